package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// delivery is one webhook POST as the receiver got it.
type delivery struct {
	header http.Header
	body   []byte
}

func (d delivery) signatures() []string { return strings.Fields(d.header.Get("webhook-signature")) }

// hookReceiver is a webhook receiver on 127.0.0.1; failFirst answers 503 to
// that many attempts first.
func hookReceiver(t *testing.T, failFirst int64) (string, chan delivery) {
	t.Helper()
	got := make(chan delivery, 64)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Clone(), b}
		if n.Add(1) <= failFirst {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/hook", got
}

// runWithWebhook runs echo with a webhook to hook and returns the run's id.
func (s *server) runWithWebhook(key, hook string) string {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.URL()+"/runs/wait", strings.NewReader(
		fmt.Sprintf(`{"assistant_id": "echo", "input": {"messages": []}, "webhook": %q}`, hook)))
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		s.t.Fatalf("runs/wait: %d %s", res.StatusCode, b)
	}
	return path.Base(res.Header.Get("Content-Location"))
}

func next(t *testing.T, got chan delivery) delivery {
	t.Helper()
	select {
	case d := <-got:
		return d
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook delivery in 20 s")
		return delivery{}
	}
}

// webhooksCLI runs "stepgraph webhooks ARGS --data dir" and returns its
// stdout lines.
func webhooksCLI(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(binary, append(append([]string{"webhooks"}, args...), "--data", dir)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("stepgraph webhooks %v: %v\n%s", args, err, stderr.String())
	}
	return strings.Fields(string(out))
}

func verifies(secret string, d delivery) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.Verify(d.body, d.header)
}

// F13, end to end on the real binary: deliveries follow Standard Webhooks
// (checked with its reference library, and with README's standard-library
// Python verifier), the id holds across retries, the timestamp is signed;
// `webhooks rotate` on the running server's data directory makes both
// secrets sign during the overlap, then only the new one — the server's
// cache follows without a restart.
func TestWebhookSigningAndRotation(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "-webhooks-allow-private")
	key := createKey(t, dir, "hooks")
	old := webhooksCLI(t, dir, "secret", "--org", "hooks")
	if len(old) != 1 || !strings.HasPrefix(old[0], "whsec_") {
		t.Fatalf("webhooks secret printed %v, want one whsec_ secret", old)
	}
	current := old[0]

	// A first attempt answered 503, then the retry: same id, both signed.
	hook, got := hookReceiver(t, 1)
	runID := s.runWithWebhook(key, hook)
	first, retry := next(t, got), next(t, got)
	for i, d := range []delivery{first, retry} {
		if err := verifies(current, d); err != nil || len(d.signatures()) != 1 {
			t.Errorf("attempt %d: %v, %d signatures (%v)", i+1, err, len(d.signatures()), d.header)
		}
		if id := d.header.Get("webhook-id"); id != "msg_"+runID {
			t.Errorf("attempt %d: webhook-id %q, want msg_%s on every attempt", i+1, id, runID)
		}
	}
	if d := first; d.header.Get("X-Stepgraph-Signature") != "" {
		t.Errorf("the legacy header is still sent")
	}
	// The timestamp is signed: a captured delivery replayed with a fresh
	// timestamp (to pass the receiver's window) does not verify.
	replay := delivery{first.header.Clone(), first.body}
	ts, _ := strconv.ParseInt(first.header.Get("webhook-timestamp"), 10, 64)
	replay.header.Set("webhook-timestamp", strconv.FormatInt(ts+60, 10))
	if err := verifies(current, replay); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("a replay with a new timestamp: %v, want no matching signature", err)
	}
	readmeVerifier(t, current, retry, replay)

	// Rotate while the server runs. Both sign until the overlap ends; the
	// overlap grows until a delivery falls inside it, so a slow machine
	// makes the test longer, never wrong: a delivery with one signature
	// must come after the overlap's end.
	hook, got = hookReceiver(t, 0)
	var retired []string // every secret rotated away
	for overlap := 2 * time.Second; ; overlap *= 2 {
		if overlap > time.Minute {
			t.Fatal("no delivery fell inside a rotation's overlap")
		}
		previous := current
		rotatedAt := time.Now()
		rotated := webhooksCLI(t, dir, "rotate", "--org", "hooks", "--overlap", overlap.String())
		if len(rotated) != 1 || rotated[0] == previous {
			t.Fatalf("webhooks rotate printed %v", rotated)
		}
		current, retired = rotated[0], append(retired, previous)
		listed := webhooksCLI(t, dir, "secret", "--org", "hooks")
		s.runWithWebhook(key, hook)
		d := next(t, got)
		if err := verifies(current, d); err != nil {
			t.Fatalf("after rotating: the new secret does not verify: %v", err)
		}
		if len(d.signatures()) == 2 {
			if err := verifies(previous, d); err != nil {
				t.Errorf("during the overlap: the previous secret does not verify: %v", err)
			}
			if strings.Join(listed, " ") != current+" "+previous {
				t.Errorf("webhooks secret during the overlap printed %d secrets, want the new one then the previous one", len(listed))
			}
			break
		}
		sentAt, _ := strconv.ParseInt(d.header.Get("webhook-timestamp"), 10, 64)
		if len(d.signatures()) != 1 || sentAt < rotatedAt.Add(overlap).Unix() {
			t.Fatalf("a delivery %d s into a %s overlap carries %d signatures, want 2",
				sentAt-rotatedAt.Unix(), overlap, len(d.signatures()))
		}
		t.Logf("the delivery came after the %s overlap; rotating again with a longer one", overlap)
	}

	// After the overlap: only the new secret signs.
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		s.runWithWebhook(key, hook)
		d := next(t, got)
		if err := verifies(current, d); err != nil {
			t.Fatalf("the current secret does not verify: %v", err)
		}
		if len(d.signatures()) == 1 {
			for _, p := range retired {
				if err := verifies(p, d); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
					t.Errorf("after the overlap the previous secret still verifies (%v)", err)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the previous secret still signs 3 minutes later: %d signatures", len(d.signatures()))
		}
	}
	if listed := webhooksCLI(t, dir, "secret", "--org", "hooks"); len(listed) != 1 || listed[0] != current {
		t.Errorf("webhooks secret after the overlap printed %d secrets, want the current one", len(listed))
	}
	for _, secret := range append(retired, current) {
		if strings.Contains(s.Logs(), secret) {
			t.Errorf("a signing secret is in the server's log")
		}
	}
}

// readmeVerifier runs the Python verifier of README.md (standard library
// only) on deliveries: good must verify, each of bad must not.
func readmeVerifier(t *testing.T, secret string, good delivery, bad ...delivery) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- webhook-verify:begin -->\n```python\n(.*?)```\n<!-- webhook-verify:end -->").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README has no webhook-verify block")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to run README's verifier: %v", err)
	}
	check := func(d delivery) error {
		headers := map[string]string{}
		for k := range d.header {
			headers[strings.ToLower(k)] = d.header.Get(k)
		}
		h, _ := json.Marshal(headers)
		cmd := exec.Command(python, "-c", string(m[1])+`
import json, os, sys
if not verify(os.environ["SECRET"], json.loads(os.environ["HEADERS"]), sys.stdin.buffer.read()):
    sys.exit(3)
`)
		cmd.Env = append(os.Environ(), "SECRET="+secret, "HEADERS="+string(h))
		cmd.Stdin = strings.NewReader(string(d.body))
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := check(good); err != nil {
		t.Errorf("README's verifier refuses a real delivery: %v", err)
	}
	for _, d := range bad {
		if err := check(d); err == nil {
			t.Errorf("README's verifier accepts a tampered delivery")
		}
	}
}

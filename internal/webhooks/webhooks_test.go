package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// fixedKeys are an organization's signing secrets, the current one first.
type fixedKeys []string

func (k fixedKeys) SigningSecrets(context.Context, string) ([]string, error) { return k, nil }

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// receiver records deliveries and answers with the given statuses in turn.
type receiver struct {
	mu       sync.Mutex
	bodies   [][]byte
	headers  []http.Header
	statuses []int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.bodies = append(rc.bodies, b)
	rc.headers = append(rc.headers, r.Header.Clone())
	status := http.StatusOK
	if n := len(rc.bodies); n <= len(rc.statuses) {
		status = rc.statuses[n-1]
	}
	w.WriteHeader(status)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.bodies)
}

func TestDeliverSignsAndRetries(t *testing.T) {
	cases := []struct {
		name     string
		statuses []int
		want     int // attempts
	}{
		{"ok at once", nil, 1},
		{"5xx then ok", []int{503}, 2},
		{"429 twice then ok", []int{429, 429}, 3},
		{"always 500 stops after three", []int{500, 500, 500, 500}, 3},
		{"4xx is final", []int{400}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := &receiver{statuses: c.statuses}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			s := &Sender{Keys: fixedKeys{testSecret}, AllowPrivate: true, Backoff: time.Millisecond}
			s.Deliver(context.Background(), "org", srv.URL+"/hook", map[string]any{"run_id": "r1", "status": "success"})
			s.Wait()
			if got := rc.count(); got != c.want {
				t.Fatalf("%d attempts, want %d", got, c.want)
			}
			// Every attempt verifies with the reference library, under the
			// same id (the receiver's dedupe key).
			wh, err := standardwebhooks.NewWebhook(testSecret)
			if err != nil {
				t.Fatal(err)
			}
			for i, h := range rc.headers {
				if err := wh.Verify(rc.bodies[i], h); err != nil {
					t.Errorf("attempt %d does not verify: %v (%v)", i+1, err, h)
				}
				if h.Get(HeaderID) != "msg_r1" {
					t.Errorf("attempt %d: webhook-id %q, want msg_r1 on every attempt", i+1, h.Get(HeaderID))
				}
			}
			var body map[string]any
			if err := json.Unmarshal(rc.bodies[0], &body); err != nil || body["run_id"] != "r1" || body["webhook_sent_at"] == nil {
				t.Errorf("body %s (%v)", rc.bodies[0], err)
			}
		})
	}
}

// Sign against the test vector of the Standard Webhooks reference libraries
// (libraries/python/tests/test_webhooks.py, test_sign_function), and with
// several secrets: one v1 signature each, space-separated, in order.
func TestSign(t *testing.T) {
	got, err := Sign([]string{testSecret}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; err != nil || got != want {
		t.Errorf("Sign = %q, %v; want %q", got, err, want)
	}
	other := "whsec_" + strings.Repeat("QUJD", 8)
	both, err := Sign([]string{other, testSecret}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if parts := strings.Split(both, " "); err != nil || len(parts) != 2 || parts[1] != got || parts[0] == got {
		t.Errorf("two secrets: %q, %v", both, err)
	}
	// A legacy secret (whsec_ + 64 hex digits, made before 2026-11) is
	// valid base64 and keeps signing.
	if _, err := Sign([]string{"whsec_" + strings.Repeat("0f", 32)}, "msg_x", 1, nil); err != nil {
		t.Errorf("legacy hex secret: %v", err)
	}
	if _, err := Sign(nil, "msg_x", 1, nil); err == nil {
		t.Error("no secret: signed anyway")
	}
	for _, bad := range []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!"} {
		if _, err := Sign([]string{bad}, "msg_x", 1, nil); err == nil || strings.Contains(err.Error(), bad) {
			t.Errorf("secret %q: %v, want an error that does not repeat it", bad, err)
		}
	}
}

// The timestamp is inside the signed content: a captured delivery replayed
// with a fresh webhook-timestamp (to pass the receiver's tolerance window)
// no longer verifies, and the original one ages out of that window.
func TestTimestampIsSigned(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := &Sender{Keys: fixedKeys{testSecret}, AllowPrivate: true}
	s.Deliver(context.Background(), "org", srv.URL, map[string]any{"run_id": "r2"})
	s.Wait()
	wh, _ := standardwebhooks.NewWebhook(testSecret)
	h, body := rc.headers[0], rc.bodies[0]
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("delivery does not verify: %v", err)
	}
	ts, _ := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	replay := h.Clone()
	replay.Set(HeaderTimestamp, strconv.FormatInt(ts+600, 10))
	if err := wh.VerifyIgnoringTimestamp(body, replay); err == nil {
		t.Error("a new timestamp on a captured delivery still verifies: the timestamp is not signed")
	}
	tampered := bytes.Replace(body, []byte(`"r2"`), []byte(`"r3"`), 1)
	if err := wh.Verify(tampered, h); err == nil {
		t.Error("a changed body verifies")
	}
	mac := hmac.New(sha256.New, mustKey(t, testSecret))
	mac.Write([]byte(h.Get(HeaderID) + "." + h.Get(HeaderTimestamp) + "."))
	mac.Write(body)
	if want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)); h.Get(HeaderSignature) != want {
		t.Errorf("webhook-signature %q, want %q (HMAC of id.timestamp.body)", h.Get(HeaderSignature), want)
	}
}

func mustKey(t *testing.T, secret string) []byte {
	t.Helper()
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestPrivateDestinationsRefused(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := &Sender{Keys: fixedKeys{testSecret}, Backoff: time.Millisecond}
	for _, u := range []string{"http://127.0.0.1/x", "http://localhost:8080/x", "http://10.1.2.3/x", "http://169.254.169.254/latest",
		"http://[::1]/x", "http://192.168.0.1/x", "ftp://example.com/x", "/relative", "http://u:p@example.com/x"} {
		if err := s.Check(u); err == nil || !strings.HasPrefix(err.Error(), "webhook: ") {
			t.Errorf("Check(%q) = %v, want a webhook error", u, err)
		}
	}
	if err := s.Check("https://hooks.example.com/x?token=1"); err != nil {
		t.Errorf("public URL refused: %v", err)
	}
	// The dial-time check refuses loopback even when Check was bypassed (a
	// name resolving to 127.0.0.1, or a redirect there).
	if _, err := s.post(context.Background(), srv.URL, []byte("{}"), nil); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("dial to loopback: %v", err)
	}
	if rc.count() != 0 {
		t.Errorf("refused destination received %d requests", rc.count())
	}
}

// F12: a failed delivery is logged with the destination's host, never its
// path or query (capability URLs carry their secret there), whatever the
// failure: no connection, the guard, error statuses, a redirect elsewhere,
// a broken Location, a redirect loop.
func TestFailedDeliveryLogsHostOnly(t *testing.T) {
	const capability = "/services/T000/B000/PATHSECRET?token=QUERYSECRET"
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close() // nothing listens there any more: connection refused
	var redirector *httptest.Server
	redirector = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/elsewhere"):
			http.Redirect(w, r, closedURL+"/REDIRECTSECRET?sig=REDIRECTQUERY", http.StatusTemporaryRedirect)
		case strings.HasPrefix(r.URL.Path, "/broken"):
			w.Header().Set("Location", "http://[::1/LOCATIONSECRET")
			w.WriteHeader(http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/loop"):
			http.Redirect(w, r, redirector.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		case strings.HasPrefix(r.URL.Path, "/status"):
			http.Error(w, "you sent "+r.URL.RequestURI(), http.StatusInternalServerError)
		}
	}))
	defer redirector.Close()
	host := strings.TrimPrefix(redirector.URL, "http://")
	cases := []struct {
		name, url    string
		allowPrivate bool
		host         string // named in the log line
		reason       string // a fragment of the error logged
	}{
		{"no connection", closedURL + capability, true, strings.TrimPrefix(closedURL, "http://"), "connection refused"},
		{"refused by the guard", redirector.URL + capability, false, host, "special-purpose address"},
		{"error status", redirector.URL + "/status" + capability, true, host, "receiver answered 500"},
		{"redirect to a dead end", redirector.URL + "/elsewhere" + capability, true, host, "connection refused"},
		{"broken Location", redirector.URL + "/broken" + capability, true, host, "Location"},
		{"redirect loop", redirector.URL + "/loop" + capability, true, host, "too many redirects"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := &Sender{Keys: fixedKeys{testSecret}, AllowPrivate: c.allowPrivate, Backoff: time.Millisecond,
				Log: slog.New(slog.NewJSONHandler(&logs, nil))}
			s.Deliver(context.Background(), "org", c.url, map[string]any{"run_id": "r-42"})
			s.Wait()
			var line map[string]any
			if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
				t.Fatalf("not one JSON log line: %v\n%s", err, logs.Bytes())
			}
			if line["msg"] != "webhook not delivered" || line["host"] != c.host || line["run_id"] != "r-42" ||
				!strings.Contains(fmt.Sprint(line["error"]), c.reason) {
				t.Errorf("log line %s, want the host %s and a reason naming %q", logs.Bytes(), c.host, c.reason)
			}
			for _, secret := range []string{"PATHSECRET", "QUERYSECRET", "REDIRECTSECRET", "REDIRECTQUERY", "LOCATIONSECRET", "/services/"} {
				if strings.Contains(logs.String(), secret) {
					t.Errorf("the log line carries %q: %s", secret, logs.Bytes())
				}
			}
		})
	}
}

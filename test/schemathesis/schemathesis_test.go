package schemathesis

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	// defaultExamples bounds the fuzzing phase per operation (and the
	// stateful phase's scenarios); the whole test stays well under two
	// minutes on two cores. STEPGRAPH_SCHEMATHESIS_EXAMPLES overrides it for
	// a deeper run by hand.
	defaultExamples = 50
	// defaultSeed makes the run reproducible; STEPGRAPH_SCHEMATHESIS_SEED
	// overrides it to explore elsewhere.
	defaultSeed = 20261123

	runTimeout   = 5 * time.Minute
	startTimeout = 30 * time.Second
	// requestTimeout is generous: no request of the run should take more
	// than a few seconds (hooks.py keeps run delays short), so hitting it
	// means the server hung, and that is reported as a finding.
	requestTimeout = 30
	serverLogLines = 150
)

// checks are the Schemathesis checks applied to every answer. Left out, on
// purpose:
//   - positive_data_acceptance: the document states types and bounds, not
//     every business rule (name patterns, URL rules, uniqueness), so a
//     schema-valid body may still be a correct 422;
//   - ensure_resource_availability: POST /threads/{id}/runs answers 404
//     "Thread or assistant not found." (upstream's message) when the
//     assistant is missing, which the check takes for a missing thread;
//   - use_after_free: deleting a deployment is asynchronous by design (204,
//     then AWAITING_DELETE until it is gone);
//   - allow_header_conformance: /assistants/search and /threads/{id}/runs/wait
//     also match /assistants/{assistant_id} and /threads/{id}/runs/{run_id},
//     so the server's Allow header truthfully lists GET and DELETE there;
//   - object_level_authorization: needs a second organization's key; the
//     generated isolation test in internal/api covers every operation.
var checks = []string{
	"not_a_server_error",
	"status_code_conformance",
	"content_type_conformance",
	"response_headers_conformance",
	"response_schema_conformance",
	"negative_data_rejection",
	"ignored_auth",
	"missing_required_header",
	"unsupported_method",
}

var keyPattern = regexp.MustCompile(`sg_[A-Za-z0-9_-]{43}`)

// TestSchemathesis runs Schemathesis against the server's own document.
func TestSchemathesis(t *testing.T) {
	root := repoRoot(t)
	bin := checkDeps(t, root)
	examples := envInt(t, "STEPGRAPH_SCHEMATHESIS_EXAMPLES", defaultExamples)
	seed := envInt(t, "STEPGRAPH_SCHEMATHESIS_SEED", defaultSeed)

	// Runs that ask for a webhook get this sink on 127.0.0.1 (hooks.py).
	var hooks atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hooks.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(sink.Close)
	// Every outbound HTTP(S) request of the server that honours the proxy
	// settings (custom_url probes, git fetches of hosted repositories) ends
	// here, on 127.0.0.1, and is refused: nothing leaves the machine.
	trap := newTrap(t)

	start := time.Now()
	srv := startServer(t, root, trap.url)
	t.Logf("server %s up in %s", srv.url, time.Since(start).Round(time.Millisecond))

	args := []string{"run", srv.url + "/openapi.json",
		"--header", "X-Api-Key: " + srv.apiKey,
		"--checks", strings.Join(checks, ","),
		"--max-examples", strconv.Itoa(examples),
		"--seed", strconv.Itoa(seed),
		"--workers", "1", // one request at a time: the same seed, the same run
		"--request-timeout", strconv.Itoa(requestTimeout),
		"--generation-database", "none", // nothing kept between runs
		"--no-color",
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir() // anything Schemathesis or Hypothesis writes lands here
	cmd.Env = append(os.Environ(),
		"SCHEMATHESIS_HOOKS="+filepath.Join(root, "test", "schemathesis", "hooks.py"),
		"STEPGRAPH_TEST_WEBHOOK="+sink.URL+"/hook",
		// Loopback must never go through a proxy from the environment.
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
		"PYTHONDONTWRITEBYTECODE=1",
	)
	cmd.WaitDelay = 5 * time.Second
	began := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(began).Round(time.Millisecond)
	report := string(out)
	switch {
	case ctx.Err() != nil:
		t.Fatalf("schemathesis timed out after %s; its output:\n%s", runTimeout, report)
	case err != nil:
		t.Fatalf("schemathesis found problems (exit %v after %s; seed %d, %d examples per operation); its report:\n%s",
			err, took, seed, examples, report)
	}
	t.Logf("schemathesis passed in %s (seed %d, %d examples per operation; %d webhooks delivered to the sink, %d outbound requests trapped)\n%s",
		took, seed, examples, hooks.Load(), trap.count.Load(), summary(report))

	// The server took the whole run without a panic and still answers.
	if strings.Contains(srv.logs.String(), `"msg":"panic in handler"`) {
		t.Errorf("the server logged a panic during the run")
	}
	res, err := http.Get(srv.url + "/ok")
	if err != nil {
		t.Fatalf("server not answering after the run: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET /ok after the run: %s", res.Status)
	}
}

// summary is the part of Schemathesis' output from its SUMMARY line on.
func summary(report string) string {
	if i := strings.Index(report, "SUMMARY"); i >= 0 {
		if j := strings.LastIndex(report[:i], "\n"); j >= 0 {
			return report[j+1:]
		}
	}
	return tail(report, 25)
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a whole number ≥ 1", name, v)
	}
	return n
}

// repoRoot is two levels up from this package, where go.mod is.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found at %s: %v", root, err)
	}
	return root
}

// checkDeps fails (never skips) unless the pinned Schemathesis is installed
// in .venv from the current requirement files: the stamp written by
// scripts/install-test-deps.sh holds the sha256 of both files, concatenated.
// It returns the schemathesis executable.
func checkDeps(t *testing.T, root string) string {
	t.Helper()
	const fix = "run `make test-deps` (scripts/install-test-deps.sh) to install the pinned Schemathesis into .venv"
	bin := filepath.Join(root, ".venv", "bin", "schemathesis")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("schemathesis is not installed: %s not found\n%s", bin, fix)
	}
	var pins []byte
	for _, f := range []string{"test/conformance/python/requirements.txt", "test/schemathesis/requirements.txt"} {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		pins = append(pins, b...)
	}
	sum := sha256.Sum256(pins)
	stamp, err := os.ReadFile(filepath.Join(root, ".venv", ".stepgraph-schemathesis.sha256"))
	if err != nil || strings.TrimSpace(string(stamp)) != hex.EncodeToString(sum[:]) {
		t.Fatalf("schemathesis in .venv is not installed from the current test/schemathesis/requirements.txt\n%s", fix)
	}
	return bin
}

// trap is a listener on 127.0.0.1 that takes the server's proxied outbound
// connections and closes them at once.
type trap struct {
	url   string
	count atomic.Int64
}

func newTrap(t *testing.T) *trap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trap{url: "http://" + ln.Addr().String()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tr.count.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return tr
}

type server struct {
	url    string
	apiKey string
	logs   *syncBuffer // everything the server printed, for failures
}

// startServer builds ./cmd/stepgraph and starts `serve` on 127.0.0.1:0 with a
// fresh data directory and no rate limit, its outbound HTTP(S) sent to proxy.
// It reads the address (stderr, JSON log "listening") and the first-start
// API key (stdout). It is stopped with SIGTERM in t.Cleanup.
func startServer(t *testing.T, root, proxy string) *server {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "stepgraph")
	build := exec.Command("go", "build", "-o", bin, "./cmd/stepgraph")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/stepgraph: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "serve", "-addr", "127.0.0.1:0", "-data", filepath.Join(tmp, "data"),
		"-log-json", "-rate-limit", "0",
		// Webhooks go to the test's sink on 127.0.0.1 (hooks.py), so
		// loopback must be allowed; nothing else is ever a webhook.
		"-webhooks-allow-private")
	cmd.Dir = tmp
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(name) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "STEPGRAPH_ADDR", "STEPGRAPH_DATA_DIR", "STEPGRAPH_RATE_LIMIT":
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, "HTTP_PROXY="+proxy, "HTTPS_PROXY="+proxy, "http_proxy="+proxy, "https_proxy="+proxy)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start server: %v", err)
	}
	srv := &server{logs: &syncBuffer{}}
	exited := make(chan struct{})
	var copies sync.WaitGroup
	keyCh := make(chan string, 1)
	addrCh := make(chan string, 1)
	copies.Add(2)
	go func() {
		defer copies.Done()
		scan(stdout, srv.logs, func(line string) {
			if k := keyPattern.FindString(line); k != "" {
				select {
				case keyCh <- k:
				default:
				}
			}
		})
	}()
	go func() {
		defer copies.Done()
		scan(stderr, srv.logs, func(line string) {
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
				select {
				case addrCh <- rec.Addr:
				default:
				}
			}
		})
	}()
	var waitErr error
	go func() {
		copies.Wait() // pipes must be drained before Wait closes them
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				t.Errorf("server did not stop within 15s of SIGTERM; killing it")
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		var exitErr *exec.ExitError
		if waitErr != nil && !(errors.As(waitErr, &exitErr) && exitErr.ExitCode() == 0) {
			t.Logf("server exit: %v", waitErr)
		}
		if t.Failed() {
			t.Logf("server output (last %d lines):\n%s", serverLogLines, tail(srv.logs.String(), serverLogLines))
		}
	})

	deadline := time.After(startTimeout)
	for srv.url == "" || srv.apiKey == "" {
		select {
		case a := <-addrCh:
			srv.url = "http://" + a
		case k := <-keyCh:
			srv.apiKey = k
		case <-exited:
			t.Fatalf("server exited before it was ready: %v", waitErr)
		case <-deadline:
			t.Fatalf("server not ready within %s (url %q, API key seen: %v)", startTimeout, srv.url, srv.apiKey != "")
		}
	}
	return srv
}

// scan copies r line by line into buf, calling fn on each line.
func scan(r io.Reader, buf *syncBuffer, fn func(string)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		buf.WriteLine(line)
		fn(line)
	}
	_, _ = io.Copy(io.Discard, r)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// syncBuffer is a line buffer shared by the two output readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) WriteLine(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
	b.buf.WriteByte('\n')
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

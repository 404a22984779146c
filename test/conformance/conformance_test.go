package conformance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// suiteTimeout bounds one SDK suite; startTimeout the server's start.
const (
	suiteTimeout = 5 * time.Minute
	startTimeout = 30 * time.Second
	// serverLogLines is how much of the server's log a failure shows.
	serverLogLines = 150
)

var keyPattern = regexp.MustCompile(`sg_[A-Za-z0-9_-]{43}`)

// TestSDKConformance starts one server and runs the Python and the JS SDK
// suites against it, side by side.
func TestSDKConformance(t *testing.T) {
	root := repoRoot(t)
	python := filepath.Join(root, ".venv", "bin", "python")
	jsDir := filepath.Join(root, "test", "conformance", "js")
	checkDeps(t, root, python, jsDir)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found on PATH (%v): install Node.js, then run `make test-deps`", err)
	}

	start := time.Now()
	srv := startServer(t, root)
	t.Logf("server %s up in %s", srv.url, time.Since(start).Round(time.Millisecond))
	agent := newDeployedAgent(t, root, python)

	env := append(os.Environ(),
		"STEPGRAPH_URL="+srv.url,
		"STEPGRAPH_API_KEY="+srv.apiKey,
		"STEPGRAPH_WEBHOOK_SECRET="+srv.webhookSecret,
		"STEPGRAPH_AGENT_REPO="+agent.repoURL,
		"STEPGRAPH_AGENT_RUNTIME="+agent.runtimeURL,
		"STEPGRAPH_AGENT_API_KEY="+agent.apiKey,
		// Loopback must never go through a proxy from the environment.
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
		// Leave no __pycache__ in the work tree.
		"PYTHONDONTWRITEBYTECODE=1",
	)

	t.Run("python", func(t *testing.T) {
		t.Parallel()
		runSuite(t, root, env, python, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider",
			filepath.Join("test", "conformance", "python"))
	})
	t.Run("js", func(t *testing.T) {
		t.Parallel()
		runSuite(t, root, env, node, "--test", "--test-reporter=spec",
			filepath.Join("test", "conformance", "js", "sdk.test.mjs"))
	})
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

// checkDeps fails (never skips) when the pinned SDKs are missing or older than
// their pin files: the stamps written by scripts/install-test-deps.sh hold the
// sha256 of the file each was installed from.
func checkDeps(t *testing.T, root, python, jsDir string) {
	t.Helper()
	const fix = "run `make test-deps` (scripts/install-test-deps.sh) to install the pinned SDKs"
	var problems []string
	if _, err := os.Stat(python); err != nil {
		problems = append(problems, fmt.Sprintf("Python venv missing: %s not found", python))
	} else if stale(filepath.Join(root, ".venv", ".stepgraph-requirements.sha256"),
		filepath.Join(root, "test", "conformance", "python", "requirements.txt")) {
		problems = append(problems, "Python venv .venv is not installed from the current test/conformance/python/requirements.txt")
	}
	sdk := filepath.Join(jsDir, "node_modules", "@langchain", "langgraph-sdk", "package.json")
	if _, err := os.Stat(sdk); err != nil {
		problems = append(problems, fmt.Sprintf("npm packages missing: %s not found", sdk))
	} else if stale(filepath.Join(jsDir, "node_modules", ".stepgraph-lock.sha256"),
		filepath.Join(jsDir, "package-lock.json")) {
		problems = append(problems, "test/conformance/js/node_modules is not installed from the current package-lock.json")
	}
	if len(problems) > 0 {
		t.Fatalf("%s\n%s", strings.Join(problems, "\n"), fix)
	}
}

// stale reports whether the stamp file does not hold the sha256 of src.
func stale(stamp, src string) bool {
	want, err := os.ReadFile(stamp)
	if err != nil {
		return true
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return true
	}
	sum := sha256.Sum256(data)
	return strings.TrimSpace(string(want)) != hex.EncodeToString(sum[:])
}

type server struct {
	url           string
	apiKey        string
	webhookSecret string
	logs          *syncBuffer // everything the server printed, for failures
}

// startServer builds ./cmd/stepgraph, starts it on 127.0.0.1:0 with a fresh
// data directory and reads its address (stderr, JSON log "listening") and
// first-start API key (stdout). It is stopped with SIGTERM in t.Cleanup.
func startServer(t *testing.T, root string) *server {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "stepgraph")
	data := filepath.Join(tmp, "data")

	build := exec.Command("go", "build", "-o", bin, "./cmd/stepgraph")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/stepgraph: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "serve", "-addr", "127.0.0.1:0", "-data", data,
		"-log-json", "-webhooks-allow-private",
		// The deployed agent's model and runtime are test servers on loopback.
		"-outbound-allow-private")
	cmd.Dir = tmp
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

	// The webhook tests verify signatures with this secret. Without it the
	// test fails, but the suites still run so every other result shows.
	sec := exec.Command(bin, "webhooks", "secret", "--org", "default", "-data", data)
	sec.Dir = tmp
	var secErr bytes.Buffer
	sec.Stderr = &secErr
	out, err := sec.Output()
	srv.webhookSecret = strings.TrimSpace(string(out))
	switch {
	case err != nil:
		t.Errorf("stepgraph webhooks secret --org default: %v\n%s(the webhook tests of both suites will fail)", err, secErr.String())
	case srv.webhookSecret == "":
		t.Errorf("stepgraph webhooks secret --org default printed nothing (the webhook tests of both suites will fail)")
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

// runSuite runs one SDK suite and fails with its output on a non-zero exit.
func runSuite(t *testing.T, root string, env []string, name string, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	cmd.Env = env
	cmd.Stdin = nil
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start).Round(time.Millisecond)
	if ctx.Err() != nil {
		t.Fatalf("%s %s: timed out after %s\n%s", filepath.Base(name), strings.Join(args, " "), suiteTimeout, out)
	}
	if err != nil {
		t.Fatalf("%s %s: %v (after %s)\n%s", filepath.Base(name), strings.Join(args, " "), err, took, out)
	}
	t.Logf("%s passed in %s; last lines:\n%s", filepath.Base(name), took, tail(string(out), 12))
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

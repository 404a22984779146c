package schemathesis

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/testserver"
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

	runTimeout = 5 * time.Minute
	// requestTimeout is generous: no request of the run should take more
	// than a few seconds (hooks.py keeps run delays short), so hitting it
	// means the server hung, and that is reported as a finding.
	requestTimeout = 30
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

// TestSchemathesis runs Schemathesis against the server's own document.
func TestSchemathesis(t *testing.T) {
	root, err := testserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := testserver.CheckDeps(root, testserver.Schemathesis); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, ".venv", "bin", "schemathesis")
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
	t.Logf("server %s up in %s", srv.URL(), time.Since(start).Round(time.Millisecond))

	args := []string{"run", srv.URL() + "/openapi.json",
		"--header", "X-Api-Key: " + srv.FirstKey(),
		"--checks", strings.Join(checks, ","),
		"--max-examples", strconv.Itoa(examples),
		"--seed", strconv.Itoa(seed),
		"--workers", "1", // one request at a time: the same seed, the same run
		"--request-timeout", strconv.Itoa(requestTimeout),
		"--generation-database", "none", // nothing kept between runs
		// A thread's stream lasts until its client leaves (as upstream's):
		// every request Schemathesis makes on a real thread would wait for
		// the request timeout. internal/api's stream tests cover its errors.
		"--exclude-operation-id", "join_thread_stream_threads__thread_id__stream_get",
		// The thread event protocol's stream lasts until its client leaves
		// too; it is fuzzed on its own below, without the stateful phase
		// (which hands it real threads).
		"--exclude-operation-id", protocolEvents,
		"--no-color",
	}
	report, took := runSchemathesis(t, bin, args, sink.URL, seed, examples)
	t.Logf("schemathesis passed in %s (seed %d, %d examples per operation; %d webhooks delivered to the sink, %d outbound requests trapped)\n%s",
		took, seed, examples, hooks.Load(), trap.count.Load(), summary(report))
	// The protocol's stream: every request on a thread that does not exist
	// (or with a body that breaks a rule) is answered at once.
	events := append(slices.Clone(args[:len(args)-5]), "--include-operation-id", protocolEvents,
		"--phases", "examples,coverage,fuzzing", "--no-color")
	report, took = runSchemathesis(t, bin, events, sink.URL, seed, examples)
	t.Logf("schemathesis passed %s in %s\n%s", protocolEvents, took, summary(report))

	// The server took the whole run without a panic and still answers.
	if strings.Contains(srv.Logs(), `"msg":"panic in handler"`) {
		t.Errorf("the server logged a panic during the run")
	}
	res, err := http.Get(srv.URL() + "/ok")
	if err != nil {
		t.Fatalf("server not answering after the run: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET /ok after the run: %s", res.Status)
	}
}

// upstreamChecks are the checks of the run against upstream's document:
// status codes and bodies as upstream documents them (positive mode, so
// every request is one the document calls valid).
var upstreamChecks = []string{
	"not_a_server_error",
	"status_code_conformance",
	"content_type_conformance",
	"response_headers_conformance",
	"response_schema_conformance",
}

// upstreamExamples bounds the upstream run per operation: it adds no
// stateful phase, and stepgraph's own document is fuzzed harder above.
const upstreamExamples = 25

// TestSchemathesisUpstream runs Schemathesis with upstream's own OpenAPI
// document (langgraph-api's openapi.json, pinned in
// test/conformance/upstream/langgraph-api.pin) against stepgraph: the
// answers must be what upstream documents. Where that document is wrong
// about upstream's own server, upstream_hooks.py corrects it, erratum by
// erratum, each citing upstream's code (docs/api-conformance.md).
func TestSchemathesisUpstream(t *testing.T) {
	root, err := testserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := testserver.CheckDeps(root, testserver.Schemathesis, testserver.UpstreamOpenAPI); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, ".venv", "bin", "schemathesis")
	examples := envInt(t, "STEPGRAPH_SCHEMATHESIS_EXAMPLES", upstreamExamples)
	seed := envInt(t, "STEPGRAPH_SCHEMATHESIS_SEED", defaultSeed)
	ops, err := testserver.UpstreamOperations(root)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := testserver.UpstreamPending(root)
	if err != nil {
		t.Fatal(err)
	}

	var hooks atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hooks.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(sink.Close)
	trap := newTrap(t)
	srv := startServer(t, root, trap.url)

	args := []string{"run", filepath.Join(root, filepath.FromSlash(testserver.UpstreamOpenAPIPath)),
		"--url", srv.URL(),
		"--header", "X-Api-Key: " + srv.FirstKey(),
		"--checks", strings.Join(upstreamChecks, ","),
		"--mode", "positive",
		"--phases", "examples,coverage,fuzzing",
		"--max-examples", strconv.Itoa(examples),
		"--seed", strconv.Itoa(seed),
		"--workers", "1",
		"--request-timeout", strconv.Itoa(requestTimeout),
		"--generation-database", "none",
		"--no-color",
	}
	var left []string
	for _, op := range ops {
		switch {
		case pending[op.Template()]:
			// Not served yet (the route walk keeps this list honest).
		case op.ID == "join_thread_stream_threads__thread_id__stream_get", op.ID == protocolEvents:
			// Streams that last until their client leaves (see
			// TestSchemathesis); stepgraph's own document fuzzes them.
		default:
			continue
		}
		if op.ID == "" {
			t.Fatalf("%s has no operationId in upstream's document: cannot leave it out", op)
		}
		args = append(args, "--exclude-operation-id", op.ID)
		left = append(left, op.String())
	}
	report, took := runSchemathesisHooks(t, bin, args, sink.URL, seed, examples, "upstream_hooks.py")
	t.Logf("schemathesis passed upstream's document in %s (seed %d, %d examples per operation; left out: %s; %d webhooks, %d outbound requests trapped)\n%s",
		took, seed, examples, strings.Join(left, ", "), hooks.Load(), trap.count.Load(), summary(report))
	if strings.Contains(srv.Logs(), `"msg":"panic in handler"`) {
		t.Errorf("the server logged a panic during the run")
	}
}

// summary is the part of Schemathesis' output from its SUMMARY line on.
func summary(report string) string {
	if i := strings.Index(report, "SUMMARY"); i >= 0 {
		if j := strings.LastIndex(report[:i], "\n"); j >= 0 {
			return report[j+1:]
		}
	}
	return testserver.Tail(report, 25)
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

// startServer builds ./cmd/stepgraph and starts `serve` on 127.0.0.1 with a
// fresh data directory and no rate limit, its outbound HTTP(S) sent to proxy,
// waiting for its address and first-start API key. It is stopped with
// SIGTERM in t.Cleanup.
func startServer(t *testing.T, root, proxy string) *testserver.Server {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "stepgraph")
	if err := testserver.Build(context.Background(), root, bin); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(name) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "STEPGRAPH_ADDR", "STEPGRAPH_DATA_DIR", "STEPGRAPH_RATE_LIMIT":
			continue
		}
		env = append(env, kv)
	}
	return testserver.StartT(t, testserver.Options{
		Binary: bin, DataDir: filepath.Join(tmp, "data"), Dir: tmp, WaitKey: true,
		Args: []string{"-log-json", "-rate-limit", "0",
			// Webhooks go to the test's sink on 127.0.0.1 (hooks.py), so
			// loopback must be allowed; nothing else is ever a webhook.
			"-webhooks-allow-private"},
		Env: append(env, "HTTP_PROXY="+proxy, "HTTPS_PROXY="+proxy, "http_proxy="+proxy, "https_proxy="+proxy),
	})
}

// protocolEvents is the operation of the thread event protocol's stream.
const protocolEvents = "protocol_thread_events_post"

// runSchemathesis runs Schemathesis with args and fails the test on its
// findings; it returns its report and how long it took.
func runSchemathesis(t *testing.T, bin string, args []string, webhook string, seed, examples int) (string, time.Duration) {
	t.Helper()
	return runSchemathesisHooks(t, bin, args, webhook, seed, examples, "hooks.py")
}

// runSchemathesisHooks is runSchemathesis with the hooks module of
// test/schemathesis named hooks.
func runSchemathesisHooks(t *testing.T, bin string, args []string, webhook string, seed, examples int, hooks string) (string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	root, err := testserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir() // anything Schemathesis or Hypothesis writes lands here
	cmd.Env = append(os.Environ(),
		"SCHEMATHESIS_HOOKS="+filepath.Join(root, "test", "schemathesis", hooks),
		"STEPGRAPH_TEST_WEBHOOK="+webhook+"/hook",
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
	return report, took
}

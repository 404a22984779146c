package lambdaapp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/assembly"
	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/ministack"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/sources/git"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// The AWS shape in one process: an API function's service (no workers,
// TailEvents, as lambdaapp.Open wires it) and a run worker's service (its
// own in-memory hub), on one store. Nothing reaches the API side but the
// store and the event log, as between two Lambdas.
type awsShape struct {
	api     http.Handler
	release chan struct{} // closing it lets the gate graph's second node finish
	key     string
}

// gateGraph writes step 1, then waits for release before it writes step
// 2: a run that lasts exactly as long as the test wants, with no sleep.
func gateGraph(release <-chan struct{}) *graph.Graph {
	return graph.NewBuilder("gate").
		AddChannel("step", graph.Channel{}).
		AddNode("first", func(context.Context, map[string]any, *graph.Runtime) (*graph.Command, error) {
			return graph.Update(map[string]any{"step": 1}), nil
		}).
		AddNode("second", func(ctx context.Context, _ map[string]any, _ *graph.Runtime) (*graph.Command, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return graph.Update(map[string]any{"step": 2}), nil
		}).
		AddEdge(graph.Start, "first").
		AddEdge("first", "second").
		AddEdge("second", graph.End).
		MustCompile()
}

func newAWSShape(t *testing.T, apiCfg func(*api.Config)) *awsShape {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	sec, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	release := make(chan struct{})
	assemble := func() *assembly.Services {
		s := assembly.Assemble(assembly.Adapters{Store: db, Events: db, Secrets: sec,
			Sources: &git.Checker{}, Outbound: weburl.GuardedClient(false, 0)},
			assembly.Options{Log: log, PollInterval: 10 * time.Millisecond})
		if err := s.Runs.Graphs.Register(gateGraph(release)); err != nil {
			t.Fatal(err)
		}
		return s
	}
	apiSide, workerSide := assemble(), assemble()
	apiSide.Runs.TailEvents = true
	apiSide.Runs.TailPollMin, apiSide.Runs.TailPollMax = 5*time.Millisecond, 50*time.Millisecond
	stop := workerSide.Runs.StartWorkers(2, log)
	cfg := apiSide.APIConfig()
	cfg.Version = "test"
	if apiCfg != nil {
		apiCfg(&cfg)
	}
	h, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release) // no run is left blocked
		}
		stop()
		db.Close()
	})
	return &awsShape{api: h, release: release, key: newKey(t, apiSide.Keys)}
}

func newKey(t *testing.T, keys *auth.Keys) string {
	t.Helper()
	org, _, err := keys.EnsureOrganization(context.Background(), "streaming")
	if err != nil {
		t.Fatal(err)
	}
	k, err := keys.Create(context.Background(), org.ID)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// gateway is API Gateway's REST API in front of the function: each
// request becomes a proxy event (payload 1.0); the streamed routes are
// answered through StreamingHandler and read back as API Gateway reads a
// streamed integration response (the JSON prelude, eight NUL bytes, the
// body as it comes, flushed to the client), the others through the
// buffered HandleV1.
type gateway struct {
	t         *testing.T
	streaming *lambdaapp.StreamingHandler
	buffered  *lambdaapp.HTTPHandler

	mu sync.Mutex
	// cutFirstAfterAnID ends the first streamed response right after its
	// first event that carries an id, as a budget that ends there would:
	// a client's reconnect is then tested whatever the machine's speed.
	cutFirstAfterAnID bool
	requests          []string    // "METHOD path [Last-Event-ID]" of each streamed request, once its response ended
	ended             chan string // the same, as each streamed response ends
	served            int         // streamed responses begun
}

func newGateway(t *testing.T, h http.Handler, streamBudget time.Duration) *httptest.Server {
	g := &gateway{t: t, streaming: lambdaapp.NewStreamingHandler(h), buffered: lambdaapp.NewHTTPHandler(h),
		ended: make(chan string, 64)}
	g.streaming.Budget = streamBudget
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	gateways.Store(srv, g)
	return srv
}

var gateways sync.Map // *httptest.Server → *gateway

func gatewayOf(srv *httptest.Server) *gateway {
	g, _ := gateways.Load(srv)
	return g.(*gateway)
}

func streamedPath(method, path string) bool {
	return strings.HasSuffix(path, "/stream") || strings.HasSuffix(path, "/join") ||
		(method == http.MethodPost && strings.HasSuffix(path, "/wait"))
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ev := events.APIGatewayProxyRequest{HTTPMethod: r.Method, Path: r.URL.Path, Body: string(body),
		MultiValueQueryStringParameters: r.URL.Query(), MultiValueHeaders: r.Header,
		RequestContext: events.APIGatewayProxyRequestContext{DomainName: r.Host, Stage: "prod",
			Identity: events.APIGatewayRequestIdentity{SourceIP: "127.0.0.1"}}}
	if !streamedPath(r.Method, r.URL.Path) {
		resp, err := g.buffered.HandleV1(r.Context(), ev)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, vs := range resp.MultiValueHeaders {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.WriteString(w, resp.Body)
		return
	}
	resp, err := g.streaming.Handle(r.Context(), ev)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer func() {
		resp.Close()
		req := r.Method + " " + r.URL.Path + " " + r.Header.Get("Last-Event-ID")
		g.mu.Lock()
		g.requests = append(g.requests, req)
		g.mu.Unlock()
		g.ended <- req
	}()
	// What the runtime sends: the prelude, the delimiter, the body.
	br := bufio.NewReader(resp)
	prelude, err := br.ReadBytes(0)
	if err != nil {
		g.t.Errorf("no prelude delimiter in the streamed response: %v", err)
		return
	}
	rest := make([]byte, 7)
	if _, err := io.ReadFull(br, rest); err != nil || !bytes.Equal(rest, make([]byte, 7)) {
		g.t.Errorf("the prelude is not followed by eight NUL bytes: %q", rest)
		return
	}
	var meta struct {
		StatusCode        int                 `json:"statusCode"`
		Headers           map[string]string   `json:"headers"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	}
	if err := json.Unmarshal(prelude[:len(prelude)-1], &meta); err != nil {
		g.t.Errorf("the prelude is not JSON: %v: %q", err, prelude)
		return
	}
	for k, v := range meta.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range meta.MultiValueHeaders {
		w.Header()[k] = vs
	}
	w.WriteHeader(meta.StatusCode)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	g.mu.Lock()
	g.served++
	cut := g.cutFirstAfterAnID && g.served == 1
	g.mu.Unlock()
	if cut {
		forwardUntilAnID(w, rc, br)
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := br.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// forwardUntilAnID copies SSE lines to w until the end of the first event
// that has an id line.
func forwardUntilAnID(w io.Writer, rc *http.ResponseController, br *bufio.Reader) {
	hasID := false
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := w.Write(line); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
		switch trimmed := bytes.TrimRight(line, "\r\n"); {
		case bytes.HasPrefix(trimmed, []byte("id:")):
			hasID = true
		case len(trimmed) == 0 && hasID:
			return
		}
	}
}

func do(t *testing.T, srv *httptest.Server, key, method, path string, body any, header ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, srv.URL+path, rd)
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func mustJSON(t *testing.T, resp *http.Response, out any) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v: %q", resp.Request.URL.Path, err, b)
	}
}

type sse struct{ id, event, data string }

// readSSE reads events until the body ends.
func readSSE(t *testing.T, body io.Reader) []sse {
	t.Helper()
	var out []sse
	var cur sse
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case line == "":
			if cur.event != "" {
				out = append(out, cur)
			}
			cur = sse{}
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		}
	}
	return out
}

// A stream served by the streaming handler, with the run executed
// elsewhere: its events come through the event log, with ids (the run was
// made resumable by the stream request), the response is cut by the
// budget while the run waits, and a join with Last-Event-ID continues it
// with no gap and no duplicate.
func TestStreamOutlivesTheResponseThroughTheEventLog(t *testing.T) {
	shape := newAWSShape(t, func(c *api.Config) { c.StreamHeartbeat = 20 * time.Millisecond })
	// Each response's budget: long enough for a loaded machine to create
	// the run and answer the stream's headers within it (a budget that
	// ends first makes the gateway answer 503), short enough that the
	// responses end while the run waits at the gate.
	srv := newGateway(t, shape.api, 3*time.Second)
	var th struct {
		ThreadID string `json:"thread_id"`
	}
	mustJSON(t, do(t, srv, shape.key, "POST", "/threads", map[string]any{}), &th)

	// No stream_resumable: on this shape a streamed run is logged anyway.
	resp := do(t, srv, shape.key, "POST", "/threads/"+th.ThreadID+"/runs/stream",
		map[string]any{"assistant_id": "gate", "input": map[string]any{"step": 0}, "stream_mode": []string{"values"},
			"on_disconnect": "cancel"})
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("runs/stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	loc := resp.Header.Get("Location")
	got := readSSE(t, resp.Body) // ends at the budget: the run waits at the gate
	resp.Body.Close()
	// Reconnect as a client does until step 1 came; every response ends at
	// the budget while the run waits.
	responses := 1
	seen := func(data string) bool { return len(got) > 0 && got[len(got)-1].data == data }
	for !seen(`{"step":1}`) {
		// A response may end before the run's first event was logged (a
		// loaded machine): then the join asks for every kept event (-1).
		last := "-1"
		if len(got) > 0 {
			last = got[len(got)-1].id
		}
		resp = do(t, srv, shape.key, "GET", loc, nil, "Last-Event-ID", last)
		got = append(got, readSSE(t, resp.Body)...)
		resp.Body.Close()
		responses++
	}
	// The budget is not the client leaving: on_disconnect cancel did not
	// cancel the run.
	var run struct{ Status string }
	mustJSON(t, do(t, srv, shape.key, "GET", strings.TrimSuffix(loc, "/stream"), nil), &run)
	if run.Status != "running" {
		t.Fatalf("after the response's budget the run is %q, want running", run.Status)
	}
	close(shape.release)
	for !seen(`{"step":2}`) {
		resp = do(t, srv, shape.key, "GET", loc, nil, "Last-Event-ID", got[len(got)-1].id)
		got = append(got, readSSE(t, resp.Body)...)
		resp.Body.Close()
		responses++
	}
	if got[0].event != "metadata" || responses < 2 {
		t.Fatalf("%d responses: %+v", responses, got)
	}
	for i, e := range got {
		if e.id != fmt.Sprint(i) {
			t.Fatalf("event %d has id %q: every event once, in order, was expected across %d responses: %+v", i, e.id, responses, got)
		}
	}
}

// runs/wait on the streamed route: keep-alive newlines, then the run's
// output, after longer than the buffered gateway's budget (28 s on AWS,
// 3 s here) — where the buffered answer is WaitTimeout.
func TestWaitLongerThanTheBufferedBudgetEndsWithTheOutput(t *testing.T) {
	// Long enough for the run to be created on a loaded machine (the gate
	// then holds it, so the answer past the budget is WaitTimeout).
	const bufferedBudget = 3 * time.Second
	shape := newAWSShape(t, func(c *api.Config) { c.KeepAlive = 10 * time.Millisecond })
	srv := newGateway(t, shape.api, time.Minute)
	var th struct {
		ThreadID string `json:"thread_id"`
	}
	mustJSON(t, do(t, srv, shape.key, "POST", "/threads", map[string]any{}), &th)

	// Buffered (the HTTP API's integration, 30 s there): the run waits at
	// the gate, so the answer is WaitTimeout with where to join.
	buffered := lambdaapp.NewHTTPHandler(shape.api)
	buffered.Budget = bufferedBudget
	ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: "/threads/" + th.ThreadID + "/runs/wait",
		Headers: map[string]string{"x-api-key": shape.key, "content-type": "application/json"},
		Body:    `{"assistant_id": "gate", "input": {"step": 0}}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/threads/" + th.ThreadID + "/runs/wait"}}}
	bresp, err := buffered.Handle(context.Background(), ev)
	if err != nil || bresp.StatusCode != 200 || !strings.Contains(bresp.Body, lambdaapp.KindWaitTimeout) {
		t.Fatalf("buffered wait: %v %d %q", err, bresp.StatusCode, bresp.Body)
	}
	firstRun := bresp.Headers["Content-Location"]

	// Streamed: the same wait, on a new thread, outlives the buffered
	// budget and ends with the output.
	mustJSON(t, do(t, srv, shape.key, "POST", "/threads", map[string]any{}), &th)
	resp := do(t, srv, shape.key, "POST", "/threads/"+th.ThreadID+"/runs/wait",
		map[string]any{"assistant_id": "gate", "input": map[string]any{"step": 0}})
	if resp.StatusCode != 200 {
		t.Fatalf("runs/wait: %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	// A keep-alive newline arrives while the run waits: the response is
	// streamed, not buffered.
	if b, err := br.ReadByte(); err != nil || b != '\n' {
		t.Fatalf("first byte of the streamed wait: %q %v", b, err)
	}
	<-time.After(bufferedBudget) // the buffered answer would be over by now
	close(shape.release)
	rest, err := io.ReadAll(br)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(rest)); got != `{"step":2}` {
		t.Fatalf("the streamed wait ended with %q, want the run's output", got)
	}
	// The first run went on after its WaitTimeout: its join (streamed) has
	// its output too.
	resp = do(t, srv, shape.key, "GET", firstRun+"/join", nil)
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := strings.TrimSpace(string(out)); got != `{"step":2}` {
		t.Fatalf("join after WaitTimeout: %q", got)
	}
}

// A wait that outlasts even the streamed budget answers WaitTimeout after
// its keep-alives, at the end of the stream, and the run goes on.
func TestStreamedWaitPastItsBudgetAnswersWaitTimeout(t *testing.T) {
	shape := newAWSShape(t, func(c *api.Config) { c.KeepAlive = 10 * time.Millisecond })
	srv := newGateway(t, shape.api, 3*time.Second)
	resp := do(t, srv, shape.key, "POST", "/runs/wait", map[string]any{"assistant_id": "gate", "input": map[string]any{"step": 0},
		"on_disconnect": "cancel"})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var body struct {
		Error struct{ Error, Message string } `json:"__error__"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(bytes.TrimSpace(b), &body) != nil || body.Error.Error != lambdaapp.KindWaitTimeout {
		t.Fatalf("wait past the budget: %d %q", resp.StatusCode, b)
	}
	if !strings.Contains(body.Error.Message, resp.Header.Get("Location")) || !strings.HasSuffix(resp.Header.Get("Location"), "/join") {
		t.Fatalf("the WaitTimeout does not name the join (%s): %s", resp.Header.Get("Location"), body.Error.Message)
	}
	// The run goes on: the worker (another process, polling) may not have
	// claimed it yet when the budget ended, so it is read until it left
	// pending. A cancel would have ended it at once (a pending run is
	// settled on the spot), and gate's second node holds a running run.
	var run struct{ Status string }
	for deadline := time.Now().Add(30 * time.Second); ; { // a guard, not a timing assertion
		mustJSON(t, do(t, srv, shape.key, "GET", resp.Header.Get("Content-Location"), nil), &run)
		if run.Status != "pending" || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // the worker side announces nothing to this one
	}
	if run.Status != "running" {
		t.Fatalf("the run after the wait's budget: %q (on_disconnect cancel must not apply to the budget)", run.Status)
	}
}

// The official Python SDK (langgraph-sdk, as pinned in
// test/conformance/python/requirements.txt) streams a run through the
// gateway; the response ends while the run waits (as at a budget), the
// SDK asks the run, reconnects to Location with Last-Event-ID, and gets
// the rest: every event once, in order.
func TestPythonSDKReconnectsAcrossTheBudget(t *testing.T) {
	root, err := ministack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(root, ".venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("the Python SDK is not installed (run scripts/install-test-deps.sh): %v", err)
	}
	shape := newAWSShape(t, func(c *api.Config) { c.StreamHeartbeat = 20 * time.Millisecond })
	// The SDK reconnects with the last id it got; a first response with no
	// event at all would make it rejoin live (upstream's meaning of no
	// Last-Event-ID). So the first response ends right after its first
	// event with an id, not at a time a loaded machine might not reach:
	// the budget's own end is TestStreamOutlivesTheResponseThroughTheEventLog's.
	srv := newGateway(t, shape.api, time.Minute)
	g := gatewayOf(srv)
	g.mu.Lock()
	g.cutFirstAfterAnID = true
	g.mu.Unlock()
	// The gate opens once the first streamed response has ended: the SDK
	// has to reconnect to get step 2.
	go func() {
		for req := range g.ended {
			if strings.HasPrefix(req, "POST ") {
				close(shape.release)
				return
			}
		}
	}()
	script := `
import asyncio, json, sys, warnings
from langgraph_sdk import get_client

async def main():
    client = get_client(url=sys.argv[1], api_key=sys.argv[2])
    thread = await client.threads.create()
    parts = []
    async for p in client.runs.stream(thread["thread_id"], "gate", input={"step": 0}, stream_mode="values"):
        parts.append({"event": p.event, "data": p.data, "id": p.id})
    print(json.dumps(parts))

warnings.simplefilter("ignore")
asyncio.run(main())
`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", script, srv.URL, shape.key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the SDK: %v\n%s", err, stderr.String())
	}
	var parts []struct {
		Event string          `json:"event"`
		Data  json.RawMessage `json:"data"`
		ID    string          `json:"id"`
	}
	if err := json.Unmarshal(out, &parts); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for i, p := range parts {
		if p.ID != fmt.Sprint(i) {
			t.Fatalf("part %d has id %q: every event once, in order, was expected: %s", i, p.ID, out)
		}
	}
	var last struct{ Step int }
	if len(parts) < 4 || parts[0].Event != "metadata" || json.Unmarshal(parts[len(parts)-1].Data, &last) != nil || last.Step != 2 {
		t.Fatalf("the SDK got %s", out)
	}
	g.mu.Lock()
	reqs := append([]string(nil), g.requests...)
	g.mu.Unlock()
	var joined bool
	for _, r := range reqs[1:] {
		if strings.HasPrefix(r, "GET ") && strings.Contains(r, "/stream ") && !strings.HasSuffix(r, " ") {
			joined = true // a join with a Last-Event-ID
		}
	}
	if len(reqs) < 2 || !strings.HasPrefix(reqs[0], "POST ") || !joined {
		t.Fatalf("the SDK's streamed requests: %q; want the POST, then a join with Last-Event-ID", reqs)
	}
}

// A thread stream on the AWS shape follows the thread's runs through the
// store: a streamed run's events from its log, a run that is not logged by
// its lifecycle only, and the end of each.
func TestThreadStreamTailsTheThreadsRuns(t *testing.T) {
	shape := newAWSShape(t, func(c *api.Config) { c.StreamHeartbeat = 20 * time.Millisecond })
	srv := newGateway(t, shape.api, time.Minute)
	var th struct {
		ThreadID string `json:"thread_id"`
	}
	mustJSON(t, do(t, srv, shape.key, "POST", "/threads", map[string]any{}), &th)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/threads/"+th.ThreadID+"/stream", nil)
	req.Header.Set("X-Api-Key", shape.key)
	resp, err := srv.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("thread stream: %v %v", err, resp)
	}
	defer resp.Body.Close()
	evs := make(chan sse, 100)
	go func() {
		defer close(evs)
		var cur sse
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			switch {
			case line == "" && cur.event != "":
				evs <- cur
				cur = sse{}
			case strings.HasPrefix(line, "event: "):
				cur.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				cur.data = strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, "id: "):
				cur.id = strings.TrimPrefix(line, "id: ")
			}
		}
	}()
	// until reads events until one with data want; a safety net, not a
	// timing: the events come within milliseconds.
	until := func(want string) []sse {
		t.Helper()
		var got []sse
		safety := time.After(time.Minute)
		for {
			select {
			case e, ok := <-evs:
				if !ok {
					t.Fatalf("the thread stream ended waiting for %s: %+v", want, got)
				}
				if e.id != "" {
					t.Fatalf("a thread stream event with an id: %+v", e)
				}
				got = append(got, e)
				if e.data == want {
					return got
				}
			case <-safety:
				t.Fatalf("no %s on the thread stream: %+v", want, got)
			}
		}
	}
	// A streamed run (logged): its events, then its end.
	var run struct {
		RunID string `json:"run_id"`
	}
	mustJSON(t, do(t, srv, shape.key, "POST", "/threads/"+th.ThreadID+"/runs",
		map[string]any{"assistant_id": "gate", "input": map[string]any{"step": 0}, "stream_resumable": true,
			"stream_mode": []string{"values"}}), &run)
	got := until(`{"step":1}`)
	if got[0].event != "metadata" || !strings.Contains(got[0].data, run.RunID) {
		t.Fatalf("the logged run on the thread stream: %+v", got)
	}
	close(shape.release)
	until(`{"run_id":"` + run.RunID + `","status":"run_done"}`)
	// A run that is not logged: its start and its end.
	mustJSON(t, do(t, srv, shape.key, "POST", "/threads/"+th.ThreadID+"/runs",
		map[string]any{"assistant_id": "gate", "input": map[string]any{"step": 0}}), &run)
	got = until(`{"run_id":"` + run.RunID + `","status":"run_done"}`)
	if len(got) != 2 || got[0].event != "metadata" || !strings.Contains(got[0].data, `"run_id":"`+run.RunID+`"`) {
		t.Fatalf("the run that is not logged on the thread stream: %+v", got)
	}
}

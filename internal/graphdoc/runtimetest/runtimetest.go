package runtimetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/graphdoc"
)

// Kind is how the scripted function answers one attempt of a call.
type Kind int

const (
	// Reply: the function ran and answered Answer.Body, sent as it is.
	Reply Kind = iota + 1
	// Crash: the function ran and failed outside the protocol, with an
	// exception its runtime did not catch (over HTTP a 500 answer, on
	// Lambda a function error); Answer.Body is the failure's message.
	Crash
	// Unavailable: the call was turned away before the function ran (over
	// HTTP a 503 of the runtime's gateway, on Lambda throttling), so the
	// transport may try again.
	Unavailable
	// Hang: the function does not answer. The transport holds the call
	// until the caller gives up, or at the latest until the subtest ends
	// (Function.Released).
	Hang
)

func (k Kind) String() string {
	switch k {
	case Reply:
		return "Reply"
	case Crash:
		return "Crash"
	case Unavailable:
		return "Unavailable"
	case Hang:
		return "Hang"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Answer is the scripted function's answer to one attempt.
type Answer struct {
	Kind Kind
	// Body is the answer's bytes (Reply) or the failure's message (Crash).
	Body []byte
}

// Settings are what a factory must set on the Runtime it makes (the
// transports' MaxAttempts, Backoff and MaxResponseBytes).
type Settings struct {
	MaxAttempts      int
	Backoff          time.Duration
	MaxResponseBytes int64
}

// settings keep retries fast and the size bound small.
var settings = Settings{MaxAttempts: 3, Backoff: time.Millisecond, MaxResponseBytes: 4096}

// Factory returns a Runtime, configured with s, whose calls reach fn: each
// attempt of a call asks fn.Invoke how to answer (a describe call
// fn.Describe), and the transport's remote answers that way. It may
// register cleanups on t; fn is released before they run.
type Factory func(t *testing.T, fn *Function, s Settings) graphdoc.Runtime

// Function is a scripted function runtime: the remote end of a transport
// under test. It records what reaches it.
type Function struct {
	script   func(attempt int, request map[string]any) Answer
	describe Answer
	released chan struct{}
	once     sync.Once

	mu        sync.Mutex
	attempts  int
	describes int
	requests  []map[string]any
}

func newFunction(script func(attempt int, request map[string]any) Answer) *Function {
	return &Function{script: script, released: make(chan struct{}),
		describe: Answer{Kind: Crash, Body: []byte("this function has no description")}}
}

// Invoke is one attempt of a function call reaching the remote. request is
// the FunctionRequest as the transport delivered it: the JSON object (on
// Lambda, the "request" of the invoke payload). Every attempt counts,
// including those answered Unavailable.
func (f *Function) Invoke(request []byte) Answer {
	var req map[string]any
	if err := json.Unmarshal(request, &req); err != nil || req == nil {
		req = map[string]any{"$not-an-object": string(request)}
	}
	f.mu.Lock()
	f.attempts++
	n := f.attempts
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	return f.script(n, req)
}

// Describe is a describe call reaching the remote.
func (f *Function) Describe() Answer {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.describes++
	return f.describe
}

// Released is closed when the subtest ends: a transport holding a Hang
// answer lets go then at the latest.
func (f *Function) Released() <-chan struct{} { return f.released }

func (f *Function) release() { f.once.Do(func() { close(f.released) }) }

// Attempts is how many attempts of function calls reached the remote.
func (f *Function) Attempts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts
}

func (f *Function) describeCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.describes
}

// Requests are the requests of the attempts so far, decoded.
func (f *Function) Requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// Run checks the Runtimes that newRuntime makes. cannot lists the answers
// the transport's remote cannot give (a real service that cannot be made
// to throttle, say); the cases that need one are skipped, saying so.
func Run(t *testing.T, newRuntime Factory, cannot ...Kind) {
	t.Helper()
	c := &contract{newRuntime: newRuntime, cannot: cannot}
	t.Run("RequestFieldsArrive", c.testRequestFields)
	t.Run("AnswersAreDecoded", c.testAnswersDecoded)
	t.Run("Describe", c.testDescribe)
	t.Run("CrashIsBadStatusNotRetried", c.testCrash)
	t.Run("GarbageIsBadResponse", c.testGarbage)
	t.Run("OversizeIsBadResponse", c.testOversize)
	t.Run("TurnedAwayIsRetried", c.testTurnedAwayRetried)
	t.Run("TurnedAwayEveryTime", c.testTurnedAwayEveryTime)
	t.Run("TimeoutIsNotRetried", c.testTimeout)
}

type contract struct {
	newRuntime Factory
	cannot     []Kind
}

// start makes fn's Runtime; fn is released at the end of the subtest,
// before the factory's cleanups.
func (c *contract) start(t *testing.T, fn *Function, needs ...Kind) graphdoc.Runtime {
	t.Helper()
	for _, k := range needs {
		if slices.Contains(c.cannot, k) {
			t.Skipf("the transport's remote cannot answer %s", k)
		}
	}
	rt := c.newRuntime(t, fn, settings)
	if rt == nil {
		t.Fatal("the factory returned a nil Runtime")
	}
	t.Cleanup(fn.release)
	return rt
}

// reply answers every attempt with body.
func reply(body string) func(int, map[string]any) Answer {
	return func(int, map[string]any) Answer { return Answer{Kind: Reply, Body: []byte(body)} }
}

// byNode answers each call with the body named by its node.
func byNode(t *testing.T, bodies map[string]string) func(int, map[string]any) Answer {
	return func(_ int, req map[string]any) Answer {
		node, _ := req["node"].(string)
		body, ok := bodies[node]
		if !ok {
			t.Errorf("a call for node %q, which the script does not know", node)
			return Answer{Kind: Crash, Body: []byte("unknown node")}
		}
		return Answer{Kind: Reply, Body: []byte(body)}
	}
}

func call(t *testing.T, rt graphdoc.Runtime, req graphdoc.FunctionRequest) (graphdoc.FunctionResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return rt.Call(ctx, req)
}

// The request reaches the function whole: graph, node, state, config,
// context, resume ([] when the caller set none) and, for a tool, the tool
// call. An echo of it comes back as the output.
func (c *contract) testRequestFields(t *testing.T) {
	fn := newFunction(func(_ int, req map[string]any) Answer {
		b, err := json.Marshal(map[string]any{"output": req})
		if err != nil {
			return Answer{Kind: Crash, Body: []byte(err.Error())}
		}
		return Answer{Kind: Reply, Body: b}
	})
	rt := c.start(t, fn)
	state := map[string]any{"count": 1, "messages": []any{map[string]any{"role": "user", "content": "Where is order 42? ✓"}}}
	config := map[string]any{"metadata": map[string]any{"graph_id": "support", "langgraph_node": "classify",
		"langgraph_step": 1, "langgraph_task_id": "task-1"}}
	requests := []struct {
		name string
		req  graphdoc.FunctionRequest
		want map[string]any
	}{
		{"function node, no resume", graphdoc.FunctionRequest{Graph: "support", Node: "classify", State: state,
			Config: config, Context: map[string]any{"tenant": "acme"}},
			map[string]any{"graph": "support", "node": "classify", "state": state, "config": config,
				"context": map[string]any{"tenant": "acme"}, "resume": []any{}}},
		{"function node, resumed", graphdoc.FunctionRequest{Graph: "refund", Node: "confirm", State: map[string]any{},
			Config: map[string]any{}, Context: map[string]any{}, Resume: []any{"yes", map[string]any{"amount": 10}}},
			map[string]any{"graph": "refund", "node": "confirm", "state": map[string]any{}, "config": map[string]any{},
				"context": map[string]any{}, "resume": []any{"yes", map[string]any{"amount": 10}}}},
		{"tool", graphdoc.FunctionRequest{Graph: "support", Node: "tools", State: state, Config: config,
			Context: map[string]any{"tenant": "acme"},
			Tool:    &graphdoc.ToolCall{ID: "call_1", Name: "lookup_order", Args: map[string]any{"order_id": "42"}}},
			map[string]any{"graph": "support", "node": "tools", "state": state, "config": config,
				"context": map[string]any{"tenant": "acme"}, "resume": []any{},
				"tool": map[string]any{"id": "call_1", "name": "lookup_order", "args": map[string]any{"order_id": "42"}}}},
	}
	for i, r := range requests {
		resp, err := call(t, rt, r.req)
		if err != nil {
			t.Fatalf("%s: Call: %v", r.name, err)
		}
		got := fn.Requests()
		if len(got) != i+1 {
			t.Fatalf("%s: %d attempts reached the function, want %d", r.name, len(got), i+1)
		}
		if !jsonEqual(got[i], r.want) {
			t.Errorf("%s: the function received\n%s\nwant\n%s", r.name, canonical(got[i]), canonical(r.want))
		}
		if !jsonEqual(resp.Output, r.want) {
			t.Errorf("%s: the echo decoded as output %s, want %s", r.name, canonical(resp.Output), canonical(r.want))
		}
	}
}

// Every part of the protocol's answer is decoded: update (an object, or
// pairs in order), goto (a name or a list), interrupt, output, and an
// error the function reports, which is an answer and not a failed call.
func (c *contract) testAnswersDecoded(t *testing.T) {
	cases := []struct{ node, answer, want string }{
		{"update-and-goto", `{"update": {"count": 2, "answer": "yes"}, "goto": "after"}`,
			`{"update": [["answer", "yes"], ["count", 2]], "goto": ["after"]}`},
		{"update-pairs", `{"update": [["messages", {"role": "assistant", "content": "hi"}], ["count", 1], ["count", 2]], "goto": ["a", "b"]}`,
			`{"update": [["messages", {"role": "assistant", "content": "hi"}], ["count", 1], ["count", 2]], "goto": ["a", "b"]}`},
		{"interrupt", `{"interrupt": {"question": "Refund order 42 (59.90 EUR)?"}}`,
			`{"interrupt": {"question": "Refund order 42 (59.90 EUR)?"}}`},
		{"output", `{"output": {"order_id": "42", "status": "shipped", "items": [1, 2.5, null, true]}}`,
			`{"output": {"order_id": "42", "status": "shipped", "items": [1, 2.5, null, true]}}`},
		{"error", `{"error": {"type": "LookupError", "message": "no order 7"}}`,
			`{"error": {"type": "LookupError", "message": "no order 7"}}`},
		{"error-without-type", `{"error": {"message": "no order 7"}}`,
			`{"error": {"type": "Error", "message": "no order 7"}}`},
		{"nothing", `{}`, `{}`},
		{"custom-events", `{"update": {"count": 1}, "events": [{"progress": 0.5}, "half", [1, 2], null]}`,
			`{"update": [["count", 1]], "events": [{"progress": 0.5}, "half", [1, 2], null]}`},
		{"custom-events-and-interrupt", `{"interrupt": "sure?", "events": [{"step": "asked"}]}`,
			`{"interrupt": "sure?", "events": [{"step": "asked"}]}`},
		{"custom-events-and-error", `{"error": {"type": "KeyError", "message": "k"}, "events": ["before"]}`,
			`{"error": {"type": "KeyError", "message": "k"}, "events": ["before"]}`},
	}
	bodies := map[string]string{}
	for _, c := range cases {
		bodies[c.node] = c.answer
	}
	fn := newFunction(byNode(t, bodies))
	rt := c.start(t, fn)
	for _, cs := range cases {
		resp, err := call(t, rt, graphdoc.FunctionRequest{Graph: "g", Node: cs.node})
		if err != nil {
			t.Errorf("%s: Call: %v", cs.node, err)
			continue
		}
		var want any
		if err := json.Unmarshal([]byte(cs.want), &want); err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(resp, want) {
			t.Errorf("%s: answer %s decoded as %s, want %s", cs.node, cs.answer, canonical(resp), canonical(want))
		}
	}
	if n := fn.Attempts(); n != len(cases) {
		t.Errorf("%d attempts for %d calls answered at once, want one each", n, len(cases))
	}
}

// Describe returns the runtime's graph config; it is no function call.
func (c *contract) testDescribe(t *testing.T) {
	const config = `{"graphs": {"g": {"state": {"answer": null}, "nodes": {"fn": {"kind": "function"}},
		"edges": [{"from": "__start__", "to": "fn"}]}}}`
	fn := newFunction(reply(`{}`))
	fn.describe = Answer{Kind: Reply, Body: []byte(config)}
	rt := c.start(t, fn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw, err := rt.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	var got, want any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("Describe returned %s: %v", raw, err)
	}
	_ = json.Unmarshal([]byte(config), &want)
	if !jsonEqual(got, want) {
		t.Errorf("Describe returned %s, want %s", canonical(got), canonical(want))
	}
	if _, err := graphdoc.ParseConfig("describe", raw, nil); err != nil {
		t.Errorf("the description does not parse: %v", err)
	}
	if fn.describeCalls() != 1 || fn.Attempts() != 0 {
		t.Errorf("%d describe calls and %d function calls reached the runtime, want 1 and 0", fn.describeCalls(), fn.Attempts())
	}
}

// A function that crashed is a BadStatus naming its message, and is not
// retried: it ran.
func (c *contract) testCrash(t *testing.T) {
	fn := newFunction(func(int, map[string]any) Answer {
		return Answer{Kind: Crash, Body: []byte("ValueError: no order 7")}
	})
	rt := c.start(t, fn, Crash)
	_, err := call(t, rt, graphdoc.FunctionRequest{Graph: "g", Node: "fn"})
	wantCallError(t, err, graphdoc.BadStatus, 1, "no order 7")
	if n := fn.Attempts(); n != 1 {
		t.Errorf("%d attempts reached the function, want 1", n)
	}
}

// An answer that is not the protocol's is a BadResponse, not retried.
func (c *contract) testGarbage(t *testing.T) {
	cases := []struct{ node, answer, fragment string }{
		{"html", `<html>oops</html>`, "not a JSON object"},
		{"list", `[1, 2]`, "not a JSON object"},
		{"other-protocol", `{"updates": {"count": 1}}`, `"updates"`},
		{"bad-goto", `{"goto": 7}`, `"goto"`},
		{"interrupt-and-update", `{"interrupt": "sure?", "update": {"count": 1}}`, "holds nothing else"},
		{"error-and-output", `{"error": {"message": "boom"}, "output": 1}`, "holds nothing else"},
		{"events-not-a-list", `{"events": {"progress": 1}}`, `"events"`},
	}
	bodies := map[string]string{}
	for _, c := range cases {
		bodies[c.node] = c.answer
	}
	fn := newFunction(byNode(t, bodies))
	rt := c.start(t, fn)
	for _, cs := range cases {
		_, err := call(t, rt, graphdoc.FunctionRequest{Graph: "g", Node: cs.node})
		t.Run(cs.node, func(t *testing.T) { wantCallError(t, err, graphdoc.BadResponse, 1, cs.fragment) })
	}
	if n := fn.Attempts(); n != len(cases) {
		t.Errorf("%d attempts for %d calls, want one each", n, len(cases))
	}
}

// An answer larger than MaxResponseBytes is a BadResponse naming the
// bound, for a call and for a describe.
func (c *contract) testOversize(t *testing.T) {
	big := `{"output": "` + strings.Repeat("x", 2*int(settings.MaxResponseBytes)) + `"}`
	fn := newFunction(reply(big))
	fn.describe = Answer{Kind: Reply, Body: []byte(big)}
	rt := c.start(t, fn)
	bound := fmt.Sprintf("larger than %d bytes", settings.MaxResponseBytes)
	_, err := call(t, rt, graphdoc.FunctionRequest{Graph: "g", Node: "fn"})
	wantCallError(t, err, graphdoc.BadResponse, 1, bound)
	if n := fn.Attempts(); n != 1 {
		t.Errorf("%d attempts reached the function, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = rt.Describe(ctx)
	wantCallError(t, err, graphdoc.BadResponse, 1, bound)
}

// A call turned away before the function ran is tried again, and the
// answer of the attempt that got through is the call's.
func (c *contract) testTurnedAwayRetried(t *testing.T) {
	fn := newFunction(func(n int, _ map[string]any) Answer {
		if n < settings.MaxAttempts {
			return Answer{Kind: Unavailable, Body: []byte("busy")}
		}
		return Answer{Kind: Reply, Body: []byte(`{"update": {"count": 1}}`)}
	})
	rt := c.start(t, fn, Unavailable)
	resp, err := call(t, rt, graphdoc.FunctionRequest{Graph: "g", Node: "fn"})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if !jsonEqual(resp, map[string]any{"update": []any{[]any{"count", 1}}}) {
		t.Errorf("answer %s, want the update of the attempt that got through", canonical(resp))
	}
	if n := fn.Attempts(); n != settings.MaxAttempts {
		t.Errorf("%d attempts reached the remote, want %d", n, settings.MaxAttempts)
	}
}

// A call turned away every time fails after MaxAttempts attempts.
func (c *contract) testTurnedAwayEveryTime(t *testing.T) {
	fn := newFunction(func(int, map[string]any) Answer { return Answer{Kind: Unavailable, Body: []byte("busy")} })
	rt := c.start(t, fn, Unavailable)
	_, err := call(t, rt, graphdoc.FunctionRequest{Graph: "g", Node: "fn"})
	wantCallError(t, err, graphdoc.BadStatus, settings.MaxAttempts, fmt.Sprintf("(%d attempts)", settings.MaxAttempts))
	if n := fn.Attempts(); n != settings.MaxAttempts {
		t.Errorf("%d attempts reached the remote, want %d", n, settings.MaxAttempts)
	}
}

// A call that gets no answer before the caller's deadline is TimedOut
// after one attempt: the function may have run, so it is not retried.
func (c *contract) testTimeout(t *testing.T) {
	fn := newFunction(func(int, map[string]any) Answer { return Answer{Kind: Hang} })
	rt := c.start(t, fn, Hang)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := rt.Call(ctx, graphdoc.FunctionRequest{Graph: "g", Node: "fn"})
	wantCallError(t, err, graphdoc.TimedOut, 1)
	// Retries happen within Call: none can reach the function after it.
	if n := fn.Attempts(); n > 1 {
		t.Errorf("%d attempts reached the function, want at most 1", n)
	}
}

// wantCallError checks that err is a *graphdoc.CallError of failure after
// attempts attempts, whose message holds every fragment.
func wantCallError(t *testing.T, err error, failure graphdoc.Failure, attempts int, fragments ...string) {
	t.Helper()
	var ce *graphdoc.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a *graphdoc.CallError", err, err)
	}
	if ce.Failure != failure || ce.Attempts != attempts {
		t.Errorf("CallError failure %s after %d attempts (%v), want %s after %d",
			failureName(ce.Failure), ce.Attempts, err, failureName(failure), attempts)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not contain %q", err.Error(), f)
		}
	}
}

func failureName(f graphdoc.Failure) string {
	switch f {
	case graphdoc.Unreachable:
		return "Unreachable"
	case graphdoc.TimedOut:
		return "TimedOut"
	case graphdoc.BadStatus:
		return "BadStatus"
	case graphdoc.BadResponse:
		return "BadResponse"
	}
	return fmt.Sprintf("Failure(%d)", int(f))
}

// canonical is v's JSON with object keys sorted and numbers as JSON has
// them, so that values decoded on either side compare.
func canonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return string(b)
	}
	b, _ = json.Marshal(generic)
	return string(b)
}

func jsonEqual(a, b any) bool { return canonical(a) == canonical(b) }

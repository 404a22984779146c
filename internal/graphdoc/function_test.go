package graphdoc

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
)

const functionDoc = `
state:
  count: {reducer: add, default: 0}
  answer:
nodes:
  fn: {kind: function, timeout: 5}
  after: {kind: transform, update: {answer: "after {{ state.answer }}"}}
edges:
  - {from: __start__, to: fn}
  - {from: fn, to: __end__}
`

// functionGraph compiles functionDoc against a runtime at url.
func functionGraph(t *testing.T, url string, doc string) *graph.Graph {
	t.Helper()
	rt := &HTTPRuntime{URL: url, Client: &http.Client{}, Backoff: time.Millisecond}
	return compileDocs(t, testOptions(rt), map[string]string{"g": doc})["g"]
}

func TestFunctionNode(t *testing.T) {
	cases := []struct {
		name   string
		status int
		answer string
		check  func(t *testing.T, cp graph.Checkpoint, out graph.Outcome)
	}{
		{"update and goto", 200, `{"update": {"count": 2, "answer": "yes"}, "goto": "after"}`,
			func(t *testing.T, cp graph.Checkpoint, out graph.Outcome) {
				wantStatus(t, out, graph.Done)
				jsonEqual(t, cp.Values, `{"count": 2, "answer": "after yes"}`)
			}},
		{"update as pairs, goto list", 200, `{"update": [["count", 1], ["count", 2]], "goto": ["__end__"]}`,
			func(t *testing.T, cp graph.Checkpoint, out graph.Outcome) {
				wantStatus(t, out, graph.Done)
				jsonEqual(t, cp.Values, `{"count": 3}`)
			}},
		{"nothing to do", 200, `{}`,
			func(t *testing.T, cp graph.Checkpoint, out graph.Outcome) { wantStatus(t, out, graph.Done) }},
		{"the function reports an error", 200, `{"error": {"type": "KeyError", "message": "no user 7"}}`,
			func(t *testing.T, _ graph.Checkpoint, out graph.Outcome) {
				wantError(t, out, "KeyError", `node "fn": no user 7`)
			}},
		{"garbage", 200, `<html>oops</html>`,
			func(t *testing.T, _ graph.Checkpoint, out graph.Outcome) {
				wantError(t, out, graph.KindValue, `node "fn": the function's answer is not valid: the answer is not a JSON object: <html>oops</html>`)
			}},
		{"not an object", 200, `[1, 2]`,
			func(t *testing.T, _ graph.Checkpoint, out graph.Outcome) {
				wantError(t, out, graph.KindValue, `node "fn"`, "not a JSON object")
			}},
		{"a key of another protocol", 200, `{"updates": {"count": 1}}`,
			func(t *testing.T, _ graph.Checkpoint, out graph.Outcome) {
				wantError(t, out, graph.KindValue, `node "fn"`, `"updates": is not part of the protocol`)
			}},
		{"update of the wrong type", 200, `{"update": 5}`,
			func(t *testing.T, _ graph.Checkpoint, out graph.Outcome) {
				wantError(t, out, graph.KindValue, `node "fn"`, `"update"`)
			}},
		{"an unknown channel", 200, `{"update": {"total": 1}}`,
			func(t *testing.T, _ graph.Checkpoint, out graph.Outcome) {
				wantError(t, out, graph.KindValue, `node "fn"`, `writes "total", which is not a state channel`)
			}},
		{"an unknown node", 200, `{"goto": "afterwards"}`,
			func(t *testing.T, _ graph.Checkpoint, out graph.Outcome) {
				wantError(t, out, graph.KindValue, `node "fn"`, `goto "afterwards": no such node`)
			}},
		{"interrupt and update together", 200, `{"interrupt": "sure?", "update": {"count": 1}}`,
			func(t *testing.T, _ graph.Checkpoint, out graph.Outcome) {
				wantError(t, out, graph.KindValue, `node "fn"`, "an answer with an interrupt holds nothing else")
			}},
		{"a server error", 500, `Traceback (most recent call last): ...`,
			func(t *testing.T, _ graph.Checkpoint, out graph.Outcome) {
				wantError(t, out, graph.KindGeneric, `node "fn": the function runtime failed: POST`, "/invoke answered 500 Internal Server Error: Traceback")
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, calls := fakeRuntime(t, func(map[string]any) (int, string) { return c.status, c.answer })
			cp, out := run(t, functionGraph(t, srv.URL, functionDoc), nil, map[string]any{}, graph.Options{})
			c.check(t, cp, out)
			if len(*calls) != 1 {
				t.Errorf("%d calls, want 1 (no retry)", len(*calls))
			}
		})
	}
}

func TestFunctionTimeout(t *testing.T) {
	var hang atomic.Bool
	hang.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so the server notices the client hanging up
		if hang.Load() {
			<-r.Context().Done()
			return
		}
		_, _ = w.Write([]byte(`{"update": {"answer": "late"}}`))
	}))
	defer srv.Close()
	g := functionGraph(t, srv.URL, `
state: {answer: }
nodes: {fn: {kind: function, timeout: 0.2}}
edges: [{from: __start__, to: fn}]
`)
	cp, out := run(t, g, nil, map[string]any{"answer": "none"}, graph.Options{})
	wantError(t, out, graph.KindTimeout, `node "fn": the function did not answer within 200ms`)

	// The thread is consistent: the failed step can be retried.
	if len(cp.Next) != 1 || cp.Next[0] != "fn" {
		t.Fatalf("next = %v, want [fn]", cp.Next)
	}
	hang.Store(false)
	cp, out = run(t, g, &cp, nil, graph.Options{})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, cp.Values, `{"answer": "late"}`)
}

func TestFunctionUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close() // nothing listens there now: connections are refused
	_, out := run(t, functionGraph(t, url, functionDoc), nil, map[string]any{}, graph.Options{})
	wantError(t, out, kindConnection, `node "fn": the function runtime is unreachable`, "connection refused", "(3 attempts)")
}

func TestFunctionRetriesGatewayErrors(t *testing.T) {
	statuses := []int{502, 503, 504, 200}
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := statuses[n.Add(1)-1]
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"update": {"count": 1}}`))
	}))
	defer srv.Close()
	rt := &HTTPRuntime{URL: srv.URL, Client: &http.Client{}, Backoff: time.Millisecond, MaxAttempts: 4}
	g := compileDocs(t, testOptions(rt), map[string]string{"g": functionDoc})["g"]
	cp, out := run(t, g, nil, map[string]any{}, graph.Options{})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, cp.Values, `{"count": 1}`)
	if n.Load() != 4 {
		t.Errorf("%d attempts, want 4", n.Load())
	}

	// The default is three attempts, then the node fails naming the status.
	n.Store(0)
	statuses = []int{503, 503, 503, 200}
	_, out = run(t, functionGraph(t, srv.URL, functionDoc), nil, map[string]any{}, graph.Options{})
	wantError(t, out, graph.KindGeneric, `node "fn"`, "503 Service Unavailable", "(3 attempts)")
}

func TestFunctionInterrupts(t *testing.T) {
	// The function asks twice; each call carries the answers so far.
	srv, calls := fakeRuntime(t, func(req map[string]any) (int, string) {
		switch resume := req["resume"].([]any); len(resume) {
		case 0:
			return 200, `{"interrupt": {"question": "name?"}}`
		case 1:
			return 200, `{"interrupt": {"question": "sure, ` + resume[0].(string) + `?"}}`
		default:
			return 200, `{"update": {"answer": "` + resume[0].(string) + `/` + resume[1].(string) + `"}}`
		}
	})
	g := functionGraph(t, srv.URL, functionDoc)
	cp, out := run(t, g, nil, map[string]any{}, graph.Options{})
	wantStatus(t, out, graph.Interrupted)
	jsonEqual(t, out.Interrupts[0].Value, `{"question": "name?"}`)

	cp, out = run(t, g, &cp, graph.Command{Resume: "Ada"}, graph.Options{})
	wantStatus(t, out, graph.Interrupted)
	jsonEqual(t, out.Interrupts[0].Value, `{"question": "sure, Ada?"}`)

	cp, out = run(t, g, &cp, graph.Command{Resume: "yes"}, graph.Options{})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, cp.Values, `{"count": 0, "answer": "Ada/yes"}`)
	var resumes []any
	for _, c := range *calls {
		resumes = append(resumes, c["resume"])
	}
	jsonEqual(t, resumes, `[[], [], ["Ada"], [], ["Ada"], ["Ada", "yes"]]`)
}

func TestHTTPRuntimeDescribe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/describe" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"graphs": {"g": {"state": {"answer": null},
			"nodes": {"fn": {"kind": "function"}}, "edges": [{"from": "__start__", "to": "fn"}]}}}`))
	}))
	defer srv.Close()
	rt := &HTTPRuntime{URL: srv.URL + "/", Client: &http.Client{}}
	raw, err := rt.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig("describe", raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Compile(Options{Runtime: rt}); err != nil {
		t.Fatal(err)
	}

	// A description names no files.
	_, err = ParseConfig("describe", []byte(`{"graphs": {"g": "graphs/g.yaml"}}`), nil)
	if err == nil || err.Error() != "describe: /graphs/g: must be an inline document: there are no files to read graphs/g.yaml from" {
		t.Errorf("a path in a description: %v", err)
	}

	// A runtime that is not there.
	_, err = (&HTTPRuntime{URL: srv.URL + "/nope", Client: &http.Client{}}).Describe(context.Background())
	var ce *CallError
	if !errors.As(err, &ce) || ce.Failure != BadStatus {
		t.Errorf("describe of a missing path: %v", err)
	}
}

func TestParseFunctionResponse(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"update": {"a": 1}, "goto": "b"}`, ""},
		{`{"output": "sunny"}`, ""},
		{`{"interrupt": null}`, ""},
		{`{"error": {"message": "boom"}}`, ""},
		{`{"error": "boom"}`, `"error": must be {"type": "<ExceptionName>", "message": "<text>"} with a message`},
		{`{"goto": 3}`, `"goto": must be a node name or a list of node names`},
		{`{"error": {"type": "E", "message": "m"}, "output": 1}`, "an answer with an error holds nothing else"},
		{`null`, "the answer is not a JSON object: null"},
		{``, "the answer is not a JSON object: (empty)"},
	}
	for _, c := range cases {
		_, err := ParseFunctionResponse([]byte(c.in))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.in, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("%s: error %v, want %s", c.in, err, c.want)
		}
	}
}

package graphdoc

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

func TestHTTPNode(t *testing.T) {
	var got struct {
		method, path, query, header, body string
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.method, got.path, got.query, got.header, got.body = r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("X-Customer"), string(b)
		switch r.URL.Path {
		case "/orders":
			w.Header().Set("X-Request-Id", "r-1")
			_, _ = w.Write([]byte(`{"order": {"id": 42, "items": [{"sku": "a"}, {"sku": "b"}]}}`))
		case "/text":
			_, _ = w.Write([]byte("plain words"))
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat("x", 2048)))
		case "/slow":
			<-r.Context().Done()
		default:
			http.Error(w, "no such order", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	doc := func(path, extra string) string {
		return `
state: {customer: {}, order: {}, last_sku: {}, request: {}, status: {}}
nodes:
  fetch:
    kind: http
    url: ` + srv.URL + path + `
    query: {customer: "{{ state.customer.id }}", tag: "c-{{ state.customer.id }}"}
    headers: {X-Customer: "{{ state.customer.name }}"}
    body: {customer: "{{ state.customer }}", note: "for {{ state.customer.name }}", n: 1}
    update:
      order: "{{ response.body.order }}"
      last_sku: "{{ response.body.order.items[-1].sku }}"
      request: "{{ response.headers.x-request-id }}"
      status: "{{ response.status }}"
` + extra + `
edges: [{from: __start__, to: fetch}]
`
	}
	input := map[string]any{"customer": map[string]any{"id": 7, "name": "Ada"}}

	g := compileDocs(t, testOptions(nil), map[string]string{"g": doc("/orders", "")})["g"]
	cp, out := run(t, g, nil, input, graph.Options{})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, cp.Values, `{"customer": {"id": 7, "name": "Ada"},
		"order": {"id": 42, "items": [{"sku": "a"}, {"sku": "b"}]}, "last_sku": "b", "request": "r-1", "status": 200}`)
	jsonEqual(t, []string{got.method, got.path, got.query, got.header}, `["POST", "/orders", "customer=7&tag=c-7", "Ada"]`)
	jsonEqual(t, got.body, `"{\"customer\":{\"id\":7,\"name\":\"Ada\"},\"n\":1,\"note\":\"for Ada\"}"`)

	cases := []struct {
		path, extra string
		check       func(t *testing.T, cp graph.Checkpoint, out graph.Outcome)
	}{
		{"/text", "", func(t *testing.T, cp graph.Checkpoint, out graph.Outcome) {
			wantStatus(t, out, graph.Done)
			if cp.Values["order"] != nil || cp.Values["status"] == nil {
				t.Errorf("values %v", cp.Values)
			}
		}},
		{"/missing", "", func(t *testing.T, _ graph.Checkpoint, out graph.Outcome) {
			wantError(t, out, "HTTPError", `node "fetch": POST `+srv.URL+`/missing?customer=7&tag=c-7 answered 404 Not Found: no such order`)
		}},
		{"/big", "    max_response_bytes: 1024", func(t *testing.T, _ graph.Checkpoint, out graph.Outcome) {
			wantError(t, out, graph.KindValue, `node "fetch"`, "the answer is larger than 1024 bytes")
		}},
		{"/slow", "    timeout: 0.1", func(t *testing.T, _ graph.Checkpoint, out graph.Outcome) {
			wantError(t, out, graph.KindTimeout, `node "fetch": POST `, "no answer in the time allowed")
		}},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			g := compileDocs(t, testOptions(nil), map[string]string{"g": doc(c.path, c.extra)})["g"]
			cp, out := run(t, g, nil, input, graph.Options{})
			c.check(t, cp, out)
		})
	}
}

// guardedClient stands for the platform's SSRF-guarded client: it refuses
// every address, as the guard refuses a name that resolves to a private one.
func guardedClient() *http.Client {
	return &http.Client{Transport: roundTripper(func(*http.Request) (*http.Response, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &weburl.RefusedError{Addr: "10.1.2.3:443"}}
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Every outbound call goes through the client given in Options, so the
// platform's SSRF guard applies to all of them.
func TestOutboundCallsUseTheGivenClient(t *testing.T) {
	doc := `
state: {messages: {reducer: messages}, x: {}}
tools:
  t: {kind: http, description: d, url: "https://tool.example.com/"}
nodes:
  fetch: {kind: http, url: "https://api.example.com/"}
  llm: {kind: chat_model, base_url: "https://llm.example.com/v1", model: m, api_key_secret: KEY}
  tools: {kind: tools}
edges: [{from: __start__, to: %s}]
`
	toolCall := map[string]any{"messages": []any{map[string]any{"type": "ai", "content": "",
		"tool_calls": []any{map[string]any{"id": "c1", "name": "t", "args": map[string]any{}}}}}}
	for _, node := range []string{"fetch", "llm", "tools"} {
		opts := testOptions(nil)
		opts.HTTPClient = guardedClient()
		g := compileDocs(t, opts, map[string]string{"g": strings.Replace(doc, "%s", node, 1)})["g"]
		_, out := run(t, g, nil, toolCall, graph.Options{})
		wantError(t, out, kindConnection, `node "`+node+`"`, "is refused: it is, or resolves to, a private, loopback")
		if strings.Contains(fmt.Sprint(out), "10.1.2.3") {
			t.Errorf("the error names the address the host resolved to: %v", out)
		}
	}
}

func TestTransformAndSwitch(t *testing.T) {
	g := compileDocs(t, testOptions(nil), map[string]string{"g": `
state:
  messages: {reducer: append}
  route: {}
  copy: {}
  summary: {}
  visited: {reducer: append}
nodes:
  pick:
    kind: transform
    update:
      copy: "{{ state.messages[-1] }}"
      summary: "{{ state.messages[0].content }} → {{ context.user }} ({{ state.missing }})"
      visited: [pick, 1, true, null, {nested: "{{ state.route }}"}]
  a: {kind: transform, update: {visited: a}}
  b: {kind: transform, update: {visited: b}}
  other: {kind: transform, update: {visited: other}}
edges:
  - {from: __start__, to: pick}
  - {from: pick, when: state.route, cases: {alpha: a, "true": b, "2": b}, default: other}
`})["g"]
	msgs := []any{map[string]any{"role": "user", "content": "hi"}, map[string]any{"role": "user", "content": "bye"}}
	cp, out := run(t, g, nil, map[string]any{"messages": msgs, "route": "alpha"}, graph.Options{Context: map[string]any{"user": "Ada"}})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, []any{cp.Values["copy"], cp.Values["summary"], cp.Values["visited"]},
		`[{"role": "user", "content": "bye"}, "hi → Ada ()", ["pick", 1, true, null, {"nested": "alpha"}, "a"]]`)

	for route, want := range map[any]string{true: "b", 2: "b", "beta": "other", nil: "other"} {
		cp, out := run(t, g, nil, map[string]any{"messages": msgs, "route": route}, graph.Options{})
		wantStatus(t, out, graph.Done)
		visited := cp.Values["visited"].([]any)
		if last := visited[len(visited)-1]; last != want {
			t.Errorf("route %v went to %v, want %s", route, last, want)
		}
	}

	// Without a default, a value no case names fails the run, naming the edge.
	g = compileDocs(t, testOptions(nil), map[string]string{"g": `
state: {route: {}}
nodes: {a: {kind: transform, update: {route: done}}}
edges:
  - {from: __start__, to: a}
  - {from: a, when: state.route, cases: {again: a}}
`})["g"]
	_, out = run(t, g, nil, map[string]any{}, graph.Options{})
	wantError(t, out, graph.KindValue, `the edge from "a": state.route is "done", which matches none of its cases [again] and it has no default`)
}

func TestInterruptNode(t *testing.T) {
	g := compileDocs(t, testOptions(nil), map[string]string{"g": `
state: {order: {}, approved: {}, note: {}}
nodes:
  confirm:
    kind: interrupt
    value: {question: "Refund order {{ state.order.id }}?", order: "{{ state.order }}"}
    update: {approved: "{{ resume.ok }}", note: "answered {{ resume.ok }}"}
edges: [{from: __start__, to: confirm}, {from: confirm, to: __end__}]
`})["g"]
	cp, out := run(t, g, nil, map[string]any{"order": map[string]any{"id": 42}}, graph.Options{})
	wantStatus(t, out, graph.Interrupted)
	jsonEqual(t, out.Interrupts[0].Value, `{"question": "Refund order 42?", "order": {"id": 42}}`)
	cp, out = run(t, g, &cp, graph.Command{Resume: map[string]any{"ok": true}}, graph.Options{})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, cp.Values, `{"order": {"id": 42}, "approved": true, "note": "answered true"}`)
}

func TestSubgraph(t *testing.T) {
	docs := map[string]string{
		"parent": `
state: {messages: {reducer: messages}, topic: {}, report: {}, approved: {}}
nodes:
  shared: {kind: subgraph, graph: writer}
  mapped:
    kind: subgraph
    graph: reviewer
    input: {draft: "{{ state.report }}"}
    update: {approved: "{{ result.verdict }}"}
edges:
  - {from: __start__, to: shared}
  - {from: shared, to: mapped}
`,
		"writer": `
state: {messages: {reducer: messages}, topic: {}, report: {}}
nodes:
  write:
    kind: transform
    update:
      report: "A report on {{ state.topic }}"
      messages: {type: ai, content: "wrote about {{ state.topic }}", id: w1}
edges: [{from: __start__, to: write}]
`,
		"reviewer": `
state: {draft: {}, verdict: {}}
nodes:
  ask:
    kind: interrupt
    value: "Approve '{{ state.draft }}'?"
    update: {verdict: "{{ resume }}"}
edges:
  - {from: __start__, to: ask}
  - {from: ask, when: state.verdict, cases: {"yes": __end__, "no": __end__}}
`,
	}
	g := compileDocs(t, testOptions(nil), docs)["parent"]
	input := map[string]any{"topic": "owls", "messages": []any{map[string]any{"type": "human", "content": "go", "id": "h1"}}}
	cp, out := run(t, g, nil, input, graph.Options{})
	wantStatus(t, out, graph.Interrupted)
	jsonEqual(t, out.Interrupts[0].Value, `"Approve 'A report on owls'?"`)
	jsonEqual(t, cp.Values["messages"], `[{"type": "human", "content": "go", "id": "h1"}, {"type": "ai", "content": "wrote about owls", "id": "w1"}]`)

	done, out := run(t, g, &cp, graph.Command{Resume: "yes"}, graph.Options{})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, done.Values, `{"topic": "owls", "report": "A report on owls", "approved": "yes",
		"messages": [{"type": "human", "content": "go", "id": "h1"}, {"type": "ai", "content": "wrote about owls", "id": "w1"}]}`)

	// A failure inside the subgraph names the node.
	_, out = run(t, g, &cp, graph.Command{Resume: "maybe"}, graph.Options{})
	wantError(t, out, graph.KindValue, `node "mapped": subgraph "reviewer": the edge from "ask": state.verdict is "maybe"`)
}

func TestChatModelErrors(t *testing.T) {
	const secret = "sk-test-secret-value"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Case") {
		default:
			// Endpoints echo keys back; the error must not carry it.
			http.Error(w, `{"error": {"message": "Incorrect API key provided: `+r.Header.Get("Authorization")+`"}}`, http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	g := compileDocs(t, testOptions(nil), map[string]string{"g": `
state: {messages: {reducer: messages}}
nodes: {llm: {kind: chat_model, base_url: "` + srv.URL + `", model: m, api_key_secret: KEY}}
edges: [{from: __start__, to: llm}]
`})["g"]
	cp, out := run(t, g, nil, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, graph.Options{})
	wantError(t, out, "APIStatusError", `node "llm": the model endpoint answered 401 Unauthorized`, "Bearer [redacted]")
	if strings.Contains(out.Error.Message, secret) {
		t.Errorf("the API key is in the error: %s", out.Error.Message)
	}
	if len(cp.Next) != 1 {
		t.Errorf("next = %v: the failed step should stay to retry", cp.Next)
	}

	_, out = run(t, g, nil, map[string]any{"messages": []any{map[string]any{"role": "robot", "content": "hi"}}}, graph.Options{})
	wantError(t, out, graph.KindValue, `node "llm": messages: message 0 has type "robot", not human, ai, system or tool`)
}

func TestAIMessage(t *testing.T) {
	msg, err := aiMessage([]byte(`{"model": "m", "choices": [{"message": {"content": "let me see", "tool_calls": [
		{"id": "", "type": "function", "function": {"name": "a", "arguments": ""}},
		{"id": "c2", "type": "function", "function": {"name": "b", "arguments": "{oops"}}]}, "finish_reason": "tool_calls"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	calls := msg["tool_calls"].([]any)
	call := calls[0].(map[string]any)
	if len(calls) != 1 || !strings.HasPrefix(call["id"].(string), "call_") {
		t.Fatalf("tool_calls = %v", calls)
	}
	jsonEqual(t, []any{call["name"], call["args"], msg["invalid_tool_calls"]}, `["a", {}, [
		{"type": "invalid_tool_call", "id": "c2", "name": "b", "args": "{oops", "error": "the arguments are not a JSON object"}]]`)

	for _, bad := range []string{`{"choices": []}`, `not json`} {
		if _, err := aiMessage([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestToolsNode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "city unknown", http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write([]byte(r.Method + " " + string(b)))
	}))
	defer srv.Close()
	runtime, _ := fakeRuntime(t, func(req map[string]any) (int, string) {
		return 200, `{"error": {"type": "LookupError", "message": "no order 9"}}`
	})
	opts := testOptions(&HTTPRuntime{URL: runtime.URL, Client: &http.Client{}})
	g := compileDocs(t, opts, map[string]string{"g": `
state: {history: {reducer: append}}
tools:
  echo: {kind: http, description: Echo, url: "` + srv.URL + `/echo", method: PUT}
  fail: {kind: http, description: Fails, url: "` + srv.URL + `/fail"}
  order: {kind: function, description: An order}
  unused: {kind: function, description: Not offered}
nodes:
  run: {kind: tools, messages: history, tools: [echo, fail, order]}
edges: [{from: __start__, to: run}]
`})["g"]
	call := func(id, name string) map[string]any {
		return map[string]any{"id": id, "name": name, "args": map[string]any{"q": 1}}
	}
	ai := map[string]any{"role": "assistant", "content": "",
		"tool_calls": []any{call("1", "echo"), call("2", "fail"), call("3", "order"), call("4", "unused")}}
	cp, out := run(t, g, nil, map[string]any{"history": []any{ai}}, graph.Options{})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, cp.Values["history"].([]any)[1:], `[
		{"type": "tool", "tool_call_id": "1", "name": "echo", "status": "success", "content": "PUT {\"q\":1}"},
		{"type": "tool", "tool_call_id": "2", "name": "fail", "status": "error", "content": "Error: HTTP 400 Bad Request: city unknown"},
		{"type": "tool", "tool_call_id": "3", "name": "order", "status": "error", "content": "Error: LookupError: no order 9"},
		{"type": "tool", "tool_call_id": "4", "name": "unused", "status": "error", "content": "Error: unused is not a valid tool, try one of [echo, fail, order]."}]`)

	_, out = run(t, g, nil, map[string]any{"history": []any{map[string]any{"role": "user", "content": "hi"}}}, graph.Options{})
	wantError(t, out, graph.KindValue, `node "run": the last message of "history" is not an ai message with tool calls`)
}

func TestSubgraphEventsReachTheRunsObserver(t *testing.T) {
	g := compileDocs(t, testOptions(nil), map[string]string{
		"parent": `
state: {topic: {}, report: {}}
nodes:
  shared: {kind: subgraph, graph: writer}
edges: [{from: __start__, to: shared}]
`,
		"writer": `
state: {topic: {}, report: {}}
nodes:
  write: {kind: transform, update: {report: "A report on {{ state.topic }}"}}
edges: [{from: __start__, to: write}]
`,
	})["parent"]
	var mu sync.Mutex
	var got []string
	observe := func(e graph.Event) {
		if e.Kind != graph.EventTaskEnd {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		ns := ""
		for _, p := range e.Namespace {
			ns += strings.SplitN(p, ":", 2)[0] + "|"
		}
		got = append(got, ns+e.Task.Name)
	}
	_, out := run(t, g, nil, map[string]any{"topic": "owls"}, graph.Options{Observe: observe})
	wantStatus(t, out, graph.Done)
	if strings.Join(got, " ") != "shared|write shared" {
		t.Fatalf("task ends %v, want the subgraph's write under shared, then shared", got)
	}
}

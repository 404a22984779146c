package graphdoc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/testmodel"
)

// events collects a run's engine events.
type events struct {
	mu  sync.Mutex
	all []graph.Event
}

func (e *events) observe(ev graph.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) of(kind graph.EventKind) []graph.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []graph.Event
	for _, ev := range e.all {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func modelDoc(baseURL, extra string) string {
	return `
state: {messages: {reducer: messages}}
nodes: {llm: {kind: chat_model, base_url: "` + baseURL + `", model: m, api_key_secret: KEY, system: "Be brief."` + extra + `}}
edges: [{from: __start__, to: llm}]
`
}

var hi = map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi", "id": "h1"}}}

// runModel runs a one-node chat model graph against baseURL, observed.
func runModel(t *testing.T, baseURL, extra string) (graph.Checkpoint, graph.Outcome, *events) {
	t.Helper()
	g := compileDocs(t, testOptions(nil), map[string]string{"g": modelDoc(baseURL, extra)})["g"]
	var ev events
	cp, out := run(t, g, nil, hi, graph.Options{Observe: ev.observe})
	return cp, out, &ev
}

func answer(t *testing.T, cp graph.Checkpoint) map[string]any {
	t.Helper()
	msgs, _ := cp.Values["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("messages %v, want the question and the answer", msgs)
	}
	return msgs[1].(map[string]any)
}

// A streamed answer reaches the state exactly as the same answer given
// whole, and every piece is reported as it arrives, with the message's id.
func TestChatModelStreamsTheSameMessageItWrites(t *testing.T) {
	turn := testmodel.Turn{Content: []string{"It is ", "sunny", "."},
		ToolCalls: []testmodel.ToolCall{
			{ID: "call_w", Name: "get_weather", Args: []string{`{"ci`, `ty": "Par`, `is"}`}},
			{ID: "call_o", Name: "lookup_order", Args: []string{`{"order_id": 42`, `}`}}},
		Usage: &[3]int{80, 20, 100}}
	plainTurn := turn
	plainTurn.Plain = true
	streamed := testmodel.Start(t, "sk-test-secret-value", func(testmodel.Request) testmodel.Turn { return turn })
	plain := testmodel.Start(t, "sk-test-secret-value", func(testmodel.Request) testmodel.Turn { return plainTurn })

	cp, out, ev := runModel(t, streamed.URL+"/v1", "")
	wantStatus(t, out, graph.Done)
	cpPlain, outPlain, _ := runModel(t, plain.URL+"/v1", "")
	wantStatus(t, outPlain, graph.Done)
	got, want := answer(t, cp), answer(t, cpPlain)
	id := got["id"].(string)
	delete(got, "id")
	delete(want, "id")
	wantJSON, _ := json.Marshal(want)
	jsonEqual(t, got, string(wantJSON))
	jsonEqual(t, got, `{"type": "ai", "content": "It is sunny.", "invalid_tool_calls": [],
		"tool_calls": [{"type": "tool_call", "id": "call_w", "name": "get_weather", "args": {"city": "Paris"}},
			{"type": "tool_call", "id": "call_o", "name": "lookup_order", "args": {"order_id": 42}}],
		"response_metadata": {"model_name": "gpt-4o-mini", "finish_reason": "tool_calls"},
		"usage_metadata": {"input_tokens": 80, "output_tokens": 20, "total_tokens": 100}}`)

	req := streamed.Requests()[0].Body
	if req["stream"] != true || fmt.Sprint(req["stream_options"]) != "map[include_usage:true]" {
		t.Errorf("the request asks stream %v, stream_options %v", req["stream"], req["stream_options"])
	}

	chunks := ev.of(graph.EventMessageChunk)
	var content strings.Builder
	args := map[string]string{}
	for _, c := range chunks {
		m := c.Data.(map[string]any)
		if m["type"] != "AIMessageChunk" || m["id"] != id || c.Task.Name != "llm" {
			t.Fatalf("chunk %v of task %s, want an AIMessageChunk with the message's id %s", m, c.Task.Name, id)
		}
		content.WriteString(m["content"].(string))
		for _, tc := range m["tool_call_chunks"].([]any) {
			tc := tc.(map[string]any)
			args[fmt.Sprint(tc["index"])] += tc["args"].(string)
		}
	}
	// the three pieces of content, five of arguments (two calls' first
	// deltas have none) and the last chunk with the answer's metadata
	if len(chunks) != 3+2+5+1 || content.String() != "It is sunny." ||
		args["0"] != `{"city": "Paris"}` || args["1"] != `{"order_id": 42}` {
		t.Errorf("%d chunks: content %q, arguments %v", len(chunks), content.String(), args)
	}
	first := chunks[0].Data.(map[string]any)
	jsonEqual(t, first, fmt.Sprintf(`{"type": "AIMessageChunk", "id": %q, "content": "It is ", "additional_kwargs": {},
		"response_metadata": {}, "name": null, "example": false, "tool_calls": [], "invalid_tool_calls": [],
		"usage_metadata": null, "tool_call_chunks": []}`, id))
	fragment := chunks[5].Data.(map[string]any) // the second fragment of call_w: partial JSON
	jsonEqual(t, []any{fragment["tool_call_chunks"], fragment["tool_calls"], fragment["invalid_tool_calls"]},
		`[[{"type": "tool_call_chunk", "index": 0, "id": null, "name": null, "args": "ty\": \"Par"}], [],
		  [{"type": "invalid_tool_call", "name": null, "args": "ty\": \"Par", "id": null, "error": null}]]`)
	last := chunks[len(chunks)-1].Data.(map[string]any)
	jsonEqual(t, []any{last["response_metadata"], last["usage_metadata"]},
		`[{"model_name": "gpt-4o-mini", "finish_reason": "tool_calls"}, {"input_tokens": 80, "output_tokens": 20, "total_tokens": 100}]`)

	// The call itself, for the events mode.
	starts, ends := ev.of(graph.EventCallStart), ev.of(graph.EventCallEnd)
	if len(starts) != 1 || len(ends) != 1 || starts[0].Call.ID != ends[0].Call.ID || starts[0].Call.Type != "chat_model" {
		t.Fatalf("calls %v %v", starts, ends)
	}
	jsonEqual(t, starts[0].Call.Input, `{"messages": [[{"type": "system", "content": "Be brief."}, {"role": "user", "content": "hi", "id": "h1"}]]}`)
	jsonEqual(t, starts[0].Call.Metadata, `{"ls_provider": "openai", "ls_model_name": "m", "ls_model_type": "chat"}`)
	if out := ends[0].Call.Output.(map[string]any); out["id"] != id || out["content"] != "It is sunny." {
		t.Errorf("the call's output %v", out)
	}
}

// A run no one observes gets the same answer; nothing is reported.
func TestChatModelStreamsUnobserved(t *testing.T) {
	m := testmodel.Start(t, "sk-test-secret-value", func(testmodel.Request) testmodel.Turn {
		return testmodel.Turn{Content: []string{"a", "b"}}
	})
	g := compileDocs(t, testOptions(nil), map[string]string{"g": modelDoc(m.URL+"/v1", "")})["g"]
	cp, out := run(t, g, nil, hi, graph.Options{})
	wantStatus(t, out, graph.Done)
	if got := answer(t, cp); got["content"] != "ab" {
		t.Errorf("answer %v", got)
	}
}

// Streams the node cannot use end it with an error that says why: never a
// hang, a panic or a half answer in the state.
func TestChatModelBadStreams(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	sse := func(w http.ResponseWriter, lines ...string) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, l := range lines {
			_, _ = w.Write([]byte(l))
			w.(http.Flusher).Flush()
		}
	}
	const ok = `data: {"model": "m", "choices": [{"index": 0, "delta": {"content": "hel"}}]}` + "\n\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.TrimSuffix(r.URL.Path, "/chat/completions") {
		case "/hang": // a piece, then nothing
			sse(w, ok)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/garbage":
			sse(w, ok, "data: {not json\n\n")
		case "/content-object":
			sse(w, `data: {"choices": [{"index": 0, "delta": {"content": {"x": 1}}}]}`+"\n\n")
		case "/cut": // no finish_reason, no [DONE]
			sse(w, ok)
		case "/error-event":
			sse(w, ok, `data: {"error": {"message": "overloaded", "type": "server_error"}}`+"\n\n")
		case "/huge":
			w.Header().Set("Content-Type", "text/event-stream")
			piece := `data: {"choices": [{"index": 0, "delta": {"content": "` + strings.Repeat("x", 64<<10) + `"}}]}` + "\n\n"
			for range (maxCompletionBytes / len(piece)) + 2 {
				if _, err := w.Write([]byte(piece)); err != nil {
					return
				}
			}
		case "/long-line": // one line longer than the bound, never ended
			w.Header().Set("Content-Type", "text/event-stream")
			chunk := []byte(strings.Repeat("y", 1<<20))
			for range maxCompletionBytes/len(chunk) + 2 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/index":
			sse(w, `data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 100000, "function": {"arguments": "{}"}}]}}]}`+"\n\n")
		case "/empty":
			sse(w, "data: [DONE]\n\n")
		case "/no-done": // a finish_reason and the end of the body: complete
			sse(w, ok, `data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}`+"\n\n")
		}
	}))
	defer srv.Close()
	for _, c := range []struct {
		path, extra, kind string
		fragments         []string
	}{
		{"/hang", ", timeout: 1", graph.KindTimeout, []string{`node "llm"`, "stream broke off", "no answer in the time allowed"}},
		{"/garbage", "", graph.KindValue, []string{"not a chat completion stream", "{not json"}},
		{"/content-object", "", graph.KindValue, []string{"content is not text"}},
		{"/cut", "", graph.KindValue, []string{"ended before the answer was complete"}},
		{"/error-event", "", "APIStatusError", []string{"reported an error in its stream", "overloaded"}},
		{"/huge", "", graph.KindValue, []string{"larger than"}},
		{"/long-line", "", graph.KindValue, []string{"larger than"}},
		{"/index", "", graph.KindValue, []string{"tool call index out of range", "100000"}},
		{"/empty", "", graph.KindValue, []string{"holds no chunk"}},
		{"/no-done", "", "", nil},
	} {
		t.Run(c.path, func(t *testing.T) {
			cp, out, _ := runModel(t, srv.URL+c.path, c.extra)
			if c.kind == "" {
				wantStatus(t, out, graph.Done)
				if got := answer(t, cp); got["content"] != "hel" {
					t.Errorf("answer %v", got)
				}
				return
			}
			wantError(t, out, c.kind, c.fragments...)
			if msgs, _ := cp.Values["messages"].([]any); len(msgs) != 1 {
				t.Errorf("the state has %v", msgs)
			}
		})
	}
}

// An endpoint echoing the key in its stream, even cut over two chunks,
// gets it into no chunk and not into the state.
func TestChatModelStreamRedactsTheKey(t *testing.T) {
	const key = "sk-test-secret-value"
	m := testmodel.Start(t, key, func(testmodel.Request) testmodel.Turn {
		return testmodel.Turn{Content: []string{"you sent sk-test-", "secret-value and ", "Bearer " + key, " ok"},
			ToolCalls: []testmodel.ToolCall{{ID: "c", Name: "t", Args: []string{`{"k": "sk-test-sec`, `ret-value"}`}}}}
	})
	cp, out, ev := runModel(t, m.URL+"/v1", "")
	wantStatus(t, out, graph.Done)
	said, _ := json.Marshal(cp.Values)
	var content, args strings.Builder
	for _, c := range ev.of(graph.EventMessageChunk) {
		b, _ := json.Marshal(c.Data)
		said = append(said, b...)
		content.WriteString(c.Data.(map[string]any)["content"].(string))
		for _, tc := range c.Data.(map[string]any)["tool_call_chunks"].([]any) {
			args.WriteString(tc.(map[string]any)["args"].(string))
		}
	}
	if strings.Contains(string(said), "secret-value") {
		t.Fatalf("the key reached the run: %s", said)
	}
	msg := answer(t, cp)
	if content.String() != msg["content"] || msg["content"] != "you sent [redacted] and Bearer [redacted] ok" {
		t.Errorf("streamed %q, state %q", content.String(), msg["content"])
	}
	if args.String() != `{"k": "[redacted]"}` {
		t.Errorf("streamed arguments %q", args.String())
	}
}

// A function's custom events are emitted in order by its node, before its
// answer is applied; a function that asked a question emits again on
// resume what it emitted before it; a function tool's events come from the
// tools node, between the tool call's start and end.
func TestFunctionCustomEvents(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := readJSON(t, r)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case req["tool"] != nil:
			_, _ = w.Write([]byte(`{"output": "done", "events": [{"tool": "progress"}]}`))
		case len(req["resume"].([]any)) == 0:
			_, _ = w.Write([]byte(`{"interrupt": "sure?", "events": [{"step": 1}, "asking"]}`))
		default:
			_, _ = w.Write([]byte(`{"update": {"answer": "yes"}, "events": [{"step": 1}, "asking", {"step": 2}]}`))
		}
	}))
	defer srv.Close()
	g := functionGraph(t, srv.URL, functionDoc)
	var ev events
	cp, out := run(t, g, nil, map[string]any{}, graph.Options{Observe: ev.observe})
	wantStatus(t, out, graph.Interrupted)
	cp, out = run(t, g, &cp, graph.Command{Resume: "yes"}, graph.Options{Observe: ev.observe})
	wantStatus(t, out, graph.Done)
	var got []any
	for _, e := range ev.of(graph.EventCustom) {
		got = append(got, []any{e.Task.Name, e.Data})
	}
	jsonEqual(t, got, `[["fn", {"step": 1}], ["fn", "asking"], ["fn", {"step": 1}], ["fn", "asking"], ["fn", {"step": 2}]]`)

	toolDoc := `
state: {messages: {reducer: messages}}
tools: {look: {kind: function, description: d}}
nodes: {run: {kind: tools}}
edges: [{from: __start__, to: run}]
`
	g = functionGraph(t, srv.URL, toolDoc)
	ev = events{}
	toolCall := map[string]any{"messages": []any{map[string]any{"type": "ai", "content": "",
		"tool_calls": []any{map[string]any{"id": "c1", "name": "look", "args": map[string]any{"q": 1}}}}}}
	_, out = run(t, g, nil, toolCall, graph.Options{Observe: ev.observe})
	wantStatus(t, out, graph.Done)
	var seq []string
	for _, e := range ev.all {
		switch e.Kind {
		case graph.EventCallStart, graph.EventCallEnd:
			b, _ := json.Marshal([]any{e.Call.Type, e.Call.Name, e.Call.Input, e.Call.Output})
			seq = append(seq, string(e.Kind)+" "+string(b))
		case graph.EventCustom:
			b, _ := json.Marshal(e.Data)
			seq = append(seq, "custom "+string(b))
		}
	}
	want := []string{`call_start ["tool","look",{"q":1},null]`, `custom {"tool":"progress"}`,
		`call_end ["tool","look",{"q":1},{"content":"done","name":"look","status":"success","tool_call_id":"c1","type":"tool"}]`}
	if fmt.Sprint(seq) != fmt.Sprint(want) {
		t.Errorf("events\n%v\nwant\n%v", seq, want)
	}
	_ = cp
}

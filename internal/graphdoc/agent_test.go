package graphdoc

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// docsExample reads the files of docs/graphs.md's complete agent (the code
// blocks after a <!-- file: NAME --> comment), so the documented example is
// the one these tests run.
func docsExample(t *testing.T) fstest.MapFS {
	t.Helper()
	md, err := os.ReadFile("../../docs/graphs.md")
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{}
	re := regexp.MustCompile("(?s)<!-- file: (\\S+) -->\n```ya?ml\n(.*?)```")
	for _, m := range re.FindAllStringSubmatch(string(md), -1) {
		fsys[m[1]] = &fstest.MapFile{Data: []byte(m[2])}
	}
	if len(fsys) != 2 {
		t.Fatalf("docs/graphs.md: found %d example files, want the config and the agent", len(fsys))
	}
	return fsys
}

// fakeModel is an OpenAI-compatible Chat Completions server: asked without
// tool results, it calls both tools; with them, it answers from them.
type fakeModel struct {
	t        *testing.T
	mu       sync.Mutex
	requests []map[string]any
	headers  []http.Header
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body := readJSON(m.t, r)
	m.mu.Lock()
	m.requests = append(m.requests, body)
	m.headers = append(m.headers, r.Header.Clone())
	m.mu.Unlock()
	msgs, _ := body["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	w.Header().Set("Content-Type", "application/json")
	if last["role"] != "tool" {
		_, _ = w.Write([]byte(`{"id": "chatcmpl-1", "model": "gpt-4o-mini", "choices": [{"index": 0,
			"message": {"role": "assistant", "content": null, "tool_calls": [
				{"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
				{"id": "call_o", "type": "function", "function": {"name": "lookup_order", "arguments": "{\"order_id\": \"42\"}"}}]},
			"finish_reason": "tool_calls"}],
			"usage": {"prompt_tokens": 80, "completion_tokens": 20, "total_tokens": 100}}`))
		return
	}
	_, _ = w.Write([]byte(`{"id": "chatcmpl-2", "model": "gpt-4o-mini", "choices": [{"index": 0,
		"message": {"role": "assistant", "content": "It is 21°C and sunny in Paris; order 42 has shipped."},
		"finish_reason": "stop"}]}`))
}

// fakeRuntime is a function runtime answering with handle.
func fakeRuntime(t *testing.T, handle func(req map[string]any) (int, string)) (*httptest.Server, *[]map[string]any) {
	var mu sync.Mutex
	var calls []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/invoke" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		req := readJSON(t, r)
		mu.Lock()
		calls = append(calls, req)
		mu.Unlock()
		status, body := handle(req)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestSupportAgent(t *testing.T) {
	model := &fakeModel{t: t}
	llm := httptest.NewServer(model)
	defer llm.Close()
	var weatherQuery string
	weather := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		weatherQuery = r.URL.RawQuery
		_, _ = w.Write([]byte(`{"city": "Paris", "temp_c": 21, "sky": "sunny"}`))
	}))
	defer weather.Close()
	runtime, calls := fakeRuntime(t, func(req map[string]any) (int, string) {
		if tool, ok := req["tool"].(map[string]any); ok && tool["name"] == "lookup_order" {
			return 200, `{"output": {"order_id": "42", "status": "shipped"}}`
		}
		if req["node"] == "triage" {
			return 200, `{"update": {"topic": "weather and orders"}}`
		}
		return 400, `unexpected`
	})

	fsys := docsExample(t)
	doc := string(fsys["graphs/support.yaml"].Data)
	doc = strings.ReplaceAll(doc, "https://api.openai.com", llm.URL)
	doc = strings.ReplaceAll(doc, "https://weather.example.com", weather.URL)
	fsys["graphs/support.yaml"].Data = []byte(doc)
	cfg, err := Load(fsys, "stepgraph.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const secret = "sk-live-0123456789"
	graphs, err := cfg.Compile(Options{
		Secrets:           SecretMap{"OPENAI_API_KEY": secret},
		Runtime:           &HTTPRuntime{URL: runtime.URL, Client: &http.Client{}},
		HTTPClient:        &http.Client{},
		AllowLoopbackHTTP: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	g := graphs["support"]
	input := map[string]any{"user_name": "Ada",
		"messages": []any{map[string]any{"role": "user", "content": "Weather in Paris? And where is order 42?", "id": "m1"}}}
	d, _ := cfg.Document("support")
	if err := d.CheckInput(input); err != nil {
		t.Fatalf("CheckInput: %v", err)
	}
	cp, out := run(t, g, nil, input, graph.Options{})
	wantStatus(t, out, graph.Done)

	// The conversation: question, tool calls, two tool messages, answer.
	msgs := cp.Values["messages"].([]any)
	for _, m := range msgs {
		delete(m.(map[string]any), "id")
	}
	jsonEqual(t, msgs, `[
		{"role": "user", "content": "Weather in Paris? And where is order 42?"},
		{"type": "ai", "content": "", "invalid_tool_calls": [],
		 "tool_calls": [
			{"type": "tool_call", "id": "call_w", "name": "get_weather", "args": {"city": "Paris"}},
			{"type": "tool_call", "id": "call_o", "name": "lookup_order", "args": {"order_id": "42"}}],
		 "response_metadata": {"model_name": "gpt-4o-mini", "finish_reason": "tool_calls"},
		 "usage_metadata": {"input_tokens": 80, "output_tokens": 20, "total_tokens": 100}},
		{"type": "tool", "content": "{\"city\": \"Paris\", \"temp_c\": 21, \"sky\": \"sunny\"}",
		 "tool_call_id": "call_w", "name": "get_weather", "status": "success"},
		{"type": "tool", "content": "{\"order_id\":\"42\",\"status\":\"shipped\"}",
		 "tool_call_id": "call_o", "name": "lookup_order", "status": "success"},
		{"type": "ai", "content": "It is 21°C and sunny in Paris; order 42 has shipped.", "invalid_tool_calls": [], "tool_calls": [],
		 "response_metadata": {"model_name": "gpt-4o-mini", "finish_reason": "stop"}}]`)
	if cp.Values["topic"] != "weather and orders" {
		t.Errorf("topic = %v", cp.Values["topic"])
	}
	if weatherQuery != "city=Paris" {
		t.Errorf("the weather tool got query %q", weatherQuery)
	}

	// What the model was sent.
	if len(model.requests) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(model.requests))
	}
	first, second := model.requests[0], model.requests[1]
	if got := model.headers[0].Get("Authorization"); got != "Bearer "+secret {
		t.Errorf("Authorization = %q", got)
	}
	jsonEqual(t, []any{first["model"], first["temperature"], first["messages"]}, `["gpt-4o-mini", 0, [
		{"role": "system", "content": "You help Ada with a question about weather and orders. Be brief."},
		{"role": "user", "content": "Weather in Paris? And where is order 42?"}]]`)
	jsonEqual(t, first["tools"], `[
		{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
		 "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "A city name, e.g. Paris"}}, "required": ["city"]}}},
		{"type": "function", "function": {"name": "lookup_order", "description": "The status of an order, by its id.",
		 "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}]`)
	jsonEqual(t, second["messages"].([]any)[2:], `[
		{"role": "assistant", "content": null, "tool_calls": [
			{"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
			{"id": "call_o", "type": "function", "function": {"name": "lookup_order", "arguments": "{\"order_id\":\"42\"}"}}]},
		{"role": "tool", "tool_call_id": "call_w", "content": "{\"city\": \"Paris\", \"temp_c\": 21, \"sky\": \"sunny\"}"},
		{"role": "tool", "tool_call_id": "call_o", "content": "{\"order_id\":\"42\",\"status\":\"shipped\"}"}]`)

	// What the runtime was sent: the triage node, then the function tool.
	if len(*calls) != 2 {
		t.Fatalf("the runtime got %d calls, want 2", len(*calls))
	}
	triage, tool := (*calls)[0], (*calls)[1]
	jsonEqual(t, []any{triage["graph"], triage["node"], triage["tool"], triage["resume"], triage["context"]},
		`["support", "triage", null, [], null]`)
	jsonEqual(t, triage["state"], `{"user_name": "Ada", "messages": [
		{"role": "user", "content": "Weather in Paris? And where is order 42?", "id": "m1"}]}`)
	meta := triage["config"].(map[string]any)["metadata"].(map[string]any)
	if meta["graph_id"] != "support" || meta["langgraph_node"] != "triage" || meta["langgraph_task_id"] == "" {
		t.Errorf("config.metadata = %v", meta)
	}
	jsonEqual(t, []any{tool["node"], tool["tool"]}, `["tools", {"id": "call_o", "name": "lookup_order", "args": {"order_id": "42"}}]`)

	// The secret reached the model and nothing else.
	state, _ := json.Marshal(cp)
	if strings.Contains(string(state), secret) {
		t.Error("the API key is in the checkpoint")
	}
	for _, c := range *calls {
		if b, _ := json.Marshal(c); strings.Contains(string(b), secret) {
			t.Error("the API key was sent to the runtime")
		}
	}

	// The input schema.
	err = d.CheckInput(map[string]any{"user_name": "Ada"})
	if err == nil || err.Error() != "input: /messages: is required" {
		t.Errorf("CheckInput without messages: %v", err)
	}
}

package main

// These tests start both example runtimes — this package's, as a child
// process of the test binary, and examples/python/runtime.py with python3 —
// on 127.0.0.1, and run their agent through graphdoc, the platform's client
// of the protocol, against a fake OpenAI-compatible model on 127.0.0.1.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/graphdoc"
)

// childEnv makes the test binary run main instead of the tests.
const childEnv = "STEPGRAPH_EXAMPLE_GO_RUNTIME_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

const pythonRuntime = "../../python/runtime.py"

// runtimeNames are the runtimes every test runs, in order.
var runtimeNames = []string{"go", "python"}

// command returns the command that starts runtime name with args.
func command(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	switch name {
	case "go":
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), childEnv+"=1")
		return cmd
	case "python":
		python, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("python3 is not installed")
		}
		cmd := exec.Command(python, append([]string{pythonRuntime}, args...)...)
		cmd.Env = os.Environ()
		return cmd
	}
	t.Fatalf("no runtime %q", name)
	return nil
}

// lockedBuffer collects a child's output; the first line is also sent on
// firstLine.
type lockedBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	firstLine chan string
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	had := bytes.IndexByte(b.buf.Bytes(), '\n') >= 0
	b.buf.Write(p)
	if i := bytes.IndexByte(b.buf.Bytes(), '\n'); !had && i >= 0 && b.firstLine != nil {
		b.firstLine <- b.buf.String()[:i]
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// start starts runtime name on 127.0.0.1 with a free port and env added to
// its environment, and returns its base URL. The process is stopped when
// the test ends (SIGTERM, then SIGKILL), and must exit cleanly.
func start(t *testing.T, name string, env ...string) string {
	t.Helper()
	cmd := command(t, name, "--host", "127.0.0.1", "--port", "0")
	cmd.Env = append(cmd.Env, env...)
	stdout := &lockedBuffer{firstLine: make(chan string, 1)}
	stderr := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s runtime: %v", name, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			if waitErr != nil {
				t.Errorf("%s runtime: on SIGTERM: %v", name, waitErr)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("%s runtime: still running 10s after SIGTERM; killed", name)
		}
		if strings.Contains(stderr.String(), "DATA RACE") {
			t.Errorf("%s runtime: the race detector reported a race", name)
		}
		if t.Failed() {
			t.Logf("%s runtime stderr:\n%s", name, stderr)
		}
	})
	select {
	case line := <-stdout.firstLine:
		url, ok := strings.CutPrefix(line, "listening on ")
		if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Fatalf("%s runtime: first line %q, want listening on http://127.0.0.1:PORT", name, line)
		}
		return url
	case <-exited:
		t.Fatalf("%s runtime exited at start (%v); stderr:\n%s", name, waitErr, stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s runtime: no first line within 60s; stderr:\n%s", name, stderr)
	}
	return ""
}

// fakeModel is an OpenAI-compatible Chat Completions server: asked without
// tool results, it looks up orders 42 and 7; with them, it answers with
// what the tools said.
type fakeModel struct {
	mu       sync.Mutex
	requests []map[string]any
	auth     []string
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&body) != nil {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.requests = append(m.requests, body)
	m.auth = append(m.auth, r.Header.Get("Authorization"))
	m.mu.Unlock()
	msgs, _ := body["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	var answer any
	if last["role"] != "tool" {
		answer = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": "call_42", "type": "function", "function": map[string]any{"name": "lookup_order", "arguments": `{"order_id": "42"}`}},
			map[string]any{"id": "call_7", "type": "function", "function": map[string]any{"name": "lookup_order", "arguments": `{"order_id": "7"}`}},
		}}
	} else {
		var said []string
		for _, msg := range msgs {
			if m, _ := msg.(map[string]any); m["role"] == "tool" {
				said = append(said, fmt.Sprintf("%s said %s", m["tool_call_id"], m["content"]))
			}
		}
		answer = map[string]any{"role": "assistant", "content": strings.Join(said, "; ")}
	}
	finish := "stop"
	if last["role"] != "tool" {
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "model": body["model"],
		"choices": []any{map[string]any{"index": 0, "message": answer, "finish_reason": finish}}})
}

// normalize is v's JSON, re-encoded (sorted keys, no spaces).
func normalize(t *testing.T, v any) string {
	t.Helper()
	var b []byte
	switch v := v.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	out, _ := json.Marshal(x)
	return string(out)
}

func jsonEqual(t *testing.T, what string, got any, want string) {
	t.Helper()
	if g, w := normalize(t, got), normalize(t, want); g != w {
		t.Errorf("%s:\ngot  %s\nwant %s", what, g, w)
	}
}

// withoutIDs drops the id of each message (ids are generated).
func withoutIDs(messages any) any {
	list, _ := messages.([]any)
	out := make([]any, len(list))
	for i, m := range list {
		c := map[string]any{}
		for k, v := range m.(map[string]any) {
			if k != "id" {
				c[k] = v
			}
		}
		out[i] = c
	}
	return out
}

const apiKey = "sk-example-test-key"

// TestAgent runs the agent of both runtimes, described by the runtime and
// compiled by graphdoc, and checks they give the same, expected results.
func TestAgent(t *testing.T) {
	results := map[string]map[string]any{}
	for _, name := range runtimeNames {
		t.Run(name, func(t *testing.T) {
			model := &fakeModel{}
			llm := httptest.NewServer(model)
			defer llm.Close()
			url := start(t, name, "STEPGRAPH_EXAMPLE_MODEL_URL="+llm.URL+"/v1", "STEPGRAPH_EXAMPLE_MODEL=fake-model",
				"STEPGRAPH_EXAMPLE_API_KEY_SECRET=MODEL_API_KEY")
			results[name] = runAgent(t, url, model)
			// The runtimes' configs differ only in the model's URL.
			results[name]["describe"] = json.RawMessage(strings.ReplaceAll(string(results[name]["describe"].(json.RawMessage)), llm.URL, "MODEL_URL"))
		})
	}
	if len(results) == len(runtimeNames) {
		if g, p := normalize(t, results["go"]), normalize(t, results["python"]); g != p {
			t.Errorf("the runtimes differ:\ngo     %s\npython %s", g, p)
		}
	}
}

func runAgent(t *testing.T, url string, model *fakeModel) map[string]any {
	ctx := context.Background()
	rt := &graphdoc.HTTPRuntime{URL: url, Client: &http.Client{}}
	raw, err := rt.Describe(ctx)
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	cfg, err := graphdoc.ParseConfig("describe", raw, nil)
	if err != nil {
		t.Fatalf("ParseConfig:\n%v", err)
	}
	if got := cfg.Graphs(); fmt.Sprint(got) != "[refund support]" {
		t.Fatalf("graphs %v", got)
	}
	graphs, err := cfg.Compile(graphdoc.Options{
		Secrets:           graphdoc.SecretMap{"MODEL_API_KEY": apiKey},
		Runtime:           rt,
		HTTPClient:        &http.Client{},
		AllowLoopbackHTTP: true,
	})
	if err != nil {
		t.Fatalf("Compile:\n%v", err)
	}
	result := map[string]any{"describe": json.RawMessage(raw)}

	// The support agent: classify, the model calls the tool twice, the
	// tools node runs both calls in the runtime, the model answers.
	input := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Where are my orders 42 and 7?", "id": "m1"}}}
	support, _ := cfg.Document("support")
	if err := support.CheckInput(input); err != nil {
		t.Fatalf("CheckInput: %v", err)
	}
	var mu sync.Mutex
	var custom []any
	observe := func(e graph.Event) {
		if e.Kind == graph.EventCustom {
			mu.Lock()
			custom = append(custom, []any{e.Task.Name, e.Data})
			mu.Unlock()
		}
	}
	cp, out, err := graph.Run(ctx, graphs["support"], nil, input, graph.Options{Observe: observe}, nil)
	if err != nil || out.Status != graph.Done {
		t.Fatalf("support: %v, status %s, error %v", err, out.Status, out.Error)
	}
	// The custom event classify emitted, through the protocol, to the run's
	// observer (the custom stream mode).
	mu.Lock()
	jsonEqual(t, "custom events", custom, `[["classify", {"step": "classify", "topic": "orders"}]]`)
	mu.Unlock()
	record := `{"carrier":"UPS","order_id":"42","status":"shipped","total":"59.90 EUR"}`
	messages := withoutIDs(cp.Values["messages"])
	jsonEqual(t, "messages", messages, `[
		{"role": "user", "content": "Where are my orders 42 and 7?"},
		{"type": "ai", "content": "", "invalid_tool_calls": [], "tool_calls": [
			{"type": "tool_call", "id": "call_42", "name": "lookup_order", "args": {"order_id": "42"}},
			{"type": "tool_call", "id": "call_7", "name": "lookup_order", "args": {"order_id": "7"}}],
		 "response_metadata": {"model_name": "fake-model", "finish_reason": "tool_calls"}},
		{"type": "tool", "content": `+quote(record)+`, "tool_call_id": "call_42", "name": "lookup_order", "status": "success"},
		{"type": "tool", "content": "Error: LookupError: no order 7", "tool_call_id": "call_7", "name": "lookup_order", "status": "error"},
		{"type": "ai", "content": `+quote("call_42 said "+record+"; call_7 said Error: LookupError: no order 7")+`,
		 "invalid_tool_calls": [], "tool_calls": [],
		 "response_metadata": {"model_name": "fake-model", "finish_reason": "stop"}}]`)
	if cp.Values["topic"] != "orders" {
		t.Errorf("topic = %v, want orders", cp.Values["topic"])
	}
	result["support"] = map[string]any{"messages": messages, "topic": cp.Values["topic"]}

	// What the model got: the key, the system prompt with the topic, the tool.
	model.mu.Lock()
	requests, auths := model.requests, model.auth
	model.mu.Unlock()
	if len(requests) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(requests))
	}
	for i, auth := range auths {
		if auth != "Bearer "+apiKey {
			t.Errorf("request %d: Authorization %q", i, auth)
		}
	}
	first := requests[0]
	jsonEqual(t, "the first model request", []any{first["model"], first["temperature"], first["messages"], first["tools"]}, `[
		"fake-model", 0,
		[{"role": "system", "content": "You are the support agent of an online shop. The request is about orders. Use lookup_order to check an order. Be brief."},
		 {"role": "user", "content": "Where are my orders 42 and 7?"}],
		[{"type": "function", "function": {"name": "lookup_order", "description": "The status of an order, by its id.",
		  "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}]]`)

	// The refund graph: the function asks, the run is resumed, the function
	// runs again with the answer.
	cp, out, err = graph.Run(ctx, graphs["refund"], nil, map[string]any{"order_id": "42"}, graph.Options{}, nil)
	if err != nil || out.Status != graph.Interrupted || len(out.Interrupts) != 1 {
		t.Fatalf("refund: %v, status %s, interrupts %v, error %v", err, out.Status, out.Interrupts, out.Error)
	}
	question := out.Interrupts[0].Value
	jsonEqual(t, "the question", question, `{"question": "Refund order 42 (59.90 EUR)?", "choices": ["yes", "no"]}`)
	cp, out, err = graph.Run(ctx, graphs["refund"], &cp, graph.Command{Resume: "yes"}, graph.Options{}, nil)
	if err != nil || out.Status != graph.Done {
		t.Fatalf("refund resumed: %v, status %s, error %v", err, out.Status, out.Error)
	}
	jsonEqual(t, "refund", cp.Values, `{"order_id": "42", "approved": true}`)
	result["refund"] = map[string]any{"question": question, "values": cp.Values}

	// A function that fails fails the run, naming the node.
	_, out, err = graph.Run(ctx, graphs["refund"], nil, map[string]any{"order_id": "7"}, graph.Options{}, nil)
	if err != nil || out.Status != graph.Failed || out.Error.Kind != "LookupError" || out.Error.Message != `node "confirm": no order 7` {
		t.Errorf("refund of an unknown order: %v, status %s, error %+v", err, out.Status, out.Error)
	}
	result["refund_error"] = out.Error
	return result
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// invoke posts body to url/invoke and returns the status and the answer.
func invoke(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	res, err := http.Post(url+"/invoke", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST /invoke: %v", err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, data
}

// TestProtocol sends both runtimes the same requests, valid ones and
// garbage, and checks their answers: the same from both, valid for the
// platform's client, 400 for what is not an invoke request, and the
// runtime still serving afterwards.
func TestProtocol(t *testing.T) {
	answers := map[string][]string{}
	for _, name := range runtimeNames {
		t.Run(name, func(t *testing.T) {
			url := start(t, name, "STEPGRAPH_EXAMPLE_API_KEY_SECRET=")
			answers[name] = checkProtocol(t, url)
		})
	}
	if len(answers) == len(runtimeNames) {
		jsonEqual(t, "the python runtime's answers", answers["python"], normalize(t, answers["go"]))
	}
}

func checkProtocol(t *testing.T, url string) []string {
	meta := `"config": {"metadata": {"graph_id": "support", "langgraph_node": "classify", "langgraph_step": 1, "langgraph_task_id": "t"}}`
	valid := []struct{ name, request, want string }{
		{"classify", `{"graph": "support", "node": "classify", ` + meta + `, "context": null, "resume": [],
			"state": {"messages": [{"role": "user", "content": "Where is order 42?"}]}}`,
			`{"update": {"topic": "orders"}, "events": [{"step": "classify", "topic": "orders"}]}`},
		{"classify, LangGraph's spelling and content parts", `{"graph": "support", "node": "classify", ` + meta + `, "context": {"tenant": "acme"}, "resume": [],
			"state": {"messages": [{"type": "human", "content": [{"type": "text", "text": "I want a REFUND"}]}, {"type": "ai", "content": "order?"}]}}`,
			`{"update": {"topic": "refunds"}, "events": [{"step": "classify", "topic": "refunds"}]}`},
		{"classify, no messages; optional fields left out", `{"graph": "support", "node": "classify", "state": {}}`,
			`{"update": {"topic": "other"}, "events": [{"step": "classify", "topic": "other"}]}`},
		{"a tool", `{"graph": "support", "node": "tools", "tool": {"id": "c1", "name": "lookup_order", "args": {"order_id": "43"}},
			"state": {"topic": "orders"}, ` + meta + `, "context": null, "resume": []}`,
			`{"output": {"order_id": "43", "status": "processing", "carrier": null, "total": "12.00 EUR"}}`},
		{"a tool reports an error", `{"graph": "support", "node": "tools", "tool": {"id": "c1", "name": "lookup_order", "args": {}},
			"state": {}, ` + meta + `, "context": null, "resume": []}`,
			`{"error": {"type": "LookupError", "message": "no order None"}}`},
		{"an unknown tool", `{"graph": "support", "node": "tools", "tool": {"id": "c1", "name": "cancel_order", "args": {}}, "state": {}, "resume": []}`,
			`{"error": {"type": "LookupError", "message": "no function tool 'cancel_order' in this runtime"}}`},
		{"an unknown node", `{"graph": "support", "node": "agent", "state": {}, "resume": []}`,
			`{"error": {"type": "LookupError", "message": "no function for node 'agent' of graph 'support' in this runtime"}}`},
		{"a question", `{"graph": "refund", "node": "confirm", "state": {"order_id": "42"}, "resume": []}`,
			`{"interrupt": {"question": "Refund order 42 (59.90 EUR)?", "choices": ["yes", "no"]}, "events": [{"step": "confirm", "order_id": "42"}]}`},
		{"its answer", `{"graph": "refund", "node": "confirm", "state": {"order_id": "42"}, "resume": ["no"]}`,
			`{"update": {"approved": false}, "events": [{"step": "confirm", "order_id": "42"}]}`},
		{"large numbers keep their precision", `{"graph": "support", "node": "tools", "tool": {"id": "c", "name": "lookup_order", "args": {"order_id": 12345678901234567890123}},
			"state": {}, "resume": []}`,
			`{"error": {"type": "LookupError", "message": "no order 12345678901234567890123"}}`},
	}
	var answers []string
	for _, c := range valid {
		status, body := invoke(t, url, c.request)
		if status != http.StatusOK {
			t.Errorf("%s: status %d: %s", c.name, status, body)
			continue
		}
		if _, err := graphdoc.ParseFunctionResponse(body); err != nil {
			t.Errorf("%s: the platform rejects the answer %s: %v", c.name, body, err)
		}
		jsonEqual(t, c.name, body, c.want)
		answers = append(answers, normalize(t, body))
	}

	deep := `{"graph": "support", "node": "classify", "state": {"x": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}`
	bad := []struct{ name, body string }{
		{"garbage", "garbage"},
		{"nothing", ""},
		{"a list", "[1, 2]"},
		{"null", "null"},
		{"a string", `"invoke"`},
		{"an empty object", "{}"},
		{"no node", `{"graph": "support", "state": {}}`},
		{"graph not a string", `{"graph": 1, "node": "classify", "state": {}}`},
		{"empty node", `{"graph": "support", "node": "", "state": {}}`},
		{"state not an object", `{"graph": "support", "node": "classify", "state": "x"}`},
		{"state a list", `{"graph": "support", "node": "classify", "state": []}`},
		{"config not an object", `{"graph": "support", "node": "classify", "state": {}, "config": []}`},
		{"context not an object", `{"graph": "support", "node": "classify", "state": {}, "context": 5}`},
		{"resume not a list", `{"graph": "support", "node": "classify", "state": {}, "resume": {}}`},
		{"tool not an object", `{"graph": "support", "node": "tools", "state": {}, "tool": "lookup_order"}`},
		{"tool without a name", `{"graph": "support", "node": "tools", "state": {}, "tool": {"id": "c", "args": {}}}`},
		{"tool name not a string", `{"graph": "support", "node": "tools", "state": {}, "tool": {"name": 5}}`},
		{"tool id not a string", `{"graph": "support", "node": "tools", "state": {}, "tool": {"id": 5, "name": "lookup_order"}}`},
		{"tool args not an object", `{"graph": "support", "node": "tools", "state": {}, "tool": {"name": "lookup_order", "args": ["42"]}}`},
		{"NaN", `{"graph": "support", "node": "classify", "state": {"n": NaN}}`},
		{"two values", `{"graph": "support", "node": "classify", "state": {}} {}`},
		{"truncated", `{"graph": "support", "node": "classify", "state": {`},
		{"not UTF-8", "{\"graph\": \"support\", \"node\": \"classify\", \"state\": {\"x\": \"\xff\xfe\"}}"},
		{"nested too deeply", deep},
	}
	for _, c := range bad {
		status, body := invoke(t, url, c.body)
		if status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400: %s", c.name, status, body)
			continue
		}
		var answer struct{ Detail string }
		if err := json.Unmarshal(body, &answer); err != nil || answer.Detail == "" {
			t.Errorf("%s: the 400 answer is not {\"detail\": ...}: %s", c.name, body)
		}
	}

	// Wrong paths and methods.
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/invoke", 405}, {"POST", "/describe", 405}, {"DELETE", "/describe", 405},
		{"GET", "/", 404}, {"GET", "/nope", 404}, {"POST", "/invoke/x", 404},
	} {
		req, _ := http.NewRequest(c.method, url+c.path, strings.NewReader("{}"))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var answer map[string]any
		if res.StatusCode != c.want || json.Unmarshal(body, &answer) != nil || answer["detail"] == nil {
			t.Errorf("%s %s: %d %s, want %d with a JSON detail", c.method, c.path, res.StatusCode, body, c.want)
		}
	}

	// Bytes that are not HTTP at all.
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = conn.Write([]byte("\x16\x03\x01\x02\x00garbage\x00\r\n\r\n"))
	_, _ = io.ReadAll(conn)
	conn.Close()

	// Still serving.
	if status, body := invoke(t, url, valid[0].request); status != http.StatusOK || normalize(t, body) != normalize(t, valid[0].want) {
		t.Errorf("after the garbage: %d %s", status, body)
	}
	res, err := http.Get(url + "/describe")
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("describe after the garbage: %v %v", err, res)
	}
	res.Body.Close()
	return answers
}

// TestPythonLambdaHandler runs the Python runtime's Lambda entry point
// (the same runtime, over the Lambda Invoke transport).
func TestPythonLambdaHandler(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	dir, err := filepath.Abs(filepath.Dir(pythonRuntime))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-")
	cmd.Stdin = strings.NewReader(`
import json, sys
sys.path.insert(0, ` + quote(dir) + `)
import runtime
out = {
    "describe": runtime.lambda_handler({"action": "describe"}, None),
    "invoke": runtime.lambda_handler({"action": "invoke", "request": {"graph": "support", "node": "tools",
        "tool": {"id": "c", "name": "lookup_order", "args": {"order_id": "42"}}, "state": {}, "config": {}, "context": None, "resume": []}}, None),
}
for event in ({"action": "sing"}, {"action": "invoke", "request": [1]}, "describe"):
    try:
        runtime.lambda_handler(event, None)
        out.setdefault("errors", []).append(None)
    except Exception as e:
        out.setdefault("errors", []).append(type(e).__name__)
print(json.dumps(out))
`)
	cmd.Env = append(os.Environ(), "STEPGRAPH_EXAMPLE_MODEL_URL=", "STEPGRAPH_EXAMPLE_MODEL=", "PYTHONDONTWRITEBYTECODE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Setenv("STEPGRAPH_EXAMPLE_MODEL_URL", "")
	t.Setenv("STEPGRAPH_EXAMPLE_MODEL", "")
	jsonEqual(t, "describe (the Go runtime's config)", got["describe"], normalize(t, graphConfig()))
	jsonEqual(t, "invoke", got["invoke"], `{"output": {"order_id": "42", "status": "shipped", "carrier": "UPS", "total": "59.90 EUR"}}`)
	jsonEqual(t, "errors", got["errors"], `["ValueError", "BadRequest", "ValueError"]`)
	if _, err := graphdoc.ParseConfig("describe", []byte(normalize(t, got["describe"])), nil); err != nil {
		t.Errorf("ParseConfig:\n%v", err)
	}
}

// A named event is the object of the protocol's named custom events, in
// order with the others.
func TestEmitNamed(t *testing.T) {
	var c Call
	c.Emit(map[string]any{"step": 1})
	c.EmitNamed("progress", map[string]any{"done": 2})
	b, err := json.Marshal(c.events)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != `[{"step":1},{"name":"progress","payload":{"done":2}}]` {
		t.Errorf("events %s", got)
	}
}

package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// Deployed graphs, end to end: deployments whose graph documents come from a
// git repository (hosted_repo) or from a runtime's describe call
// (external_docker), run through runs/wait, with a local OpenAI-compatible
// model server and a function runtime, all on 127.0.0.1.

// supportYAML is the support agent of examples/ (examples/support.yaml;
// the example runtimes describe the same document).
var supportYAML = func() string {
	b, err := os.ReadFile("../../examples/support.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// agentRepo is a repository holding the support agent, its graph config in
// a subdirectory naming the document by a relative path.
func agentRepo(t *testing.T, modelURL string) string {
	return gitRepo(t, map[string]string{
		"agent/stepgraph.yaml":      "graphs:\n  support: graphs/support.yaml\n",
		"agent/graphs/support.yaml": strings.ReplaceAll(supportYAML, "MODEL_URL", modelURL),
		"README.md":                 "An agent.\n",
	})
}

func agentDeployment(name, repoURL, runtimeURL, apiKey string) map[string]any {
	return map[string]any{
		"name":                   name,
		"source":                 "hosted_repo",
		"source_config":          map[string]any{"repo_url": repoURL, "custom_url": runtimeURL},
		"source_revision_config": map[string]any{"repo_ref": "main", "graph_config_path": "agent/stepgraph.yaml"},
		"secrets":                []any{map[string]any{"name": "OPENAI_API_KEY", "value": apiKey}},
	}
}

// fakeModel is an OpenAI-compatible Chat Completions server: asked without
// a tool result, it calls lookup_order for the order the user names; with
// one, it answers from it.
type fakeModel struct {
	t        *testing.T
	url      string // base_url, ".../v1"
	mu       sync.Mutex
	auth     []string
	requests []map[string]any
}

var orderNumber = regexp.MustCompile(`\d+`)

func newFakeModel(t *testing.T) *fakeModel {
	m := &fakeModel{t: t}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	m.url = srv.URL + "/v1"
	return m
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.auth = append(m.auth, r.Header.Get("Authorization"))
	m.requests = append(m.requests, body)
	m.mu.Unlock()
	msgs, _ := body["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	w.Header().Set("Content-Type", "application/json")
	if last["role"] != "tool" {
		order := orderNumber.FindString(fmt.Sprint(last["content"]))
		args, _ := json.Marshal(map[string]string{"order_id": order})
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "model": "gpt-4o-mini",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
				"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
					"function": map[string]any{"name": "lookup_order", "arguments": string(args)}}}}}},
			"usage": map[string]any{"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}})
		return
	}
	var order map[string]any
	answer := "Sorry, I could not check that: " + fmt.Sprint(last["content"])
	if json.Unmarshal([]byte(fmt.Sprint(last["content"])), &order) == nil {
		answer = fmt.Sprintf("Order %v is %v (carrier %v).", order["order_id"], order["status"], order["carrier"])
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-2", "model": "gpt-4o-mini",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": answer}}}})
}

func (m *fakeModel) calls() ([]string, []map[string]any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.auth...), append([]map[string]any(nil), m.requests...)
}

// testRuntime is a function runtime (docs/runtime-protocol.md) serving the
// support agent's functions like examples/ does, and the test graphs'.
// mode makes it misbehave: "hang" answers nothing, "garbage" answers
// something else than JSON.
type testRuntime struct {
	url    string
	mode   atomic.Value // string
	mu     sync.Mutex
	bodies []string
	// held is signalled when a call of versioned/work with hold: true
	// blocks; it answers once release is closed.
	held    chan struct{}
	release chan struct{}
}

var exampleOrders = map[string]map[string]any{
	"42": {"order_id": "42", "status": "shipped", "carrier": "UPS", "total": "59.90 EUR"},
	"43": {"order_id": "43", "status": "processing", "carrier": nil, "total": "12.00 EUR"},
}

func newTestRuntime(t *testing.T) *testRuntime {
	rt := &testRuntime{held: make(chan struct{}, 10), release: make(chan struct{})}
	rt.mode.Store("ok")
	srv := httptest.NewServer(http.HandlerFunc(rt.serve))
	t.Cleanup(srv.Close)
	rt.url = srv.URL
	return rt
}

func (rt *testRuntime) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/invoke" {
		http.NotFound(w, r)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	rt.mu.Lock()
	rt.bodies = append(rt.bodies, string(raw))
	rt.mu.Unlock()
	switch rt.mode.Load() {
	case "hang":
		<-r.Context().Done()
		return
	case "garbage":
		_, _ = w.Write([]byte("<html>Internal hiccup</html>"))
		return
	}
	var req struct {
		Graph, Node string
		State       map[string]any
		Tool        *struct {
			Name string
			Args map[string]any
		}
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	answer := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	switch {
	case req.Tool != nil && req.Tool.Name == "lookup_order":
		id, _ := req.Tool.Args["order_id"].(string)
		if o, ok := exampleOrders[id]; ok {
			answer(map[string]any{"output": o})
		} else {
			answer(map[string]any{"error": map[string]any{"type": "LookupError", "message": "no order " + id}})
		}
	case req.Graph == "support" && req.Node == "classify":
		text := ""
		msgs, _ := req.State["messages"].([]any)
		for i := len(msgs) - 1; i >= 0; i-- {
			if m, _ := msgs[i].(map[string]any); m["type"] == "human" || m["role"] == "user" {
				text = strings.ToLower(fmt.Sprint(m["content"]))
				break
			}
		}
		topic := "other"
		switch {
		case strings.Contains(text, "refund"):
			topic = "refunds"
		case strings.Contains(text, "order"):
			topic = "orders"
		}
		answer(map[string]any{"update": map[string]any{"topic": topic}, "events": []any{map[string]any{"step": "classify", "topic": topic}}})
	case req.Node == "work":
		if req.State["hold"] == true {
			rt.held <- struct{}{}
			select {
			case <-rt.release:
			case <-r.Context().Done():
				return
			}
		}
		answer(map[string]any{"update": map[string]any{"worked": true}})
	default:
		http.Error(w, "no function "+req.Graph+"/"+req.Node, http.StatusNotFound)
	}
}

func (rt *testRuntime) requests() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return strings.Join(rt.bodies, "\n")
}

// withoutIDs drops the random ids of messages, so that the outputs of two
// runs compare.
func withoutIDs(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if k != "id" {
				out[k] = withoutIDs(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = withoutIDs(x)
		}
		return out
	}
	return v
}

var orderQuestion = map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Where is my order 42?"}}}

// checkSupportAnswer checks the support agent's final state: the question,
// the model's tool call, the tool's answer, the model's answer.
func checkSupportAnswer(t *testing.T, out map[string]any) {
	t.Helper()
	msgs, _ := out["messages"].([]any)
	if out["topic"] != "orders" || len(msgs) != 4 {
		t.Fatalf("output %v", out)
	}
	types := []string{}
	for _, m := range msgs {
		m := m.(map[string]any)
		types = append(types, fmt.Sprint(m["type"], m["role"]))
	}
	if strings.Join(types, ",") != "<nil>user,ai<nil>,tool<nil>,ai<nil>" {
		t.Errorf("message types/roles %v", types)
	}
	call := msgs[1].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
	if call["name"] != "lookup_order" || fmt.Sprint(call["args"]) != "map[order_id:42]" {
		t.Errorf("tool call %v", call)
	}
	tool := msgs[2].(map[string]any)
	if tool["tool_call_id"] != "call_1" || tool["status"] != "success" || !strings.Contains(fmt.Sprint(tool["content"]), `"status":"shipped"`) {
		t.Errorf("tool message %v", tool)
	}
	if got := msgs[3].(map[string]any)["content"]; got != "Order 42 is shipped (carrier UPS)." {
		t.Errorf("answer %q", got)
	}
}

// TestDeployedAgentHostedRepo deploys the support agent from a git
// repository, its functions served by the deployment's runtime
// (custom_url), and runs it by graph name and by assistant id.
func TestDeployedAgentHostedRepo(t *testing.T) {
	e := newEnv(t)
	model, rt := newFakeModel(t), newTestRuntime(t)
	apiKey := secret("sk-hosted-agent-7Rq2")
	d := e.must(201, "POST", "/v2/deployments", e.keyA, agentDeployment("support-agent", agentRepo(t, model.url), rt.url, apiKey))
	id, revID, orgID := d["id"].(string), d["latest_revision_id"].(string), d["tenant_id"].(string)
	e.waitFor(e.keyA, "/v2/deployments/"+id, status("READY"))
	e.waitFor(e.keyA, fmt.Sprintf("/v2/deployments/%s/revisions/%s", id, revID), status("DEPLOYED"))

	out := waitBody(t, e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "support", "input": orderQuestion}))
	checkSupportAnswer(t, out)

	auth, reqs := model.calls()
	if len(auth) != 2 || auth[0] != "Bearer "+apiKey || auth[1] != auth[0] {
		t.Errorf("the model got %d calls, Authorization %v", len(auth), len(auth) > 0 && auth[0] == "Bearer "+apiKey)
	}
	system := reqs[0]["messages"].([]any)[0].(map[string]any)
	if system["role"] != "system" || !strings.Contains(fmt.Sprint(system["content"]), "The request is about orders.") {
		t.Errorf("system prompt %v", system)
	}
	if tools, _ := json.Marshal(reqs[0]["tools"]); !strings.Contains(string(tools), `"name":"lookup_order"`) {
		t.Errorf("tools offered %s", tools)
	}
	sent := rt.requests()
	if !strings.Contains(sent, `"node":"classify"`) || !strings.Contains(sent, `"name":"lookup_order"`) {
		t.Errorf("runtime requests:\n%s", sent)
	}
	if strings.Contains(sent, apiKey) {
		t.Errorf("a secret value reached the runtime in a request")
	}

	// The default assistant: uuid5 of "<org>:<graph>", runnable by id too.
	wantID := runs.DeployedAssistantID(orgID, "support")
	a := e.must(200, "GET", "/assistants/support", e.keyA, nil)
	if a["assistant_id"] != wantID || a["graph_id"] != "support" || a["metadata"].(map[string]any)["created_by"] != "system" {
		t.Errorf("assistant %v, want id %s", a, wantID)
	}
	if a["description"] != "Classifies a support request, then answers it, looking orders up." {
		t.Errorf("description %v", a["description"])
	}
	found := e.do("POST", "/assistants/search", e.keyA, map[string]any{"graph_id": "support"})
	if !strings.Contains(string(found.Body), wantID) {
		t.Errorf("search: %s", found.Body)
	}
	tid := e.newThread(e.keyA)
	r := e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": wantID, "input": orderQuestion})
	checkSupportAnswer(t, waitBody(t, r))
	run := e.must(200, "GET", r.Header.Get("Content-Location"), e.keyA, nil)
	if rev := run["kwargs"].(map[string]any)["graph_revision"]; fmt.Sprint(rev) != fmt.Sprintf("map[deployment_id:%s revision_id:%s]", id, revID) {
		t.Errorf("the run records revision %v, want %s", rev, revID)
	}
	// Another organization has no such graph.
	if r := e.do("POST", "/runs/wait", e.keyB, map[string]any{"assistant_id": "support", "input": orderQuestion}); r.Status != 422 {
		t.Errorf("organization beta ran alpha's graph: %d %s", r.Status, r.Body)
	}
	e.must(404, "GET", "/assistants/"+wantID, e.keyB, nil)

	// Input is checked against the document's input_schema.
	for _, c := range []struct {
		input  any
		detail string
	}{
		{map[string]any{}, "input.messages: is required"},
		{map[string]any{"messages": []any{}}, "input.messages: must have at least 1 items"},
		{map[string]any{"messages": "hi"}, "input.messages: must be array"},
	} {
		r := e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "support", "input": c.input})
		if r.Status != 422 || !strings.Contains(r.detail(t), c.detail) {
			t.Errorf("input %v: %d %s, want 422 naming %q", c.input, r.Status, r.Body, c.detail)
		}
	}

	// The drawing and the schemas.
	var drawing struct {
		Nodes []struct{ ID string }
		Edges []struct {
			Source, Target string
			Conditional    bool
		}
	}
	if err := json.Unmarshal(e.do("GET", "/assistants/support/graph", e.keyA, nil).Body, &drawing); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(drawing.Nodes) != "[{__start__} {agent} {classify} {tools} {__end__}]" ||
		fmt.Sprint(drawing.Edges) != "[{__start__ classify false} {agent __end__ true} {agent tools true} {classify agent false} {tools agent false}]" {
		t.Errorf("graph drawing %+v", drawing)
	}
	sc := e.must(200, "GET", "/assistants/"+wantID+"/schemas", e.keyA, nil)
	in, _ := json.Marshal(sc["input_schema"])
	state, _ := json.Marshal(sc["state_schema"])
	if sc["graph_id"] != "support" || !strings.Contains(string(in), `"required":["messages"]`) ||
		!strings.Contains(string(state), `"topic":{"type":"string"}`) {
		t.Errorf("schemas %v", sc)
	}
	e.must(200, "GET", "/assistants/echo/schemas", e.keyA, nil)

	// The document's JSON Schema is served, without a key.
	r = e.do("GET", "/v2/graph-schema", "", nil)
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/schema+json" || !strings.Contains(string(r.Body), `"$schema"`) {
		t.Errorf("GET /v2/graph-schema: %d %s %.100s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	if r := e.do("GET", "/v2/graph-config-schema", "", nil); r.Status != 200 || !strings.Contains(string(r.Body), `"graphs"`) {
		t.Errorf("GET /v2/graph-config-schema: %d", r.Status)
	}
}

// exampleRuntime starts examples/python/runtime.py on 127.0.0.1 with the
// model at modelURL and returns its URL. It needs a Python 3 (the project's
// .venv, else python3 on PATH): a missing one fails the test.
func exampleRuntime(t *testing.T, modelURL string) string {
	t.Helper()
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	script := filepath.Join(root, "examples", "python", "runtime.py")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("the example runtime is missing: %v", err)
	}
	python := filepath.Join(root, ".venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		if python, err = exec.LookPath("python3"); err != nil {
			t.Fatalf("no Python 3 to run the example runtime (.venv/bin/python or python3 on PATH): run `make test-deps`")
		}
	}
	cmd := exec.Command(python, script, "--host", "127.0.0.1", "--port", "0")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1",
		"STEPGRAPH_EXAMPLE_MODEL_URL="+modelURL, "STEPGRAPH_EXAMPLE_API_KEY_SECRET=OPENAI_API_KEY")
	var logs strings.Builder
	var logsMu sync.Mutex
	stderr, _ := cmd.StderrPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the example runtime: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logsMu.Lock()
			logs.WriteString(sc.Text() + "\n")
			logsMu.Unlock()
		}
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			logsMu.Lock()
			t.Logf("example runtime's log:\n%s", logs.String())
			logsMu.Unlock()
		}
	})
	select {
	case line := <-lines:
		url, ok := strings.CutPrefix(line, "listening on ")
		if !ok {
			t.Fatalf("the example runtime printed %q", line)
		}
		return url
	case <-exited:
		t.Fatalf("the example runtime exited:\n%s", logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the example runtime did not start within 30s")
	}
	return ""
}

// TestDeployedAgentExampleRuntime deploys the agent the example Python
// runtime describes as an external_docker deployment (custom_url): it runs
// with exactly the results of the same agent deployed from a repository,
// and its interrupting function graph stops and resumes.
func TestDeployedAgentExampleRuntime(t *testing.T) {
	e := newEnv(t)
	model := newFakeModel(t)
	runtimeURL := exampleRuntime(t, model.url)
	hosted := e.must(201, "POST", "/v2/deployments", e.keyA,
		agentDeployment("support-hosted", agentRepo(t, model.url), newTestRuntime(t).url, secret("sk-example-a-5Tz")))
	image := e.must(201, "POST", "/v2/deployments", e.keyB, map[string]any{
		"name": "support-image", "source": "external_docker",
		"source_config":          map[string]any{"custom_url": runtimeURL},
		"source_revision_config": map[string]any{"image_uri": "registry.example.com/acme/support:1"},
		"secrets":                []any{map[string]any{"name": "OPENAI_API_KEY", "value": secret("sk-example-b-8Wd")}},
	})
	e.waitFor(e.keyA, "/v2/deployments/"+hosted["id"].(string), status("READY"))
	rev := e.waitFor(e.keyB, fmt.Sprintf("/v2/deployments/%s/revisions/%s", image["id"], image["latest_revision_id"]),
		func(m map[string]any) bool {
			return m["status"] == "DEPLOYED" || strings.HasSuffix(m["status"].(string), "FAILED")
		})
	if rev["status"] != "DEPLOYED" {
		t.Fatalf("the external_docker revision: %v", rev)
	}

	fromRepo := waitBody(t, e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "support", "input": orderQuestion}))
	fromRuntime := waitBody(t, e.do("POST", "/runs/wait", e.keyB, map[string]any{"assistant_id": "support", "input": orderQuestion}))
	checkSupportAnswer(t, fromRuntime)
	a, _ := json.Marshal(withoutIDs(fromRepo))
	b, _ := json.Marshal(withoutIDs(fromRuntime))
	if string(a) != string(b) {
		t.Errorf("hosted_repo and external_docker answers differ:\n%s\n%s", a, b)
	}

	// The refund graph's function asks a human, then finishes with the answer.
	tid := e.newThread(e.keyB)
	out := waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyB, map[string]any{"assistant_id": "refund", "input": map[string]any{"order_id": "42"}}))
	if !strings.Contains(fmt.Sprint(out["__interrupt__"]), "Refund order 42 (59.90 EUR)?") {
		t.Fatalf("refund: %v", out)
	}
	out = waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyB, map[string]any{"assistant_id": "refund", "command": map[string]any{"resume": "yes"}}))
	if out["approved"] != true || out["__interrupt__"] != nil {
		t.Errorf("resumed refund: %v", out)
	}
}

// TestDeployedGraphInvalidDocuments: every broken rule fails the revision
// with DEPLOY_FAILED (or BUILD_FAILED for the size bound) and a reason
// naming the file, the JSON path and the rule.
func TestDeployedGraphInvalidDocuments(t *testing.T) {
	e := newEnv(t)
	valid := `state: {n: {}, messages: {reducer: messages}}
nodes: {a: {kind: transform, update: {n: 1}}}
edges: [{from: __start__, to: a}]
`
	files := map[string]string{
		"valid.yaml":    valid,
		"schema.yaml":   strings.Replace(valid, "nodes: {", "nodes: {llm: {kind: chat_model, base_url: \"https://llm.example.com/v1\", model: m, temperature: 3}, ", 1),
		"edge.yaml":     strings.Replace(valid, "to: a}", "to: b}", 1),
		"secret.yaml":   strings.Replace(valid, "nodes: {", "nodes: {llm: {kind: chat_model, base_url: \"https://llm.example.com/v1\", model: m, api_key_secret: NOPE}, ", 1),
		"function.yaml": strings.Replace(valid, "nodes: {", "nodes: {fn: {kind: function}, ", 1),
		"http.yaml":     strings.Replace(valid, "nodes: {", "nodes: {get: {kind: http, url: \"http://api.example.com/x\"}, ", 1),
		"template.yaml": strings.Replace(valid, "{n: 1}", "{n: \"{{ response.body }}\"}", 1),
		"cycle.yaml":    "state: {n: {}}\nnodes: {s: {kind: subgraph, graph: loop}}\nedges: [{from: __start__, to: s}]\n",
		"big.yaml":      valid + "description: \"" + strings.Repeat("x", 210<<10) + "\"\n",
	}
	config := func(entries string) string { return "graphs:\n" + entries }
	for name, entries := range map[string]string{
		"schema": "  g: schema.yaml\n", "edge": "  g: edge.yaml\n", "secret": "  g: secret.yaml\n",
		"function": "  g: function.yaml\n", "http": "  g: http.yaml\n", "template": "  g: template.yaml\n",
		"missing": "  g: nope.yaml\n", "cycle": "  loop: cycle.yaml\n", "builtin": "  echo: valid.yaml\n",
		"shared": "  shared: valid.yaml\n", "big": "  g: big.yaml\n", "notdoc": "  g: ./agent.py:graph\n",
	} {
		files[name+".config.yaml"] = config(entries)
	}
	repo := gitRepo(t, files)
	deploy := func(key, name, configPath string) (string, map[string]any) {
		body := repoDeployment(name, repo)
		body["source_revision_config"] = map[string]any{"repo_ref": "main", "graph_config_path": configPath}
		d := e.must(201, "POST", "/v2/deployments", key, body)
		rev := e.waitFor(key, fmt.Sprintf("/v2/deployments/%s/revisions/%s", d["id"], d["latest_revision_id"]),
			func(m map[string]any) bool {
				return m["status"] == "DEPLOYED" || strings.HasSuffix(m["status"].(string), "FAILED")
			})
		return d["id"].(string), rev
	}
	// A graph another deployment of the organization serves.
	if _, rev := deploy(e.keyA, "first", "shared.config.yaml"); rev["status"] != "DEPLOYED" {
		t.Fatalf("first deployment of graph shared: %v", rev)
	}
	cases := []struct {
		config string
		status string
		reason []string
	}{
		{"schema", "DEPLOY_FAILED", []string{"schema.yaml: /nodes/llm/temperature: must be <= 2"}},
		{"edge", "DEPLOY_FAILED", []string{"edge.yaml: /edges/0/to:", `"b"`}},
		{"secret", "DEPLOY_FAILED", []string{"secret.yaml: /nodes/llm/api_key_secret: the deployment has no secret \"NOPE\""}},
		{"function", "DEPLOY_FAILED", []string{"function.yaml: /nodes/fn: runs in the deployment's runtime, and this deployment has none", "set source_config.custom_url"}},
		{"http", "DEPLOY_FAILED", []string{"http.yaml: /nodes/get/url: must use https"}},
		{"template", "DEPLOY_FAILED", []string{"template.yaml: /nodes/a/update/n:", "response"}},
		{"missing", "DEPLOY_FAILED", []string{"missing.config.yaml: /graphs/g: nope.yaml does not exist"}},
		{"cycle", "DEPLOY_FAILED", []string{"cycle.yaml: /nodes/s/graph: subgraph cycle: loop → loop"}},
		{"notdoc", "DEPLOY_FAILED", []string{"notdoc.config.yaml: /graphs/g:"}},
		{"builtin", "DEPLOY_FAILED", []string{`graph "echo" is the name of a built-in graph`}},
		{"shared", "DEPLOY_FAILED", []string{`graph "shared" is already served by deployment "first"`}},
		{"big", "BUILD_FAILED", []string{"larger than 204800 bytes together"}},
	}
	for i, c := range cases {
		t.Run(c.config, func(t *testing.T) {
			id, rev := deploy(e.keyA, fmt.Sprintf("bad-%d", i), c.config+".config.yaml")
			msg, _ := rev["status_message"].(string)
			t.Logf("%s: %s", rev["status"], msg)
			if rev["status"] != c.status {
				t.Fatalf("status %v (%s), want %s", rev["status"], msg, c.status)
			}
			for _, frag := range c.reason {
				if !strings.Contains(msg, frag) {
					t.Errorf("reason %q does not name %q", msg, frag)
				}
			}
			if d := e.must(200, "GET", "/v2/deployments/"+id, e.keyA, nil); d["status"] != "AWAITING_DATABASE" {
				t.Errorf("deployment %v", d["status"])
			}
		})
	}
	// The same graph id in another organization is fine.
	if _, rev := deploy(e.keyB, "first", "shared.config.yaml"); rev["status"] != "DEPLOYED" {
		t.Errorf("graph shared in organization beta: %v", rev)
	}

	// What a runtime describes is checked alike; problems name "describe".
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"graphs": {"g": {"state": {}, "nodes": {"a": {"kind": "teleport"}}, "edges": []}}}`))
	}))
	defer bad.Close()
	d := e.must(201, "POST", "/v2/deployments", e.keyA, map[string]any{"name": "described", "source": "external_docker",
		"source_config": map[string]any{"custom_url": bad.URL}, "source_revision_config": map[string]any{"image_uri": "acme/agent:1"}})
	rev := e.waitFor(e.keyA, fmt.Sprintf("/v2/deployments/%s/revisions/%s", d["id"], d["latest_revision_id"]), status("DEPLOY_FAILED"))
	if msg, _ := rev["status_message"].(string); !strings.Contains(msg, "describe: /graphs/g/nodes/a/kind: must be one of") {
		t.Errorf("describe reason %q", msg)
	}
}

// stepsYAML is a graph whose function node the tests make fail.
const stepsYAML = `state:
  topic: {}
  worked: {}
  done: {}
nodes:
  work: {kind: function, timeout: 1}
  finish: {kind: transform, update: {done: "{{ state.topic }}"}}
edges:
  - {from: __start__, to: work}
  - {from: work, to: finish}
`

// TestDeployedFunctionFailures: a function that times out, answers garbage
// or cannot be reached fails the run with an __error__ naming the node; the
// thread keeps its state and a later run finishes the work.
func TestDeployedFunctionFailures(t *testing.T) {
	e := newEnv(t)
	rt := newTestRuntime(t)
	repo := gitRepo(t, map[string]string{"stepgraph.yaml": "graphs:\n  steps: steps.yaml\n", "steps.yaml": stepsYAML})
	body := repoDeployment("steps", repo)
	body["source_revision_config"] = map[string]any{"repo_ref": "main", "graph_config_path": "stepgraph.yaml"}
	body["source_config"] = map[string]any{"repo_url": repo, "custom_url": rt.url}
	id, _ := e.deployReady(body)

	cases := []struct {
		name, mode, kind, message string
		url                       string // custom_url while failing ("" unchanged)
	}{
		{"timeout", "hang", "TimeoutError", `node "work": the function did not answer within 1s`, ""},
		{"garbage", "garbage", "ValueError", `node "work": the function's answer is not valid: the answer is not a JSON object: <html>Internal hiccup</html>`, ""},
		{"unreachable", "ok", "ConnectionError", `node "work": the function runtime is unreachable:`, "http://127.0.0.1:1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt.mode.Store(c.mode)
			if c.url != "" {
				e.must(200, "PATCH", "/v2/deployments/"+id, e.keyA, map[string]any{"source_config": map[string]any{"custom_url": c.url}})
			}
			tid := e.newThread(e.keyA)
			out := waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "steps", "input": map[string]any{"topic": c.name}}))
			got, _ := out["__error__"].(map[string]any)
			if got["error"] != c.kind || !strings.HasPrefix(fmt.Sprint(got["message"]), c.message) {
				t.Fatalf("__error__ %v, want %s %q", out, c.kind, c.message)
			}
			th := e.must(200, "GET", "/threads/"+tid, e.keyA, nil)
			if th["status"] != "error" || th["values"].(map[string]any)["topic"] != c.name {
				t.Errorf("thread after the failure: %v", th)
			}
			state := e.must(200, "GET", "/threads/"+tid+"/state", e.keyA, nil)
			if fmt.Sprint(state["next"]) != "[work]" {
				t.Errorf("state after the failure: next %v", state["next"])
			}

			rt.mode.Store("ok")
			if c.url != "" {
				e.must(200, "PATCH", "/v2/deployments/"+id, e.keyA, map[string]any{"source_config": map[string]any{"custom_url": rt.url}})
			}
			out = waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "steps"}))
			if out["done"] != c.name || out["worked"] != true || out["__error__"] != nil {
				t.Errorf("resumed run: %v", out)
			}
			if th := e.must(200, "GET", "/threads/"+tid, e.keyA, nil); th["status"] != "idle" {
				t.Errorf("thread after the resumed run: %v", th["status"])
			}
		})
	}
}

// versionedYAML stamps its version; its function node blocks while the
// input holds it.
const versionedYAML = `state:
  version: {}
  hold: {}
  worked: {}
nodes:
  work: {kind: function, timeout: 60}
  stamp: {kind: transform, update: {version: VERSION}}
edges:
  - {from: __start__, to: work}
  - {from: work, to: stamp}
`

// gitRepoWriter makes a repository and returns its file:// URL and a
// function committing files to its main branch (returning the sha).
func gitRepoWriter(t *testing.T) (string, func(files map[string]string) string) {
	t.Helper()
	dir := repoDir(t)
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.Main}})
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	commit := func(files map[string]string) string {
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := wt.Add(name); err != nil {
				t.Fatal(err)
			}
		}
		sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}
		h, err := wt.Commit("commit", &git.CommitOptions{Author: sig})
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	return "file://" + dir, commit
}

// TestDeployedGraphRedeploy: a new revision replaces the graphs, a redeploy
// of the older one switches them back, and runs created before a switch —
// running or still queued — finish on the revision they were created on.
func TestDeployedGraphRedeploy(t *testing.T) {
	e := newEnv(t)
	rt := newTestRuntime(t)
	repo, commit := gitRepoWriter(t)
	sha1 := commit(map[string]string{"stepgraph.yaml": "graphs:\n  versioned: versioned.yaml\n",
		"versioned.yaml": strings.Replace(versionedYAML, "VERSION", "one", 1)})
	body := repoDeployment("versioned", repo)
	body["source_revision_config"] = map[string]any{"repo_ref": "main", "graph_config_path": "stepgraph.yaml"}
	body["source_config"] = map[string]any{"repo_url": repo, "custom_url": rt.url}
	id, first := e.deployReady(body)
	version := func() any {
		return waitBody(t, e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "versioned", "input": map[string]any{}}))["version"]
	}
	if v := version(); v != "one" {
		t.Fatalf("first revision answers %v", v)
	}
	// main moves on; a new revision of the same ref builds from there.
	commit(map[string]string{"versioned.yaml": strings.Replace(versionedYAML, "VERSION", "two", 1)})
	second := e.must(201, "POST", "/v2/deployments/"+id+"/revisions", e.keyA, map[string]any{})["id"].(string)
	e.waitFor(e.keyA, "/v2/deployments/"+id, func(m map[string]any) bool { return m["active_revision_id"] == second })
	if v := version(); v != "two" {
		t.Fatalf("second revision answers %v", v)
	}

	// A run that is running, and one queued behind it, both on the second revision.
	tid := e.newThread(e.keyA)
	running := e.must(200, "POST", "/threads/"+tid+"/runs", e.keyA, map[string]any{"assistant_id": "versioned", "input": map[string]any{"hold": true}})
	select {
	case <-rt.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the held run never reached its function")
	}
	queued := e.must(200, "POST", "/threads/"+tid+"/runs", e.keyA, map[string]any{"assistant_id": "versioned", "input": map[string]any{"hold": false}, "multitask_strategy": "enqueue"})

	// Redeploy the first revision: new runs are on it again — its own
	// documents, though main has moved on.
	e.must(200, "POST", fmt.Sprintf("/v2/deployments/%s/revisions/%s/redeploy", id, first), e.keyA, nil)
	e.waitFor(e.keyA, "/v2/deployments/"+id, func(m map[string]any) bool { return m["active_revision_id"] == first })
	redeployed := e.waitFor(e.keyA, fmt.Sprintf("/v2/deployments/%s/revisions/%s", id, first), status("DEPLOYED"))
	if v := version(); v != "one" {
		t.Errorf("after the redeploy, new runs answer %v", v)
	}
	if sha := redeployed["source_revision_config"].(map[string]any)["repo_commit_sha"]; sha != sha1 {
		t.Errorf("the redeployed revision is built from %v, want its own commit %s", sha, sha1)
	}

	close(rt.release)
	for _, r := range []map[string]any{running, queued} {
		out := waitBody(t, e.do("GET", fmt.Sprintf("/threads/%s/runs/%s/join", tid, r["run_id"]), e.keyA, nil))
		if out["version"] != "two" {
			t.Errorf("run %s created on the second revision finished with %v", r["run_id"], out)
		}
		if rev := r["kwargs"].(map[string]any)["graph_revision"].(map[string]any)["revision_id"]; rev != second {
			t.Errorf("run %s records revision %v, want %s", r["run_id"], rev, second)
		}
	}
}

package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// MCP (POST /mcp) and A2A (POST /a2a/{assistant_id}) through the whole
// server: real runs on the built-in graphs, two organizations.

const mcpAccept = "application/json, text/event-stream"

// rpc sends one JSON-RPC body to path and returns the status and the
// decoded response object.
func (e *env) rpc(path, key string, body any, accept string, headers ...string) (int, map[string]any) {
	e.t.Helper()
	r := e.do("POST", path, key, body, append([]string{"Accept", accept}, headers...)...)
	if len(r.Body) == 0 {
		return r.Status, nil
	}
	return r.Status, r.json(e.t)
}

func rpcError(t *testing.T, m map[string]any) (int, string) {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("no JSON-RPC error in %v", m)
	}
	code, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	return int(code), msg
}

func rpcResult(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	if m["jsonrpc"] != "2.0" {
		t.Fatalf("not a JSON-RPC 2.0 response: %v", m)
	}
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result object in %v", m)
	}
	return r
}

func TestMCPInitializeNegotiatesTheProtocolVersion(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ asked, want string }{
		{"2024-11-05", "2024-11-05"},
		{"2025-03-26", "2025-03-26"},
		{"2025-06-18", "2025-06-18"},
		{"2025-11-25", "2025-11-25"},
		{"2099-01-01", "2025-11-25"}, // unknown: the server's latest
		{"", "2025-11-25"},
	} {
		status, m := e.rpc("/mcp", e.keyA, map[string]any{"jsonrpc": "2.0", "id": 7, "method": "initialize",
			"params": map[string]any{"protocolVersion": tc.asked, "capabilities": map[string]any{}}}, mcpAccept)
		if status != 200 {
			t.Fatalf("initialize %q: status %d %v", tc.asked, status, m)
		}
		if m["id"] != float64(7) {
			t.Errorf("id not echoed: %v", m["id"])
		}
		res := rpcResult(t, m)
		if res["protocolVersion"] != tc.want {
			t.Errorf("initialize %q: protocolVersion %v, want %s", tc.asked, res["protocolVersion"], tc.want)
		}
		if tools, _ := res["capabilities"].(map[string]any)["tools"].(map[string]any); tools == nil {
			t.Errorf("no tools capability: %v", res)
		}
		if info, _ := res["serverInfo"].(map[string]any); info["version"] != "test" {
			t.Errorf("serverInfo %v", res["serverInfo"])
		}
	}
}

func TestMCPToolsListAndCall(t *testing.T) {
	e := newEnv(t)
	e.must(200, "POST", "/assistants", e.keyA, map[string]any{"graph_id": "echo", "name": "alpha private echo"})

	list := func(key string) map[string]map[string]any {
		status, m := e.rpc("/mcp", key, map[string]any{"jsonrpc": "2.0", "id": "l", "method": "tools/list"}, mcpAccept)
		if status != 200 {
			t.Fatalf("tools/list: %d %v", status, m)
		}
		out := map[string]map[string]any{}
		for _, tool := range rpcResult(t, m)["tools"].([]any) {
			tm := tool.(map[string]any)
			out[tm["name"].(string)] = tm
		}
		return out
	}
	alpha, beta := list(e.keyA), list(e.keyB)
	echo, ok := alpha["echo"]
	if !ok {
		t.Fatalf("no echo tool: %v", alpha)
	}
	schema := echo["inputSchema"].(map[string]any)
	if schema["type"] != "object" || schema["properties"].(map[string]any)["messages"] == nil {
		t.Errorf("echo inputSchema: %v", schema)
	}
	if echo["description"] == "" || echo["title"] != "echo" {
		t.Errorf("echo tool: %v", echo)
	}
	// The name is normalized to MCP's rule; the title keeps it.
	if got := alpha["alpha_private_echo"]; got == nil || got["title"] != "alpha private echo" {
		t.Errorf("alpha's own assistant as a tool: %v", got)
	}
	if _, leaked := beta["alpha_private_echo"]; leaked {
		t.Errorf("beta lists alpha's assistant: %v", beta)
	}
	if _, ok := beta["echo"]; !ok {
		t.Errorf("beta has no echo tool of its own")
	}

	call := func(key, name string, args any) map[string]any {
		status, m := e.rpc("/mcp", key, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call",
			"params": map[string]any{"name": name, "arguments": args}}, mcpAccept, "MCP-Protocol-Version", "2025-06-18")
		if status != 200 {
			t.Fatalf("tools/call %s: %d %v", name, status, m)
		}
		return m
	}
	res := rpcResult(t, call(e.keyA, "echo", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}))
	content := res["content"].([]any)[0].(map[string]any)
	var out map[string]any
	if err := json.Unmarshal([]byte(content["text"].(string)), &out); err != nil {
		t.Fatalf("tool output is not the run's JSON output: %v", content)
	}
	msgs := out["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any); last["content"] != "echo: hi" {
		t.Errorf("echo answered %v", out)
	}
	if res["isError"] == true {
		t.Errorf("isError on success: %v", res)
	}
	// A run that fails is a tool error, in the result.
	failed := rpcResult(t, call(e.keyA, "fail", map[string]any{}))
	if failed["isError"] != true || !strings.Contains(failed["content"].([]any)[0].(map[string]any)["text"].(string), "boom") {
		t.Errorf("failing tool: %v", failed)
	}
	// Another organization's assistant is an unknown tool.
	if code, msg := rpcError(t, call(e.keyB, "alpha_private_echo", map[string]any{})); code != -32602 || !strings.Contains(msg, "Unknown tool") {
		t.Errorf("beta calling alpha's tool: %d %s", code, msg)
	}
	if code, _ := rpcError(t, call(e.keyA, "", map[string]any{})); code != -32602 {
		t.Errorf("tools/call without a name: %d", code)
	}
	if code, _ := rpcError(t, call(e.keyA, "echo", []any{1})); code != -32602 {
		t.Errorf("tools/call with array arguments: %d", code)
	}
}

func TestMCPProtocolErrors(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		body   any
		accept string
		header []string
		status int
		code   int // JSON-RPC error code, 0 for none
	}{
		{"not JSON", `{"jsonrpc": "2.0",`, mcpAccept, nil, 400, -32700},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, mcpAccept, nil, 400, -32600},
		{"a string", `"ping"`, mcpAccept, nil, 400, -32600},
		{"no jsonrpc", map[string]any{"id": 1, "method": "ping"}, mcpAccept, nil, 400, -32600},
		{"jsonrpc 1.0", map[string]any{"jsonrpc": "1.0", "id": 1, "method": "ping"}, mcpAccept, nil, 400, -32600},
		{"object id", map[string]any{"jsonrpc": "2.0", "id": map[string]any{}, "method": "ping"}, mcpAccept, nil, 400, -32600},
		{"neither request nor notification", map[string]any{"jsonrpc": "2.0"}, mcpAccept, nil, 400, -32600},
		{"accept text/html", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}, "text/html", nil, 400, -32600},
		{"no accept", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}, "", nil, 400, -32600},
		{"unsupported protocol header", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}, mcpAccept, []string{"MCP-Protocol-Version", "1999-01-01"}, 400, -32600},
		{"unknown method", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "resources/list"}, mcpAccept, nil, 200, -32601},
		{"numeric method", map[string]any{"jsonrpc": "2.0", "id": 1, "method": 5}, mcpAccept, nil, 200, -32601},
		{"array params", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": []any{}}, mcpAccept, nil, 200, -32602},
		{"bad cursor", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": map[string]any{"cursor": "x"}}, mcpAccept, nil, 200, -32602},
		{"notification", map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}, mcpAccept, nil, 202, 0},
		{"response", map[string]any{"jsonrpc": "2.0", "id": 4, "result": map[string]any{}}, mcpAccept, nil, 202, 0},
		{"ping", map[string]any{"jsonrpc": "2.0", "id": 0, "method": "ping"}, "*/*", nil, 200, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, m := e.rpc("/mcp", e.keyA, tc.body, tc.accept, tc.header...)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %v", status, tc.status, m)
			}
			if tc.code == 0 {
				if status == 200 && m["error"] != nil {
					t.Errorf("unexpected error %v", m)
				}
				return
			}
			if code, _ := rpcError(t, m); code != tc.code {
				t.Errorf("code %d, want %d: %v", code, tc.code, m)
			}
			if _, ok := m["id"]; !ok {
				t.Errorf("an error response carries id (null when unknown): %v", m)
			}
		})
	}
	if r := e.do("POST", "/mcp", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}, "Accept", mcpAccept); r.Status != 401 {
		t.Errorf("no key: %d", r.Status)
	}
	// GET and DELETE as upstream's endpoint answers them
	// (api/mcp/_handlers.py): 405 (no stream) and 404 (no session), on
	// /mcp and on /mcp/ alike, after the API key is checked.
	for _, p := range []string{"/mcp", "/mcp/"} {
		if r := e.do("GET", p, e.keyA, nil, "Accept", "text/event-stream"); r.Status != 405 || r.Header.Get("Allow") != "POST, DELETE" {
			t.Errorf("GET %s: %d, Allow %q; want 405 with Allow: POST, DELETE", p, r.Status, r.Header.Get("Allow"))
		}
		if r := e.do("DELETE", p, e.keyA, nil, "Mcp-Session-Id", "s-1"); r.Status != 404 || !strings.Contains(r.detail(t), "session") {
			t.Errorf("DELETE %s: %d %q; want 404 naming the session", p, r.Status, r.Body)
		}
		for _, m := range []string{"GET", "DELETE"} {
			if r := e.do(m, p, "", nil); r.Status != 401 {
				t.Errorf("%s %s without a key: %d, want 401", m, p, r.Status)
			}
		}
		r := e.do("POST", p, e.keyA, map[string]any{"jsonrpc": "2.0", "id": 7, "method": "ping"}, "Accept", mcpAccept)
		if m := r.json(t); r.Status != 200 || m["id"] != float64(7) {
			t.Errorf("POST %s ping: %d %s", p, r.Status, r.Body)
		}
	}
	// Only /mcp/ itself: a path below it is an unknown route.
	if r := e.do("POST", "/mcp/x", e.keyA, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}); r.Status != 404 {
		t.Errorf("POST /mcp/x: %d, want 404", r.Status)
	}
}

func a2aSend(method, text string, extra map[string]any) map[string]any {
	msg := map[string]any{"role": "user", "messageId": "m-" + text, "parts": []any{map[string]any{"kind": "text", "text": text}}}
	for k, v := range extra {
		msg[k] = v
	}
	return map[string]any{"jsonrpc": "2.0", "id": "req-1", "method": method, "params": map[string]any{"message": msg}}
}

func artifactText(t *testing.T, task map[string]any) string {
	t.Helper()
	arts, _ := task["artifacts"].([]any)
	if len(arts) != 1 {
		t.Fatalf("artifacts %v", task["artifacts"])
	}
	parts := arts[0].(map[string]any)["parts"].([]any)
	return parts[0].(map[string]any)["text"].(string)
}

func TestA2AMessageSendAndTasksGet(t *testing.T) {
	e := newEnv(t)
	asst := e.must(200, "GET", "/assistants/echo", e.keyA, nil)["assistant_id"].(string)
	path := "/a2a/" + asst

	status, m := e.rpc(path, e.keyA, a2aSend("message/send", "hi", nil), "application/json")
	if status != 200 || m["id"] != "req-1" {
		t.Fatalf("message/send: %d %v", status, m)
	}
	task := rpcResult(t, m)
	if task["kind"] != "task" || task["status"].(map[string]any)["state"] != "completed" {
		t.Fatalf("task %v", task)
	}
	if got := artifactText(t, task); got != "echo: hi" {
		t.Errorf("answer %q", got)
	}
	ctxID := task["contextId"].(string)
	taskID := task["id"].(string)
	if !strings.HasPrefix(taskID, ctxID+":") {
		t.Errorf("task id %q is not {context}:{run}", taskID)
	}
	// The context is a thread of the organization's, with the conversation.
	th := e.must(200, "GET", "/threads/"+ctxID, e.keyA, nil)
	if n := len(th["values"].(map[string]any)["messages"].([]any)); n != 2 {
		t.Errorf("thread has %d messages", n)
	}
	hist := task["history"].([]any)
	if len(hist) != 2 || hist[0].(map[string]any)["role"] != "user" || hist[1].(map[string]any)["role"] != "agent" {
		t.Errorf("history %v", hist)
	}

	// The same context continues the conversation; historyLength bounds it.
	body := a2aSend("message/send", "again", map[string]any{"contextId": ctxID})
	body["params"].(map[string]any)["configuration"] = map[string]any{"historyLength": 1}
	_, m = e.rpc(path, e.keyA, body, "application/json")
	second := rpcResult(t, m)
	if second["contextId"] != ctxID || artifactText(t, second) != "echo: again" {
		t.Errorf("second turn %v", second)
	}
	if h := second["history"].([]any); len(h) != 1 {
		t.Errorf("historyLength 1 gave %d messages", len(h))
	}

	// tasks/get finds the task; its A2A 1.0 name answers in 1.0's form.
	_, m = e.rpc(path, e.keyA, map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tasks/get", "params": map[string]any{"id": taskID}}, "application/json")
	got := rpcResult(t, m)
	if got["id"] != taskID || got["status"].(map[string]any)["state"] != "completed" {
		t.Errorf("tasks/get %v", got)
	}
	_, m = e.rpc(path, e.keyA, map[string]any{"jsonrpc": "2.0", "id": 9, "method": "GetTask", "params": map[string]any{"id": taskID}}, "application/json")
	if got := rpcResult(t, m); got["status"].(map[string]any)["state"] != "TASK_STATE_COMPLETED" {
		t.Errorf("GetTask %v", got)
	}
	// A finished task takes no more messages.
	_, m = e.rpc(path, e.keyA, a2aSend("message/send", "more", map[string]any{"taskId": taskID}), "application/json")
	if code, _ := rpcError(t, m); code != -32004 {
		t.Errorf("message to a completed task: %v", m)
	}
	// tasks/cancel of a finished task is refused.
	_, m = e.rpc(path, e.keyA, map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tasks/cancel", "params": map[string]any{"id": taskID}}, "application/json")
	if code, _ := rpcError(t, m); code != -32002 {
		t.Errorf("tasks/cancel of a completed task: %v", m)
	}

	// SendMessage (A2A 1.0): ROLE_ and TASK_STATE_ values, the task under "task".
	v1 := map[string]any{"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": map[string]any{"message": map[string]any{
		"role": "ROLE_USER", "messageId": "v1", "parts": []any{map[string]any{"text": "one"}}}}}
	_, m = e.rpc(path, e.keyA, v1, "application/json")
	v1task := rpcResult(t, m)["task"].(map[string]any)
	if v1task["status"].(map[string]any)["state"] != "TASK_STATE_COMPLETED" || artifactText(t, v1task) != "echo: one" {
		t.Errorf("SendMessage %v", v1task)
	}
	if h := v1task["history"].([]any); h[1].(map[string]any)["role"] != "ROLE_AGENT" {
		t.Errorf("1.0 roles: %v", h)
	}

	// Beta cannot reach alpha's task, context or assistant.
	_, m = e.rpc(path, e.keyB, map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tasks/get", "params": map[string]any{"id": taskID}}, "application/json")
	if code, _ := rpcError(t, m); code != -32001 {
		t.Errorf("beta tasks/get on alpha's task: %v", m)
	}
	own := e.must(200, "POST", "/assistants", e.keyA, map[string]any{"graph_id": "echo", "name": "alpha-only"})["assistant_id"].(string)
	_, m = e.rpc("/a2a/"+own, e.keyB, a2aSend("message/send", "x", nil), "application/json")
	if code, msg := rpcError(t, m); code != -32602 || strings.Contains(msg, "alpha-only") {
		t.Errorf("beta on alpha's assistant: %v", m)
	}
	// Beta naming alpha's context id talks in a context of its own: it
	// sees none of alpha's conversation, and alpha's thread is untouched.
	_, m = e.rpc(path, e.keyB, a2aSend("message/send", "x", map[string]any{"contextId": ctxID}), "application/json")
	if h := rpcResult(t, m)["history"].([]any); len(h) != 2 || strings.Contains(string(mustJSONBytes(t, h)), "again") {
		t.Errorf("beta's history in a context named like alpha's: %v", h)
	}
	if n := len(e.must(200, "GET", "/threads/"+ctxID, e.keyA, nil)["values"].(map[string]any)["messages"].([]any)); n != 4 {
		t.Errorf("alpha's thread has %d messages after beta's message, want 4", n)
	}
}

func mustJSONBytes(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestA2ARefusals(t *testing.T) {
	e := newEnv(t)
	path := "/a2a/echo"
	counter := "/a2a/counter"
	for _, tc := range []struct {
		name   string
		path   string
		body   any
		accept string
		status int
		code   int
	}{
		{"not JSON", path, `{`, "application/json", 200, -32700},
		{"array", path, `[]`, "application/json", 200, -32600},
		{"no jsonrpc", path, map[string]any{"id": 1, "method": "message/send"}, "application/json", 200, -32600},
		{"unknown method", path, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe"}, "application/json", 200, -32601},
		{"notification", path, map[string]any{"jsonrpc": "2.0", "method": "message/send"}, "application/json", 200, -32600},
		{"no params", path, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send"}, "application/json", 200, -32602},
		{"no messageId", path, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": map[string]any{"role": "user", "parts": []any{map[string]any{"text": "x"}}}}}, "application/json", 200, -32602},
		{"no parts", path, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": map[string]any{"role": "user", "messageId": "a", "parts": []any{}}}}, "application/json", 200, -32602},
		{"bad role", path, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": map[string]any{"role": "robot", "messageId": "a", "parts": []any{map[string]any{"text": "x"}}}}}, "application/json", 200, -32602},
		{"file part", path, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": map[string]any{"role": "user", "messageId": "a", "parts": []any{map[string]any{"kind": "file", "file": map[string]any{"uri": "https://x.test/f"}}}}}}, "application/json", 200, -32005},
		{"data not an object", path, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": map[string]any{"role": "user", "messageId": "a", "parts": []any{map[string]any{"data": []any{1}}}}}}, "application/json", 200, -32005},
		{"historyLength over 10", path, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"configuration": map[string]any{"historyLength": 11}, "message": map[string]any{"role": "user", "messageId": "a", "parts": []any{map[string]any{"text": "x"}}}}}, "application/json", 200, -32602},
		{"text to a graph without messages", counter, a2aSend("message/send", "x", nil), "application/json", 200, -32602},
		{"contextId not a uuid", path, a2aSend("message/send", "x", map[string]any{"contextId": "not-a-uuid"}), "application/json", 200, -32602},
		{"unknown task", path, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": map[string]any{"id": "00000000-0000-0000-0000-000000000001:00000000-0000-0000-0000-000000000002"}}, "application/json", 200, -32001},
		{"tasks/get without id", path, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": map[string]any{}}, "application/json", 200, -32602},
		{"unknown assistant", "/a2a/00000000-0000-0000-0000-0000000000aa", a2aSend("message/send", "x", nil), "application/json", 200, -32602},
		{"send without accepting JSON", path, a2aSend("message/send", "x", nil), "text/event-stream", 400, -32600},
		{"stream without accepting SSE", path, a2aSend("message/stream", "x", nil), "application/json", 400, -32600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, m := e.rpc(tc.path, e.keyA, tc.body, tc.accept)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %v", status, tc.status, m)
			}
			if code, _ := rpcError(t, m); code != tc.code {
				t.Errorf("code %d, want %d: %v", code, tc.code, m)
			}
		})
	}
	// Data parts become the input of a graph without messages.
	_, m := e.rpc(counter, e.keyA, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": map[string]any{
		"role": "user", "messageId": "d", "parts": []any{map[string]any{"kind": "data", "data": map[string]any{"steps": 3}}}}}}, "application/json")
	task := rpcResult(t, m)
	var out map[string]any
	if err := json.Unmarshal([]byte(artifactText(t, task)), &out); err != nil || out["count"] != float64(3) {
		t.Errorf("counter by data part: %v", task)
	}
	// A failing run is a failed task.
	_, m = e.rpc("/a2a/fail", e.keyA, a2aSend("message/send", "x", nil), "application/json")
	failed := rpcResult(t, m)["status"].(map[string]any)
	if failed["state"] != "failed" || !strings.Contains(failed["message"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string), "boom") {
		t.Errorf("failed task status %v", failed)
	}
}

// sse reads a message/stream answer: each event's data, in order.
func sse(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	event := ""
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if event != "message" {
				t.Errorf("event %q, want message", event)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m); err != nil {
				t.Fatalf("data not JSON: %s", line)
			}
			out = append(out, m)
		}
	}
	return out
}

func TestA2AMessageStream(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		method                     string
		submitted, working, done   string
		taskKey, statusKey, artKey string
	}{
		{"message/stream", "submitted", "working", "completed", "", "", ""},
		{"SendStreamingMessage", "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "task", "statusUpdate", "artifactUpdate"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			r := e.do("POST", "/a2a/echo", e.keyA, a2aSend(tc.method, "streamed", nil), "Accept", "text/event-stream")
			if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d %s: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
			}
			evs := sse(t, r.Body)
			if len(evs) != 4 {
				t.Fatalf("%d events: %v", len(evs), evs)
			}
			get := func(i int, key string) map[string]any {
				res := rpcResult(t, evs[i])
				if key != "" {
					res, _ = res[key].(map[string]any)
				}
				if res == nil {
					t.Fatalf("event %d has no %q: %v", i, key, evs[i])
				}
				return res
			}
			first := get(0, tc.taskKey)
			if first["kind"] != "task" || first["status"].(map[string]any)["state"] != tc.submitted {
				t.Errorf("first event %v", first)
			}
			if w := get(1, tc.statusKey); w["status"].(map[string]any)["state"] != tc.working || w["final"] != false {
				t.Errorf("second event %v", w)
			}
			art := get(2, tc.artKey)
			if art["kind"] != "artifact-update" || art["artifact"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"] != "echo: streamed" {
				t.Errorf("artifact event %v", art)
			}
			last := get(3, tc.statusKey)
			if last["final"] != true || last["status"].(map[string]any)["state"] != tc.done || last["taskId"] != first["id"] {
				t.Errorf("final event %v", last)
			}
			for _, ev := range evs {
				if ev["id"] != "req-1" {
					t.Errorf("event id %v", ev["id"])
				}
			}
		})
	}
	// Errors before the run are one error event.
	r := e.do("POST", "/a2a/counter", e.keyA, a2aSend("message/stream", "x", nil), "Accept", "text/event-stream")
	evs := sse(t, r.Body)
	if len(evs) != 1 {
		t.Fatalf("refused stream: %v", evs)
	}
	if code, _ := rpcError(t, evs[0]); code != -32602 {
		t.Errorf("refused stream: %v", evs[0])
	}
}

func TestA2AAgentCard(t *testing.T) {
	e := newEnv(t)
	asst := e.must(200, "GET", "/assistants/echo", e.keyA, nil)["assistant_id"].(string)
	for _, p := range []string{"/a2a/" + asst, "/a2a/" + asst + "/.well-known/agent-card.json",
		"/a2a/echo/.well-known/agent.json", "/.well-known/agent-card.json?assistant_id=" + asst} {
		card := e.must(200, "GET", p, e.keyA, nil)
		if card["name"] != "echo" || card["url"] != e.url+"/a2a/"+asst {
			t.Errorf("%s: card %v", p, card)
		}
		if caps := card["capabilities"].(map[string]any); caps["streaming"] != true {
			t.Errorf("%s: capabilities %v", p, caps)
		}
		skill := card["skills"].([]any)[0].(map[string]any)
		meta := skill["metadata"].(map[string]any)["inputSchema"].(map[string]any)
		if meta["supportsA2A"] != true {
			t.Errorf("%s: skill %v", p, skill)
		}
	}
	own := e.must(200, "POST", "/assistants", e.keyA, map[string]any{"graph_id": "echo", "name": "alpha-card"})["assistant_id"].(string)
	if r := e.do("GET", "/a2a/"+own+"/.well-known/agent-card.json", e.keyB, nil); r.Status != 404 || strings.Contains(string(r.Body), "alpha-card") {
		t.Errorf("beta reads alpha's card: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/.well-known/agent-card.json", e.keyA, nil); r.Status != 422 {
		t.Errorf("card without assistant_id: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/a2a/"+asst, "", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("card without a key: %d", r.Status)
	}
}

// A task that ends on an interrupt asks for input; a message to it
// resumes the interrupt with the message's text.
func TestA2AInputRequiredAndResume(t *testing.T) {
	e := newEnv(t)
	_, m := e.rpc("/a2a/approval", e.keyA, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": map[string]any{
		"role": "user", "messageId": "q", "parts": []any{map[string]any{"kind": "data", "data": map[string]any{"request": "refund #42"}}}}}}, "application/json")
	task := rpcResult(t, m)
	if task["status"].(map[string]any)["state"] != "input-required" {
		t.Fatalf("task %v", task)
	}
	arts := task["artifacts"].([]any)
	if len(arts) != 1 || arts[0].(map[string]any)["name"] != "Interrupt" || !strings.Contains(string(mustJSONBytes(t, arts)), "refund #42") {
		t.Errorf("interrupt artifact %v", arts)
	}
	taskID := task["id"].(string)
	_, m = e.rpc("/a2a/approval", e.keyA, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": map[string]any{"id": taskID, "historyLength": 0}}, "application/json")
	got := rpcResult(t, m)
	if got["status"].(map[string]any)["state"] != "input-required" || got["history"] != nil {
		t.Errorf("tasks/get of the waiting task %v", got)
	}
	// The answer resumes the same task, on the same context.
	_, m = e.rpc("/a2a/approval", e.keyA, a2aSend("message/send", "yes", map[string]any{"taskId": taskID}), "application/json")
	done := rpcResult(t, m)
	if done["id"] != taskID || done["contextId"] != task["contextId"] || done["status"].(map[string]any)["state"] != "completed" {
		t.Fatalf("resumed task %v", done)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(artifactText(t, done)), &out); err != nil || out["answer"] != "yes" {
		t.Errorf("resumed output %v", done)
	}
}

// FuzzJSONRPC sends arbitrary bodies to the JSON-RPC endpoints: whatever
// arrives, the answer is never a 5xx, and every answer with a body is one
// JSON-RPC response (exactly one of result and error, an id member), a
// stream of them, or (no body at all) a JSON detail.
func FuzzJSONRPC(f *testing.F) {
	for i, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"echo","arguments":{"messages":[{"role":"user","content":"a"}]}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"100"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"message/send","params":{"message":{"role":"user","messageId":"m","parts":[{"kind":"text","text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"message/stream","params":{"message":{"role":"agent","messageId":"m","parts":[{"data":{"a":1}}],"contextId":"00000000-0000-0000-0000-000000000001"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"id":":","historyLength":1e400}}`,
		`{"jsonrpc":"2.0","id":6,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m","parts":[{"text":"x","file":{}}],"taskId":"a:b"},"configuration":{"historyLength":-1}}}`,
		`[]`, `null`, `{"jsonrpc":"2.0","id":{},"method":"ping"}`, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\u0000\"}",
	} {
		f.Add(uint8(i), []byte(s))
	}
	e := newEnv(f)
	paths := []string{"/mcp", "/a2a/echo", "/a2a/counter"}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		e.t = t
		path := paths[int(which)%len(paths)]
		accept := "application/json, text/event-stream"
		r := e.do("POST", path, e.keyA, body, "Accept", accept)
		switch {
		case r.Status >= 500:
			t.Fatalf("%s with %q: %d %s", path, body, r.Status, r.Body)
		case r.Status == 202:
			if len(r.Body) != 0 {
				t.Fatalf("202 with a body: %s", r.Body)
			}
		case r.Status == 422:
			if r.detail(t) == "" {
				t.Fatalf("422 without a detail: %s", r.Body)
			}
		case strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream"):
			for _, ev := range sse(t, r.Body) {
				checkRPCResponse(t, ev)
			}
		default:
			checkRPCResponse(t, r.json(t))
		}
	})
}

func checkRPCResponse(t *testing.T, m map[string]any) {
	t.Helper()
	_, hasID := m["id"]
	_, hasResult := m["result"]
	_, hasError := m["error"]
	if m["jsonrpc"] != "2.0" || !hasID || hasResult == hasError {
		t.Fatalf("not one JSON-RPC response: %v", m)
	}
}

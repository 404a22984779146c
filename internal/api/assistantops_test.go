package api_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAssistantVersionsCountSelectAndSystem: PATCH makes a new version and
// keeps the old ones; latest goes back; count and select; a graph's system
// assistant cannot be deleted; subgraphs of a graph without any are {}.
func TestAssistantVersionsCountSelectAndSystem(t *testing.T) {
	e := newEnv(t)
	a := e.must(200, "POST", "/assistants", e.keyA, map[string]any{"graph_id": "echo", "name": "one",
		"config": map[string]any{"tags": []string{"a"}}, "metadata": map[string]any{"team": "red"}})
	id := a["assistant_id"].(string)
	p := e.must(200, "PATCH", "/assistants/"+id, e.keyA, map[string]any{"name": "two", "metadata": map[string]any{"stage": "b"}})
	if p["version"] != 2.0 || p["name"] != "two" || p["metadata"].(map[string]any)["team"] != "red" || p["metadata"].(map[string]any)["stage"] != "b" ||
		p["config"].(map[string]any)["tags"] == nil || p["created_at"] != a["created_at"] {
		t.Errorf("patched: %v", p)
	}
	if r := e.do("PATCH", "/assistants/"+id, e.keyA, map[string]any{"graph_id": "counter"}); r.Status != 200 {
		t.Errorf("patch graph_id: %d %s", r.Status, r.Body)
	}
	vs := list(t, e.do("POST", "/assistants/"+id+"/versions", e.keyA, map[string]any{}))
	if len(vs) != 3 || vs[0]["version"] != 3.0 || vs[0]["graph_id"] != "counter" || vs[2]["name"] != "one" {
		t.Errorf("versions: %v", vs)
	}
	if staged := list(t, e.do("POST", "/assistants/"+id+"/versions", e.keyA, map[string]any{"metadata": map[string]any{"stage": "b"}, "limit": 1})); len(staged) != 1 || staged[0]["version"] != 3.0 {
		t.Errorf("versions with stage b, limit 1: %v", staged)
	}
	back := e.must(200, "POST", "/assistants/"+id+"/latest", e.keyA, map[string]any{"version": 1})
	if back["version"] != 1.0 || back["name"] != "one" || back["graph_id"] != "echo" {
		t.Errorf("latest 1: %v", back)
	}
	if got := e.must(200, "GET", "/assistants/"+id, e.keyA, nil); got["version"] != 1.0 {
		t.Errorf("after latest: %v", got)
	}
	// A run uses the current version: echo again.
	out := waitBody(t, e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": id,
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "v1"}}}}))
	if !strings.Contains(mustJSONText(t, out), "echo: v1") {
		t.Errorf("run on version 1: %v", out)
	}

	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		detail       string
	}{
		{"POST", "/assistants/" + id + "/latest", map[string]any{"version": 9}, 404, "version 9"},
		{"POST", "/assistants/" + id + "/latest", map[string]any{"version": 0}, 422, "version"},
		{"PATCH", "/assistants/" + id, map[string]any{"graph_id": "nope"}, 422, "graph_id"},
		{"PATCH", "/assistants/" + id, map[string]any{"config": []int{1}}, 422, "config"},
		{"POST", "/assistants/search", map[string]any{"select": []string{"assistant_id", "owner"}}, 422, "select"},
		{"DELETE", "/assistants/echo", nil, 409, "system assistant"},
		{"PATCH", "/assistants/" + id, map[string]any{"name": "x"}, 200, ""},
	} {
		r := e.do(tc.method, tc.path, e.keyA, tc.body)
		if r.Status != tc.status || (tc.detail != "" && !strings.Contains(r.detail(t), tc.detail)) {
			t.Errorf("%s %s %v: %d %s, want %d naming %q", tc.method, tc.path, tc.body, r.Status, r.Body, tc.status, tc.detail)
		}
	}
	for _, op := range []struct{ method, path string }{{"PATCH", ""}, {"POST", "/versions"}, {"POST", "/latest"}, {"GET", "/subgraphs"}} {
		if r := e.do(op.method, "/assistants/"+id+op.path, e.keyB, map[string]any{"version": 1}); r.Status != 404 {
			t.Errorf("%s %s as another organization: %d", op.method, op.path, r.Status)
		}
	}

	count := func(body any) string {
		return strings.TrimSpace(string(e.do("POST", "/assistants/count", e.keyA, body).Body))
	}
	// Four system assistants (echo, counter, approval, fail) and ours.
	if got := count(map[string]any{}); got != "5" {
		t.Errorf("count: %s", got)
	}
	if got := count(map[string]any{"metadata": map[string]any{"team": "red"}}); got != "1" {
		t.Errorf("count team red: %s", got)
	}
	if got := count(map[string]any{"graph_id": "echo"}); got != "2" {
		t.Errorf("count graph echo: %s", got)
	}
	sel := list(t, e.do("POST", "/assistants/search", e.keyA, map[string]any{"select": []string{"assistant_id", "version"}, "metadata": map[string]any{"team": "red"}}))
	if len(sel) != 1 || len(sel[0]) != 2 || sel[0]["assistant_id"] != id {
		t.Errorf("select: %v", sel)
	}
	sc := e.must(200, "GET", "/assistants/"+id+"/schemas", e.keyA, nil)
	for _, k := range []string{"config_schema", "context_schema"} {
		if m, ok := sc[k].(map[string]any); !ok || m["type"] != "object" {
			t.Errorf("%s of a graph that declares none: %v (want an object schema, present)", k, sc[k])
		}
	}
	if subs := e.must(200, "GET", "/assistants/"+id+"/subgraphs?recurse=true", e.keyA, nil); len(subs) != 0 {
		t.Errorf("subgraphs of echo: %v", subs)
	}
	e.must(204, "DELETE", "/assistants/"+id, e.keyA, nil)
	if r := e.do("POST", "/assistants/"+id+"/versions", e.keyA, map[string]any{}); r.Status != 404 {
		t.Errorf("versions of a deleted assistant: %d", r.Status)
	}
}

func mustJSONText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/assembly"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// TestStoreItems walks the store's routes as the SDKs call them: upstream's
// statuses (204 writes, 200 null for a missing item), the item's shape,
// search with a filter, namespaces, and isolation between organizations.
func TestStoreItems(t *testing.T) {
	e := newEnv(t)
	e.must(204, "PUT", "/store/items", e.keyA, map[string]any{
		"namespace": []string{"users", "u1"}, "key": "prefs", "value": map[string]any{"theme": "dark", "n": 1}})
	e.must(204, "PUT", "/store/items", e.keyA, map[string]any{
		"namespace": []string{"users", "u2"}, "key": "prefs", "value": map[string]any{"theme": "light", "n": 2}, "ttl": 5})

	got := e.must(200, "GET", "/store/items?namespace=users.u1&key=prefs", e.keyA, nil)
	if got["key"] != "prefs" || got["value"].(map[string]any)["theme"] != "dark" ||
		strings.Join(toStrings(got["namespace"]), ".") != "users.u1" || got["created_at"] == nil || got["updated_at"] == nil {
		t.Errorf("item: %v", got)
	}
	for _, who := range []string{e.keyA, e.keyB} {
		r := e.do("GET", "/store/items?namespace=users.u9&key=prefs", who, nil)
		if r.Status != 200 || string(r.Body) != "null\n" && string(r.Body) != "null" {
			t.Errorf("missing item: %d %s, want 200 null", r.Status, r.Body)
		}
	}
	if r := e.do("GET", "/store/items?namespace=users.u1&key=prefs", e.keyB, nil); string(strings.TrimSpace(string(r.Body))) != "null" {
		t.Errorf("another organization reads the item: %s", r.Body)
	}

	res := e.must(200, "POST", "/store/items/search", e.keyA, map[string]any{
		"namespace_prefix": []string{"users"}, "filter": map[string]any{"n": map[string]any{"$gte": 2}}})
	items := res["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["key"] != "prefs" ||
		strings.Join(toStrings(items[0].(map[string]any)["namespace"]), ".") != "users.u2" {
		t.Errorf("filtered search: %v", res)
	}
	if v, ok := items[0].(map[string]any)["score"]; !ok || v != nil {
		t.Errorf("search item's score: %v (present %v), want null", v, ok)
	}
	res = e.must(200, "POST", "/store/items/search", e.keyB, map[string]any{})
	if len(res["items"].([]any)) != 0 {
		t.Errorf("another organization's search: %v", res)
	}

	res = e.must(200, "POST", "/store/namespaces", e.keyA, map[string]any{"prefix": []string{"users"}, "max_depth": 2})
	ns, _ := json.Marshal(res["namespaces"])
	if string(ns) != `[["users","u1"],["users","u2"]]` {
		t.Errorf("namespaces: %s", ns)
	}

	e.must(204, "DELETE", "/store/items", e.keyB, map[string]any{"namespace": []string{"users", "u1"}, "key": "prefs"})
	e.must(200, "GET", "/store/items?namespace=users.u1&key=prefs", e.keyA, nil)
	e.must(204, "DELETE", "/store/items", e.keyA, map[string]any{"namespace": []string{"users", "u1"}, "key": "prefs"})
	if r := e.do("GET", "/store/items?namespace=users.u1&key=prefs", e.keyA, nil); strings.TrimSpace(string(r.Body)) != "null" {
		t.Errorf("deleted item: %s", r.Body)
	}
	e.must(204, "DELETE", "/store/items", e.keyA, map[string]any{"namespace": []string{"users", "u1"}, "key": "prefs"})
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestStoreInvalid: every wrong input is a 422 naming the field.
func TestStoreInvalid(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		method, path string
		body         any
		field        string
	}{
		{"PUT", "/store/items", map[string]any{"namespace": []string{"a.b"}, "key": "k", "value": map[string]any{}}, "namespace"},
		{"PUT", "/store/items", map[string]any{"namespace": []string{}, "key": "k", "value": map[string]any{}}, "namespace"},
		{"PUT", "/store/items", map[string]any{"namespace": []string{"a"}, "key": "k", "value": []int{1}}, "value"},
		{"PUT", "/store/items", map[string]any{"namespace": []string{"a"}, "value": map[string]any{}}, "key"},
		{"PUT", "/store/items", map[string]any{"namespace": []string{"a"}, "key": "k", "value": map[string]any{}, "ttl": -1}, "ttl"},
		{"PUT", "/store/items", map[string]any{"namespace": []string{"a"}, "key": "k", "value": map[string]any{}, "index": true}, "index"},
		{"PUT", "/store/items", map[string]any{"namespace": []string{"langgraph"}, "key": "k", "value": map[string]any{}}, "namespace"},
		{"POST", "/store/items/search", map[string]any{"limit": 5000}, "limit"},
		{"POST", "/store/items/search", map[string]any{"filter": map[string]any{"a": map[string]any{"$regex": "x"}}}, "filter.a"},
		{"POST", "/store/items/search", map[string]any{"namespace_prefix": []string{""}}, "namespace_prefix"},
		{"POST", "/store/namespaces", map[string]any{"max_depth": 0}, "max_depth"},
		{"POST", "/store/namespaces", map[string]any{"suffix": []string{"x.y"}}, "suffix"},
		{"DELETE", "/store/items", map[string]any{"namespace": []string{"a"}}, "key"},
		{"GET", "/store/items?namespace=a..b&key=k", nil, "namespace"},
		{"GET", "/store/items?namespace=a", nil, "key"},
		{"GET", "/store/items?namespace=a&key=k&refresh_ttl=maybe", nil, "refresh_ttl"},
	}
	for _, tc := range tests {
		r := e.do(tc.method, tc.path, e.keyA, tc.body)
		if r.Status != 422 || !strings.Contains(r.detail(t), tc.field) {
			t.Errorf("%s %s %v: %d %s, want 422 naming %s", tc.method, tc.path, tc.body, r.Status, r.Body, tc.field)
		}
	}
}

// TestStoreQuota: items count toward the organization's stored-bytes
// quota with its threads; past it a put is a 429 naming the quota.
func TestStoreQuota(t *testing.T) {
	e := newEnvWith(t, func(o *assembly.Options) { o.Limits = runs.Limits{MaxStoredBytes: 200} })
	big := strings.Repeat("x", 120)
	e.must(204, "PUT", "/store/items", e.keyA, map[string]any{"namespace": []string{"q"}, "key": "a", "value": map[string]any{"v": big}})
	r := e.do("PUT", "/store/items", e.keyA, map[string]any{"namespace": []string{"q"}, "key": "b", "value": map[string]any{"v": big}})
	if r.Status != 429 || !strings.Contains(r.detail(t), "stored bytes") {
		t.Fatalf("put past the quota: %d %s", r.Status, r.Body)
	}
	// The other organization has its own quota.
	e.must(204, "PUT", "/store/items", e.keyB, map[string]any{"namespace": []string{"q"}, "key": "b", "value": map[string]any{"v": big}})
	e.must(204, "DELETE", "/store/items", e.keyA, map[string]any{"namespace": []string{"q"}, "key": "a"})
	e.must(204, "PUT", "/store/items", e.keyA, map[string]any{"namespace": []string{"q"}, "key": "b", "value": map[string]any{"v": big}})
}

// memoryGraph is a deployed graph with long-term memory: it remembers the
// input's note under the user's namespace, reads it back, and searches
// the user's memories with a filter.
const memoryGraph = `{"graphs": {"memory": {
	"state": {"user": {}, "note": {}, "kind": {}, "got": {}, "found": {}},
	"nodes": {
		"remember": {"kind": "store", "operation": "put", "namespace": ["memories", "{{state.user}}"],
			"key": "{{state.note}}", "value": {"text": "{{state.note}}", "kind": "{{state.kind}}"}, "ttl": 60},
		"read": {"kind": "store", "operation": "get", "namespace": ["memories", "{{state.user}}"], "key": "{{state.note}}",
			"update": {"got": "{{result.value.text}}"}},
		"recall": {"kind": "store", "operation": "search", "namespace": ["memories", "{{state.user}}"],
			"filter": {"kind": "{{state.kind}}"}, "limit": 10, "update": {"found": "{{result}}"}}
	},
	"edges": [{"from": "__start__", "to": "remember"}, {"from": "remember", "to": "read"},
		{"from": "read", "to": "recall"}, {"from": "recall", "to": "__end__"}]}}}`

// TestStoreFromGraphs: a deployed graph's store nodes write and read its
// organization's store, which the API then shows (and another
// organization does not see).
func TestStoreFromGraphs(t *testing.T) {
	e := newEnv(t)
	repo := gitRepo(t, map[string]string{"langgraph.json": memoryGraph})
	e.deployReady(repoDeployment("memory", repo))
	run := func(note, kind string) map[string]any {
		return waitBody(t, e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "memory",
			"input": map[string]any{"user": "u-7", "note": note, "kind": kind}}))
	}
	run("likes tea", "pref")
	run("ordered #42", "order")
	out := run("likes jazz", "pref")
	if out["got"] != "likes jazz" {
		t.Errorf("the get node read %v, want the note just put", out["got"])
	}
	found, _ := out["found"].([]any)
	var keys []string
	for _, f := range found {
		keys = append(keys, f.(map[string]any)["key"].(string))
	}
	if strings.Join(keys, ",") != "likes jazz,likes tea" {
		t.Errorf("the search node found %v, want the two preferences, newest first", keys)
	}
	it := e.must(200, "GET", "/store/items?namespace=memories.u-7&key=ordered+%2342", e.keyA, nil)
	if it["value"].(map[string]any)["kind"] != "order" {
		t.Errorf("the API reads the graph's item as %v", it)
	}
	if r := e.do("GET", "/store/items?namespace=memories.u-7&key=ordered+%2342", e.keyB, nil); strings.TrimSpace(string(r.Body)) != "null" {
		t.Errorf("another organization reads the graph's item: %s", r.Body)
	}
	// A namespace label the store refuses fails the run, naming the rule.
	r := e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "memory",
		"input": map[string]any{"user": "a.b", "note": "x", "kind": "k"}})
	if !strings.Contains(string(r.Body), "periods") {
		t.Errorf("a run with a bad label: %d %s", r.Status, r.Body)
	}
}

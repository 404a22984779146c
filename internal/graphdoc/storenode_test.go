package graphdoc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// memStore records the store nodes' calls (a unit-test fake: the real
// store, storeapi on SQLite, is exercised by internal/api's
// TestStoreFromGraphs).
type memStore struct {
	items map[string]map[string]any
	calls []string
	fail  error
}

func (m *memStore) k(ns []string, key string) string { return strings.Join(ns, "/") + "#" + key }

func (m *memStore) GetItem(_ context.Context, ns []string, key string) (map[string]any, error) {
	m.calls = append(m.calls, "get "+m.k(ns, key))
	if v, ok := m.items[m.k(ns, key)]; ok {
		return map[string]any{"namespace": ns, "key": key, "value": v}, m.fail
	}
	return nil, m.fail
}

func (m *memStore) PutItem(_ context.Context, ns []string, key string, value map[string]any, ttl *float64, index any) error {
	call := "put " + m.k(ns, key)
	if ttl != nil {
		call += " ttl"
	}
	if index != nil {
		call += " index"
	}
	m.calls = append(m.calls, call)
	m.items[m.k(ns, key)] = value
	return m.fail
}

func (m *memStore) DeleteItem(_ context.Context, ns []string, key string) error {
	m.calls = append(m.calls, "delete "+m.k(ns, key))
	delete(m.items, m.k(ns, key))
	return m.fail
}

func (m *memStore) SearchItems(_ context.Context, prefix []string, query string, filter map[string]any, limit int) ([]map[string]any, error) {
	m.calls = append(m.calls, "search "+strings.Join(prefix, "/")+" q="+query+" kind="+asText(filter["kind"])+" limit="+asText(limit))
	var out []map[string]any
	for k, v := range m.items {
		if strings.HasPrefix(k, strings.Join(prefix, "/")) && v["kind"] == filter["kind"] {
			out = append(out, map[string]any{"key": k, "value": v})
		}
	}
	return out, m.fail
}

const storeDoc = `
state: {user: {}, note: {}, got: {}, found: {}}
nodes:
  put:
    kind: store
    operation: put
    namespace: [mem, "{{ state.user }}"]
    key: "n-{{ state.note.id }}"
    value: {text: "{{ state.note.text }}", kind: fact}
    ttl: 30
    index: [text]
  get:
    kind: store
    operation: get
    namespace: [mem, "{{ state.user }}"]
    key: "n-{{ state.note.id }}"
    update: {got: "{{ result.value.text }}"}
  search:
    kind: store
    operation: search
    namespace: [mem, "{{ state.user }}"]
    query: "about {{ state.note.text }}"
    filter: {kind: fact}
    limit: 5
    update: {found: "{{ result }}"}
  forget:
    kind: store
    operation: delete
    namespace: [mem, "{{ state.user }}"]
    key: "n-{{ state.note.id }}"
edges:
  - {from: __start__, to: put}
  - {from: put, to: get}
  - {from: get, to: search}
  - {from: search, to: forget}
  - {from: forget, to: __end__}
`

func TestStoreNode(t *testing.T) {
	st := &memStore{items: map[string]map[string]any{}}
	opts := testOptions(nil)
	opts.Store = st
	g := compileDocs(t, opts, map[string]string{"g": storeDoc})["g"]
	cp, out := run(t, g, nil, map[string]any{"user": "u1", "note": map[string]any{"id": 7, "text": "tea"}}, graph.Options{})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, []any{cp.Values["got"], cp.Values["found"]},
		`["tea", [{"key": "mem/u1#n-7", "value": {"text": "tea", "kind": "fact"}}]]`)
	jsonEqual(t, st.calls, `["put mem/u1#n-7 ttl index", "get mem/u1#n-7", "search mem/u1 q=about tea kind=fact limit=5", "delete mem/u1#n-7"]`)
	if len(st.items) != 0 {
		t.Errorf("items left after the delete node: %v", st.items)
	}

	// A store error fails the run, naming the node.
	st.fail = errors.New("namespace: label \"a.b\" contains a period")
	_, out = run(t, g, nil, map[string]any{"user": "a.b", "note": map[string]any{"id": 1, "text": "x"}}, graph.Options{})
	wantError(t, out, graph.KindValue, `node "put"`, "period")
}

func TestStoreNodeRules(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		opts func(*Options)
		want string
	}{
		{"no store configured", storeDoc, func(o *Options) { o.Store = nil }, "uses the long-term memory store, and none is configured"},
		{"put without a value", `
state: {a: {}}
nodes: {p: {kind: store, operation: put, namespace: [x], key: k}}
edges: [{from: __start__, to: p}, {from: p, to: __end__}]`, nil, "a store put needs a value"},
		{"get without a key", `
state: {a: {}}
nodes: {p: {kind: store, operation: get, namespace: [x]}}
edges: [{from: __start__, to: p}, {from: p, to: __end__}]`, nil, "a store get needs a key"},
		{"unknown operation", `
state: {a: {}}
nodes: {p: {kind: store, operation: list, namespace: [x]}}
edges: [{from: __start__, to: p}, {from: p, to: __end__}]`, nil, "/nodes/p/operation"},
		{"update to an unknown channel", `
state: {a: {}}
nodes: {p: {kind: store, operation: get, namespace: [x], key: k, update: {nope: "{{ result }}"}}}
edges: [{from: __start__, to: p}, {from: p, to: __end__}]`, nil, "nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := testOptions(nil)
			opts.Store = &memStore{items: map[string]map[string]any{}}
			if c.opts != nil {
				c.opts(&opts)
			}
			cfg, err := Load(files(map[string]string{"g": c.doc}), "stepgraph.yaml")
			if err == nil {
				_, err = cfg.Compile(opts)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want a *ValidationError containing %q", err, c.want)
			}
		})
	}
}

// A function node's "store" writes (the runtime protocol): applied in
// order with its update; refused without a store, or malformed.
func TestFunctionStoreWrites(t *testing.T) {
	answer := `{"update": {"answer": "noted"}, "store": [
		{"op": "put", "namespace": ["mem", "u1"], "key": "k1", "value": {"text": "tea"}, "ttl": 10},
		{"op": "put", "namespace": ["mem", "u1"], "key": "k2", "value": {"text": "jazz"}},
		{"op": "delete", "namespace": ["mem", "u1"], "key": "k1"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	rt := &HTTPRuntime{URL: srv.URL, Client: &http.Client{}, Backoff: time.Millisecond}
	st := &memStore{items: map[string]map[string]any{}}
	opts := testOptions(rt)
	opts.Store = st
	g := compileDocs(t, opts, map[string]string{"g": functionDoc})["g"]
	cp, out := run(t, g, nil, map[string]any{}, graph.Options{})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, cp.Values["answer"], `"noted"`)
	jsonEqual(t, st.calls, `["put mem/u1#k1 ttl", "put mem/u1#k2", "delete mem/u1#k1"]`)
	jsonEqual(t, st.items, `{"mem/u1#k2": {"text": "jazz"}}`)

	// Without a store: the node fails, saying so.
	g = compileDocs(t, testOptions(rt), map[string]string{"g": functionDoc})["g"]
	_, out = run(t, g, nil, map[string]any{}, graph.Options{})
	wantError(t, out, graph.KindValue, `node "fn"`, "long-term memory store")

	// Malformed writes are refused before anything is written.
	for bad, want := range map[string]string{
		`{"store": [{"op": "upsert", "namespace": ["a"], "key": "k"}]}`:                   "op must be put or delete",
		`{"store": [{"op": "put", "namespace": ["a"], "key": "k"}]}`:                      "a put needs a value",
		`{"store": [{"op": "delete", "namespace": [], "key": "k"}]}`:                      "namespace and key are required",
		`{"store": {"op": "delete"}}`:                                                     "must be a list",
		`{"interrupt": "q", "store": [{"op": "delete", "namespace": ["a"], "key": "k"}]}`: "holds nothing else",
	} {
		answer = bad
		st.calls = nil
		g = compileDocs(t, opts, map[string]string{"g": functionDoc})["g"]
		_, out = run(t, g, nil, map[string]any{}, graph.Options{})
		wantError(t, out, graph.KindValue, want)
		if len(st.calls) != 0 {
			t.Errorf("%s: the store was written: %v", bad, st.calls)
		}
	}
}

package graphdoc

import (
	"context"
	"strconv"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// Store is the long-term memory store a graph's store nodes reach: the
// items of the organization whose runs the graph serves (the platform's
// /store API, internal/storeapi, which applies its rules, limits and quota
// to these calls as to the API's). Items are JSON as the API answers them:
// {namespace, key, value, created_at, updated_at} (and score from a
// search).
type Store interface {
	// GetItem returns the item, nil when there is none. It refreshes the
	// item's TTL, as the API's default.
	GetItem(ctx context.Context, namespace []string, key string) (map[string]any, error)
	// PutItem stores value (a JSON object) at namespace and key; ttl is in
	// minutes (nil: the server's default); index is the API's (nil, false
	// or a list of paths).
	PutItem(ctx context.Context, namespace []string, key string, value map[string]any, ttl *float64, index any) error
	// DeleteItem removes the item (a missing one is no error).
	DeleteItem(ctx context.Context, namespace []string, key string) error
	// SearchItems is the API's search under prefix: filter on values,
	// query ranked by similarity when the server has embeddings.
	SearchItems(ctx context.Context, prefix []string, query string, filter map[string]any, limit int) ([]map[string]any, error)
}

// The store node: one operation on the store, its namespace, key, value,
// query and filter templates of the state; its result (the item for get,
// the list for search, null for put and delete) reaches the state through
// its update, under the root "result".
type storeNode struct {
	name string
	spec *nodeSpec
	st   Store
}

func (s *storeNode) run(ctx context.Context, state map[string]any, rt *graph.Runtime) (*graph.Command, error) {
	scope := map[string]any{"state": state, "context": rt.Context}
	ns := make([]string, len(s.spec.namespace))
	for i, t := range s.spec.namespace {
		ns[i] = asText(t.render(scope))
	}
	key := ""
	if s.spec.key != nil {
		key = asText(s.spec.key.render(scope))
	}
	var result any
	var err error
	switch s.spec.Operation {
	case "get":
		var it map[string]any
		it, err = s.st.GetItem(ctx, ns, key)
		if it != nil {
			result = it
		}
	case "put":
		value, ok := s.spec.value.render(scope).(map[string]any)
		if !ok {
			return nil, nodeError(s.name, graph.KindValue, "value: must render to an object")
		}
		err = s.st.PutItem(ctx, ns, key, value, s.spec.TTL, s.spec.Index)
	case "delete":
		err = s.st.DeleteItem(ctx, ns, key)
	case "search":
		query := ""
		if s.spec.queryText != nil {
			query = asText(s.spec.queryText.render(scope))
		}
		var filter map[string]any
		if s.spec.filter != nil {
			filter = renderAll(s.spec.filter, scope)
		}
		var items []map[string]any
		items, err = s.st.SearchItems(ctx, ns, query, filter, int(s.spec.Limit))
		list := make([]any, len(items))
		for i, it := range items {
			list[i] = it
		}
		result = list
	}
	if err != nil {
		return nil, nodeError(s.name, graph.KindValue, "store %s: %v", s.spec.Operation, err)
	}
	if len(s.spec.update) == 0 {
		return graph.Update(nil), nil
	}
	scope["result"] = result
	return graph.Update(renderAll(s.spec.update, scope)), nil
}

// checkStoreNode parses a store node's templates.
func (d *Document) checkStoreNode(n *nodeSpec, at string, ps *problems) {
	n.namespace = make([]tmpl, len(n.Namespace))
	for i, l := range n.Namespace {
		n.namespace[i] = parseTemplate(l, stateRoots, d.file, pointer(at, "namespace", strconv.Itoa(i)), ps)
	}
	if n.Key != nil {
		n.key = parseTemplate(n.Key, stateRoots, d.file, pointer(at, "key"), ps)
	}
	needKey := n.Operation != "search"
	if needKey && n.Key == nil {
		ps.add(d.file, at, "a store %s needs a key", n.Operation)
	}
	if n.Operation == "put" {
		if n.Value == nil {
			ps.add(d.file, at, "a store put needs a value")
		} else {
			n.value = parseTemplate(n.Value, stateRoots, d.file, pointer(at, "value"), ps)
		}
	}
	if n.Query != nil {
		n.queryText = parseTemplate(n.Query, stateRoots, d.file, pointer(at, "query"), ps)
	}
	if n.Filter != nil {
		n.filter = parseTemplates(n.Filter, stateRoots, d.file, pointer(at, "filter"), ps)
	}
	n.update = d.parseUpdate(n.Update, resultRoots, pointer(at, "update"), ps)
}

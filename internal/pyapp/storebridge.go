package pyapp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/storeapi"
)

// StoreAPI is what the bridge needs of the store API (storeapi.Service):
// the same operations, rules, limits and quota as /store.
type StoreAPI interface {
	Put(ctx context.Context, orgID string, in storeapi.PutInput) error
	Get(ctx context.Context, orgID string, in storeapi.GetInput) (*storeapi.Item, error)
	Delete(ctx context.Context, orgID string, in storeapi.DeleteInput) error
	Search(ctx context.Context, orgID string, in storeapi.SearchInput) ([]storeapi.SearchItem, error)
	Namespaces(ctx context.Context, orgID string, in storeapi.NamespacesInput) (storeapi.NamespacesOutput, error)
}

// Bounds of one batch of store operations from a graph.
const (
	maxStoreBody = 8 << 20
	maxStoreOps  = 100
)

type storeOp struct {
	Op              string          `json:"op"`
	Namespace       []string        `json:"namespace"`
	Key             *string         `json:"key"`
	RefreshTTL      *bool           `json:"refresh_ttl"`
	NamespacePrefix []string        `json:"namespace_prefix"`
	Filter          json.RawMessage `json:"filter"`
	Limit           *int            `json:"limit"`
	Offset          *int            `json:"offset"`
	Query           *string         `json:"query"`
	Value           json.RawMessage `json:"value"`
	Index           json.RawMessage `json:"index"`
	TTL             *float64        `json:"ttl"`
	Prefix          []string        `json:"prefix"`
	Suffix          []string        `json:"suffix"`
	MaxDepth        *int            `json:"max_depth"`
}

// CallRoutes serve what a run call's graph asks of the platform, for a
// call whose scope the caller has established (the loopback Bridge from
// its grant, the stage's API from a signed token): the same answers on
// both.
type CallRoutes struct {
	// Store, when set, serves the store's operations; Auth, when set,
	// token requests.
	Store StoreAPI
	Auth  Authenticator
	Log   *slog.Logger
}

// ServeStore applies a batch of store operations in the scope's
// organization.
func (b *CallRoutes) ServeStore(w http.ResponseWriter, r *http.Request, scope CallScope) {
	if b.Store == nil {
		bridgeAnswer(w, http.StatusNotFound, map[string]any{"detail": "the graphs have no store here"})
		return
	}
	orgID := scope.OrgID
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxStoreBody+1))
	if err != nil || len(raw) > maxStoreBody {
		bridgeAnswer(w, http.StatusRequestEntityTooLarge, map[string]any{"detail": "a batch of store operations is at most 8 MiB"})
		return
	}
	var body struct {
		Ops []storeOp `json:"ops"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		bridgeAnswer(w, http.StatusBadRequest, map[string]any{"detail": "ops: " + err.Error()})
		return
	}
	if len(body.Ops) > maxStoreOps {
		bridgeAnswer(w, http.StatusBadRequest, map[string]any{"detail": "ops: at most 100 operations per batch"})
		return
	}
	results := make([]any, len(body.Ops))
	for i, op := range body.Ops {
		res, err := b.apply(r.Context(), orgID, op)
		if err != nil {
			status := http.StatusBadRequest
			if k := fail.KindOf(err); k == fail.KindUnavailable || k == 0 {
				status = http.StatusServiceUnavailable
			}
			bridgeAnswer(w, status, map[string]any{"detail": fail.MessageOf(err)})
			return
		}
		results[i] = res
	}
	bridgeAnswer(w, http.StatusOK, map[string]any{"results": results})
}

func (b *CallRoutes) apply(ctx context.Context, orgID string, op storeOp) (any, error) {
	switch op.Op {
	case "get":
		if op.Key == nil {
			return nil, fail.Invalid("key", "is required")
		}
		it, err := b.Store.Get(ctx, orgID, storeapi.GetInput{Namespace: strings.Join(op.Namespace, "."), Key: *op.Key, RefreshTTL: op.RefreshTTL})
		if err != nil || it == nil {
			return nil, notFoundIsNil(err)
		}
		return it, nil
	case "search":
		items, err := b.Store.Search(ctx, orgID, storeapi.SearchInput{NamespacePrefix: op.NamespacePrefix, Filter: op.Filter,
			Limit: op.Limit, Offset: op.Offset, Query: op.Query, RefreshTTL: op.RefreshTTL})
		if items == nil {
			items = []storeapi.SearchItem{}
		}
		return items, err
	case "put":
		if len(op.Value) == 0 || string(op.Value) == "null" {
			return nil, notFoundIsNil(b.Store.Delete(ctx, orgID, storeapi.DeleteInput{Namespace: op.Namespace, Key: op.Key}))
		}
		return nil, b.Store.Put(ctx, orgID, storeapi.PutInput{Namespace: op.Namespace, Key: op.Key, Value: op.Value, Index: op.Index, TTL: op.TTL})
	case "list_namespaces":
		out, err := b.Store.Namespaces(ctx, orgID, storeapi.NamespacesInput{Prefix: op.Prefix, Suffix: op.Suffix,
			MaxDepth: op.MaxDepth, Limit: op.Limit, Offset: op.Offset})
		if out.Namespaces == nil {
			out.Namespaces = [][]string{}
		}
		return out.Namespaces, err
	}
	return nil, fail.Invalid("op", "must be get, search, put or list_namespaces")
}

// notFoundIsNil: a missing item is LangGraph's None, not a failure.
func notFoundIsNil(err error) error {
	if fail.KindOf(err) == fail.KindNotFound {
		return nil
	}
	return err
}

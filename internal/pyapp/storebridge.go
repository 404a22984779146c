package pyapp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

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

// StoreBridge serves the graphs' store operations on 127.0.0.1: each run
// call gets a token (Grant) that binds its operations to the run's
// organization, valid until the call ends.
type StoreBridge struct {
	API StoreAPI

	mu     sync.Mutex
	grants map[string]string // token → organization
	url    string
	srv    *http.Server
}

// StartStoreBridge listens on a free port of 127.0.0.1.
func StartStoreBridge(api StoreAPI) (*StoreBridge, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &StoreBridge{API: api, grants: map[string]string{}, url: "http://" + ln.Addr().String() + "/store"}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

// Close stops serving.
func (b *StoreBridge) Close() error { return b.srv.Close() }

// Grant returns the link of one call to orgID's store and its release.
func (b *StoreBridge) Grant(orgID string) (StoreLink, func()) {
	raw := make([]byte, 24)
	_, _ = rand.Read(raw)
	tok := hex.EncodeToString(raw)
	b.mu.Lock()
	b.grants[tok] = orgID
	b.mu.Unlock()
	return StoreLink{URL: b.url, Token: tok}, func() {
		b.mu.Lock()
		delete(b.grants, tok)
		b.mu.Unlock()
	}
}

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

func (b *StoreBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/store" {
		storeAnswer(w, http.StatusNotFound, map[string]any{"detail": "not found"})
		return
	}
	b.mu.Lock()
	orgID, ok := b.grants[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	b.mu.Unlock()
	if !ok {
		storeAnswer(w, http.StatusUnauthorized, map[string]any{"detail": "no such store grant (the run's call has ended)"})
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxStoreBody+1))
	if err != nil || len(raw) > maxStoreBody {
		storeAnswer(w, http.StatusRequestEntityTooLarge, map[string]any{"detail": "a batch of store operations is at most 8 MiB"})
		return
	}
	var body struct {
		Ops []storeOp `json:"ops"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		storeAnswer(w, http.StatusBadRequest, map[string]any{"detail": "ops: " + err.Error()})
		return
	}
	if len(body.Ops) > maxStoreOps {
		storeAnswer(w, http.StatusBadRequest, map[string]any{"detail": "ops: at most 100 operations per batch"})
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
			storeAnswer(w, status, map[string]any{"detail": fail.MessageOf(err)})
			return
		}
		results[i] = res
	}
	storeAnswer(w, http.StatusOK, map[string]any{"results": results})
}

func (b *StoreBridge) apply(ctx context.Context, orgID string, op storeOp) (any, error) {
	switch op.Op {
	case "get":
		if op.Key == nil {
			return nil, fail.Invalid("key", "is required")
		}
		it, err := b.API.Get(ctx, orgID, storeapi.GetInput{Namespace: strings.Join(op.Namespace, "."), Key: *op.Key, RefreshTTL: op.RefreshTTL})
		if err != nil || it == nil {
			return nil, notFoundIsNil(err)
		}
		return it, nil
	case "search":
		items, err := b.API.Search(ctx, orgID, storeapi.SearchInput{NamespacePrefix: op.NamespacePrefix, Filter: op.Filter,
			Limit: op.Limit, Offset: op.Offset, Query: op.Query, RefreshTTL: op.RefreshTTL})
		if items == nil {
			items = []storeapi.SearchItem{}
		}
		return items, err
	case "put":
		if len(op.Value) == 0 || string(op.Value) == "null" {
			return nil, notFoundIsNil(b.API.Delete(ctx, orgID, storeapi.DeleteInput{Namespace: op.Namespace, Key: op.Key}))
		}
		return nil, b.API.Put(ctx, orgID, storeapi.PutInput{Namespace: op.Namespace, Key: op.Key, Value: op.Value, Index: op.Index, TTL: op.TTL})
	case "list_namespaces":
		out, err := b.API.Namespaces(ctx, orgID, storeapi.NamespacesInput{Prefix: op.Prefix, Suffix: op.Suffix,
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

func storeAnswer(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

package pyapp

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Bridge serves, on 127.0.0.1, what the graphs of LangGraph apps ask of the
// platform while a run call lasts: their store operations (/store, to the
// store API) and their users' provider tokens (/auth/token, agent auth).
// Each run call gets one grant (Grant): a token binding both routes to the
// run's organization, assistant and user, valid until the call ends.
type Bridge struct {
	// Store, when set, serves /store; Auth, when set, /auth/token.
	Store StoreAPI
	Auth  Authenticator
	Log   *slog.Logger

	mu     sync.Mutex
	grants map[string]*grant // by token
	base   string
	srv    *http.Server
}

// StartBridge listens on a free port of 127.0.0.1; store and auth may be nil
// (the graphs then have no store, or no tokens).
func StartBridge(store StoreAPI, auth Authenticator, log *slog.Logger) (*Bridge, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	b := &Bridge{Store: store, Auth: auth, Log: log, grants: map[string]*grant{}, base: "http://" + ln.Addr().String()}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

// Close stops serving.
func (b *Bridge) Close() error { return b.srv.Close() }

// CallScope is what one run call's grant is bound to.
type CallScope struct {
	OrgID string
	// AssistantID is the run's assistant: the agent a token is scoped to
	// unless the graph asks for the unscoped one.
	AssistantID string
	// UserID is the run's user (RunUser); "" when the run names none.
	UserID string
}

// grant is one run call's access to the bridge.
type grant struct {
	scope CallScope
	// tokenRequests counts /auth/token calls under the grant (bounded).
	tokenRequests int
}

// CallLinks are the links of one run call: nil where the bridge does not
// serve the route.
type CallLinks struct {
	Store, Auth *Link
}

// Grant returns the links of one call bound to scope, and their release.
func (b *Bridge) Grant(scope CallScope) (CallLinks, func()) {
	raw := make([]byte, 24)
	_, _ = rand.Read(raw)
	tok := hex.EncodeToString(raw)
	b.mu.Lock()
	b.grants[tok] = &grant{scope: scope}
	b.mu.Unlock()
	var links CallLinks
	if b.Store != nil {
		links.Store = &Link{URL: b.base + "/store", Token: tok}
	}
	if b.Auth != nil {
		links.Auth = &Link{URL: b.base + "/auth/token", Token: tok}
	}
	return links, func() {
		b.mu.Lock()
		delete(b.grants, tok)
		b.mu.Unlock()
	}
}

func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := map[string]func(http.ResponseWriter, *http.Request, *grant){"/store": b.serveStore, "/auth/token": b.serveToken}[r.URL.Path]
	if r.Method != http.MethodPost || route == nil {
		bridgeAnswer(w, http.StatusNotFound, map[string]any{"detail": "not found"})
		return
	}
	b.mu.Lock()
	g := b.grants[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	b.mu.Unlock()
	if g == nil {
		bridgeAnswer(w, http.StatusUnauthorized, map[string]any{"detail": "no such grant (the run's call has ended)"})
		return
	}
	route(w, r, g)
}

func bridgeAnswer(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

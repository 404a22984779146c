package pyapp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
)

// Granter hands out the links of one run call (CallLinks) bound to its
// scope, and their release when the call ends: the loopback Bridge (an
// in-memory grant) or StageLinks (a signed token for the stage's API, on
// AWS).
type Granter interface {
	Grant(ctx context.Context, scope CallScope) (CallLinks, func(), error)
}

// Bridge serves, on 127.0.0.1, what the graphs of LangGraph apps ask of the
// platform while a run call lasts: their store operations (/store, to the
// store API) and their users' provider tokens (/auth/token, agent auth).
// Each run call gets one grant (Grant): a token binding both routes to the
// run's organization, assistant and user, valid until the call ends.
type Bridge struct {
	// CallRoutes serve the routes: /store when Store is set, /auth/token
	// when Auth is.
	CallRoutes

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
	b := &Bridge{CallRoutes: CallRoutes{Store: store, Auth: auth, Log: log}, grants: map[string]*grant{}, base: "http://" + ln.Addr().String()}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

// Close stops serving.
func (b *Bridge) Close() error { return b.srv.Close() }

// CallScope is what one run call's grant is bound to.
type CallScope struct {
	OrgID string
	RunID string
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
	// Events (the stage's, for a runtime on Lambda) is where the runtime
	// posts the call's events as it runs; Mailbox where they are read.
	Events  *Link
	Mailbox Mailbox
}

var (
	_ Granter = (*Bridge)(nil)
	_ Granter = (*StageLinks)(nil)
)

// Grant implements Granter: the links of one call bound to scope, and
// their release.
func (b *Bridge) Grant(_ context.Context, scope CallScope) (CallLinks, func(), error) {
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
	}, nil
}

func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || (r.URL.Path != "/store" && r.URL.Path != "/auth/token") {
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
	if r.URL.Path == "/store" {
		b.ServeStore(w, r, g.scope)
		return
	}
	b.ServeToken(w, r, g.scope, func() error { return b.countTokenRequest(g) })
}

// countTokenRequest counts a token request under g, refusing those over
// the bound.
func (b *Bridge) countTokenRequest(g *grant) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	g.tokenRequests++
	if g.tokenRequests > MaxTokenRequests {
		return fail.Quota("auth: at most %d token requests per run call", MaxTokenRequests)
	}
	return nil
}

func bridgeAnswer(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

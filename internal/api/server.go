package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/agentauth"
	"github.com/stepgraph/stepgraph/internal/api/docs"
	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/console"
	"github.com/stepgraph/stepgraph/internal/cors"
	"github.com/stepgraph/stepgraph/internal/crons"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/graphdoc"
	"github.com/stepgraph/stepgraph/internal/interop"
	"github.com/stepgraph/stepgraph/internal/providers"
	"github.com/stepgraph/stepgraph/internal/reqid"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/storeapi"
)

// DefaultMaxBodyBytes bounds request bodies when Config.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 10 << 20

// Config wires the server to its use cases. Logger defaults to slog.Default().
type Config struct {
	Logger      *slog.Logger
	Keys        *auth.Keys
	Providers   *providers.Service
	Deployments *deployments.Service
	Runs        *runs.Service
	Crons       *crons.Service
	// AgentAuth serves /v2/auth/authenticate, wait, callback and tokens;
	// nil answers them 404.
	AgentAuth *agentauth.Service
	// Store is the long-term memory store (the /store routes).
	Store *storeapi.Service
	// AppCalls serves /runtime/store and /runtime/auth/token, LangGraph
	// apps' graphs calling back during a run call with its signed token;
	// nil answers them 404.
	AppCalls    *AppCalls
	Idempotency store.Idempotency
	// RequestHashKey is the organization's server-held key of the
	// idempotency records' request hashes; required with Idempotency.
	RequestHashKey func(ctx context.Context, orgID string) ([]byte, error)
	MaxBodyBytes   int64
	// RateLimit limits requests per API key (429 with Retry-After); nil or
	// a zero Rate means no limit.
	RateLimit *auth.Limiter
	// KeepAlive is the newline interval of runs/wait and join
	// (DefaultKeepAlive when 0).
	KeepAlive time.Duration
	// StreamHeartbeat is the heartbeat interval of run and thread streams
	// (DefaultStreamHeartbeat when 0).
	StreamHeartbeat time.Duration
	Version         string
	// CORS, when not nil, lets the browser origins it lists call the API
	// (internal/cors): their preflights are answered here, 204 or 403, and
	// their answers carry the CORS headers. nil: no cross-origin access.
	CORS *cors.Policy
	// Operations, when not nil, are the only operations served, by route
	// key "METHOD /path" of openapi.yaml: an AWS function serves only the
	// routes API Gateway gives it, so its IAM grants can be those routes'
	// needs (internal/lambdaapp). Any other request is answered as an
	// unknown route would be (405 with Allow when the path has operations,
	// else 404) and reaches no use case. nil serves every operation.
	Operations []string
}

// Server is the HTTP handler of the whole API.
type Server struct {
	cfg  Config
	log  *slog.Logger
	spec *spec
	mux  *http.ServeMux
	// all has every operation's pattern, served here or not: unrouted
	// answers from it, so a path this server does not serve still gets
	// the API's 405 and Allow.
	all     *http.ServeMux
	docs    http.Handler
	console http.Handler
	// interop serves MCP and A2A over Config.Runs (interop.go).
	interop *interop.Service
	// httpMetrics counts each organization's requests (GET /metrics).
	httpMetrics *httpMetrics
}

// handlerFunc is what an operation's handler looks like: it gets the
// validated request and answers with a value to encode or an error.
type handlerFunc func(w http.ResponseWriter, r *request) error

// New builds the server from the embedded OpenAPI document. It fails when an
// operation of the document has no handler or a handler no operation, so the
// document and the code cannot drift.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Idempotency != nil && cfg.RequestHashKey == nil {
		return nil, errors.New("api: Config.RequestHashKey is required with Config.Idempotency")
	}
	if cfg.CORS != nil {
		for _, o := range cfg.CORS.Origins {
			if err := cors.CheckOrigin(o); err != nil {
				return nil, fmt.Errorf("api: %w", err)
			}
		}
	}
	var only map[string]bool
	if cfg.Operations != nil {
		only = map[string]bool{}
		for _, key := range cfg.Operations {
			only[key] = true
		}
	}
	sp, err := loadSpec(maps.Clone(only))
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, spec: sp, mux: http.NewServeMux(), all: http.NewServeMux(),
		httpMetrics: newHTTPMetrics()}
	// The protocols hold no state of their own: built here, over the runs
	// service, so every root that serves the API serves them alike.
	s.interop = interop.New(cfg.Runs, cfg.Version, cfg.Logger)
	// The docs page and the console are built at their first request, not
	// here: on Lambda, New runs in every function's cold start, and only
	// the system function serves them (review #19).
	s.docs = lazyHandler(func() (http.Handler, error) { return docs.Handler(sp.JSON, "/openapi.json") })
	s.console = lazyHandler(func() (http.Handler, error) { return console.New() })
	handlers := s.handlers()
	maps.Copy(handlers, s.cronHandlers())
	for _, op := range sp.Operations {
		h, ok := handlers[op.ID]
		if !ok {
			return nil, fmt.Errorf("operation %s (%s %s) has no handler", op.ID, op.Method, op.Path)
		}
		delete(handlers, op.ID)
		key := op.Method + " " + op.Path
		// "/" (the console's page) is a prefix pattern to ServeMux: "/{$}"
		// is that path alone, so unknown paths still get the API's 404.
		pattern := key
		if op.Path == "/" {
			pattern = op.Method + " /{$}"
		}
		s.all.Handle(pattern, http.NotFoundHandler())
		if only == nil || only[key] {
			s.mux.Handle(pattern, s.endpoint(op, h))
			delete(only, key)
		}
	}
	for id := range handlers {
		return nil, fmt.Errorf("handler %s has no operation in openapi.yaml", id)
	}
	for key := range only {
		return nil, fmt.Errorf("operation %q of Config.Operations is not in openapi.yaml", key)
	}
	return s, nil
}

// handlers binds every operationId of openapi.yaml to its handler; each
// handler lives in the file of its resource (system.go, providers.go,
// deployments.go, assistants.go, threads.go, runs.go, stream.go).
func (s *Server) handlers() map[string]handlerFunc {
	return map[string]handlerFunc{
		"ok":        s.ok,
		"info":      s.info,
		"openapi":   s.openapi,
		"docs":      s.docsPage,
		"docsAsset": s.docsPage,
		// The web console (internal/console): its page and assets.
		"console":      s.consolePage,
		"consoleAsset": s.consolePage,

		"runtimeStore":  s.runtimeStore,
		"runtimeToken":  s.runtimeToken,
		"runtimeEvents": s.runtimeEvents,

		"getGraphSchema":       s.graphSchema(graphdoc.DocumentSchema),
		"getGraphConfigSchema": s.graphSchema(graphdoc.ConfigSchema),

		"listProviders":  s.listProviders,
		"createProvider": s.idempotent(s.createProvider),
		"getProvider":    s.getProvider,
		"updateProvider": s.updateProvider,
		"deleteProvider": s.deleteProvider,

		"authenticate": s.authenticate,
		"waitAuth":     s.waitAuth,
		"authCallback": s.authCallback,
		"tokenExists":  s.tokenExists,
		"revokeTokens": s.revokeTokens,

		"authCallbackFinalize": s.authCallbackFinalize,
		"listTokens":           s.listTokens,
		"deleteToken":          s.deleteToken,

		"listDeployments":       s.listDeployments,
		"createDeployment":      s.idempotent(s.createDeployment),
		"getDeployment":         s.getDeployment,
		"updateDeployment":      s.updateDeployment,
		"deleteDeployment":      s.deleteDeployment,
		"listRevisions":         s.listRevisions,
		"createRevision":        s.createRevision,
		"getRevision":           s.getRevision,
		"redeployRevision":      s.redeployRevision,
		"getBuildLogs":          s.deploymentLogs("build"),
		"getDeployLogs":         s.deploymentLogs("deploy"),
		"getRevisionDeployLogs": s.deploymentLogs("deploy"),

		"createAssistant":     s.createAssistant,
		"searchAssistants":    s.searchAssistants,
		"getAssistant":        s.getAssistant,
		"deleteAssistant":     s.deleteAssistant,
		"getAssistantGraph":   s.getAssistantGraph,
		"getAssistantSchemas": s.getAssistantSchemas,

		"countAssistants":                s.countAssistants,
		"patchAssistant":                 s.patchAssistant,
		"getAssistantVersions":           s.getAssistantVersions,
		"setLatestAssistantVersion":      s.setLatestAssistantVersion,
		"getAssistantSubgraphs":          s.getAssistantSubgraphs,
		"getAssistantSubgraphsNamespace": s.getAssistantSubgraphs,

		"createThread":     s.createThread,
		"searchThreads":    s.searchThreads,
		"getThread":        s.getThread,
		"patchThread":      s.patchThread,
		"deleteThread":     s.deleteThread,
		"getThreadState":   s.getThreadState,
		"getThreadStateAt": s.getThreadStateAt,
		"getThreadHistory": s.getThreadHistory,
		// Upstream's GET form of the history, its query string.
		"getThreadHistoryGet": s.getThreadHistoryGet,
		"getThreadStorage":    s.getThreadStorage,

		"countThreads":      s.countThreads,
		"pruneThreads":      s.pruneThreads,
		"copyThread":        s.copyThread,
		"updateThreadState": s.updateThreadState,
		"patchThreadState":  s.patchThreadState,
		"postThreadStateAt": s.postThreadStateAt,

		"listRuns":           s.listRuns,
		"createRun":          s.createRun,
		"waitRun":            s.waitRun,
		"getRun":             s.getRun,
		"deleteRun":          s.deleteRun,
		"joinRun":            s.joinRun,
		"cancelRun":          s.cancelRun,
		"createStatelessRun": s.createStatelessRun,
		"waitStatelessRun":   s.waitStatelessRun,
		"createRunBatch":     s.createRunBatch,
		"cancelRuns":         s.cancelRuns,

		// Streams (stream.go) keep the upstream operationIds.
		"stream_run_threads__thread_id__runs_stream_post":            s.streamRun,
		"stream_run_stateless_runs_stream_post":                      s.streamStatelessRun,
		"stream_run_http_threads__thread_id__runs__run_id__join_get": s.joinRunStream,
		"join_thread_stream_threads__thread_id__stream_get":          s.joinThreadStream,
		// The thread event protocol (stream.go), with upstream's operationIds.
		"protocol_thread_command_post": s.threadCommand,
		"protocol_thread_events_post":  s.threadEvents,

		// The long-term memory store (store.go).
		"putStoreItem":        s.putStoreItem,
		"getStoreItem":        s.getStoreItem,
		"deleteStoreItem":     s.deleteStoreItem,
		"searchStoreItems":    s.searchStoreItems,
		"listStoreNamespaces": s.listStoreNamespaces,

		// MCP and A2A (interop.go) keep the upstream operationIds.
		"post_mcp":                  s.postMCP,
		"post_a2a":                  s.postA2A,
		"get_a2a":                   s.agentCard,
		"get_a2a_agent_card":        s.agentCard,
		"get_a2a_agent_card_legacy": s.agentCard,
		"get_well_known_agent_card": s.rootAgentCard,

		// Upstream's system metrics, the caller organization's (metrics.go).
		"system_metrics_metrics_get": s.metrics,

		// MCP's GET and DELETE (interop.go).
		"get_mcp":    s.getMCP,
		"delete_mcp": s.deleteMCP,

		// The JS SDK's client["~ui"].getComponent (system.go).
		"handle_ui": s.uiComponent,
	}
}

// ServeHTTP adds a request id, logs the request, recovers panics and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := uuid.NewString()
	rec := &statusRecorder{ResponseWriter: w}
	rec.Header().Set("X-Request-Id", id)
	ctx := context.WithValue(reqid.With(r.Context(), id), requestIDKey{}, id)
	ctx = context.WithValue(ctx, orgKey{}, &orgSlot{})
	r = r.WithContext(ctx)
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in handler", "request_id", id, "method", r.Method, "path", r.URL.Path,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if !rec.wrote {
				writeDetail(rec, http.StatusInternalServerError, "internal error (request id "+id+")")
			}
		}
		took := time.Since(start)
		s.log.Info("request", "request_id", id, "method", r.Method, "path", r.URL.Path,
			"status", rec.status, "duration_ms", took.Milliseconds(), "org_id", orgFrom(r.Context()))
		if slot, ok := r.Context().Value(orgKey{}).(*orgSlot); ok {
			s.httpMetrics.record(slot.id, r.Method, slot.route, rec.status, took)
		}
	}()
	// Before routing: a preflight is answered for any path (OPTIONS is no
	// operation's method), and every answer, errors included, carries the
	// headers a browser needs to read it.
	if preflight, allowed := s.cfg.CORS.Apply(rec.Header(), r); preflight {
		if !allowed {
			writeDetail(rec, http.StatusForbidden, "this origin is not allowed to call this API (CORS)")
			return
		}
		rec.WriteHeader(http.StatusNoContent)
		return
	}
	if r.URL.Path == "/mcp/" {
		// Upstream's document names the MCP endpoint /mcp/ (its server and
		// the MCP clients use /mcp): both reach it. (Not a second path of
		// the document: API Gateway's HTTP APIs refuse a route path that
		// ends in "/", so AWS could not route it.)
		r.URL.Path = "/mcp"
	}
	if r.URL.Path != path.Clean(r.URL.Path) {
		// ServeMux would answer a redirect to the clean path (HTML, and a
		// different resource than the one named): no route has such a path.
		writeDetail(rec, http.StatusNotFound, "no route for "+r.URL.Path)
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.unrouted(rec, r)
		return
	}
	s.mux.ServeHTTP(rec, r)
}

// unrouted answers requests no served operation matches: 405 when the path
// exists with another method, else 404, both as JSON. A request for an
// operation of the document that this server does not serve
// (Config.Operations) gets 404 too.
func (s *Server) unrouted(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		probe := r.Clone(r.Context())
		probe.Method = m
		// A pattern matched only by reading a word as an id is no
		// resource of this path (see plausibleIDs).
		if _, pattern := s.all.Handler(probe); pattern != "" && plausibleIDs(pattern, r.URL.Path) {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 || slices.Contains(allow, r.Method) {
		writeDetail(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
		return
	}
	for _, m := range allow {
		w.Header().Add("Allow", m)
	}
	writeDetail(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path)
}

// uuidParams are the path parameters whose values are always UUIDs.
var uuidParams = map[string]bool{"{thread_id}": true, "{run_id}": true, "{cron_id}": true}

// plausibleIDs reports whether the path's values for pattern's UUID
// parameters are UUIDs: POST /threads/count matches GET /threads/{thread_id}
// only by reading "count" as an id, and is an unknown route (404), not a
// known resource asked with the wrong method (405).
func plausibleIDs(pattern, urlPath string) bool {
	_, pat, _ := strings.Cut(pattern, " ")
	want, got := strings.Split(pat, "/"), strings.Split(urlPath, "/")
	for i, seg := range want {
		if uuidParams[seg] && i < len(got) {
			if _, err := uuid.Parse(got[i]); err != nil {
				return false
			}
		}
	}
	return true
}

// endpoint is the per-operation pipeline: authenticate, validate, handle.
func (s *Server) endpoint(op operation, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		r := &request{Request: hr, op: op}
		if !op.Public {
			orgID, err := s.cfg.Keys.Authenticate(hr.Context(), hr.Header.Get("X-Api-Key"))
			if err != nil {
				s.fail(w, r, err)
				return
			}
			r.orgID = orgID
			setOrg(hr.Context(), orgID)
			if slot, ok := hr.Context().Value(orgKey{}).(*orgSlot); ok {
				slot.route = op.Path
			}
			if ok, wait := s.cfg.RateLimit.Allow(auth.Hash(hr.Header.Get("X-Api-Key"))); !ok {
				secs := int(math.Ceil(wait.Seconds()))
				w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
				writeDetail(w, http.StatusTooManyRequests, "rate limit of this API key exceeded; retry after "+strconv.Itoa(max(secs, 1))+" s")
				return
			}
		}
		if err := r.readAndValidate(w, s.cfg.MaxBodyBytes); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := h(w, r); err != nil {
			s.fail(w, r, err)
		}
	})
}

// lazyHandler builds a handler at its first request (once, whatever the
// concurrency). A build that fails answers 500 every time, naming what
// failed; the embedded documents it builds from are tested to build
// (TestLazyPagesBuild).
func lazyHandler(build func() (http.Handler, error)) http.Handler {
	var once sync.Once
	var h http.Handler
	var err error
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { h, err = build() })
		if err != nil {
			writeDetail(w, http.StatusInternalServerError, "page unavailable: "+err.Error())
			return
		}
		h.ServeHTTP(w, r)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if !s.wrote {
		s.status, s.wrote = http.StatusOK, true
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

type requestIDKey struct{}

// orgSlot lets the auth step report the organization to the access log,
// which holds the outer context.
type orgSlot struct {
	id string
	// route is the operation's path template (the request metrics').
	route string
}
type orgKey struct{}

func setOrg(ctx context.Context, id string) {
	if slot, ok := ctx.Value(orgKey{}).(*orgSlot); ok {
		slot.id = id
	}
}

func orgFrom(ctx context.Context) string {
	if slot, ok := ctx.Value(orgKey{}).(*orgSlot); ok {
		return slot.id
	}
	return ""
}

package deployedgraphs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/graphdoc"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/secrets"
)

// Source is where deployed graphs come from; *deployments.Service
// implements it.
type Source interface {
	ServedGraphs(ctx context.Context, orgID string) (map[string]deployments.ServedGraph, error)
	RevisionGraphs(ctx context.Context, orgID, deploymentID, revisionID string) (deployments.RevisionGraphs, error)
}

// Assistants makes the default assistant of a published graph;
// *runs.Service implements it.
type Assistants interface {
	EnsureDeployedAssistant(ctx context.Context, orgID, graphID, description string) error
}

// Apps serves the graphs of revisions that are LangGraph apps;
// *pyapp.Apps implements it.
type Apps interface {
	// Graph is graphID of the revision's app, its runtime started when it
	// is not running (env: the revision's secrets).
	Graph(ctx context.Context, rg deployments.RevisionGraphs, env map[string]string, graphID string) (runs.DeployedGraph, error)
	// Activate tells that rg is its deployment's active revision: the
	// runtimes of its other revisions stop.
	Activate(ctx context.Context, rg deployments.RevisionGraphs) error
}

// AppChecker is Apps that check, while a revision deploys, that its app
// loads and serves its graphs where it runs (pyapp.LambdaApps: its
// function's health call). reason says why the revision fails.
type AppChecker interface {
	CheckApp(ctx context.Context, rg deployments.RevisionGraphs, env map[string]string) (reason string, err error)
}

// DefaultCacheSize is how many compiled revisions a Host keeps by default.
const DefaultCacheSize = 256

// Host serves deployed graphs. Source, Secrets and HTTPClient are required.
type Host struct {
	Source  Source
	Secrets secrets.Store
	// Store gives a deployment's graphs the long-term memory store of its
	// organization (store nodes); nil: documents with store nodes do not
	// compile.
	Store func(orgID string) graphdoc.Store
	// Assistants makes default assistants on Publish; nil makes none (they
	// are then made when a graph is first resolved by name).
	Assistants Assistants
	// Builtins lists the built-in graph ids, which no deployment may use
	// (runs.Service.Graphs.Names).
	Builtins func() []string
	// HTTPClient makes every outbound call of the graphs: model endpoints,
	// tools, http nodes and the runtime. Pass weburl.GuardedClient.
	HTTPClient *http.Client
	// AllowLoopbackHTTP accepts http:// URLs on loopback hosts in documents
	// (local development; the guarded client must then allow private
	// addresses too, or the calls are refused).
	AllowLoopbackHTTP bool
	// Lambda reaches the runtimes that are Lambda functions (RuntimeFor),
	// answers bounded by maxBytes: the composition root passes
	// lambdaruntime.Runtimes. Nil on a server without AWS: a deployment
	// whose runtime is a Lambda function then fails to deploy, saying so.
	Lambda func(functionARN string, maxBytes int64) graphdoc.Runtime
	// Runtime, when set, replaces RuntimeFor's choice of transport (tests).
	Runtime func(url string) graphdoc.Runtime
	// CacheSize bounds the compiled revisions kept (DefaultCacheSize when 0).
	CacheSize int
	// MaxSubgraphDepth refuses, when they are deployed, graphs whose
	// subgraphs nest deeper than their runs may (runs.Limits); 0: no bound.
	MaxSubgraphDepth int
	// Tokens gives the graphs of an organization's deployments its users'
	// provider tokens (agent auth); nil: documents asking for one do not
	// compile.
	Tokens func(orgID string) graphdoc.Tokens
	// Apps serves the revisions that are LangGraph apps (internal/pyapp);
	// nil: they are not served here.
	Apps Apps
	// ExternalApps serves the LangGraph apps of external_docker deployments
	// (RevisionGraphs.ExternalApp): the app answers at the revision's
	// runtime URL (pyapp.RuntimeApps). nil: they are not served here.
	ExternalApps Apps

	mu    sync.Mutex
	cache map[cacheKey]*compiled
	order []cacheKey // least recently used first
}

var (
	_ runs.DeployedGraphs        = (*Host)(nil)
	_ deployments.GraphPublisher = (*Host)(nil)
)

// cacheKey: a revision's documents and secrets never change; the runtime
// URL does (custom_url changes in place).
type cacheKey struct {
	revisionID string
	runtimeURL string
}

// compiled is a revision's graphs, compiled.
type compiled struct {
	config *graphdoc.Config
	graphs map[string]*graph.Graph
}

// Current implements runs.DeployedGraphs.
func (h *Host) Current(ctx context.Context, orgID, graphID string) (runs.DeployedGraph, error) {
	served, err := h.Source.ServedGraphs(ctx, orgID)
	if err != nil {
		return runs.DeployedGraph{}, err
	}
	sg, ok := served[graphID]
	if !ok {
		return runs.DeployedGraph{}, fail.NotFound("no deployment serves graph %q", graphID)
	}
	return h.At(ctx, orgID, graphID, runs.GraphRevision{DeploymentID: sg.DeploymentID, RevisionID: sg.RevisionID})
}

// At implements runs.DeployedGraphs.
func (h *Host) At(ctx context.Context, orgID, graphID string, rev runs.GraphRevision) (runs.DeployedGraph, error) {
	rg, err := h.Source.RevisionGraphs(ctx, orgID, rev.DeploymentID, rev.RevisionID)
	if err != nil {
		return runs.DeployedGraph{}, err
	}
	if rg.App {
		return h.appGraph(ctx, rg, graphID)
	}
	c, err := h.compile(ctx, rg)
	var ve *graphdoc.ValidationError
	var ue *UnreachableRuntimeError
	if errors.As(err, &ve) || errors.As(err, &ue) {
		return runs.DeployedGraph{}, fail.BadRequest("the graphs of revision %s cannot be served: %v", rev.RevisionID, err)
	}
	if err != nil {
		return runs.DeployedGraph{}, err
	}
	g, ok := c.graphs[graphID]
	doc, _ := c.config.Document(graphID)
	if !ok || doc == nil {
		return runs.DeployedGraph{}, fail.NotFound("revision %s of deployment %s has no graph %q", rev.RevisionID, rev.DeploymentID, graphID)
	}
	dg := runs.DeployedGraph{Graph: g, Revision: rev, InputSchema: doc.InputSchema()}
	if dg.InputSchema != nil {
		dg.CheckInput = func(input any) error { return inputError(doc.CheckInput(input)) }
	}
	return dg, nil
}

// Names implements runs.DeployedGraphs.
func (h *Host) Names(ctx context.Context, orgID string) ([]string, error) {
	served, err := h.Source.ServedGraphs(ctx, orgID)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(served))
	for id := range served {
		names = append(names, id)
	}
	slices.Sort(names)
	return names, nil
}

// Check implements deployments.GraphPublisher: no graph id of a built-in
// graph, and every document compiles as it will be served.
func (h *Host) Check(ctx context.Context, rg deployments.RevisionGraphs) (string, error) {
	if rg.App {
		if reason := h.checkBuiltins(rg.GraphIDs); reason != "" {
			return reason, nil
		}
		if rg.ExternalApp && h.ExternalApps == nil {
			return "the deployment's runtime is a LangGraph app, and this server does not serve LangGraph apps at a runtime URL", nil
		}
		if c, ok := h.appsFor(rg).(AppChecker); ok && rg.RuntimeURL != "" {
			values, err := h.secretValues(ctx, rg.SecretRefs)
			if err != nil {
				return "", err
			}
			return c.CheckApp(ctx, rg, values)
		}
		return "", nil
	}
	cfg, err := rg.Config()
	var ve *graphdoc.ValidationError
	switch {
	case errors.As(err, &ve):
		return ve.Error(), nil
	case err != nil:
		return "", err
	}
	if reason := h.checkBuiltins(cfg.Graphs()); reason != "" {
		return reason, nil
	}
	if _, err := h.compile(ctx, rg); err != nil {
		var ue *UnreachableRuntimeError
		if errors.As(err, &ue) {
			return ue.Error(), nil
		}
		if !errors.As(err, &ve) {
			return "", err
		}
		reason := ve.Error()
		if rg.RuntimeURL == "" && strings.Contains(reason, "runs in the deployment's runtime") {
			reason += "\n" + noRuntimeHint
		}
		return reason, nil
	}
	return "", nil
}

// checkBuiltins: no graph id of a built-in graph.
func (h *Host) checkBuiltins(ids []string) string {
	var taken []string
	if h.Builtins != nil {
		builtins := h.Builtins()
		for _, id := range ids {
			if slices.Contains(builtins, id) {
				taken = append(taken, fmt.Sprintf("graph %q is the name of a built-in graph (built-in graphs: %s): choose another graph id",
					id, strings.Join(builtins, ", ")))
			}
		}
	}
	return strings.Join(taken, "\n")
}

// appGraph is a graph of a LangGraph app's revision.
func (h *Host) appGraph(ctx context.Context, rg deployments.RevisionGraphs, graphID string) (runs.DeployedGraph, error) {
	apps := h.appsFor(rg)
	if apps == nil {
		return runs.DeployedGraph{}, fail.BadRequest("revision %s is a LangGraph app, and this server does not run LangGraph apps", rg.RevisionID)
	}
	if !slices.Contains(rg.GraphIDs, graphID) {
		return runs.DeployedGraph{}, fail.NotFound("revision %s of deployment %s has no graph %q", rg.RevisionID, rg.DeploymentID, graphID)
	}
	values, err := h.secretValues(ctx, rg.SecretRefs)
	if err != nil {
		return runs.DeployedGraph{}, err
	}
	return apps.Graph(ctx, rg, values, graphID)
}

// appsFor is what serves the app of rg: ExternalApps for an
// external_docker deployment's runtime, Apps for a hosted_repo app.
func (h *Host) appsFor(rg deployments.RevisionGraphs) Apps {
	if rg.ExternalApp {
		return h.ExternalApps
	}
	return h.Apps
}

// noRuntimeHint follows the problems of function nodes and tools in a
// deployment without a runtime.
const noRuntimeHint = "function nodes and function tools run in the deployment's runtime: " +
	"set source_config.custom_url to the URL where it answers, or to its Lambda function's ARN (docs/runtime-protocol.md)"

// Publish implements deployments.GraphPublisher: each graph of the revision
// gets its default assistant.
func (h *Host) Publish(ctx context.Context, rg deployments.RevisionGraphs) error {
	if rg.App {
		if apps := h.appsFor(rg); apps != nil {
			if err := apps.Activate(ctx, rg); err != nil {
				return err
			}
		}
		for _, id := range rg.GraphIDs {
			if h.Assistants != nil {
				if err := h.Assistants.EnsureDeployedAssistant(ctx, rg.OrgID, id, ""); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if h.Assistants == nil {
		return nil
	}
	c, err := h.compile(ctx, rg)
	if err != nil {
		return fmt.Errorf("publish revision %s: %w", rg.RevisionID, err)
	}
	for _, id := range c.config.Graphs() {
		if err := h.Assistants.EnsureDeployedAssistant(ctx, rg.OrgID, id, c.graphs[id].Description()); err != nil {
			return err
		}
	}
	return nil
}

// compile returns the revision's graphs compiled for serving, from the
// cache when they are there. A *graphdoc.ValidationError says why they
// cannot be served; another error is passing (the secrets store failed).
func (h *Host) compile(ctx context.Context, rg deployments.RevisionGraphs) (*compiled, error) {
	key := cacheKey{revisionID: rg.RevisionID, runtimeURL: rg.RuntimeURL}
	if c := h.cached(key); c != nil {
		return c, nil
	}
	cfg, err := rg.Config()
	if err != nil {
		return nil, err
	}
	values, err := h.secretValues(ctx, rg.SecretRefs)
	if err != nil {
		return nil, err
	}
	opts := graphdoc.Options{Secrets: values, HTTPClient: h.HTTPClient, AllowLoopbackHTTP: h.AllowLoopbackHTTP,
		MaxSubgraphDepth: h.MaxSubgraphDepth}
	if h.Tokens != nil {
		opts.Tokens = h.Tokens(rg.OrgID)
	}
	if h.Store != nil {
		opts.Store = h.Store(rg.OrgID)
	}
	if rg.RuntimeURL != "" {
		if opts.Runtime, err = h.RuntimeFor(rg.RuntimeURL, 0); err != nil {
			return nil, err
		}
		if sc, ok := opts.Runtime.(SecretsCarrier); ok && rg.RuntimeSecrets {
			opts.Runtime = sc.WithSecrets(values)
		}
	}
	graphs, err := cfg.Compile(opts)
	if err != nil {
		return nil, err
	}
	c := &compiled{config: cfg, graphs: graphs}
	h.keep(key, c)
	return c, nil
}

// secretValues reads the revision's secret values. A value that is gone is
// left out: a document naming it does not compile, saying so.
func (h *Host) secretValues(ctx context.Context, refs map[string]string) (graphdoc.SecretMap, error) {
	values := graphdoc.SecretMap{}
	for name, ref := range refs {
		v, err := h.Secrets.Get(ctx, ref)
		if errors.Is(err, secrets.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read secret %s of the deployment: %w", name, err)
		}
		values[name] = string(v)
	}
	return values, nil
}

// RuntimeFor returns the transport to the runtime at url (a deployment's
// runtime URL: its custom_url, or the Lambda function the platform made
// from its image_uri). It is the one place the transport is chosen, for
// function nodes, function tools and describe alike:
//
//   - a Lambda function ARN (graphdoc.IsLambdaFunctionARN): Lambda Invoke,
//     the runtime Lambda makes (on AWS, lambdaruntime.Runtime) — an
//     *UnreachableRuntimeError on a Host without one;
//   - anything else: HTTP, a graphdoc.HTTPRuntime over HTTPClient.
//
// maxBytes bounds an answer (0: the transport's default).
func (h *Host) RuntimeFor(url string, maxBytes int64) (graphdoc.Runtime, error) {
	if h.Runtime != nil {
		return h.Runtime(url), nil
	}
	if graphdoc.IsLambdaFunctionARN(url) {
		if h.Lambda == nil {
			return nil, &UnreachableRuntimeError{URL: url, Reason: "is a Lambda function, and this server has no Lambda client: " +
				"only stepgraph's AWS deployment invokes Lambda function runtimes; give the http(s) URL where the runtime answers"}
		}
		return h.Lambda(url, maxBytes), nil
	}
	return &graphdoc.HTTPRuntime{URL: url, Client: h.HTTPClient, MaxResponseBytes: maxBytes}, nil
}

// SecretsCarrier is a runtime transport that can hand the revision's secret
// values to the runtime with each call (lambdaruntime.Runtime: the Lambda
// payload's "secrets"). A runtime the platform made from an image_uri
// (RevisionGraphs.RuntimeSecrets) gets them so, and holds them nowhere
// else; an HTTP runtime or a deployment's own runtime never does.
type SecretsCarrier interface {
	WithSecrets(values map[string]string) graphdoc.Runtime
}

// UnreachableRuntimeError: a deployment's runtime is of a kind this server
// cannot call. A revision that needs it fails with its message.
type UnreachableRuntimeError struct {
	URL    string
	Reason string
}

func (e *UnreachableRuntimeError) Error() string {
	return fmt.Sprintf("the deployment's runtime %s %s", e.URL, e.Reason)
}

// DescribeRuntime implements deployments.GraphPublisher: the describe call
// of the runtime at url, over the transport RuntimeFor chooses.
func (h *Host) DescribeRuntime(ctx context.Context, url string, maxBytes int64) ([]byte, error) {
	rt, err := h.RuntimeFor(url, maxBytes)
	if err != nil {
		return nil, err
	}
	raw, err := rt.Describe(ctx)
	if err == nil && maxBytes > 0 && int64(len(raw)) > maxBytes {
		return nil, fmt.Errorf("the answer is larger than %d bytes", maxBytes)
	}
	return raw, err
}

func (h *Host) cached(key cacheKey) *compiled {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.cache[key]
	if ok {
		h.touch(key)
	}
	return c
}

func (h *Host) keep(key cacheKey, c *compiled) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cache == nil {
		h.cache = map[cacheKey]*compiled{}
	}
	if _, ok := h.cache[key]; ok {
		h.touch(key)
		return // compiled twice at once: keep the first
	}
	h.cache[key] = c
	h.order = append(h.order, key)
	limit := h.CacheSize
	if limit <= 0 {
		limit = DefaultCacheSize
	}
	for len(h.order) > limit {
		delete(h.cache, h.order[0])
		h.order = h.order[1:]
	}
}

// touch moves key to the most recently used end.
func (h *Host) touch(key cacheKey) {
	if i := slices.Index(h.order, key); i >= 0 {
		h.order = append(slices.Delete(h.order, i, i+1), key)
	}
}

// inputError turns the input's schema problems into a fail.Invalid naming
// each field: "input.messages: must have at least 1 items".
func inputError(err error) error {
	var ve *graphdoc.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var c fail.Checks
	for _, p := range ve.Problems {
		c.Add(true, fieldName(p.Path), "%s", p.Rule)
	}
	return c.Err()
}

// fieldName writes a JSON Pointer into the input as a field name:
// "/messages/0/content" → "input.messages[0].content".
func fieldName(pointer string) string {
	var b strings.Builder
	b.WriteString("input")
	if pointer == "" {
		return b.String()
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if tok != "" && strings.Trim(tok, "0123456789") == "" {
			b.WriteString("[" + tok + "]")
			continue
		}
		b.WriteString("." + tok)
	}
	return b.String()
}

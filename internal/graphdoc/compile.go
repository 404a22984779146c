package graphdoc

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// Secrets resolves a deployment's secrets by name. Values are used only
// where a document names them (a chat_model's api_key_secret) and never
// appear in an error, a log line or the state.
type Secrets interface {
	Lookup(name string) (value string, ok bool)
}

// SecretMap is Secrets held in a map.
type SecretMap map[string]string

// Lookup implements Secrets.
func (m SecretMap) Lookup(name string) (string, bool) {
	v, ok := m[name]
	return v, ok
}

// Options are what compiled graphs need from the deployment and the
// platform.
type Options struct {
	// Secrets are the deployment's secrets. A document naming a secret
	// that is not there does not compile.
	Secrets Secrets
	// Runtime runs function nodes and function tools. Without one, a
	// document that has any does not compile.
	Runtime Runtime
	// HTTPClient makes every outbound call of http, chat_model and tools
	// nodes. Pass the platform's guarded client (its dialer refuses
	// internal addresses); without one, a document with such nodes does
	// not compile.
	HTTPClient *http.Client
	// AllowLoopbackHTTP accepts http:// URLs on loopback hosts in
	// documents (local development and tests); otherwise every URL a
	// document names must be https.
	AllowLoopbackHTTP bool
	// Store is the long-term memory store of the organization the graphs
	// serve (store nodes). Without one, a document that has any does not
	// compile.
	Store Store
	// MaxSubgraphDepth refuses graphs whose subgraphs nest deeper (0: no
	// bound): the platform's graph.Limits.MaxSubgraphDepth, so a graph its
	// runs could never finish is refused when it is deployed.
	MaxSubgraphDepth int
	// Tokens gives http and tools nodes with `auth` a provider token of
	// the run's user; without it such a document does not compile.
	Tokens Tokens
}

// Compile builds the config's graphs with the engine, keyed by graph id;
// each graph's name is its id. Rules that depend on the deployment (its
// secrets, its runtime, the URLs allowed) are checked first, and every
// problem is reported as a *ValidationError naming file, path and rule.
func (c *Config) Compile(opts Options) (map[string]*graph.Graph, error) {
	var ps problems
	for _, id := range c.Graphs() {
		c.graphs[id].checkDeployment(opts, &ps)
	}
	if opts.MaxSubgraphDepth > 0 {
		c.checkNesting(opts.MaxSubgraphDepth, &ps)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	out := map[string]*graph.Graph{}
	for _, id := range c.Graphs() {
		c.build(id, opts, out, &ps)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkDeployment applies the rules that depend on opts.
func (d *Document) checkDeployment(opts Options, ps *problems) {
	checkURL := func(raw, at string) {
		if err := weburl.Check("url", raw, opts.AllowLoopbackHTTP); err != nil {
			ps.add(d.file, at, "%s", strings.TrimPrefix(err.Error(), "url: "))
		}
	}
	outbound := func(at string) {
		if opts.HTTPClient == nil {
			ps.add(d.file, at, "makes outbound calls, and no HTTP client is configured (graphdoc.Options.HTTPClient)")
		}
	}
	needsRuntime := func(at string) {
		if opts.Runtime == nil {
			ps.add(d.file, at, "runs in the deployment's runtime, and this deployment has none")
		}
	}
	for _, name := range sortedKeys(d.spec.Tools) {
		t, at := d.spec.Tools[name], pointer(d.base, "tools", name)
		if t.Kind == "function" {
			needsRuntime(at)
			continue
		}
		outbound(at)
		checkURL(t.URL, pointer(at, "url"))
	}
	for _, name := range sortedKeys(d.spec.Nodes) {
		n, at := d.spec.Nodes[name], pointer(d.base, "nodes", name)
		switch n.Kind {
		case "chat_model":
			outbound(at)
			checkURL(n.BaseURL, pointer(at, "base_url"))
			if n.APIKeySecret != "" && !hasSecret(opts.Secrets, n.APIKeySecret) {
				ps.add(d.file, pointer(at, "api_key_secret"), "the deployment has no secret %q", n.APIKeySecret)
			}
		case "http":
			outbound(at)
			checkURL(n.URL, pointer(at, "url"))
		case "function":
			needsRuntime(at)
		case "store":
			if opts.Store == nil {
				ps.add(d.file, at, "uses the long-term memory store, and none is configured (graphdoc.Options.Store)")
			}
		}
		if n.Auth != nil && opts.Tokens == nil {
			ps.add(d.file, pointer(at, "auth"), "asks for a token of provider %q, and agent auth is not available on this server", n.Auth.Provider)
		}
	}
}

func hasSecret(s Secrets, name string) bool {
	if s == nil {
		return false
	}
	_, ok := s.Lookup(name)
	return ok
}

// build compiles graph id into out, its subgraphs first (the config has no
// cycles).
func (c *Config) build(id string, opts Options, out map[string]*graph.Graph, ps *problems) *graph.Graph {
	if g, ok := out[id]; ok {
		return g
	}
	d := c.graphs[id]
	b := graph.NewBuilder(id).Describe(d.spec.Description)
	for _, name := range sortedKeys(d.spec.State) {
		ch := d.spec.State[name]
		schema, _ := ch.Schema.(map[string]any)
		b.AddChannel(name, graph.Channel{Reducer: graph.Reducer(ch.Reducer), Default: ch.Default, Schema: schema})
	}
	for _, name := range sortedKeys(d.spec.Nodes) {
		n := d.spec.Nodes[name]
		var child *graph.Graph
		if n.Kind == "subgraph" {
			if child = c.build(n.Graph, opts, out, ps); child == nil {
				return nil
			}
		}
		b.AddNode(name, d.nodeFunc(id, name, n, child, opts))
		if child != nil {
			b.MarkSubgraph(name, child)
		}
	}
	for _, e := range d.spec.Edges {
		switch {
		case e.targets != nil:
			for _, to := range e.targets {
				b.AddEdge(e.From, to)
			}
		case e.When == "tool_calls":
			els := cmp.Or(e.Else, graph.End)
			b.AddConditionalEdges(e.From, toolCallsRouter(e.messages, e.Then, els), e.Then, els)
		default:
			b.AddConditionalEdges(e.From, switchRouter(e), e.switchTargets()...)
		}
	}
	g, err := b.Compile()
	if err != nil { // the checks should have caught it
		ps.add(d.file, d.base, "%v", err)
		return nil
	}
	out[id] = g
	return g
}

// nodeFunc makes the engine's node for a document's node.
func (d *Document) nodeFunc(graphID, name string, n *nodeSpec, child *graph.Graph, opts Options) graph.NodeFunc {
	switch n.Kind {
	case "chat_model":
		key := ""
		if n.APIKeySecret != "" {
			key, _ = opts.Secrets.Lookup(n.APIKeySecret)
		}
		return newChatModel(name, n, d.spec.Tools, key, opts.HTTPClient).run
	case "tools":
		tools := d.spec.Tools
		if len(n.Tools) > 0 {
			tools = map[string]*toolSpec{}
			for _, t := range n.Tools {
				tools[t] = d.spec.Tools[t]
			}
		}
		return (&toolsNode{graphID: graphID, node: name, messages: n.messagesChannel, tools: tools,
			client: opts.HTTPClient, runtime: opts.Runtime, auth: n.Auth, tokens: opts.Tokens}).run
	case "http":
		h := newHTTPNode(name, n, opts.HTTPClient)
		h.tokens = opts.Tokens
		return h.run
	case "transform":
		return transformNode(n)
	case "interrupt":
		return interruptNode(n)
	case "subgraph":
		return subgraphNode(name, n, child, sortedKeys(d.spec.State))
	case "store":
		return (&storeNode{name: name, spec: n, st: opts.Store}).run
	case "function":
		return (&functionNode{graphID: graphID, node: name, timeout: seconds(n.Timeout, 60), runtime: opts.Runtime, store: opts.Store,
			channels: sortedKeys(d.spec.State), nodes: sortedKeys(d.spec.Nodes), auth: n.Auth, tokens: opts.Tokens}).run
	}
	panic(fmt.Sprintf("graphdoc: node kind %q passed the schema", n.Kind)) // the schema's enum lists every kind
}

// toolCallsRouter goes to then when the last message has tool calls, else
// to els.
func toolCallsRouter(messages, then, els string) graph.Router {
	return func(state map[string]any) ([]string, error) {
		if len(toolCalls(lastMessage(state, messages))) > 0 {
			return []string{then}, nil
		}
		return []string{els}, nil
	}
}

// switchRouter goes to the case named by the value at the edge's path (a
// string as it is, a number or boolean as its JSON text), or else to the
// default. No match and no default fails the run.
func switchRouter(e *edgeSpec) graph.Router {
	return func(state map[string]any) ([]string, error) {
		v := e.field.render(map[string]any{"state": state})
		switch v.(type) {
		case nil, map[string]any, []any:
		default:
			if target, ok := e.Cases[asText(v)]; ok {
				return []string{target}, nil
			}
		}
		if e.Default != "" {
			return []string{e.Default}, nil
		}
		return nil, graph.Errorf(graph.KindValue, "the edge from %q: %s is %s, which matches none of its cases %v and it has no default",
			e.From, e.field, describeValue(v), sortedKeys(e.Cases))
	}
}

func (e *edgeSpec) switchTargets() []string {
	targets := make([]string, 0, len(e.Cases)+1)
	for _, t := range e.Cases {
		targets = append(targets, t)
	}
	if e.Default != "" {
		targets = append(targets, e.Default)
	}
	return targets
}

func describeValue(v any) string {
	switch v.(type) {
	case nil:
		return "null or absent"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%q", asText(v))
}

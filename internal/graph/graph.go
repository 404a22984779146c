package graph

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// The virtual nodes every graph has: Start writes the run's input, End is
// where finished paths go.
const (
	Start = "__start__"
	End   = "__end__"
)

// NodeFunc is a node's code. It gets its own copy of the state, and returns
// the writes and routing it wants (nil: none) or an error; an *Error chooses
// the kind callers see. Nodes of one step run concurrently.
type NodeFunc func(ctx context.Context, state map[string]any, rt *Runtime) (*Command, error)

// Router chooses where a conditional edge goes: node names or End. It sees
// the state as its own node left it (the step's other writes not yet merged).
type Router func(state map[string]any) ([]string, error)

// Graph is a compiled, immutable graph definition; it is safe for concurrent
// use by any number of runs.
type Graph struct {
	name        string
	description string
	channels    map[string]Channel
	nodes       map[string]NodeFunc
	edges       map[string][]string // static targets by source, sorted
	branches    map[string][]branch
	// subgraphs are the graphs that nodes run as subgraphs, by node (for
	// drawing and schemas: the node functions run them).
	subgraphs map[string]*Graph
}

type branch struct {
	route   Router
	targets []string // declared targets; empty means any node
}

// Name is the graph's registry name (its graph_id).
func (g *Graph) Name() string { return g.name }

// Description says what the graph does.
func (g *Graph) Description() string { return g.description }

// Nodes lists the graph's nodes, sorted.
func (g *Graph) Nodes() []string { return sortedKeys(g.nodes) }

// Channels lists the graph's state keys, sorted.
func (g *Graph) Channels() []string { return sortedKeys(g.channels) }

// Subgraphs returns the graphs that nodes run as subgraphs, by node name
// (see Builder.MarkSubgraph).
func (g *Graph) Subgraphs() map[string]*Graph { return maps.Clone(g.subgraphs) }

// MarkSubgraph records that node (added with AddNode) runs child as a
// subgraph: LangGraph's get_subgraphs lists it.
func (b *Builder) MarkSubgraph(node string, child *Graph) *Builder {
	if b.g.subgraphs == nil {
		b.g.subgraphs = map[string]*Graph{}
	}
	b.g.subgraphs[node] = child
	return b
}

// Builder assembles a Graph; errors are collected and reported by Compile.
type Builder struct {
	g    *Graph
	errs []error
}

// NewBuilder starts a graph called name.
func NewBuilder(name string) *Builder {
	return &Builder{g: &Graph{
		name:     name,
		channels: map[string]Channel{},
		nodes:    map[string]NodeFunc{},
		edges:    map[string][]string{},
		branches: map[string][]branch{},
	}}
}

func (b *Builder) fail(format string, args ...any) *Builder {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
	return b
}

// Describe sets the graph's description.
func (b *Builder) Describe(text string) *Builder {
	b.g.description = text
	return b
}

// AddChannel declares a state key.
func (b *Builder) AddChannel(name string, c Channel) *Builder {
	if err := checkName(name); err != nil {
		return b.fail("channel %q: %v", name, err)
	}
	if _, dup := b.g.channels[name]; dup {
		return b.fail("channel %q is declared twice", name)
	}
	def, err := checkDefault(c)
	if err != nil {
		return b.fail("channel %q: %v", name, err)
	}
	c.Default = def
	b.g.channels[name] = c
	return b
}

// checkDefault normalizes a channel's default and checks that its reducer
// can start from it.
func checkDefault(c Channel) (any, error) {
	switch c.reducer() {
	case LastValue, Append, Add, Messages:
	default:
		return nil, fmt.Errorf("unknown reducer %q", c.Reducer)
	}
	if c.Default == nil {
		return nil, nil
	}
	def, err := normalize(c.Default)
	if err != nil {
		return nil, fmt.Errorf("default is not JSON: %v", err)
	}
	if c.reducer() == LastValue {
		return def, nil
	}
	// Reducing no writes only checks that the reducer accepts the value.
	if _, err := c.reduce("default", def, true, nil); err != nil {
		return nil, fmt.Errorf("default does not suit reducer %s: %v", c.reducer(), err)
	}
	return def, nil
}

// AddNode adds a node.
func (b *Builder) AddNode(name string, fn NodeFunc) *Builder {
	if err := checkName(name); err != nil {
		return b.fail("node %q: %v", name, err)
	}
	if _, dup := b.g.nodes[name]; dup {
		return b.fail("node %q is added twice", name)
	}
	if fn == nil {
		return b.fail("node %q has no function", name)
	}
	b.g.nodes[name] = fn
	return b
}

// AddEdge makes to run in the step after from.
func (b *Builder) AddEdge(from, to string) *Builder {
	b.g.edges[from] = append(b.g.edges[from], to)
	return b
}

// AddConditionalEdges makes route choose the nodes that run after from.
// targets declares where it may go (for the drawing, and checked at run
// time); none means any node or End.
func (b *Builder) AddConditionalEdges(from string, route Router, targets ...string) *Builder {
	if route == nil {
		return b.fail("conditional edges from %q have no router", from)
	}
	b.g.branches[from] = append(b.g.branches[from], branch{route: route, targets: targets})
	return b
}

// Compile checks the definition and returns the graph.
func (b *Builder) Compile() (*Graph, error) {
	g := b.g
	errs := append([]error(nil), b.errs...)
	if g.name == "" {
		errs = append(errs, errors.New("the graph has no name"))
	}
	if len(g.nodes) == 0 {
		errs = append(errs, errors.New("the graph has no nodes"))
	}
	if len(g.edges[Start]) == 0 && len(g.branches[Start]) == 0 {
		errs = append(errs, errors.New("nothing follows __start__: add an edge from graph.Start"))
	}
	errs = append(errs, g.checkEdges()...)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("graph %q: %w", g.name, err)
	}
	return g.frozen(), nil
}

// frozen copies the definition, so later calls on the Builder cannot change
// a compiled graph that runs may be using.
func (g *Graph) frozen() *Graph {
	out := &Graph{
		name:        g.name,
		description: g.description,
		channels:    maps.Clone(g.channels),
		nodes:       maps.Clone(g.nodes),
		subgraphs:   maps.Clone(g.subgraphs),
		edges:       map[string][]string{},
		branches:    map[string][]branch{},
	}
	for from, targets := range g.edges {
		out.edges[from] = uniqueSorted(targets)
	}
	for from, bs := range g.branches {
		out.branches[from] = slices.Clone(bs)
	}
	return out
}

// MustCompile is Compile for definitions known to be valid (the built-ins).
func (b *Builder) MustCompile() *Graph {
	g, err := b.Compile()
	if err != nil {
		panic(err)
	}
	return g
}

func (g *Graph) checkEdges() []error {
	var errs []error
	for from, targets := range g.edges {
		errs = append(errs, g.checkEdge("edge", from, targets)...)
	}
	for from, bs := range g.branches {
		for _, br := range bs {
			errs = append(errs, g.checkEdge("conditional edge", from, br.targets)...)
		}
	}
	return errs
}

func (g *Graph) checkEdge(what, from string, targets []string) []error {
	var errs []error
	if _, ok := g.nodes[from]; !ok && from != Start {
		errs = append(errs, fmt.Errorf("%s from unknown node %q", what, from))
	}
	for _, to := range targets {
		if _, ok := g.nodes[to]; !ok && to != End {
			errs = append(errs, fmt.Errorf("%s from %q to unknown node %q", what, from, to))
		}
	}
	return errs
}

// checkName rejects empty names and the "__" prefix, which is reserved for
// the engine's own names (__start__, __end__, __interrupt__, __error__).
func checkName(name string) error {
	if name == "" {
		return errors.New("the name is empty")
	}
	if strings.HasPrefix(name, "__") {
		return errors.New(`names starting with "__" are reserved`)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func uniqueSorted(names []string) []string {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	return sortedKeys(set)
}

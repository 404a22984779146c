package graph

// Info describes a graph for the assistants API: the drawing
// (GET /assistants/{id}/graph, LangGraph's {nodes, edges} shape) and the
// state's JSON Schema (GET /assistants/{id}/schemas).
type Info struct {
	Name        string         `json:"graph_id"`
	Description string         `json:"description,omitempty"`
	Nodes       []NodeInfo     `json:"nodes"`
	Edges       []EdgeInfo     `json:"edges"`
	StateSchema map[string]any `json:"state_schema"`
}

// NodeInfo is a node of the drawing; __start__ and __end__ have type
// "schema", the graph's nodes "runnable".
type NodeInfo struct {
	ID   string `json:"id"`
	Type string `json:"type,omitempty"`
	Data any    `json:"data,omitempty"`
	// Metadata is a LangGraph app's node metadata as LangChain draws it
	// (e.g. a ToolNode's "__tools"); the engine's nodes have none.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// EdgeInfo is an edge of the drawing; a conditional edge is one a router may
// take.
type EdgeInfo struct {
	Source      string `json:"source"`
	Target      string `json:"target"`
	Conditional bool   `json:"conditional,omitempty"`
}

// Info describes the graph.
func (g *Graph) Info() Info {
	edges, usesEnd := g.drawEdges()
	nodes := []NodeInfo{{ID: Start, Type: "schema", Data: Start}}
	for _, n := range g.Nodes() {
		nodes = append(nodes, NodeInfo{ID: n, Type: "runnable", Data: map[string]any{"name": n}})
	}
	if usesEnd {
		nodes = append(nodes, NodeInfo{ID: End, Type: "schema", Data: End})
	}
	return Info{Name: g.name, Description: g.description, Nodes: nodes, Edges: edges, StateSchema: g.StateSchema()}
}

// drawEdges lists static then conditional edges, by source; a router that
// declared no targets is drawn to every node and End.
func (g *Graph) drawEdges() ([]EdgeInfo, bool) {
	edges := []EdgeInfo{}
	usesEnd := false
	add := func(from, to string, conditional bool) {
		edges = append(edges, EdgeInfo{Source: from, Target: to, Conditional: conditional})
		usesEnd = usesEnd || to == End
	}
	sources := append([]string{Start}, g.Nodes()...)
	for _, from := range sources {
		for _, to := range g.edges[from] {
			add(from, to, false)
		}
		for _, to := range g.branchTargets(from) {
			add(from, to, true)
		}
	}
	return edges, usesEnd
}

func (g *Graph) branchTargets(from string) []string {
	var targets []string
	for _, br := range g.branches[from] {
		if len(br.targets) == 0 {
			targets = append(targets, append(g.Nodes(), End)...)
		}
		targets = append(targets, br.targets...)
	}
	return uniqueSorted(targets)
}

// StateSchema is the JSON Schema of the graph's state (every key optional,
// as input may set any subset).
func (g *Graph) StateSchema() map[string]any {
	props := map[string]any{}
	for name, c := range g.channels {
		props[name] = c.schema()
	}
	return map[string]any{
		"title":      g.name,
		"type":       "object",
		"properties": props,
	}
}

package graph

import (
	"fmt"
	"sync"
)

// Registry finds graphs by name (an assistant's graph_id). It always holds
// the built-in graphs; deployments add theirs. Safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	graphs map[string]*Graph
}

// NewRegistry returns a registry holding the built-in graphs.
func NewRegistry() *Registry {
	r := &Registry{graphs: map[string]*Graph{}}
	for _, g := range Builtins() {
		r.graphs[g.Name()] = g
	}
	return r
}

// Register adds g; a name can be registered once, so a deployment can never
// shadow a built-in or another deployment's graph.
func (r *Registry) Register(g *Graph) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.graphs[g.Name()]; dup {
		return fmt.Errorf("graph %q is already registered", g.Name())
	}
	r.graphs[g.Name()] = g
	return nil
}

// Get returns the graph called name.
func (r *Registry) Get(name string) (*Graph, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	g, ok := r.graphs[name]
	return g, ok
}

// Names lists the registered graphs, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.graphs)
}

package graph

import "slices"

// emptyCheckpoint is the state of a thread that never ran: defaults only.
// Its step is -2 so the input checkpoint that follows is step -1, as in
// LangGraph.
func (g *Graph) emptyCheckpoint() Checkpoint {
	values := map[string]any{}
	for name, c := range g.channels {
		if c.Default != nil {
			values[name] = cloneValue(c.Default)
		}
	}
	return Checkpoint{
		V:        FormatVersion,
		Values:   values,
		Next:     []string{},
		Tasks:    []Task{},
		Metadata: Metadata{Source: SourceInput, Step: -2, Parents: map[string]any{}},
	}
}

// stateOf is the state a node or router sees: a private copy of the values,
// with defaults for channels the checkpoint predates.
func (g *Graph) stateOf(values map[string]any) map[string]any {
	state := cloneMap(values)
	if state == nil {
		state = map[string]any{}
	}
	for name, c := range g.channels {
		if _, ok := state[name]; !ok && c.Default != nil {
			state[name] = cloneValue(c.Default)
		}
	}
	return state
}

// checkWrites normalizes writes and rejects unknown keys, and writes
// larger than maxBytes of JSON (0: no bound; what names them in the
// error). The size is measured before normalizing, which encodes them.
func (g *Graph) checkWrites(ws Writes, maxBytes int, what string) (Writes, *Error) {
	if maxBytes > 0 {
		if size := writesSize(ws, maxBytes); size > maxBytes {
			return nil, stateSizeError(what, size, maxBytes)
		}
	}
	out := make(Writes, len(ws))
	for i, w := range ws {
		if _, ok := g.channels[w.Key]; !ok {
			return nil, invalidUpdate("Invalid update for channel '%s': the state has no such key (keys: %v)", w.Key, g.Channels())
		}
		v, err := normalize(w.Value)
		if err != nil {
			return nil, invalidUpdate("Invalid update for channel '%s': the value is not JSON: %v", w.Key, err)
		}
		out[i] = Write{Key: w.Key, Value: v}
	}
	return out, nil
}

// applyWrites merges writes (already in merge order) into values, channel by
// channel through the reducers. values is modified in place.
func (g *Graph) applyWrites(values map[string]any, ws Writes) *Error {
	byKey := map[string][]any{}
	for _, w := range ws {
		byKey[w.Key] = append(byKey[w.Key], w.Value)
	}
	for _, key := range sortedKeys(byKey) {
		c := g.channels[key]
		cur, has := values[key]
		if !has && c.Default != nil {
			cur, has = cloneValue(c.Default), true
		}
		v, err := c.reduce(key, cur, has, byKey[key])
		if err != nil {
			return asError(err)
		}
		values[key] = v
	}
	return nil
}

// successors lists the nodes that run after node: its edges, its routers'
// choices on state (the node's own view after its writes) and gotos; End is
// dropped. The result is sorted and unique.
func (g *Graph) successors(node string, state map[string]any, gotos []string) ([]string, *Error) {
	next := append([]string{}, g.edges[node]...)
	for _, br := range g.branches[node] {
		chosen, err := br.route(g.stateOf(state))
		if err != nil {
			return nil, asError(err)
		}
		if e := br.check(node, chosen); e != nil {
			return nil, e
		}
		next = append(next, chosen...)
	}
	next = append(next, gotos...)
	out := []string{}
	for _, n := range uniqueSorted(next) {
		if n == End {
			continue
		}
		if _, ok := g.nodes[n]; !ok {
			return nil, invalidUpdate("node %q sends control to unknown node %q", node, n)
		}
		out = append(out, n)
	}
	return out, nil
}

// check holds a router to the targets its edge declared.
func (br branch) check(node string, chosen []string) *Error {
	for _, c := range chosen {
		if len(br.targets) > 0 && !slices.Contains(br.targets, c) {
			return invalidUpdate("the router after %q chose %q, which is not among its targets %v", node, c, br.targets)
		}
	}
	return nil
}

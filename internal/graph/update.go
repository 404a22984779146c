package graph

// UpdateState edits a thread's state outside a run (POST /threads/{id}/state)
// and returns the new checkpoint (source "update"). values (an object or
// Writes; nil writes nothing) are applied through the reducers as if node
// asNode had written them, and the next tasks are asNode's successors; End
// leaves nothing to run. An empty asNode means the node that wrote the
// latest step when that is unambiguous (LangGraph's rule), else __start__
// for a new thread. The error is an *Error (InvalidUpdateError).
func UpdateState(g *Graph, from *Checkpoint, values any, asNode string) (Checkpoint, error) {
	base := g.emptyCheckpoint()
	if from != nil {
		if e := g.checkCheckpoint(*from); e != nil {
			return Checkpoint{}, e
		}
		base = from.clone()
	}
	writes, e := toWrites(values)
	if e == nil {
		writes, e = g.checkWrites(writes, 0, "")
	}
	if e != nil {
		return Checkpoint{}, e
	}
	if asNode, e = g.updater(from, asNode); e != nil {
		return Checkpoint{}, e
	}
	cp := base.child(SourceUpdate, map[string]any{asNode: writes.Map()})
	if e := g.applyTo(&cp, writes); e != nil {
		return Checkpoint{}, e
	}
	next := []string{}
	if asNode != End {
		if next, e = g.successors(asNode, cp.Values, nil); e != nil {
			return Checkpoint{}, e
		}
	}
	cp.newTasks(next)
	return cp, nil
}

// updater resolves the node an update is attributed to.
func (g *Graph) updater(from *Checkpoint, asNode string) (string, *Error) {
	if asNode == "" && from == nil {
		return Start, nil
	}
	if asNode == "" {
		if len(from.Metadata.Writes) != 1 {
			return "", invalidUpdate("Ambiguous update, specify as_node")
		}
		asNode = sortedKeys(from.Metadata.Writes)[0]
	}
	if _, ok := g.nodes[asNode]; !ok && asNode != Start && asNode != End {
		return "", invalidUpdate("as_node: graph %q has no node %q", g.name, asNode)
	}
	return asNode, nil
}

// toWrites accepts the shapes an update comes in.
func toWrites(values any) (Writes, *Error) {
	switch v := values.(type) {
	case nil:
		return nil, nil
	case Writes:
		return v, nil
	case map[string]any:
		return WritesOf(v), nil
	}
	v, err := normalize(values)
	if obj, ok := v.(map[string]any); ok && err == nil {
		return WritesOf(obj), nil
	}
	return nil, invalidUpdate("Expected an object as update, got %s", jsonType(v))
}

package graph

import "github.com/google/uuid"

// reduceMessages merges chat messages like LangGraph's add_messages: every
// message gets an id (a new uuid when it has none), a written message whose id
// is already in the list replaces that message in place, other messages are
// appended, and {"type": "remove", "id": X} deletes message X. A write is a
// message object or a list of them.
func reduceMessages(key string, cur any, has bool, writes []any) (any, error) {
	list, err := asList(key, cur, has)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(list)+len(writes))
	index := map[string]int{}
	for _, m := range list {
		msg, err := stateMessage(key, m)
		if err != nil {
			return nil, err
		}
		index[msg["id"].(string)] = len(out)
		out = append(out, msg)
	}
	removed := map[string]bool{}
	for _, w := range writes {
		items, ok := w.([]any)
		if !ok {
			items = []any{w}
		}
		for _, m := range items {
			if out, err = mergeMessage(key, out, index, removed, m); err != nil {
				return nil, err
			}
		}
	}
	return dropRemoved(out, removed), nil
}

// identifyMessages gives an id to every message that nodes write without
// one to a messages channel, in the writes themselves (LangGraph's
// add_messages sets the id on the message object it is given). The
// write then names the message exactly as the state will, which is what a
// stream of the node's messages must show; and the id stays the same when
// the step is replayed, since the writes are recorded with the task.
// writes come from checkWrites: normalized copies the engine owns.
func (g *Graph) identifyMessages(writes Writes) {
	for _, w := range writes {
		if g.channels[w.Key].reducer() != Messages {
			continue
		}
		items, ok := w.Value.([]any)
		if !ok {
			items = []any{w.Value}
		}
		for _, m := range items {
			msg, ok := m.(map[string]any)
			if !ok || msg["type"] == "remove" {
				continue // the reducer reports what is wrong with it
			}
			if id, isString := msg["id"].(string); msg["id"] == nil || (isString && id == "") {
				msg["id"] = uuid.NewString()
			}
		}
	}
}

func mergeMessage(key string, out []any, index map[string]int, removed map[string]bool, m any) ([]any, error) {
	msg, err := withID(key, m)
	if err != nil {
		return nil, err
	}
	id := msg["id"].(string)
	i, exists := index[id]
	switch {
	case msg["type"] == "remove":
		if !exists || removed[id] {
			return nil, invalidUpdate("At key '%s': cannot remove message %q: no such message", key, id)
		}
		removed[id] = true
	case exists:
		out[i] = msg
		delete(removed, id)
	default:
		index[id] = len(out)
		out = append(out, msg)
	}
	return out, nil
}

// stateMessage is message m of the channel's current list: as it is when
// it has its id (the state's values are never changed in place, so it can
// be shared: copying every message of a long conversation at every write
// made a step's cost grow with the conversation), else withID's copy.
func stateMessage(key string, m any) (map[string]any, error) {
	if obj, ok := m.(map[string]any); ok {
		if id, ok := obj["id"].(string); ok && id != "" {
			return obj, nil
		}
	}
	return withID(key, m)
}

// withID returns a copy of message m that has a string id.
func withID(key string, m any) (map[string]any, error) {
	obj, ok := m.(map[string]any)
	if !ok {
		return nil, invalidUpdate("At key '%s': a message must be an object, got %s", key, jsonType(m))
	}
	msg := cloneMap(obj)
	switch id := msg["id"].(type) {
	case string:
		if id != "" {
			return msg, nil
		}
	case nil:
	default:
		return nil, invalidUpdate("At key '%s': a message id must be a string, got %s", key, jsonType(id))
	}
	msg["id"] = uuid.NewString()
	return msg, nil
}

func dropRemoved(list []any, removed map[string]bool) []any {
	if len(removed) == 0 {
		return list
	}
	out := list[:0]
	for _, m := range list {
		if !removed[m.(map[string]any)["id"].(string)] {
			out = append(out, m)
		}
	}
	return out
}

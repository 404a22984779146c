package graph

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Write is one write to a state channel. Its JSON form is the pair [key, value].
type Write struct {
	Key   string
	Value any
}

// Writes is an ordered list of writes. Order matters only for writes to the
// same key (an append channel written twice by one node, say). In JSON it
// reads an object or a list of [key, value] pairs, and writes the pair list,
// which keeps order and repeated keys.
type Writes []Write

// WritesOf turns a map into writes, in key order so the result is stable.
func WritesOf(m map[string]any) Writes {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ws := make(Writes, len(keys))
	for i, k := range keys {
		ws[i] = Write{Key: k, Value: m[k]}
	}
	return ws
}

// Map returns the writes as an object; of repeated keys the last one wins.
func (ws Writes) Map() map[string]any {
	m := make(map[string]any, len(ws))
	for _, w := range ws {
		m[w.Key] = w.Value
	}
	return m
}

// MarshalJSON writes the pair [key, value].
func (w Write) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{w.Key, w.Value})
}

// UnmarshalJSON reads the pair [key, value].
func (w *Write) UnmarshalJSON(b []byte) error {
	var pair []json.RawMessage
	if err := decodeJSON(b, &pair); err != nil || len(pair) != 2 {
		return errors.New("a write must be a [key, value] pair")
	}
	if err := decodeJSON(pair[0], &w.Key); err != nil {
		return errors.New("a write's key must be a string")
	}
	return decodeJSON(pair[1], &w.Value)
}

// UnmarshalJSON accepts an object or a list of [key, value] pairs.
func (ws *Writes) UnmarshalJSON(b []byte) error {
	var obj map[string]any
	if err := decodeJSON(b, &obj); err == nil {
		if obj == nil { // JSON null
			*ws = nil
		} else {
			*ws = WritesOf(obj)
		}
		return nil
	}
	var list []Write
	if err := decodeJSON(b, &list); err != nil {
		return fmt.Errorf("update must be an object or a list of [key, value] pairs: %w", err)
	}
	*ws = list
	return nil
}

// Command steers a run. A node returns one to write state (Update) and to
// choose the next nodes (Goto, in addition to the node's edges). As a run's
// input it may also carry Resume: one value for the next pending interrupt, or
// an object mapping interrupt ids to values.
type Command struct {
	Update Writes   `json:"update,omitempty"`
	Goto   []string `json:"goto,omitempty"`
	// Resume is only read from run input; nil means no resume.
	Resume any `json:"resume,omitempty"`
}

// Update is the command a node returns to write m to the state.
func Update(m map[string]any) *Command {
	return &Command{Update: WritesOf(m)}
}

// UnmarshalJSON reads the API's command shape: goto may be a node name or a
// list of names. Sends ({"node", "input"}) are rejected rather than dropped,
// since the engine cannot honour them.
func (c *Command) UnmarshalJSON(b []byte) error {
	var raw struct {
		Update Writes          `json:"update"`
		Goto   json.RawMessage `json:"goto"`
		Resume any             `json:"resume"`
	}
	if err := decodeJSON(b, &raw); err != nil {
		return err
	}
	gotos, err := decodeGoto(raw.Goto)
	if err != nil {
		return err
	}
	*c = Command{Update: raw.Update, Goto: gotos, Resume: raw.Resume}
	return nil
}

func decodeGoto(b json.RawMessage) ([]string, error) {
	var items []json.RawMessage
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	if b[0] != '[' {
		items = []json.RawMessage{b}
	} else if err := decodeJSON(b, &items); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(items))
	for _, item := range items {
		var name string
		if err := decodeJSON(item, &name); err != nil {
			return nil, errors.New("goto: each target must be a node name; sends ({node, input}) are not supported")
		}
		names = append(names, name)
	}
	return names, nil
}

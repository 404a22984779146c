package runs

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// cpEncoder serializes a run's checkpoints exactly as json.Marshal does,
// reusing the JSON of each channel whose value is the one it serialized for
// the previous checkpoint, and serializing only the new elements of a list
// that grew (a conversation's messages): the state's JSON is not rebuilt
// from the whole state at every step (issue 19).
//
// Whether a value is unchanged is decided by comparing the values (the
// engine clones the state at every step, so it is never the same Go value),
// which costs a walk of the value and no encoding. Each remembered JSON is
// json.Marshal of its remembered value, which nobody modifies (checkpoints
// handed to a sink are immutable), so reusing one is exact whatever
// checkpoint the encoder saw before. encoding/json is compositional for the
// state's types (a list is "[" its elements joined by "," "]"; an object's
// members are sorted by key), which is what the splicing relies on; tests
// compare it with json.Marshal.
type cpEncoder struct {
	// ch is, per channel, the value last serialized and its JSON; replaced,
	// never modified (the latest-checkpoint cache shares it).
	ch map[string]chanJSON
}

type chanJSON struct {
	val any
	js  []byte
}

var emptyValues = []byte(`"values":{}`)

func (e *cpEncoder) marshal(cp graph.Checkpoint) ([]byte, error) {
	values := cp.Values
	if len(values) == 0 {
		e.ch = nil
		return json.Marshal(cp)
	}
	cp.Values = map[string]any{}
	head, err := json.Marshal(cp)
	if err != nil {
		return nil, err
	}
	// The first `"values":{}` is the member itself: the members before it
	// are a number, ids and a time, and a string's quotes are escaped.
	at := bytes.Index(head, emptyValues)
	if at < 0 {
		cp.Values = values
		e.ch = nil
		return json.Marshal(cp)
	}
	at += len(emptyValues) - 2
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys) // as encoding/json orders a map's members
	next := make(map[string]chanJSON, len(values))
	parts := make([][]byte, len(keys))
	size := len(head)
	for i, k := range keys {
		js, err := e.channel(k, values[k])
		if err != nil {
			return nil, err
		}
		next[k] = chanJSON{val: values[k], js: js}
		parts[i] = js
		size += len(k) + 8 + len(js)
	}
	out := make([]byte, 0, size)
	out = append(append(out, head[:at]...), '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		kj, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		out = append(append(append(out, kj...), ':'), parts[i]...)
	}
	out = append(append(out, '}'), head[at+2:]...)
	e.ch = next
	return out, nil
}

// valuesJSON is json.Marshal(values), reusing the JSON of channels the
// encoder state ch holds (a thread's values and a run's result are its last
// checkpoint's values).
func valuesJSON(values map[string]any, ch map[string]chanJSON) ([]byte, error) {
	if values == nil || ch == nil {
		return json.Marshal(values)
	}
	e := cpEncoder{ch: ch}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := []byte{'{'}
	for i, k := range keys {
		js, err := e.channel(k, values[k])
		if err != nil {
			return nil, err
		}
		kj, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, kj...), ':'), js...)
	}
	return append(out, '}'), nil
}

// channel is the JSON of channel k's value v.
func (e *cpEncoder) channel(k string, v any) ([]byte, error) {
	prev, ok := e.ch[k]
	if !ok {
		return json.Marshal(v)
	}
	list, isList := v.([]any)
	old, wasList := prev.val.([]any)
	if isList && wasList && len(old) > 0 && len(list) > len(old) && len(prev.js) > 2 && sameJSON(old, list[:len(old)]) {
		tail, err := json.Marshal(list[len(old):])
		if err != nil {
			return nil, err
		}
		js := make([]byte, 0, len(prev.js)+len(tail))
		js = append(append(js, prev.js[:len(prev.js)-1]...), ',')
		return append(js, tail[1:]...), nil
	}
	if sameJSON(prev.val, v) {
		return prev.js, nil
	}
	return json.Marshal(v)
}

// sameJSON reports whether a and b, state values (the shapes of graph's
// doc), serialize alike. Any other type is never the same: it is
// serialized again.
func sameJSON(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		if len(x) > 0 && &x[0] == &y[0] {
			return true // the same list: the engine shares unchanged values
		}
		for i := range x {
			if !sameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		if reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() {
			return true // the same object
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !sameJSON(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

package graph

import (
	"encoding/json"
	"fmt"
)

// Reducer says how a channel combines the writes of a super-step with its
// current value. The names are the ones graph documents use.
type Reducer string

const (
	// LastValue keeps the written value; two writes in one step are an error,
	// because which one should win would depend on scheduling.
	LastValue Reducer = "last_value"
	// Append extends the list with a written list, or appends a single value.
	Append Reducer = "append"
	// Add sums numbers.
	Add Reducer = "add"
	// Messages merges chat messages by id (see reduceMessages).
	Messages Reducer = "messages"
)

// Channel declares one state key.
type Channel struct {
	// Reducer combines writes; empty means LastValue.
	Reducer Reducer
	// Default is the value before any write; nil means the key is absent
	// from the state until written.
	Default any
	// Schema is the JSON Schema of the value, for the assistants API; nil
	// means one derived from the reducer.
	Schema map[string]any
}

func (c Channel) reducer() Reducer {
	if c.Reducer == "" {
		return LastValue
	}
	return c.Reducer
}

// reduce folds one step's writes (in merge order) into the current value.
// has reports whether the channel holds a value (or a default) at all.
func (c Channel) reduce(key string, cur any, has bool, writes []any) (any, error) {
	switch c.reducer() {
	case LastValue:
		if len(writes) > 1 {
			return nil, invalidUpdate("At key '%s': Can receive only one value per step. "+
				"Use a reducer (append, add, messages) to combine multiple values.", key)
		}
		return writes[0], nil
	case Append:
		return reduceAppend(key, cur, has, writes)
	case Add:
		return reduceAdd(key, cur, has, writes)
	case Messages:
		return reduceMessages(key, cur, has, writes)
	}
	return nil, invalidUpdate("At key '%s': unknown reducer %q", key, c.Reducer)
}

func reduceAppend(key string, cur any, has bool, writes []any) (any, error) {
	list, err := asList(key, cur, has)
	if err != nil {
		return nil, err
	}
	out := append([]any(nil), list...)
	for _, w := range writes {
		if items, ok := w.([]any); ok {
			out = append(out, items...)
		} else {
			out = append(out, w)
		}
	}
	return out, nil
}

func reduceAdd(key string, cur any, has bool, writes []any) (any, error) {
	sum := json.Number("0")
	if has && cur != nil {
		n, ok := cur.(json.Number)
		if !ok {
			return nil, invalidUpdate("At key '%s': add reducer needs a number, the state holds %s", key, jsonType(cur))
		}
		sum = n
	}
	for _, w := range writes {
		n, ok := w.(json.Number)
		if !ok {
			return nil, invalidUpdate("At key '%s': add reducer needs a number, got %s", key, jsonType(w))
		}
		var err error
		if sum, err = addNumbers(sum, n); err != nil {
			return nil, invalidUpdate("At key '%s': %v", key, err)
		}
	}
	return sum, nil
}

func asList(key string, cur any, has bool) ([]any, error) {
	if !has || cur == nil {
		return nil, nil
	}
	list, ok := cur.([]any)
	if !ok {
		return nil, invalidUpdate("At key '%s': the state holds %s, not a list", key, jsonType(cur))
	}
	return list, nil
}

// jsonType names a normalized value's JSON type for error messages.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// schema is the JSON Schema of the channel for the assistants API.
func (c Channel) schema() map[string]any {
	s := cloneMap(c.Schema)
	if s == nil {
		switch c.reducer() {
		case Append, Messages:
			s = map[string]any{"type": "array"}
		case Add:
			s = map[string]any{"type": "number"}
		default:
			s = map[string]any{}
		}
	}
	if c.Default != nil {
		s["default"] = cloneValue(c.Default)
	}
	return s
}

package storeapi

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/stepgraph/stepgraph/internal/fail"
)

// filter is a search's filter on item values, upstream's language
// (langgraph's stores): each key of the filter names a top-level field of
// the value; a plain value must equal the field (objects compared key by
// key, recursively: the field may have more keys; arrays element by
// element, of equal length); an object whose keys start with "$" applies
// comparison operators to the field.
type filter map[string]any

var operators = map[string]bool{"$eq": true, "$ne": true, "$gt": true, "$gte": true, "$lt": true, "$lte": true}

// parseFilter reads and checks a filter (nil for none): an unknown
// operator, or an ordering operator without a number, is refused here
// rather than failing every comparison.
func parseFilter(raw json.RawMessage) (filter, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var f map[string]any
	if err := json.Unmarshal(raw, &f); err != nil || f == nil {
		return nil, fail.Invalid("filter", "must be an object")
	}
	for k, v := range f {
		if err := checkCondition("filter."+k, v); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func checkCondition(path string, v any) error {
	obj, ok := v.(map[string]any)
	if !ok || !hasOperator(obj) {
		return nil
	}
	for op, arg := range obj {
		if !operators[op] {
			return fail.Invalid(path, "operator %q is not one of $eq, $ne, $gt, $gte, $lt, $lte", op)
		}
		if op != "$eq" && op != "$ne" {
			if _, ok := arg.(float64); !ok {
				return fail.Invalid(path, "operator %s takes a number", op)
			}
		}
	}
	return nil
}

func hasOperator(obj map[string]any) bool {
	for k := range obj {
		if strings.HasPrefix(k, "$") {
			return true
		}
	}
	return false
}

// matches reports whether the decoded value satisfies f.
func (f filter) matches(value map[string]any) bool {
	for k, want := range f {
		if !compare(value[k], want) {
			return false
		}
	}
	return true
}

func compare(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		if hasOperator(w) {
			for op, arg := range w {
				if !apply(got, op, arg) {
					return false
				}
			}
			return true
		}
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !compare(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !compare(g[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(got, want)
	}
}

// apply is one operator; an ordering operator on a field that is not a
// number does not match (upstream's in-memory store raises there; the
// Postgres store compares no rows).
func apply(got any, op string, arg any) bool {
	switch op {
	case "$eq":
		return reflect.DeepEqual(got, arg)
	case "$ne":
		return !reflect.DeepEqual(got, arg)
	}
	g, ok := got.(float64)
	a, _ := arg.(float64)
	if !ok {
		return false
	}
	switch op {
	case "$gt":
		return g > a
	case "$gte":
		return g >= a
	case "$lt":
		return g < a
	case "$lte":
		return g <= a
	}
	return false
}

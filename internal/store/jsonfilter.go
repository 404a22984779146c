package store

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
)

// JSONFilter is the rule of the metadata and values filters
// (AssistantFilter.Metadata, ThreadFilter.Metadata/Values): every key of the
// filter object must be in the stored JSON object with an equal value.
// Equality is of decoded values: numbers as float64, objects regardless of
// key order. Adapters may narrow a query with Keys and must decide with
// Matches.
type JSONFilter map[string]any

// ParseJSONFilter reads a filter; nil (no filter) for nil or an empty object.
func ParseJSONFilter(what string, raw []byte) (JSONFilter, error) {
	if raw == nil {
		return nil, nil
	}
	var want map[string]any
	if err := json.Unmarshal(raw, &want); err != nil || want == nil {
		return nil, fmt.Errorf("%s filter is not a JSON object", what)
	}
	if len(want) == 0 {
		return nil, nil
	}
	return want, nil
}

// Keys lists the filter's keys, sorted.
func (f JSONFilter) Keys() []string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Matches reports whether the stored JSON object doc satisfies the filter;
// a nil filter matches everything.
func (f JSONFilter) Matches(doc []byte) bool {
	if f == nil {
		return true
	}
	var got map[string]any
	if json.Unmarshal(doc, &got) != nil {
		return false
	}
	for k, want := range f {
		v, ok := got[k]
		if !ok || !reflect.DeepEqual(v, want) {
			return false
		}
	}
	return true
}

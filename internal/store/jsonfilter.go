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

// MergeObjects returns the JSON object base with the keys of add set (a
// shallow merge, as metadata updates are); nil or empty base is {}.
func MergeObjects(base, add []byte) ([]byte, error) {
	merged := map[string]json.RawMessage{}
	if len(base) > 0 {
		if err := json.Unmarshal(base, &merged); err != nil {
			return nil, fmt.Errorf("stored object is not a JSON object: %w", err)
		}
		if merged == nil {
			merged = map[string]json.RawMessage{}
		}
	}
	var extra map[string]json.RawMessage
	if err := json.Unmarshal(add, &extra); err != nil {
		return nil, fmt.Errorf("merged object is not a JSON object: %w", err)
	}
	for k, v := range extra {
		merged[k] = v
	}
	return json.Marshal(merged)
}

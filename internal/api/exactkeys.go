package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The schema validator and encoding/json read a body differently (security
// review F16): the validator matches object keys exactly, and a key such as
// "Limit" is to it an unknown field, ignored; encoding/json matches struct
// fields case-insensitively, so it fills Limit from "Limit" — a value no
// schema rule has seen. With a repeated key the validator keeps the last
// object while encoding/json merges both into the same struct. Either way a
// rule enforced only by the schema could be bypassed.
//
// The decoder is therefore given the value the validator saw, with the keys
// it treated as unknown but encoding/json would not dropped: a key that
// differs only in case (Unicode simple folding, as encoding/json compares)
// from a property the schema declares at its place is removed, as any
// unknown field is ignored ("Limit" is not "limit", as for the upstream
// Python server, whose models are case-sensitive), and each repeated key
// keeps its last value. A body without such keys — every ordinary one — is
// decoded from its own bytes, unchanged.

// exactBody returns the bytes to decode: body itself, or the validated
// instance inst re-encoded without the keys described above.
func exactBody(sch *jsonschema.Schema, inst any, body []byte) ([]byte, error) {
	pruned, changed := dropFoldedKeys(applicable(sch), inst)
	if !changed && !hasRepeatedKeys(body) {
		return body, nil
	}
	return json.Marshal(pruned)
}

// applicable is sch with every schema that applies at the same place:
// through $ref, $dynamicRef, $recursiveRef, allOf, anyOf, oneOf, not,
// if/then/else and dependent schemas. (Which branch of an anyOf a value
// takes does not matter: a key exact for any of them is kept.)
func applicable(schemas ...*jsonschema.Schema) []*jsonschema.Schema {
	seen := map[*jsonschema.Schema]bool{}
	var out []*jsonschema.Schema
	var add func(s *jsonschema.Schema)
	add = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		out = append(out, s)
		add(s.Ref)
		add(s.RecursiveRef)
		if s.DynamicRef != nil {
			add(s.DynamicRef.Ref)
		}
		for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
			for _, sub := range list {
				add(sub)
			}
		}
		add(s.Not)
		add(s.If)
		add(s.Then)
		add(s.Else)
		for _, sub := range s.DependentSchemas {
			add(sub)
		}
		for _, dep := range s.Dependencies {
			if sub, ok := dep.(*jsonschema.Schema); ok {
				add(sub)
			}
		}
	}
	for _, s := range schemas {
		add(s)
	}
	return out
}

// dropFoldedKeys returns v without the object keys that fold to, but are
// not, a property declared by one of schemas at their place, at any depth;
// changed tells whether it dropped any. v is not modified.
func dropFoldedKeys(schemas []*jsonschema.Schema, v any) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return dropInObject(schemas, x)
	case []any:
		out := make([]any, len(x))
		changed := false
		for i, item := range x {
			var c bool
			out[i], c = dropFoldedKeys(applicable(itemSchemas(schemas, i)...), item)
			changed = changed || c
		}
		return out, changed
	}
	return v, false
}

func dropInObject(schemas []*jsonschema.Schema, obj map[string]any) (any, bool) {
	declared := map[string]map[string]bool{} // folded name → the declared names
	for _, s := range schemas {
		for name := range s.Properties {
			f := fold(name)
			if declared[f] == nil {
				declared[f] = map[string]bool{}
			}
			declared[f][name] = true
		}
	}
	out := make(map[string]any, len(obj))
	changed := false
	for k, val := range obj {
		if exact, ok := declared[fold(k)]; ok && !exact[k] {
			changed = true
			continue
		}
		var c bool
		out[k], c = dropFoldedKeys(applicable(propertySchemas(schemas, k)...), val)
		changed = changed || c
	}
	return out, changed
}

// fold maps a name to one representative of the names equal to it under
// simple case folding (strings.EqualFold, which is how encoding/json
// matches a key to a field): each rune becomes the smallest of its fold
// orbit, so "Limit", "LIMIT" and "limit" (and "K" with the Kelvin sign)
// fold alike.
func fold(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		for {
			next := unicode.SimpleFold(r)
			if next <= r {
				r = next
				break
			}
			r = next
		}
		b.WriteRune(r)
	}
	return b.String()
}

// propertySchemas are the schemas a property k of an object is checked
// against: properties, else matching patternProperties, else
// additionalProperties, of each schema.
func propertySchemas(schemas []*jsonschema.Schema, k string) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range schemas {
		if p, ok := s.Properties[k]; ok {
			out = append(out, p)
			continue
		}
		matched := false
		for re, p := range s.PatternProperties {
			if re.MatchString(k) {
				out = append(out, p)
				matched = true
			}
		}
		if add, ok := s.AdditionalProperties.(*jsonschema.Schema); ok && !matched {
			out = append(out, add)
		}
	}
	return out
}

// itemSchemas are the schemas item i of an array is checked against, in
// draft 2020-12 (prefixItems, items) and earlier (items, additionalItems).
func itemSchemas(schemas []*jsonschema.Schema, i int) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range schemas {
		switch {
		case i < len(s.PrefixItems):
			out = append(out, s.PrefixItems[i])
		case s.Items2020 != nil:
			out = append(out, s.Items2020)
		}
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			out = append(out, items)
		case []*jsonschema.Schema:
			if i < len(items) {
				out = append(out, items[i])
			} else if add, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
				out = append(out, add)
			}
		}
		if s.Contains != nil {
			out = append(out, s.Contains)
		}
	}
	return out
}

// hasRepeatedKeys reports whether an object of body (valid JSON) has a key
// twice.
func hasRepeatedKeys(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	// One entry per open object or array: the keys seen (nil for an array)
	// and whether the next string token is a key.
	type level struct {
		keys      map[string]bool
		expectKey bool
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil { // the end (the body is valid JSON)
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil && top.expectKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k, _ := tok.(string)
			if top.keys[k] {
				return true
			}
			top.keys[k] = true
			top.expectKey = false
			continue
		}
		// A value (of an object member, an array item or the top level).
		if top != nil && top.keys != nil {
			top.expectKey = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{keys: map[string]bool{}, expectKey: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].keys != nil {
				stack[len(stack)-1].expectKey = true
			}
		}
	}
}

package api

import (
	"encoding/json"
	"maps"
	"slices"
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
	if !changed && !hasRepeatedKeys(body, inst) {
		return body, nil
	}
	return json.Marshal(pruned)
}

// applicable is schemas with every schema that applies at the same place:
// through $ref, $dynamicRef, $recursiveRef, allOf, anyOf, oneOf, not,
// if/then/else and dependent schemas. (Which branch of an anyOf a value
// takes does not matter: a key exact for any of them is kept.)
func applicable(schemas ...*jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	var add func(s *jsonschema.Schema)
	add = func(s *jsonschema.Schema) {
		// A linear search: the lists are a handful of schemas long.
		if s == nil || slices.Contains(out, s) {
			return
		}
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
// changed tells whether it dropped any. v is not modified: what changes is
// copied. Where no schema describes a value's members (metadata, input) it
// is not walked: nothing below can be declared.
func dropFoldedKeys(schemas []*jsonschema.Schema, v any) (any, bool) {
	if len(schemas) == 0 {
		return v, false
	}
	switch x := v.(type) {
	case map[string]any:
		return dropInObject(schemas, x)
	case []any:
		var out []any // a copy, made at the first change
		for i, item := range x {
			sub := itemSchemas(schemas, i)
			if len(sub) == 0 {
				continue
			}
			if nv, c := dropFoldedKeys(applicable(sub...), item); c {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i] = nv
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	}
	return v, false
}

func dropInObject(schemas []*jsonschema.Schema, obj map[string]any) (any, bool) {
	declared := map[string]map[string]bool{} // folded name → the declared names
	describesMembers := false
	for _, s := range schemas {
		for name := range s.Properties {
			f := fold(name)
			if declared[f] == nil {
				declared[f] = map[string]bool{}
			}
			declared[f][name] = true
		}
		_, additional := s.AdditionalProperties.(*jsonschema.Schema)
		describesMembers = describesMembers || len(s.Properties) > 0 || len(s.PatternProperties) > 0 || additional
	}
	if !describesMembers {
		return obj, false
	}
	var out map[string]any // a copy, made at the first change
	for k, val := range obj {
		if exact, ok := declared[fold(k)]; ok && !exact[k] {
			if out == nil {
				out = maps.Clone(obj)
			}
			delete(out, k)
			continue
		}
		sub := propertySchemas(schemas, k)
		if len(sub) == 0 {
			continue
		}
		if nv, c := dropFoldedKeys(applicable(sub...), val); c {
			if out == nil {
				out = maps.Clone(obj)
			}
			out[k] = nv
		}
	}
	if out == nil {
		return obj, false
	}
	return out, true
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

// hasRepeatedKeys reports whether an object of body has a key twice: inst,
// body parsed, keeps one of each, so it then holds fewer keys than body
// names. (Counting, rather than collecting keys per object, costs no
// allocation; json.Decoder.Token would be an order of magnitude slower on a
// large body.)
func hasRepeatedKeys(body []byte, inst any) bool {
	return keysIn(body) != keysOf(inst)
}

// keysIn counts the object keys of body, valid JSON, at any depth.
func keysIn(body []byte) int {
	var objects []bool // per open object (true) or array (false)
	expectKey := false // the next string is a key: after '{' or an object's ','
	n := 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			objects = append(objects, true)
			expectKey = true
		case '[':
			objects = append(objects, false)
			expectKey = false
		case '}', ']':
			objects = objects[:len(objects)-1]
			expectKey = false
		case ',':
			expectKey = objects[len(objects)-1]
		case '"':
			if expectKey {
				n++
				expectKey = false
			}
			for i++; body[i] != '"'; i++ {
				if body[i] == '\\' {
					i++
				}
			}
		}
	}
	return n
}

// keysOf counts the object keys of a parsed value, at any depth.
func keysOf(v any) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		n += len(x)
		for _, item := range x {
			n += keysOf(item)
		}
	case []any:
		for _, item := range x {
			n += keysOf(item)
		}
	}
	return n
}

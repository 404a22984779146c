package docs

import (
	"encoding/json"
	"html/template"
	"slices"
	"strconv"
	"strings"
)

// Limits that keep rendering finite and the page readable whatever the
// document holds.
const (
	maxFieldDepth = 12 // nested inline objects shown under one schema
	maxTypeDepth  = 6  // nesting inside one type expression
)

// typePart is a piece of a type expression; Ref, when set, is the anchor
// of the component schema it names.
type typePart struct {
	Text string
	Ref  string
}

// fact is a schema keyword worth showing ("max: 100"); a fact without a
// value is a flag ("read-only").
type fact struct {
	Label string
	Value string
}

// node is one schema as a field list entry: the root of a body or response
// (no name), a property, an items or variant entry, or a parameter.
type node struct {
	Name        string
	Label       string // shown instead of Name for synthetic entries ("one of #1")
	In          string // parameters only
	Required    bool
	Type        []typePart
	Description template.HTML
	Enum        []string
	Facts       []fact
	Children    []*node
}

func text(s string) typePart { return typePart{Text: s} }

func (n *node) setFact(label, value string) {
	for i := range n.Facts {
		if n.Facts[i].Label == label {
			n.Facts[i].Value = value
			return
		}
	}
	n.Facts = append(n.Facts, fact{label, value})
}

// field builds the node for schema s. expand says whether a $ref at this
// level is expanded into its target's fields (done at the root of a body or
// response); nested references become links to the Schemas section, which
// is also what keeps reference cycles finite.
func (b *builder) field(name string, s any, required, expand bool, stack []string, depth int) *node {
	n := &node{Name: name, Required: required}
	n.Type = b.typeExpr(s, nil, 0)
	b.describe(n, s, 0)
	n.Children = b.children(s, expand, stack, depth)
	return n
}

// resolveRef finds a local reference's target. name is what to call it and
// anchor, for component schemas, the id of its entry in the Schemas section.
func (b *builder) resolveRef(ref string) (name, anchor string, target any) {
	ptr, ok := fragmentPointer(ref)
	if !ok {
		return ref, "", nil
	}
	target = lookup(b.doc, ptr)
	if rest, ok := strings.CutPrefix(ptr, "/components/schemas/"); ok && !strings.Contains(rest, "/") {
		name = unescapeToken(rest)
		return name, b.schemaIDs[name], target
	}
	if i := strings.LastIndex(ptr, "/"); i >= 0 && i < len(ptr)-1 {
		return unescapeToken(ptr[i+1:]), "", target
	}
	return ref, "", target
}

// schemaTypes reads "type" (a string or, in 3.1, a list) and 3.0's
// "nullable".
func schemaTypes(o *object) []string {
	var out []string
	switch t := o.get("type").(type) {
	case string:
		out = append(out, t)
	case []any:
		for _, v := range t {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
	}
	if o.boolean("nullable") && len(out) > 0 && !slices.Contains(out, "null") {
		out = append(out, "null")
	}
	return out
}

// valueType is the JSON type of a decoded value.
func valueType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			return "number"
		}
		return "integer"
	case *object:
		return "object"
	case []any:
		return "array"
	}
	return "any"
}

// isScalar reports whether a schema, references followed, has no fields to
// list: its type line says all there is.
func (b *builder) isScalar(s any, depth int) bool {
	o, ok := s.(*object)
	if !ok || depth > maxTypeDepth {
		return true
	}
	if ref := o.str("$ref"); ref != "" {
		_, _, t := b.resolveRef(ref)
		return t == nil || b.isScalar(t, depth+1)
	}
	if o.obj("properties").len() > 0 {
		return false
	}
	if ap, ok := o.get("additionalProperties").(*object); ok && !b.isScalar(ap, depth+1) {
		return false
	}
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		for _, v := range o.list(kw) {
			if !b.isScalar(v, depth+1) {
				return false
			}
		}
	}
	if items, ok := o.vals["items"]; ok && !b.isScalar(items, depth+1) {
		return false
	}
	return true
}

// typeExpr renders a schema's type: "string | null", "array of Pet",
// "map of integer", "Status (string)". seen holds the references being
// rendered, so aliases that refer to each other stop.
func (b *builder) typeExpr(s any, seen []string, depth int) []typePart {
	if depth > maxTypeDepth {
		return []typePart{text("…")}
	}
	o, ok := s.(*object)
	if !ok {
		if v, ok := s.(bool); ok && !v {
			return []typePart{text("never")}
		}
		return []typePart{text("any")}
	}
	if ref := o.str("$ref"); ref != "" {
		name, anchor, t := b.resolveRef(ref)
		parts := []typePart{{Text: name, Ref: anchor}}
		if t != nil && !slices.Contains(seen, ref) && b.isScalar(t, 0) {
			inner := b.typeExpr(t, append(slices.Clip(seen), ref), depth+1)
			if !(len(inner) == 1 && inner[0].Text == "any") {
				parts = append(parts, text(" ("))
				parts = append(parts, inner...)
				parts = append(parts, text(")"))
			}
		}
		return parts
	}
	types := schemaTypes(o)
	if len(types) == 0 {
		if c, ok := o.vals["const"]; ok {
			return []typePart{text("const " + jsonText(c))}
		}
		if enum := o.list("enum"); len(enum) > 0 {
			for _, v := range enum {
				if t := valueType(v); !slices.Contains(types, t) {
					types = append(types, t)
				}
			}
		}
	}
	if len(types) == 0 {
		if l := o.list("anyOf"); len(l) > 0 {
			return b.joinExpr(l, " | ", seen, depth)
		}
		if l := o.list("oneOf"); len(l) > 0 {
			return b.joinExpr(l, " | ", seen, depth)
		}
		if l := o.list("allOf"); len(l) > 0 {
			return b.joinExpr(l, " & ", seen, depth)
		}
		switch {
		case o.has("properties") || o.has("additionalProperties"):
			types = []string{"object"}
		case o.has("items"):
			types = []string{"array"}
		default:
			return []typePart{text("any")}
		}
	}
	var out []typePart
	for i, t := range types {
		if i > 0 {
			out = append(out, text(" | "))
		}
		switch {
		case t == "array" && o.has("items"):
			out = append(out, text("array of "))
			out = append(out, wrap(b.typeExpr(o.get("items"), seen, depth+1))...)
		case t == "object" && o.obj("properties").len() == 0 && isSchema(o.get("additionalProperties")):
			out = append(out, text("map of "))
			out = append(out, wrap(b.typeExpr(o.get("additionalProperties"), seen, depth+1))...)
		default:
			out = append(out, text(t))
		}
	}
	return out
}

func isSchema(v any) bool {
	if _, ok := v.(*object); ok {
		return true
	}
	t, ok := v.(bool)
	return ok && t
}

func (b *builder) joinExpr(list []any, sep string, seen []string, depth int) []typePart {
	var out []typePart
	for i, v := range list {
		if i > 0 {
			out = append(out, text(sep))
		}
		out = append(out, wrap(b.typeExpr(v, seen, depth+1))...)
	}
	return out
}

// wrap parenthesizes a union or intersection used inside another type.
func wrap(parts []typePart) []typePart {
	for _, p := range parts {
		if p.Ref == "" && (strings.Contains(p.Text, " | ") || strings.Contains(p.Text, " & ")) {
			out := append([]typePart{text("(")}, parts...)
			return append(out, text(")"))
		}
	}
	return parts
}

// nullableVariant returns X for anyOf/oneOf [X, {type: null}].
func nullableVariant(o *object) any {
	for _, kw := range []string{"anyOf", "oneOf"} {
		var keep []any
		for _, v := range o.list(kw) {
			if !isNullSchema(v) {
				keep = append(keep, v)
			}
		}
		if len(keep) == 1 && len(o.list(kw)) > 1 {
			return keep[0]
		}
	}
	return nil
}

func isNullSchema(v any) bool {
	o, ok := v.(*object)
	if !ok {
		return false
	}
	t := schemaTypes(o)
	return len(t) == 1 && t[0] == "null" && !o.has("$ref")
}

// describe fills the description, enum and facts of n from s. A reference
// to a scalar schema (an enum, a constrained number) brings its target's
// details along, since the reader would otherwise have to follow the link
// to learn the allowed values.
func (b *builder) describe(n *node, s any, depth int) {
	o, ok := s.(*object)
	if !ok || depth > maxTypeDepth {
		return
	}
	if ref := o.str("$ref"); ref != "" {
		if _, _, t := b.resolveRef(ref); t != nil && b.isScalar(t, 0) {
			b.describe(n, t, depth+1)
		}
	} else if v := nullableVariant(o); v != nil {
		b.describe(n, v, depth+1)
	}
	if d := o.str("description"); d != "" {
		n.Description = prose(d)
	} else if t := o.str("title"); t != "" && n.Description == "" {
		n.Description = prose(t)
	}
	if enum, ok := o.vals["enum"].([]any); ok {
		n.Enum = n.Enum[:0]
		for _, v := range enum {
			n.Enum = append(n.Enum, jsonText(v))
		}
	}
	if f := o.str("format"); f != "" {
		n.setFact("format", f)
	}
	if v, ok := o.vals["default"]; ok {
		n.setFact("default", jsonText(v))
	}
	if v, ok := o.vals["const"]; ok && len(schemaTypes(o)) > 0 {
		n.setFact("const", jsonText(v))
	}
	for _, kw := range []struct{ key, label string }{
		{"minimum", "min"}, {"exclusiveMinimum", "exclusive min"},
		{"maximum", "max"}, {"exclusiveMaximum", "exclusive max"},
		{"multipleOf", "multiple of"},
		{"minLength", "min length"}, {"maxLength", "max length"},
		{"minItems", "min items"}, {"maxItems", "max items"},
		{"minProperties", "min properties"}, {"maxProperties", "max properties"},
	} {
		switch v := o.vals[kw.key].(type) {
		case json.Number:
			n.setFact(kw.label, string(v))
		case bool: // OpenAPI 3.0: exclusiveMinimum/Maximum modify minimum/maximum
			if v && strings.HasPrefix(kw.key, "exclusive") {
				base := "min"
				if kw.key == "exclusiveMaximum" {
					base = "max"
				}
				n.setFact(base+" exclusive", "")
			}
		}
	}
	if p := o.str("pattern"); p != "" {
		n.setFact("pattern", p)
	}
	for _, kw := range []struct{ key, label string }{
		{"uniqueItems", "unique items"}, {"readOnly", "read-only"},
		{"writeOnly", "write-only"}, {"deprecated", "deprecated"},
	} {
		if o.boolean(kw.key) {
			n.setFact(kw.label, "")
		}
	}
	if v, ok := o.vals["example"]; ok {
		n.setFact("example", jsonText(v))
	} else if l := o.list("examples"); len(l) > 0 {
		n.setFact("example", jsonText(l[0]))
	}
}

// children lists the fields of s: its properties, the fields of its items,
// of its allOf parts, and its anyOf/oneOf alternatives. stack holds the
// references being expanded, so a schema never expands inside itself.
func (b *builder) children(s any, expand bool, stack []string, depth int) []*node {
	o, ok := s.(*object)
	if !ok {
		return nil
	}
	if depth >= maxFieldDepth {
		if b.isScalar(o, 0) {
			return nil
		}
		return []*node{{Label: "… (nested too deep to show)"}}
	}
	if ref := o.str("$ref"); ref != "" {
		_, _, t := b.resolveRef(ref)
		if t == nil || !expand || slices.Contains(stack, ref) {
			return nil
		}
		return b.children(t, expand, append(slices.Clip(stack), ref), depth)
	}
	var out []*node
	required := map[string]bool{}
	for _, r := range o.list("required") {
		if s, ok := r.(string); ok {
			required[s] = true
		}
	}
	// Required properties first, each part in document order.
	props := o.obj("properties")
	for _, wantRequired := range []bool{true, false} {
		for _, k := range props.keys() {
			if required[k] == wantRequired {
				out = append(out, b.field(k, props.get(k), required[k], false, stack, depth+1))
			}
		}
	}
	if ap, ok := o.vals["additionalProperties"].(*object); ok {
		if kids := b.children(ap, expand, stack, depth+1); len(kids) > 0 {
			out = append(out, b.synthetic("any other key", ap, kids))
		}
	}
	if items, ok := o.vals["items"]; ok {
		out = append(out, b.children(items, expand, stack, depth)...)
	}
	for _, part := range o.list("allOf") {
		out = append(out, b.children(part, true, stack, depth)...)
	}
	if v := nullableVariant(o); v != nil {
		return append(out, b.children(v, expand, stack, depth)...)
	}
	for _, kw := range []string{"oneOf", "anyOf"} {
		variants := o.list(kw)
		kids := make([][]*node, len(variants))
		complex := false
		for i, v := range variants {
			kids[i] = b.children(v, expand, stack, depth+1)
			complex = complex || len(kids[i]) > 0
		}
		if !complex {
			continue // the type line ("A | B") says it all
		}
		label := "one of #"
		if kw == "anyOf" {
			label = "any of #"
		}
		for i, v := range variants {
			out = append(out, b.synthetic(label+strconv.Itoa(i+1), v, kids[i]))
		}
	}
	return out
}

// synthetic is an entry that is not a named property: an alternative of
// anyOf/oneOf or the schema of additional properties.
func (b *builder) synthetic(label string, s any, kids []*node) *node {
	n := &node{Label: label, Type: b.typeExpr(s, nil, 0), Children: kids}
	b.describe(n, s, 0)
	return n
}

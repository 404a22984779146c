package graphdoc

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Templates are JSON values whose strings may hold {{ path }} placeholders.
// A string that is exactly one placeholder yields the value at the path as
// it is (an object, a list, a number...); placeholders inside longer text
// are rendered as text (strings as they are, null as "", anything else as
// JSON). A path is a root (state, context, and per place response, resume
// or result) followed by .name and [index] steps; a negative index counts
// from the end. A path that leads nowhere yields null. There is nothing
// else: no expressions, no calls, no loops, so rendering cannot fail or run
// long. "{{" always opens a placeholder (there is no escape); a lone "}}" is
// text.

// tmpl is a parsed template.
type tmpl interface {
	render(scope map[string]any) any
}

type literal struct{ v any }

func (l literal) render(map[string]any) any { return l.v }

// fieldPath is root followed by steps: a string (.name) or an int ([index]).
type fieldPath struct {
	root  string
	steps []any
}

func (p fieldPath) render(scope map[string]any) any {
	v := scope[p.root]
	for _, s := range p.steps {
		switch s := s.(type) {
		case string:
			obj, _ := v.(map[string]any)
			v = obj[s]
		case int:
			list, _ := v.([]any)
			if s < 0 {
				s += len(list)
			}
			if s < 0 || s >= len(list) {
				return nil
			}
			v = list[s]
		}
	}
	return v
}

func (p fieldPath) String() string {
	var b strings.Builder
	b.WriteString(p.root)
	for _, s := range p.steps {
		switch s := s.(type) {
		case string:
			b.WriteString("." + s)
		case int:
			b.WriteString("[" + strconv.Itoa(s) + "]")
		}
	}
	return b.String()
}

// text is literal text with placeholders; parts are string or fieldPath.
type text struct{ parts []any }

func (t text) render(scope map[string]any) any {
	var b strings.Builder
	for _, part := range t.parts {
		switch part := part.(type) {
		case string:
			b.WriteString(part)
		case fieldPath:
			b.WriteString(asText(part.render(scope)))
		}
	}
	return b.String()
}

type object map[string]tmpl

func (o object) render(scope map[string]any) any {
	out := make(map[string]any, len(o))
	for k, t := range o {
		out[k] = t.render(scope)
	}
	return out
}

type array []tmpl

func (a array) render(scope map[string]any) any {
	out := make([]any, len(a))
	for i, t := range a {
		out[i] = t.render(scope)
	}
	return out
}

// asText renders a value inside text.
func asText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// parseTemplate parses a JSON value as a template whose paths may start at
// roots. Errors are added at the pointer of the string that holds them.
func parseTemplate(v any, roots []string, file, at string, ps *problems) tmpl {
	switch v := v.(type) {
	case string:
		t, err := parseText(v, roots)
		if err != nil {
			ps.add(file, at, "%v", err)
			return literal{v}
		}
		return t
	case map[string]any:
		o := make(object, len(v))
		for k, x := range v {
			o[k] = parseTemplate(x, roots, file, pointer(at, k), ps)
		}
		return o
	case []any:
		a := make(array, len(v))
		for i, x := range v {
			a[i] = parseTemplate(x, roots, file, pointer(at, strconv.Itoa(i)), ps)
		}
		return a
	}
	return literal{v}
}

// parseTemplates parses each value of m (an update or an input mapping).
func parseTemplates(m map[string]any, roots []string, file, at string, ps *problems) map[string]tmpl {
	out := make(map[string]tmpl, len(m))
	for k, v := range m {
		out[k] = parseTemplate(v, roots, file, pointer(at, k), ps)
	}
	return out
}

func renderAll(m map[string]tmpl, scope map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, t := range m {
		out[k] = t.render(scope)
	}
	return out
}

// parseText parses one string of a template.
func parseText(s string, roots []string) (tmpl, error) {
	if !strings.Contains(s, "{{") {
		return literal{s}, nil
	}
	var parts []any
	rest := s
	for rest != "" {
		open := strings.Index(rest, "{{")
		if open < 0 {
			parts = append(parts, rest)
			break
		}
		if open > 0 {
			parts = append(parts, rest[:open])
		}
		end := strings.Index(rest[open:], "}}")
		if end < 0 {
			return nil, fmt.Errorf("bad template: {{ is not closed")
		}
		p, err := parsePath(strings.TrimSpace(rest[open+2:open+end]), roots)
		if err != nil {
			return nil, fmt.Errorf("bad template: %v", err)
		}
		parts = append(parts, p)
		rest = rest[open+end+2:]
	}
	if len(parts) == 1 {
		if p, ok := parts[0].(fieldPath); ok {
			return p, nil
		}
	}
	return text{parts}, nil
}

// parsePath reads root(.name|[index])*.
func parsePath(s string, roots []string) (fieldPath, error) {
	i := strings.IndexAny(s, ".[")
	if i < 0 {
		i = len(s)
	}
	p := fieldPath{root: s[:i]}
	if !slices.Contains(roots, p.root) {
		if p.root == "" {
			return p, fmt.Errorf("%q is not a path", s)
		}
		return p, fmt.Errorf("%q: unknown root %q here (use %s)", s, p.root, strings.Join(roots, ", "))
	}
	rest := s[i:]
	for rest != "" {
		switch rest[0] {
		case '.':
			n := 1
			for n < len(rest) && isNameByte(rest[n]) {
				n++
			}
			if n == 1 {
				return p, fmt.Errorf("%q: a name must follow '.'", s)
			}
			p.steps = append(p.steps, rest[1:n])
			rest = rest[n:]
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return p, fmt.Errorf("%q: [ is not closed", s)
			}
			index, err := strconv.Atoi(rest[1:end])
			if err != nil {
				return p, fmt.Errorf("%q: [%s] is not an integer index", s, rest[1:end])
			}
			p.steps = append(p.steps, index)
			rest = rest[end+1:]
		default:
			return p, fmt.Errorf("%q: unexpected %q", s, rest[:1])
		}
	}
	return p, nil
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

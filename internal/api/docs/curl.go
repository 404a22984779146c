package docs

import (
	"encoding/json"
	"slices"
	"strings"
)

// baseVar stands for the server's address in curl examples; the page's
// script replaces it with the address the page was loaded from.
const baseVar = "$BASE_URL"

// curl writes an example request: path parameters stay {placeholders},
// required query and header parameters get example values, credentials come
// from environment variables, and a JSON body is built from the schema.
func (b *builder) curl(o *operation, params []*param, security []any, hasBody bool, schema, example any) string {
	base := baseVar
	if servers := b.doc.list("servers"); len(servers) > 0 {
		if so, ok := servers[0].(*object); ok {
			u := strings.TrimRight(so.str("url"), "/")
			if strings.Contains(u, "://") {
				base = u
			} else {
				base = baseVar + u
			}
		}
	}
	var query, headers []string
	for _, p := range params {
		if !p.required {
			continue
		}
		v := "{" + p.name + "}"
		if p.example != nil {
			v = plain(p.example)
		} else if ex := b.example(p.schema, nil, 0, false); ex != nil {
			v = plain(ex)
		}
		switch p.in {
		case "query":
			query = append(query, p.name+"="+v)
		case "header":
			headers = append(headers, p.name+": "+v)
		}
	}
	var auth []string
	if len(security) > 0 {
		if req, ok := security[0].(*object); ok {
			for _, name := range req.keys() {
				s := b.deref(b.doc.obj("components").obj("securitySchemes").get(name))
				switch s.str("type") {
				case "apiKey":
					switch s.str("in") {
					case "header":
						headers = append(headers, s.str("name")+": $API_KEY")
					case "query":
						query = append(query, s.str("name")+"=$API_KEY")
					case "cookie":
						auth = append(auth, "-b "+dq(s.str("name")+"=", "$API_KEY"))
					}
				case "http":
					if strings.EqualFold(s.str("scheme"), "basic") {
						auth = append(auth, "-u "+dq("", "$USERNAME:$PASSWORD"))
					} else {
						headers = append(headers, "Authorization: Bearer $TOKEN")
					}
				case "oauth2", "openIdConnect":
					headers = append(headers, "Authorization: Bearer $TOKEN")
				}
			}
		}
	}

	url := o.Path
	if len(query) > 0 {
		url += "?" + strings.Join(query, "&")
	}
	first := "curl"
	if o.Method == "HEAD" {
		first += " -I"
	} else if o.Method != "GET" {
		first += " -X " + o.Method
	}
	lines := []string{first + " " + urlArg(base, url)}
	for _, h := range headers {
		lines = append(lines, "-H "+headerArg(h))
	}
	lines = append(lines, auth...)
	if hasBody {
		if example == nil {
			example = b.example(schema, nil, 0, true)
		}
		if example == nil {
			example = newObject()
		}
		lines = append(lines, `-H "Content-Type: application/json"`)
		lines = append(lines, "-d "+sq(jsonIndented(example)))
	}
	return strings.Join(lines, " \\\n  ")
}

// plain renders a value for a URL or header: strings without quotes.
func plain(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return jsonText(v)
}

var dqEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`")

// dq double-quotes for the shell: lit is escaped, vars is left to expand.
func dq(lit, vars string) string {
	return `"` + dqEscaper.Replace(lit) + vars + `"`
}

// urlArg quotes base+path, leaving a leading $BASE_URL to expand.
func urlArg(base, path string) string {
	if rest, ok := strings.CutPrefix(base, baseVar); ok {
		return `"` + baseVar + dqEscaper.Replace(rest+path) + `"`
	}
	return dq(base+path, "")
}

// headerArg keeps $API_KEY and $TOKEN expandable and escapes the rest.
func headerArg(h string) string {
	for _, v := range []string{"$API_KEY", "$TOKEN"} {
		if lit, ok := strings.CutSuffix(h, v); ok {
			return dq(lit, v)
		}
	}
	return dq(h, "")
}

// sq single-quotes for the shell.
func sq(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// example builds a value that satisfies the outline of a schema: its own
// example, default or first enum value, else required properties filled by
// type. top lists every writable property of an object without required
// ones, so a partial update still shows its fields.
func (b *builder) example(s any, stack []string, depth int, top bool) any {
	o, ok := s.(*object)
	if !ok || depth > 6 {
		return nil
	}
	for _, kw := range []string{"example", "default", "const"} {
		if v, ok := o.vals[kw]; ok {
			return v
		}
	}
	if l := o.list("examples"); len(l) > 0 {
		return l[0]
	}
	if ref := o.str("$ref"); ref != "" {
		if slices.Contains(stack, ref) {
			return nil
		}
		_, _, t := b.resolveRef(ref)
		return b.example(t, append(slices.Clip(stack), ref), depth+1, top)
	}
	if enum := o.list("enum"); len(enum) > 0 {
		for _, v := range enum {
			if v != nil {
				return v
			}
		}
		return nil
	}
	if parts := o.list("allOf"); len(parts) > 0 {
		merged := newObject()
		for _, p := range parts {
			if eo, ok := b.example(p, stack, depth+1, top).(*object); ok {
				for _, k := range eo.keys() {
					merged.set(k, eo.get(k))
				}
			}
		}
		return merged
	}
	for _, kw := range []string{"oneOf", "anyOf"} {
		for _, v := range o.list(kw) {
			if isNullSchema(v) {
				continue
			}
			if ex := b.example(v, stack, depth+1, top); ex != nil {
				return ex
			}
		}
	}
	t := ""
	for _, typ := range schemaTypes(o) {
		if typ != "null" {
			t = typ
			break
		}
	}
	if t == "" {
		switch {
		case o.has("properties"):
			t = "object"
		case o.has("items"):
			t = "array"
		}
	}
	switch t {
	case "object":
		out := newObject()
		props := o.obj("properties")
		required := map[string]bool{}
		for _, r := range o.list("required") {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
		for _, k := range props.keys() {
			ps, _ := props.get(k).(*object)
			if required[k] || (top && len(required) == 0 && !b.readOnly(ps)) {
				out.set(k, b.example(ps, stack, depth+1, false))
			}
		}
		return out
	case "array":
		return []any{}
	case "string":
		switch o.str("format") {
		case "date-time":
			return "2024-01-01T00:00:00Z"
		case "date":
			return "2024-01-01"
		case "uuid":
			return "00000000-0000-0000-0000-000000000000"
		}
		return "string"
	case "integer", "number":
		if m, ok := o.vals["minimum"].(json.Number); ok {
			return m
		}
		return json.Number("0")
	case "boolean":
		return false
	}
	return nil
}

func (b *builder) readOnly(s *object) bool {
	for range 8 {
		if s == nil {
			return false
		}
		if s.boolean("readOnly") {
			return true
		}
		ref := s.str("$ref")
		if ref == "" {
			return false
		}
		_, _, t := b.resolveRef(ref)
		s, _ = t.(*object)
	}
	return false
}

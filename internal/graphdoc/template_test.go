package graphdoc

import (
	"testing"
)

func TestTemplates(t *testing.T) {
	scope := map[string]any{
		"state": map[string]any{
			"name":  "Ada",
			"n":     mustJSON(t, `42`),
			"tags":  []any{"a", "b", "c"},
			"order": map[string]any{"id": mustJSON(t, `7`), "lines": []any{map[string]any{"sku": "x-1"}}},
			"none":  nil,
			"flag":  true,
		},
		"context": map[string]any{"lang": "fr"},
	}
	cases := []struct {
		template any
		want     string // JSON
	}{
		{"plain text", `"plain text"`},
		{"a lone }} is text", `"a lone }} is text"`},
		{"{{ state.name }}", `"Ada"`},
		{"{{state.n}}", `42`},
		{"{{ state.order }}", `{"id": 7, "lines": [{"sku": "x-1"}]}`},
		{"{{ state.order.lines[0].sku }}", `"x-1"`},
		{"{{ state.tags[-1] }}", `"c"`},
		{"{{ state.tags[3] }}", `null`},
		{"{{ state.tags[-4] }}", `null`},
		{"{{ state.name.first }}", `null`},
		{"{{ state.missing.deep[0] }}", `null`},
		{"{{ state.tags.0 }}", `null`},
		{"{{ context.lang }}", `"fr"`},
		{"Hi {{ state.name }} ({{ state.n }}, {{ state.flag }}, [{{ state.none }}])", `"Hi Ada (42, true, [])"`},
		{"tags: {{ state.tags }}", `"tags: [\"a\",\"b\",\"c\"]"`},
		{"{{ state.name }}{{ state.n }}", `"Ada42"`},
		{map[string]any{"who": "{{ state.name }}", "list": []any{"{{ state.n }}", 1, nil, false}},
			`{"who": "Ada", "list": [42, 1, null, false]}`},
		{mustJSON(t, `3.5`), `3.5`},
	}
	for _, c := range cases {
		var ps problems
		tm := parseTemplate(c.template, stateRoots, "f", "/x", &ps)
		if err := ps.err(); err != nil {
			t.Errorf("%v: %v", c.template, err)
			continue
		}
		jsonEqual(t, tm.render(scope), c.want)
	}

	bad := map[string]string{
		"{{ state.name":      "bad template: {{ is not closed",
		"{{ }}":              `bad template: "" is not a path`,
		"{{ name }}":         `bad template: "name": unknown root "name" here (use state, context)`,
		"{{ state..x }}":     `bad template: "state..x": a name must follow '.'`,
		"{{ state[x] }}":     `bad template: "state[x]": [x] is not an integer index`,
		"{{ state[1 }}":      `bad template: "state[1": [ is not closed`,
		"{{ state.a b }}":    `bad template: "state.a b": unexpected " "`,
		"{{ state.a | up }}": `bad template: "state.a | up": unexpected " "`,
	}
	for template, want := range bad {
		var ps problems
		parseTemplate(map[string]any{"k": template}, stateRoots, "f", "/x", &ps)
		if err := ps.err(); err == nil || err.Error() != "f: /x/k: "+want {
			t.Errorf("%q: %v, want %s", template, err, want)
		}
	}
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := decodeJSON([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

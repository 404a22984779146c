package graphdoc

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"gopkg.in/yaml.v3"
)

const helperDoc = `
state: {topic: {}}
nodes: {h: {kind: transform, update: {topic: done}}}
edges: [{from: __start__, to: h}]
`

// TestRules breaks one rule per case — of the schema, of the document's
// meaning, of the config, of the deployment — and checks the problem names
// the file, the JSON path and the rule.
func TestRules(t *testing.T) {
	base, err := os.ReadFile("testdata/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		rule  string
		patch map[string]string // JSON Pointer in graphs/g.yaml → YAML value ("-": delete)
		files map[string]string // whole files, replacing the defaults
		opts  func(*Options)
		want  string
	}{
		// The JSON Schema.
		{rule: "nodes are required", patch: map[string]string{"/nodes": "-"},
			want: "graphs/g.yaml: /nodes: is required"},
		{rule: "no unknown top-level keys", patch: map[string]string{"/node": "{}"},
			want: "graphs/g.yaml: /node: is not a known property here"},
		{rule: "channel names", patch: map[string]string{"/state/1st": "{}"},
			want: "graphs/g.yaml: /state/1st: is not a valid name (must match ^[A-Za-z][A-Za-z0-9_-]{0,63}$)"},
		{rule: "known reducers", patch: map[string]string{"/state/count/reducer": "sum"},
			want: "graphs/g.yaml: /state/count/reducer: must be one of last_value, append, add, messages"},
		{rule: "an add channel's default is a number", patch: map[string]string{"/state/count/default": "zero"},
			want: "graphs/g.yaml: /state/count/default: must be number, not string"},
		{rule: "an append channel's default is a list", patch: map[string]string{"/state/log": "{reducer: append, default: {}}"},
			want: "graphs/g.yaml: /state/log/default: must be array, not object"},
		{rule: "known node kinds", patch: map[string]string{"/nodes/llm/kind": "llm"},
			want: "graphs/g.yaml: /nodes/llm/kind: must be one of chat_model, tools, http, transform, interrupt, subgraph, function"},
		{rule: "a chat model names its model", patch: map[string]string{"/nodes/llm/model": "-"},
			want: "graphs/g.yaml: /nodes/llm/model: is required"},
		{rule: "temperature at most 2", patch: map[string]string{"/nodes/llm/temperature": "3"},
			want: "graphs/g.yaml: /nodes/llm/temperature: must be <= 2"},
		{rule: "no unknown node fields", patch: map[string]string{"/nodes/llm/temprature": "1"},
			want: "graphs/g.yaml: /nodes/llm/temprature: is not a known property here"},
		{rule: "a field of another kind", patch: map[string]string{"/nodes/tidy/url": "https://x.example.com"},
			want: "graphs/g.yaml: /nodes/tidy/url: is not a known property here"},
		{rule: "secret names", patch: map[string]string{"/nodes/llm/api_key_secret": "my key"},
			want: "graphs/g.yaml: /nodes/llm/api_key_secret: must match ^[A-Za-z_][A-Za-z0-9_]{0,254}$"},
		{rule: "timeouts are positive", patch: map[string]string{"/nodes/fn/timeout": "0"},
			want: "graphs/g.yaml: /nodes/fn/timeout: must be > 0"},
		{rule: "timeouts at most 900 s", patch: map[string]string{"/nodes/fn/timeout": "1000"},
			want: "graphs/g.yaml: /nodes/fn/timeout: must be <= 900"},
		{rule: "a tool is http or function", patch: map[string]string{"/tools/weather/kind": "lambda"},
			want: "graphs/g.yaml: /tools/weather/kind: must be one of http, function"},
		{rule: "edges are required", patch: map[string]string{"/edges": "[]"},
			want: "graphs/g.yaml: /edges: must have at least 1 items"},
		{rule: "nothing goes to __start__", patch: map[string]string{"/edges/5/to": "__start__"},
			want: "graphs/g.yaml: /edges/5/to: must match ^([A-Za-z][A-Za-z0-9_-]{0,63}|__end__)$"},
		{rule: "a switch edge has cases", patch: map[string]string{"/edges/3/cases": "-"},
			want: "graphs/g.yaml: /edges/3/cases: is required"},
		{rule: "a switch reads the state", patch: map[string]string{"/edges/3/when": "topic"},
			want: "graphs/g.yaml: /edges/3/when: must match ^state[.\\[]"},
		{rule: "input_schema is a JSON Schema", patch: map[string]string{"/input_schema": "{type: 5}"},
			want: "graphs/g.yaml: /input_schema/type: must be one of array, boolean, integer, null, number, object, string"},

		// The document's meaning.
		{rule: "edges leave known nodes", patch: map[string]string{"/edges/2/from": "tool"},
			want: `graphs/g.yaml: /edges/2/from: no node "tool" in this graph`},
		{rule: "edges reach known nodes", patch: map[string]string{"/edges/3/cases/a": "tidyup"},
			want: `graphs/g.yaml: /edges/3/cases/a: no node "tidyup" in this graph`},
		{rule: "something follows __start__", patch: map[string]string{"/edges/0/from": "ask"},
			want: "graphs/g.yaml: /edges: no edge leaves __start__"},
		{rule: "updates write channels", patch: map[string]string{"/nodes/tidy/update/topics": "x"},
			want: "graphs/g.yaml: /nodes/tidy/update/topics: is not a state channel"},
		{rule: "templates are closed", patch: map[string]string{"/nodes/tidy/update/topic": "'{{ state.topic'"},
			want: "graphs/g.yaml: /nodes/tidy/update/topic: bad template: {{ is not closed"},
		{rule: "templates use the place's roots", patch: map[string]string{"/nodes/tidy/update/topic": "'{{ response.body }}'"},
			want: `graphs/g.yaml: /nodes/tidy/update/topic: bad template: "response.body": unknown root "response" here (use state, context)`},
		{rule: "template indexes are integers", patch: map[string]string{"/nodes/ask/value": "'{{ state.messages[last] }}'"},
			want: `graphs/g.yaml: /nodes/ask/value: bad template: "state.messages[last]": [last] is not an integer index`},
		{rule: "a switch path is a path", patch: map[string]string{"/edges/3/when": "state."},
			want: `graphs/g.yaml: /edges/3/when: "state.": a name must follow '.'`},
		{rule: "chat models use declared tools", patch: map[string]string{"/nodes/llm/tools": "[weather, search]"},
			want: `graphs/g.yaml: /nodes/llm/tools/1: no tool "search" is declared under tools`},
		{rule: "messages live in a channel", patch: map[string]string{"/nodes/llm/messages": "history"},
			want: `graphs/g.yaml: /nodes/llm/messages: the state has no channel "history" for messages`},
		{rule: "a messages channel is a list", patch: map[string]string{"/state/messages/reducer": "last_value"},
			want: `graphs/g.yaml: /nodes/llm/messages: channel "messages" holds messages, so its reducer must be messages or append`},
		{rule: "a tools node has tools", patch: map[string]string{"/tools": "-", "/nodes/llm/tools": "-"},
			want: "graphs/g.yaml: /nodes/tools: a tools node needs tools: the document declares none"},
		{rule: "a GET has no body", patch: map[string]string{"/nodes/fetch/method": "GET", "/nodes/fetch/body": "{q: 1}"},
			want: "graphs/g.yaml: /nodes/fetch/body: a GET request has no body (use query)"},
		{rule: "header names are tokens", patch: map[string]string{"/nodes/fetch/headers": "{'X Topic': a}"},
			want: "graphs/g.yaml: /nodes/fetch/headers/X Topic: is not a valid header name"},
		{rule: "schemas load nothing from outside", patch: map[string]string{"/input_schema": "{$ref: 'file:///etc/passwd'}"},
			want: "graphs/g.yaml: /input_schema: is not a usable JSON Schema"},
		{rule: "subgraphs exist", patch: map[string]string{"/nodes/sub/graph": "helpers"},
			want: `graphs/g.yaml: /nodes/sub/graph: no graph "helpers" in the graph config (graphs: [g helper])`},
		{rule: "a subgraph's input writes its channels", patch: map[string]string{"/nodes/sub/input": "{subject: '{{ state.topic }}'}"},
			want: `graphs/g.yaml: /nodes/sub/input/subject: graph "helper" has no state channel "subject"`},
		{rule: "no graph contains itself", patch: map[string]string{"/nodes/sub/graph": "g"},
			want: "graphs/g.yaml: /nodes/sub/graph: subgraph cycle: g → g"},
		{rule: "no subgraph cycle",
			files: map[string]string{"graphs/helper.yaml": `
state: {topic: {}}
nodes: {back: {kind: subgraph, graph: g}}
edges: [{from: __start__, to: back}]
`},
			want: "graphs/g.yaml: /nodes/sub/graph: subgraph cycle: g → helper → g"},

		// The files.
		{rule: "documents are YAML or JSON", files: map[string]string{"graphs/g.yaml": "state: [\n"},
			want: "graphs/g.yaml: /: is not valid YAML or JSON"},
		{rule: "templates are quoted in YAML", files: map[string]string{"graphs/g.yaml": "value: {{ state.x }}\n"},
			want: `graphs/g.yaml: /: is not valid YAML or JSON: a value starts with {{ and is not quoted (in YAML, write "{{ state.x }}")`},
		{rule: "a config names graphs", files: map[string]string{"stepgraph.yaml": "dependencies: [.]\n"},
			want: "stepgraph.yaml: /graphs: is required"},
		{rule: "graph ids", files: map[string]string{"stepgraph.yaml": "graphs: {'my agent': graphs/g.yaml}\n"},
			want: "stepgraph.yaml: /graphs/my agent: is not a valid name"},
		{rule: "graphs are documents, not code", files: map[string]string{"stepgraph.yaml": "graphs: {g: ./agent.py:graph}\n"},
			want: `stepgraph.yaml: /graphs/g: must match \.(ya?ml|json)$`},
		{rule: "documents stay in the repository", files: map[string]string{"stepgraph.yaml": "graphs: {g: ../g.yaml}\n"},
			want: "stepgraph.yaml: /graphs/g: must be a path inside the repository, relative to stepgraph.yaml"},
		{rule: "documents exist", files: map[string]string{"stepgraph.yaml": "graphs: {g: graphs/missing.yaml}\n"},
			want: "stepgraph.yaml: /graphs/g: graphs/missing.yaml does not exist"},
		{rule: "inline documents are checked too", files: map[string]string{"stepgraph.yaml": "graphs: {g: {state: {}, nodes: {}, edges: []}}\n"},
			want: "stepgraph.yaml: /graphs/g/nodes: must have at least 1 entries"},

		// The deployment.
		{rule: "named secrets exist", patch: map[string]string{"/nodes/llm/api_key_secret": "OPENAI_API_KEY"},
			want: `graphs/g.yaml: /nodes/llm/api_key_secret: the deployment has no secret "OPENAI_API_KEY"`},
		{rule: "URLs are https", patch: map[string]string{"/nodes/fetch/url": "http://api.example.com/x"},
			want: "graphs/g.yaml: /nodes/fetch/url: must use https"},
		{rule: "URLs are absolute", patch: map[string]string{"/tools/weather/url": "/weather"},
			want: "graphs/g.yaml: /tools/weather/url: must be an absolute URL"},
		{rule: "function nodes need a runtime", opts: func(o *Options) { o.Runtime = nil },
			want: "graphs/g.yaml: /nodes/fn: runs in the deployment's runtime, and this deployment has none"},
		{rule: "outbound calls need a client", opts: func(o *Options) { o.HTTPClient = nil },
			want: "graphs/g.yaml: /nodes/llm: makes outbound calls, and no HTTP client is configured"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			fsys := files(map[string]string{"g": patched(t, base, c.patch), "helper": helperDoc})
			for name, data := range c.files {
				fsys[name] = &fstest.MapFile{Data: []byte(data)}
			}
			opts := Options{Secrets: SecretMap{"KEY": "sk-secret"}, Runtime: &HTTPRuntime{}, HTTPClient: testOptions(nil).HTTPClient}
			if c.opts != nil {
				c.opts(&opts)
			}
			cfg, err := Load(fsys, "stepgraph.yaml")
			if err == nil {
				_, err = cfg.Compile(opts)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v, want a *ValidationError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("problems:\n%v\nwant one containing:\n%s", err, c.want)
			}
			if strings.Contains(err.Error(), "sk-secret") {
				t.Errorf("a secret value leaked into %v", err)
			}
		})
	}
}

// TestRulesBaseIsValid makes sure every case of TestRules fails for its own
// rule only.
func TestRulesBaseIsValid(t *testing.T) {
	base, err := os.ReadFile("testdata/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Secrets: SecretMap{"KEY": "k"}, Runtime: &HTTPRuntime{}, HTTPClient: testOptions(nil).HTTPClient}
	compileDocs(t, opts, map[string]string{"g": string(base), "helper": helperDoc})
}

// patched applies patches (JSON Pointer → YAML value, "-" deletes) to the
// YAML document doc and returns it as JSON (which is YAML).
func patched(t *testing.T, doc []byte, patches map[string]string) string {
	t.Helper()
	v, err := decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	for ptr, raw := range patches {
		var value any
		if raw != "-" {
			if err := yaml.Unmarshal([]byte(raw), &value); err != nil {
				t.Fatalf("patch %s: %v", ptr, err)
			}
			if value, err = jsonValue(value); err != nil {
				t.Fatal(err)
			}
		}
		tokens := strings.Split(ptr, "/")[1:]
		parent := v
		for _, tok := range tokens[:len(tokens)-1] {
			parent = child(t, parent, tok)
		}
		last := tokens[len(tokens)-1]
		switch p := parent.(type) {
		case map[string]any:
			if raw == "-" {
				delete(p, last)
			} else {
				p[last] = value
			}
		case []any:
			i, _ := strconv.Atoi(last)
			p[i] = value
		default:
			t.Fatalf("patch %s: no such place", ptr)
		}
	}
	out, err := jsonMarshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func child(t *testing.T, v any, tok string) any {
	switch v := v.(type) {
	case map[string]any:
		return v[tok]
	case []any:
		i, err := strconv.Atoi(tok)
		if err != nil || i >= len(v) {
			t.Fatalf("no item %s", tok)
		}
		return v[i]
	}
	t.Fatalf("cannot step into %T with %s", v, tok)
	return nil
}

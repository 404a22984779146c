package graphdoc

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stepgraph/stepgraph/internal/graph"
)

func TestSchemasAreDraft2020(t *testing.T) {
	for name, raw := range map[string][]byte{"document": DocumentSchema, "config": ConfigSchema} {
		var s map[string]any
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema = %v", name, s["$schema"])
		}
	}
	_ = schemas() // compiles both, or panics
}

func TestLoad(t *testing.T) {
	const doc = `{"state": {"n": {"reducer": "add"}}, "nodes": {"inc": {"kind": "transform", "update": {"n": 1}}},
		"edges": [{"from": "__start__", "to": "inc"}]}`
	fsys := fstest.MapFS{
		"deploy/stepgraph.json": {Data: []byte(`{"dependencies": ["."], "graphs": {
			"fromfile": "graphs/counter.json",
			"inline": ` + doc + `}}`)},
		"deploy/graphs/counter.json": {Data: []byte(doc)},
	}
	cfg, err := Load(fsys, "deploy/stepgraph.json")
	if err != nil {
		t.Fatal(err)
	}
	graphs, err := cfg.Compile(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Graphs(), ",") != "fromfile,inline" || len(graphs) != 2 {
		t.Fatalf("graphs %v", cfg.Graphs())
	}
	for id, g := range graphs {
		if g.Name() != id {
			t.Errorf("graph %q is named %q", id, g.Name())
		}
		cp, out := run(t, g, nil, map[string]any{"n": 1}, graph.Options{})
		wantStatus(t, out, graph.Done)
		jsonEqual(t, cp.Values, `{"n": 2}`)
	}

	// Problems in a file name it; inline ones name the config and their path in it.
	fsys["deploy/graphs/counter.json"].Data = []byte(strings.Replace(doc, `"n": 1`, `"m": 1`, 1))
	fsys["deploy/stepgraph.json"].Data = []byte(strings.Replace(string(fsys["deploy/stepgraph.json"].Data), `"add"`, `"sum"`, 1))
	_, err = Load(fsys, "deploy/stepgraph.json")
	want := "deploy/graphs/counter.json: /nodes/inc/update/m: is not a state channel\n" +
		"deploy/stepgraph.json: /graphs/inline/state/n/reducer: must be one of last_value, append, add, messages"
	if err == nil || err.Error() != want {
		t.Errorf("problems:\n%v\nwant:\n%s", err, want)
	}

	fsys["big.yaml"] = &fstest.MapFile{Data: []byte(strings.Repeat("#", MaxFileBytes+1))}
	if _, err := Load(fsys, "big.yaml"); err == nil || err.Error() != "big.yaml: /: is larger than 1048576 bytes" {
		t.Errorf("a big file: %v", err)
	}
	if _, err := Load(fsys, "nope.yaml"); err == nil || err.Error() != "nope.yaml: /: does not exist" {
		t.Errorf("a missing config: %v", err)
	}
}

func TestDrawing(t *testing.T) {
	fsys := docsExample(t)
	cfg, err := Load(fsys, "stepgraph.yaml")
	if err != nil {
		t.Fatal(err)
	}
	graphs, err := cfg.Compile(Options{Secrets: SecretMap{"OPENAI_API_KEY": "k"}, Runtime: &HTTPRuntime{}, HTTPClient: guardedClient()})
	if err != nil {
		t.Fatal(err)
	}
	info := graphs["support"].Info()
	jsonEqual(t, info.Edges, `[
		{"source": "__start__", "target": "triage"},
		{"source": "agent", "target": "__end__", "conditional": true},
		{"source": "agent", "target": "tools", "conditional": true},
		{"source": "tools", "target": "agent"},
		{"source": "triage", "target": "agent"}]`)
	jsonEqual(t, info.StateSchema["properties"], `{
		"messages": {"type": "array"},
		"topic": {"type": "string"},
		"user_name": {"type": "string", "default": "there"}}`)
	if info.Description == "" {
		t.Error("no description")
	}
}

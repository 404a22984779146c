package graphdoc

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// FuzzGraphDocument parses arbitrary graph configs (YAML or JSON, inline
// documents), compiles what parses and runs what compiles on arbitrary
// input: never a panic; every refusal is a *ValidationError naming its
// place; a run fails only with an error in its outcome. Outbound nodes get
// a client that answers nothing, so no input reaches the network.
func FuzzGraphDocument(f *testing.F) {
	rules, err := os.ReadFile("testdata/rules.yaml")
	if err != nil {
		f.Fatal(err)
	}
	inline := "graphs:\n  g:\n" + indent(string(rules), "    ") + "\n  helper:\n    state: {x: {}}\n    nodes: {t: {kind: transform, update: {x: 1}}}\n    edges: [{from: __start__, to: t}]\n"
	f.Add([]byte(inline), []byte(`{"topic": "a"}`))
	f.Add([]byte(`{"graphs": {"g": {"state": {"n": {"reducer": "add", "default": 0}}, "nodes": {"t": {"kind": "transform", "update": {"n": "{{ state.n }}"}}}, "edges": [{"from": "__start__", "to": "t"}]}}}`), []byte(`{"n": 2}`))
	f.Add([]byte(`graphs: {g: {state: {a: {}}, nodes: {i: {kind: interrupt, value: "{{ state.a }}", update: {a: "{{ resume }}"}}}, edges: [{from: __start__, to: i}]}}`), []byte(`{"a": [1, {"b": null}]}`))
	f.Add([]byte(`graphs: {g: {state: {a: {}}, nodes: {}, edges: []}}`), []byte(`[]`))
	f.Add([]byte("graphs: [1, 2]"), []byte(`null`))
	f.Add([]byte("{{{"), []byte(`"x"`))
	noNet := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("no network in the fuzz test")
	}), Timeout: time.Second}
	f.Fuzz(func(t *testing.T, config, input []byte) {
		cfg, err := ParseConfig("fuzz.yaml", config, nil)
		if err != nil {
			checkValidation(t, "ParseConfig", err)
			return
		}
		graphs, err := cfg.Compile(Options{Secrets: SecretMap{"KEY": "k"}, HTTPClient: noNet})
		if err != nil {
			checkValidation(t, "Compile", err)
			return
		}
		var in any
		if decodeJSON(input, &in) != nil {
			return
		}
		for id, g := range graphs {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, out, err := graph.Run(ctx, g, nil, in, graph.Options{RecursionLimit: 10}, nil)
			cancel()
			if err != nil && ctx.Err() == nil {
				t.Fatalf("graph %s: engine error %v", id, err)
			}
			if out.Status == graph.Failed && out.Error == nil {
				t.Fatalf("graph %s failed without an error", id)
			}
		}
	})
}

func checkValidation(t *testing.T, what string, err error) {
	t.Helper()
	var v *ValidationError
	if !errors.As(err, &v) || len(v.Problems) == 0 {
		t.Fatalf("%s: %T %v, want a *ValidationError with problems", what, err, err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = by + l
	}
	return strings.Join(lines, "\n")
}

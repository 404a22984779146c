package graphdoc

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// files makes a repository: a graph config naming one graph per document
// (graphs/<id>.yaml), and the documents.
func files(docs map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	var config strings.Builder
	config.WriteString("graphs:\n")
	for id, doc := range docs {
		config.WriteString("  " + id + ": graphs/" + id + ".yaml\n")
		fsys["graphs/"+id+".yaml"] = &fstest.MapFile{Data: []byte(doc)}
	}
	fsys["stepgraph.yaml"] = &fstest.MapFile{Data: []byte(config.String())}
	return fsys
}

// testOptions are Options for graphs that call loopback test servers.
func testOptions(rt Runtime) Options {
	return Options{
		Secrets:           SecretMap{"KEY": "sk-test-secret-value"},
		Runtime:           rt,
		HTTPClient:        &http.Client{},
		AllowLoopbackHTTP: true,
	}
}

// compileDocs loads and compiles docs, failing the test on any problem.
func compileDocs(t *testing.T, opts Options, docs map[string]string) map[string]*graph.Graph {
	t.Helper()
	cfg, err := Load(files(docs), "stepgraph.yaml")
	if err != nil {
		t.Fatalf("Load:\n%v", err)
	}
	graphs, err := cfg.Compile(opts)
	if err != nil {
		t.Fatalf("Compile:\n%v", err)
	}
	return graphs
}

// run runs g from a new thread (from nil) or from a checkpoint.
func run(t *testing.T, g *graph.Graph, from *graph.Checkpoint, input any, opts graph.Options) (graph.Checkpoint, graph.Outcome) {
	t.Helper()
	cp, out, err := graph.Run(context.Background(), g, from, input, opts, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return cp, out
}

func wantStatus(t *testing.T, out graph.Outcome, want graph.Status) {
	t.Helper()
	if out.Status != want {
		t.Fatalf("status %s (error %v), want %s", out.Status, out.Error, want)
	}
}

// wantError checks a failed outcome's kind and that its message contains
// every fragment.
func wantError(t *testing.T, out graph.Outcome, kind string, fragments ...string) {
	t.Helper()
	wantStatus(t, out, graph.Failed)
	if out.Error.Kind != kind {
		t.Errorf("error kind %s (%s), want %s", out.Error.Kind, out.Error.Message, kind)
	}
	for _, f := range fragments {
		if !strings.Contains(out.Error.Message, f) {
			t.Errorf("error %q does not contain %q", out.Error.Message, f)
		}
	}
}

// jsonEqual compares got's JSON encoding with want (any formatting).
func jsonEqual(t *testing.T, got any, want string) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var gv, wv any
	_ = decodeJSON(g, &gv)
	if err := decodeJSON([]byte(want), &wv); err != nil {
		t.Fatalf("bad want: %v", err)
	}
	gb, _ := json.Marshal(gv)
	wb, _ := json.Marshal(wv)
	if string(gb) != string(wb) {
		t.Errorf("got  %s\nwant %s", gb, wb)
	}
}

// readJSON decodes a request body.
func readJSON(t *testing.T, r *http.Request) map[string]any {
	t.Helper()
	var v map[string]any
	if err := decodeJSON(mustRead(r), &v); err != nil {
		t.Errorf("request body: %v", err)
	}
	return v
}

func mustRead(r *http.Request) []byte {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return []byte(b.String())
		}
	}
}

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

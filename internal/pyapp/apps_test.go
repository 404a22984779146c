package pyapp_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	pyruntime "github.com/stepgraph/stepgraph/runtimes/python"
)

func newApps(t *testing.T) *pyapp.Apps {
	t.Helper()
	rt, err := pyruntime.Extract(filepath.Join(t.TempDir(), "runtime"))
	if err != nil {
		t.Fatal(err)
	}
	a := &pyapp.Apps{Python: python(t), RuntimeDir: rt, Dir: filepath.Join(t.TempDir(), "apps"), NoIndex: true}
	t.Cleanup(a.Close)
	return a
}

// TestAppsLifecycle: a revision's app is staged from its checkout, its
// runtime started by Prepare; the next active revision's replaces it; a
// deleted deployment has no runtime and no files left.
func TestAppsLifecycle(t *testing.T) {
	a := newApps(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	checkout := os.DirFS(filepath.Dir(basicApp(t)))
	var procs []string
	for _, rev := range []string{"rev1", "rev2"} {
		app := deployments.RevisionApp{OrgID: "org", DeploymentID: "dep", RevisionID: rev, ConfigPath: "langgraph.json",
			Env: map[string]string{"SOME_SECRET": "s3cret"}}
		if reason, err := a.Stage(ctx, app, checkout); err != nil || reason != "" {
			t.Fatalf("stage %s: %q %v", rev, reason, err)
		}
		ids, reason, err := a.Prepare(ctx, app)
		if err != nil || reason != "" {
			t.Fatalf("prepare %s: %q %v", rev, reason, err)
		}
		if !slices.Equal(ids, []string{"agent", "hitl", "mapreduce", "memory", "parent", "slow"}) {
			t.Errorf("graph ids %v", ids)
		}
		rg := deployments.RevisionGraphs{OrgID: "org", DeploymentID: "dep", RevisionID: rev, App: true, AppConfig: "langgraph.json", GraphIDs: ids}
		if err := a.Activate(ctx, rg); err != nil {
			t.Fatal(err)
		}
		if got := a.Running(); !slices.Equal(got, []string{rev}) {
			t.Errorf("after activating %s, running %v", rev, got)
		}
		g, err := a.Graph(ctx, rg, nil, "hitl")
		if err != nil || g.Foreign == nil || g.Revision.RevisionID != rev {
			t.Fatalf("graph of %s: %+v %v", rev, g, err)
		}
		procs = append(procs, g.Foreign.(*pyapp.Graph).Runtime.(*pyapp.Client).BaseURL)
	}
	if procs[0] == procs[1] {
		t.Errorf("the second revision reuses the first one's runtime %s", procs[0])
	}
	if err := a.Remove(ctx, "dep"); err != nil {
		t.Fatal(err)
	}
	if got := a.Running(); len(got) != 0 {
		t.Errorf("after delete, running %v", got)
	}
	if _, err := os.Stat(filepath.Join(a.Dir, "dep")); !os.IsNotExist(err) {
		t.Errorf("the deployment's files are left: %v", err)
	}
}

// TestAppsFailuresAreReasons: what is wrong with an app fails its revision
// with a message for its developer, never a retried error.
func TestAppsFailuresAreReasons(t *testing.T) {
	a := newApps(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cases := []struct {
		name  string
		files fstest.MapFS
		want  []string
	}{
		{"import error", fstest.MapFS{
			"langgraph.json": {Data: []byte(`{"graphs": {"g": "./g.py:graph"}}`)},
			"g.py":           {Data: []byte("import no_such_module_here\ngraph = None\n")},
		}, []string{"ModuleNotFoundError", "no_such_module_here", "Traceback", "g.py"}},
		{"missing variable", fstest.MapFS{
			"langgraph.json": {Data: []byte(`{"graphs": {"g": "./g.py:graph"}}`)},
			"g.py":           {Data: []byte("x = 1\n")},
		}, []string{"/graphs/g", "no attribute 'graph'"}},
		{"missing dependency", fstest.MapFS{
			"langgraph.json": {Data: []byte(`{"graphs": {"g": "./g.py:graph"}, "dependencies": ["no-such-dist-stepgraph==9.9"]}`)},
			"g.py":           {Data: []byte("graph = None\n")},
		}, []string{"dependencies: pip could not install no-such-dist-stepgraph==9.9"}},
		{"checkpointer", fstest.MapFS{
			"langgraph.json": {Data: []byte(`{"graphs": {"g": "./g.py:graph"}, "checkpointer": {"ttl": {"default_ttl": 60}}}`)},
			"g.py":           {Data: []byte("graph = None\n")},
		}, []string{"langgraph.json: /checkpointer: stepgraph stores every checkpoint", "remove /checkpointer"}},
		{"http", fstest.MapFS{
			"langgraph.json": {Data: []byte(`{"graphs": {"g": "./g.py:graph"}, "http": {"app": "./app.py:app"}}`)},
			"g.py":           {Data: []byte("graph = None\n")},
		}, []string{"langgraph.json: /http: stepgraph serves the HTTP API itself", "remove /http"}},
		{"index without embeddings", fstest.MapFS{
			"langgraph.json": {Data: []byte(`{"graphs": {"g": "./g.py:graph"}, "store": {"index": {"embed": "openai:text-embedding-3-small", "dims": 1536}}}`)},
			"g.py":           {Data: []byte("graph = None\n")},
		}, []string{"/store/index: semantic search needs the server's embeddings endpoint"}},
		{"not a graph", fstest.MapFS{
			"langgraph.json": {Data: []byte(`{"graphs": {"g": "./g.py:graph"}}`)},
			"g.py":           {Data: []byte("graph = 42\n")},
		}, []string{"/graphs/g", "int is not a graph"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := deployments.RevisionApp{OrgID: "org", DeploymentID: "dep", RevisionID: "r" + string(rune('a'+i)), ConfigPath: "langgraph.json"}
			if reason, err := a.Stage(ctx, app, tc.files); err != nil || reason != "" {
				t.Fatalf("stage: %q %v", reason, err)
			}
			_, reason, err := a.Prepare(ctx, app)
			if err != nil {
				t.Fatalf("an app's own failure is a reason, not an error: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(reason, w) {
					t.Errorf("reason %q does not say %q", reason, w)
				}
			}
		})
	}
}

// TestAppsEnvFromLangGraphJSON: a revision's runtime has langgraph.json's
// env (a map or a dotenv file) before its graphs are imported, a
// deployment secret of the same name wins, and no value is logged.
func TestAppsEnvFromLangGraphJSON(t *testing.T) {
	var logs bytes.Buffer
	a := newApps(t)
	a.Log = slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The module refuses to load unless it sees the right values (it
	// names the variable, never its value).
	graph := []byte(`import os
from typing import TypedDict
from langgraph.graph import StateGraph
want = {"FROM_JSON": "json-value-1", "FROM_DOTENV": "dotenv value 2", "SHARED": "secret-value-3"}
for name, value in want.items():
    if os.environ.get(name) != value:
        raise RuntimeError(f"{name} is not what the app's env and secrets say")
import sys
print("loaded with the app's env", file=sys.stderr)
class S(TypedDict):
    v: str
b = StateGraph(S)
b.add_node("n", lambda s: s)
b.set_entry_point("n")
graph = b.compile()
`)
	for i, config := range []string{
		`{"graphs": {"g": "./g.py:graph"}, "env": {"FROM_JSON": "json-value-1", "FROM_DOTENV": "dotenv value 2", "SHARED": "json-loses"}}`,
		`{"graphs": {"g": "./g.py:graph"}, "env": ".env"}`,
	} {
		files := fstest.MapFS{"langgraph.json": {Data: []byte(config)}, "g.py": {Data: graph},
			".env": {Data: []byte("FROM_JSON=json-value-1\nFROM_DOTENV=\"dotenv value 2\"\nSHARED=dotenv-loses\n")}}
		app := deployments.RevisionApp{OrgID: "org", DeploymentID: "dep", RevisionID: fmt.Sprintf("env%d", i), ConfigPath: "langgraph.json",
			Env: map[string]string{"SHARED": "secret-value-3"}}
		if reason, err := a.Stage(ctx, app, files); err != nil || reason != "" {
			t.Fatalf("stage: %q %v", reason, err)
		}
		if ids, reason, err := a.Prepare(ctx, app); err != nil || reason != "" || !slices.Equal(ids, []string{"g"}) {
			t.Fatalf("prepare %s: %v %q %v", config, ids, reason, err)
		}
	}
	if !strings.Contains(logs.String(), "loaded with the app's env") {
		t.Fatalf("the runtime's standard error is not in the log:\n%s", logs.String())
	}
	for _, v := range []string{"json-value-1", "dotenv value 2", "secret-value-3", "loses"} {
		if strings.Contains(logs.String(), v) {
			t.Errorf("a value of the app's environment is in the log: %q\n%s", v, logs.String())
		}
	}
}

// TestAppsIndexWithTheServersEmbeddings: an app asking for a semantic
// index (store.index) loads when the server's store has an embeddings
// endpoint (the same app fails without one: TestAppsFailuresAreReasons).
func TestAppsIndexWithTheServersEmbeddings(t *testing.T) {
	a := newApps(t)
	a.Semantic = true
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	files := fstest.MapFS{
		"langgraph.json": {Data: []byte(`{"graphs": {"g": "./g.py:graph"}, "store": {"index": {"embed": "openai:text-embedding-3-small", "dims": 1536, "fields": ["text"]}}}`)},
		"g.py": {Data: []byte("from typing import TypedDict\nfrom langgraph.graph import StateGraph\nclass S(TypedDict):\n    v: str\n" +
			"b = StateGraph(S)\nb.add_node('n', lambda s: s)\nb.set_entry_point('n')\ngraph = b.compile()\n")},
	}
	app := deployments.RevisionApp{OrgID: "org", DeploymentID: "dep", RevisionID: "indexed", ConfigPath: "langgraph.json"}
	if reason, err := a.Stage(ctx, app, files); err != nil || reason != "" {
		t.Fatalf("stage: %q %v", reason, err)
	}
	if ids, reason, err := a.Prepare(ctx, app); err != nil || reason != "" || !slices.Equal(ids, []string{"g"}) {
		t.Fatalf("prepare: %v %q %v", ids, reason, err)
	}
}

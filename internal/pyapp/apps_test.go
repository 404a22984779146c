package pyapp_test

import (
	"context"
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

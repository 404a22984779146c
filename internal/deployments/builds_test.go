package deployments_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/sources"
)

// appRepo is a hosted repository holding one LangGraph app.
type appRepo struct{ files fstest.MapFS }

func (r appRepo) CheckURL(string) error { return nil }

func (r appRepo) CheckFiles(_ context.Context, _, _, _ string, read func(fs.FS) error) (sources.Checkout, error) {
	if read != nil {
		if err := read(r.files); err != nil {
			return sources.Checkout{}, err
		}
	}
	return sources.Checkout{CommitSHA: strings.Repeat("a", 40)}, nil
}

// fakeBuilder records the builds it starts and reports what the test
// sets.
type fakeBuilder struct {
	started []string // the app's files it was given, per build
	build   deployments.AppBuild
	removed []string
}

func (b *fakeBuilder) RemoveBuilds(_ context.Context, deploymentID string) error {
	b.removed = append(b.removed, deploymentID)
	return nil
}

func (b *fakeBuilder) StartBuild(_ context.Context, app deployments.RevisionApp, fsys fs.FS) (string, string, error) {
	files, err := fs.Glob(fsys, "*")
	if err != nil {
		return "", "", err
	}
	b.started = append(b.started, app.RevisionID+" "+app.ConfigPath+" "+strings.Join(files, ","))
	return "build-1", "", nil
}

func (b *fakeBuilder) Build(context.Context, deployments.RevisionApp, string) (deployments.AppBuild, error) {
	return b.build, nil
}

const builtManifest = `{"handler": "stepgraph_runtime.lambda_handler.handler", "runtime": "python3.11",
	"architecture": "x86_64", "config": "langgraph.json", "graphs": {"hitl": "./hitl.py:graph", "agent": "./agent.py:graph"}}`

// A hosted_repo LangGraph app on a server with an AppBuilder: building
// starts the build and the revision waits in BUILDING (Provision says
// when to look again) until it ends; a failed build is BUILD_FAILED with
// its reason; a built one becomes the deployment's function from the zip,
// with the revision's secrets, and serves the manifest's graphs.
func TestAppBuiltElsewhere(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	svc.Sources = appRepo{files: fstest.MapFS{
		"langgraph.json": {Data: []byte(`{"dependencies": ["."], "graphs": {"hitl": "./hitl.py:graph", "agent": "./agent.py:graph"}}`)},
		"hitl.py":        {Data: []byte("graph = None\n")},
	}}
	b := &fakeBuilder{}
	rts := &fakeRuntimes{url: functionARN + ":3"}
	svc.Builder, svc.Runtimes, svc.BuildPoll = b, rts, 7*time.Second
	create := func(name string) deployments.Deployment {
		t.Helper()
		d, err := svc.Create(ctx, "org", createInput(t, `{"name": "`+name+`", "source": "hosted_repo",
			"source_config": {"repo_url": "https://git.example.com/app.git"},
			"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"},
			"secrets": [{"name": "OPENAI_API_KEY", "value": "sk-1"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	provision := func(d deployments.Deployment) (deployments.Revision, error) {
		t.Helper()
		perr := svc.Provision(ctx, "org", d.ID, *d.LatestRevisionID)
		rev, err := svc.Revision(ctx, "org", d.ID, *d.LatestRevisionID)
		if err != nil {
			t.Fatal(err)
		}
		return rev, perr
	}

	d := create("built")
	rev, err := provision(d)
	var pending *deployments.PendingError
	if !errors.As(err, &pending) || pending.After != 7*time.Second || rev.Status != deployments.RevBuilding {
		t.Fatalf("while the build runs: %s, %v; want BUILDING and a PendingError after 7s", rev.Status, err)
	}
	if len(b.started) != 1 || b.started[0] != rev.ID+" langgraph.json hitl.py,langgraph.json" {
		t.Fatalf("builds started %q, want one with the checkout", b.started)
	}
	if rev, err = provision(d); !errors.As(err, &pending) || len(b.started) != 1 {
		t.Fatalf("checked again: %s, %v, %d builds started", rev.Status, err, len(b.started))
	}
	b.build = deployments.AppBuild{Done: true, Code: deployments.AppCode{Bucket: "bucket", Key: "builds/x/app.zip", Manifest: []byte(builtManifest)}}
	if rev, err = provision(d); err != nil || rev.Status != deployments.RevDeployed {
		t.Fatalf("once built: %s %v", rev.Status, err)
	}
	if len(rts.calls) != 1 || rts.calls[0] != d.ID+" s3://bucket/builds/x/app.zip" {
		t.Errorf("functions made %v, want one from the zip", rts.calls)
	}
	graphs, err := svc.ServedGraphs(ctx, "org")
	if err != nil || len(graphs) != 2 {
		t.Errorf("served graphs %v %v, want the manifest's two", graphs, err)
	}
	// Deleting the deployment removes its builds' objects.
	if err := svc.Delete(ctx, "org", d.ID); err != nil {
		t.Fatal(err)
	}
	if err := svc.FinishDelete(ctx, "org", d.ID); err != nil || len(b.removed) != 1 || b.removed[0] != d.ID {
		t.Errorf("builds removed %v (%v), want the deployment's", b.removed, err)
	}

	// A failed build fails the revision with the build's reason.
	d = create("broken")
	b.build = deployments.AppBuild{}
	if _, err := provision(d); !errors.As(err, &pending) {
		t.Fatal(err)
	}
	b.build = deployments.AppBuild{Done: true, Reason: "ERROR: No matching distribution found for langchain-foo"}
	rev, err = provision(d)
	if err != nil || rev.Status != deployments.RevBuildFailed || rev.StatusMessage == nil ||
		*rev.StatusMessage != "the app's build build-1 failed: ERROR: No matching distribution found for langchain-foo" {
		t.Fatalf("a failed build: %s %v %v", rev.Status, rev.StatusMessage, err)
	}

	// A manifest Lambda cannot run fails the revision while deploying.
	d = create("refused")
	b.build = deployments.AppBuild{}
	if _, err := provision(d); !errors.As(err, &pending) {
		t.Fatal(err)
	}
	rts.err = &deployments.RuntimeRefusedError{Reason: "runtime: \"python2.7\" is not a Lambda Python runtime"}
	b.build = deployments.AppBuild{Done: true, Code: deployments.AppCode{Bucket: "bucket", Key: "k", Manifest: []byte(builtManifest)}}
	rev, err = provision(d)
	if err != nil || rev.Status != deployments.RevDeployFailed || rev.StatusMessage == nil ||
		!strings.HasPrefix(*rev.StatusMessage, "the app's function cannot be made from its build: runtime:") {
		t.Fatalf("a refused build: %s %v %v", rev.Status, rev.StatusMessage, err)
	}
}

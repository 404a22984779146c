package deployments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"
)

// LangGraph apps built elsewhere.
//
// On AWS the deploy worker cannot build an app (no pip, no room): a hosted
// repository whose langgraph.json names Python graphs is built by an
// AppBuilder (internal/codebuild: a CodeBuild project running `stepgraph
// build` on the revision's checkout), and its zip becomes the deployment's
// function (RuntimeProvisioner.EnsureAppRuntime). The build runs for
// minutes: Provision answers a *PendingError while it does, and the
// provisioning state machine waits and provisions again (no Lambda waits).

// AppBuilder builds LangGraph apps' Lambda zips.
type AppBuilder interface {
	// StartBuild stores the app's source (fsys: the checkout, valid only
	// during the call; app.ConfigPath its langgraph.json) and starts
	// building it: the build's id, or the reason it cannot be built (a
	// repository too large, say). An error is passing (tried again).
	StartBuild(ctx context.Context, app RevisionApp, fsys fs.FS) (buildID, reason string, err error)
	// Build reports the build: still running, failed with the reason (the
	// tail of its log), or succeeded with the zip.
	Build(ctx context.Context, app RevisionApp, buildID string) (AppBuild, error)
	// RemoveBuilds deletes what the deployment's builds stored (sources,
	// zips): part of deleting the deployment, safe to repeat. The
	// functions made from the zips hold their own copies.
	RemoveBuilds(ctx context.Context, deploymentID string) error
}

// AppBuild is a build's outcome so far.
type AppBuild struct {
	// Done: the build ended; Reason says why it failed ("" when it
	// succeeded), Code is its zip when it succeeded.
	Done   bool
	Reason string
	Code   AppCode
}

// DefaultBuildPoll is how long provisioning waits before checking a
// running build again.
const DefaultBuildPoll = 15 * time.Second

// PendingError is a revision waiting for work done elsewhere (its app's
// build): Provision returns it, and the revision is to be provisioned
// again after After. It is not a failure.
type PendingError struct {
	After time.Duration
	What  string
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("%s: provision again in %v", e.What, e.After)
}

// appBuildDoc is a revision's build, kept in its record.
type appBuildDoc struct {
	ID   string   `json:"id"`
	Code *AppCode `json:"code,omitempty"` // set once it succeeded
}

// startAppBuild starts building a LangGraph app on the AppBuilder while
// building the revision: the snapshot keeps its langgraph.json.
func (l *lifecycle) startAppBuild(ctx context.Context, fsys fs.FS, configPath string, config []byte) (*graphSnapshot, string, error) {
	l.logf(phaseBuild, levelInfo, "starting the build of the app's Lambda zip")
	id, reason, err := l.s.Builder.StartBuild(ctx, l.app(configPath, nil), fsys)
	if err != nil || reason != "" {
		return nil, reason, err
	}
	l.doc.AppBuild = &appBuildDoc{ID: id}
	l.logf(phaseBuild, levelInfo, "build %s started", id)
	return &graphSnapshot{Config: configPath, App: true, Files: map[string][]byte{configPath: config}}, "", nil
}

// awaitAppBuild checks the revision's build: a *PendingError while it
// runs, the reason when it failed.
func (l *lifecycle) awaitAppBuild(ctx context.Context) (string, error) {
	b := l.doc.AppBuild
	if b == nil || b.Code != nil {
		return "", nil
	}
	got, err := l.s.Builder.Build(ctx, l.app(l.doc.Graphs.Config, nil), b.ID)
	switch {
	case err != nil:
		return "", fmt.Errorf("read build %s: %w", b.ID, err)
	case !got.Done:
		return "", &PendingError{After: l.s.buildPoll(), What: "build " + b.ID + " of the app is running"}
	case got.Reason != "":
		return boundReason("the app's build " + b.ID + " failed: " + got.Reason), nil
	}
	b.Code = &got.Code
	l.logf(phaseBuild, levelInfo, "build %s wrote s3://%s/%s", b.ID, got.Code.Bucket, got.Code.Key)
	return "", nil
}

func (s *Service) buildPoll() time.Duration {
	if s.BuildPoll > 0 {
		return s.BuildPoll
	}
	return DefaultBuildPoll
}

// deployAppFunction makes the deployment's function from the revision's
// build (once: a redeploy serves the version made then) and takes its
// graph ids from the build's manifest.
func (l *lifecycle) deployAppFunction(ctx context.Context) ([]string, string, error) {
	code := *l.doc.AppBuild.Code
	ids, reason := manifestGraphs(code.Manifest)
	if reason != "" {
		return nil, reason, nil
	}
	if l.doc.RuntimeURL != "" {
		return ids, "", nil
	}
	if l.s.Runtimes == nil {
		return nil, "this server makes no runtime functions for LangGraph apps' builds", nil
	}
	l.logf(phaseDeploy, levelInfo, "making the app's function from s3://%s/%s", code.Bucket, code.Key)
	url, err := l.s.Runtimes.EnsureAppRuntime(ctx, l.rev.DeploymentID, code)
	var refused *RuntimeRefusedError
	switch {
	case errors.As(err, &refused):
		return nil, "the app's function cannot be made from its build: " + refused.Reason, nil
	case err != nil:
		return nil, "", err
	}
	l.doc.RuntimeURL = url
	l.logf(phaseDeploy, levelInfo, "the app's function is %s", url)
	return ids, "", nil
}

// manifestGraphs are the graph ids a build's manifest names.
func manifestGraphs(manifest []byte) ([]string, string) {
	var m struct {
		Graphs map[string]string `json:"graphs"`
	}
	if json.Unmarshal(manifest, &m) != nil || len(m.Graphs) == 0 {
		return nil, "the app's build manifest (stepgraph_build.json): graphs: must name at least one graph"
	}
	ids := make([]string, 0, len(m.Graphs))
	for id := range m.Graphs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, ""
}

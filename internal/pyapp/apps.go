package pyapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// Bounds of an app's files, as kept for a revision.
const (
	DefaultMaxAppBytes = 100 << 20
	DefaultMaxAppFiles = 20000
)

// Apps runs the LangGraph apps of hosted_repo revisions on this machine
// (deployments.AppHost, deployedgraphs.Apps): each revision's files under
// Dir/<deployment>/<revision>/app, its dependencies under …/site, and its
// runtime, a process on 127.0.0.1, while the revision is its deployment's
// active one (or a run on it needs it). A redeploy starts the new
// revision's runtime and stops the old one; deleting the deployment stops
// them and removes the files.
//
// The apps run the repositories' code with the server's permissions: the
// operator enables this (stepgraph serve -langgraph-python).
type Apps struct {
	// Python is the base environment's interpreter: it holds the runtime's
	// requirements (runtimes/python/requirements.txt); each revision adds
	// what its app needs and the environment lacks.
	Python string
	// RuntimeDir holds the stepgraph_runtime package (pyruntime.Extract).
	RuntimeDir string
	// Dir keeps the apps' files.
	Dir string
	// Bridge, when set, serves the graphs' store (their get_store()) and
	// their users' provider tokens (stepgraph_runtime.auth).
	Bridge *Bridge
	// FindLinks and NoIndex are pip's options for the apps' dependencies
	// (a wheelhouse; no package index).
	FindLinks string
	NoIndex   bool
	// Semantic says the store has an embeddings endpoint: an app's
	// langgraph.json may ask for a semantic index (store.index).
	Semantic bool
	// MaxAppBytes and MaxAppFiles bound an app's files (defaults above).
	MaxAppBytes int64
	MaxAppFiles int
	Log         *slog.Logger

	mu      sync.Mutex
	running map[string]*appRuntime // by revision id
	locks   map[string]*sync.Mutex // one start at a time per revision
}

var (
	_ deployments.AppHost = (*Apps)(nil)
)

type appRuntime struct {
	deploymentID string
	proc         *Process
	graphs       map[string]runs.DeployedGraph
}

func (a *Apps) log() *slog.Logger {
	if a.Log != nil {
		return a.Log
	}
	return slog.Default()
}

func (a *Apps) revDir(deploymentID, revisionID string) string {
	return filepath.Join(a.Dir, safeName(deploymentID), safeName(revisionID))
}

// safeName keeps ids usable as one path element whatever they hold.
func safeName(id string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, id)
}

// Stage implements deployments.AppHost: it copies the checkout (without
// .git) under the revision's directory, within the bounds.
func (a *Apps) Stage(ctx context.Context, app deployments.RevisionApp, fsys fs.FS) (string, error) {
	dst := filepath.Join(a.revDir(app.DeploymentID, app.RevisionID), "app")
	if _, err := os.Stat(filepath.Join(dst, ".stepgraph-staged")); err == nil {
		return "", nil // staged before (a resumed build)
	}
	maxBytes, maxFiles := a.MaxAppBytes, a.MaxAppFiles
	if maxBytes <= 0 {
		maxBytes = DefaultMaxAppBytes
	}
	if maxFiles <= 0 {
		maxFiles = DefaultMaxAppFiles
	}
	tmp := dst + ".tmp"
	_ = os.RemoveAll(tmp)
	var total int64
	files := 0
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return os.MkdirAll(filepath.Join(tmp, filepath.FromSlash(p)), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil // links and the like are not kept
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return errAppFile{err}
		}
		total += int64(len(data))
		files++
		if total > maxBytes || files > maxFiles {
			return errAppTooLarge{maxBytes, maxFiles}
		}
		return os.WriteFile(filepath.Join(tmp, filepath.FromSlash(p)), data, 0o644)
	})
	var tooLarge errAppTooLarge
	var bad errAppFile
	switch {
	case errors.As(err, &tooLarge):
		_ = os.RemoveAll(tmp)
		return tooLarge.Error(), nil
	case errors.As(err, &bad):
		_ = os.RemoveAll(tmp)
		return "the app's files cannot be read: " + bad.err.Error(), nil
	case err != nil:
		_ = os.RemoveAll(tmp)
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".stepgraph-staged"), nil, 0o644); err != nil {
		return "", err
	}
	_ = os.RemoveAll(dst)
	return "", os.Rename(tmp, dst)
}

// errAppFile: a file of the repository that cannot be kept (too large for
// the source, say); the revision fails, naming it.
type errAppFile struct{ err error }

func (e errAppFile) Error() string { return e.err.Error() }

type errAppTooLarge struct {
	bytes int64
	files int
}

func (e errAppTooLarge) Error() string {
	return fmt.Sprintf("the repository is larger than an app may be here: at most %d bytes in %d files", e.bytes, e.files)
}

// Prepare implements deployments.AppHost: the dependencies, then the
// runtime, which answers the graph ids.
func (a *Apps) Prepare(ctx context.Context, app deployments.RevisionApp) ([]string, string, error) {
	dir := a.revDir(app.DeploymentID, app.RevisionID)
	config := filepath.Join(dir, "app", filepath.FromSlash(path.Clean(app.ConfigPath)))
	if _, err := os.Stat(config); err != nil {
		return nil, "", fmt.Errorf("the app of revision %s is not staged here: %w", app.RevisionID, err)
	}
	if reason, err := a.install(ctx, config, filepath.Join(dir, "site")); err != nil || reason != "" {
		return nil, reason, err
	}
	rt, err := a.ensure(ctx, app.DeploymentID, app.RevisionID, app.ConfigPath, app.Env)
	var le *LoadError
	if errors.As(err, &le) {
		return nil, app.ConfigPath + ": the app could not be loaded: " + le.Error(), nil
	}
	if err != nil {
		return nil, "", err
	}
	ids := make([]string, 0, len(rt.graphs))
	for id := range rt.graphs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, "", nil
}

// install puts what the app needs and the environment lacks in site; a
// reason when the app cannot be prepared (its refusal, or no answer).
func (a *Apps) install(ctx context.Context, config, site string) (string, error) {
	args := []string{"--config", config, "--target", site}
	if a.NoIndex {
		args = append(args, "--no-index")
	}
	if a.FindLinks != "" {
		args = append(args, "--find-links", a.FindLinks)
	}
	var answer struct {
		Installed []string `json:"installed"`
	}
	err := envCommand{Python: a.Python, Args: args, Dir: filepath.Dir(config),
		Env: append(baseEnv(), "PYTHONPATH="+a.RuntimeDir)}.run(ctx, &answer)
	var refused *EnvRefusal
	switch {
	case errors.As(err, &refused) && refused.Type == "DependencyError":
		return "dependencies: " + refused.Message, nil
	case errors.As(err, &refused): // langgraph.json itself: the message names the key
		return refused.Message, nil
	case err != nil && ctx.Err() != nil:
		return "", ctx.Err()
	case err != nil:
		return "the app's dependencies could not be read: " + err.Error(), nil
	}
	if len(answer.Installed) > 0 {
		a.log().Info("installed the app's dependencies", "config", config, "installed", strings.Join(answer.Installed, ", "))
	}
	return "", nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// baseEnv is what every Python process of an app inherits from the server.
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func (a *Apps) lock(revisionID string) *sync.Mutex {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.locks == nil {
		a.locks = map[string]*sync.Mutex{}
	}
	if a.locks[revisionID] == nil {
		a.locks[revisionID] = &sync.Mutex{}
	}
	return a.locks[revisionID]
}

// ensure returns the revision's running runtime, starting it when it is not.
func (a *Apps) ensure(ctx context.Context, deploymentID, revisionID, configPath string, env map[string]string) (*appRuntime, error) {
	l := a.lock(revisionID)
	l.Lock()
	defer l.Unlock()
	a.mu.Lock()
	rt := a.running[revisionID]
	a.mu.Unlock()
	if rt != nil {
		select {
		case <-rt.proc.Done():
			a.log().Warn("the LangGraph runtime of a revision exited; starting it again", "revision_id", revisionID)
		default:
			return rt, nil
		}
	}
	dir := a.revDir(deploymentID, revisionID)
	var vars []string
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	slices.Sort(vars)
	if a.Semantic {
		vars = append(vars, "STEPGRAPH_STORE_SEMANTIC=1") // the runtime's appconfig reads it
	}
	proc, err := Start(ctx, ProcessOptions{Python: a.Python,
		RuntimeDir: a.RuntimeDir + string(os.PathListSeparator) + filepath.Join(dir, "site"),
		Config:     filepath.Join(dir, "app", filepath.FromSlash(path.Clean(configPath))), Env: vars,
		Stderr: logWriter{log: a.log(), revisionID: revisionID}})
	if err != nil {
		return nil, err
	}
	descs, err := proc.Describe(ctx, "", false)
	var re *RuntimeError
	if errors.As(err, &re) {
		// A factory that fails, a graph that cannot be drawn: the app's.
		proc.Stop()
		return nil, &LoadError{Type: re.Type, Message: re.Message, Traceback: re.Traceback}
	}
	if err != nil {
		proc.Stop()
		return nil, err
	}
	rt = &appRuntime{deploymentID: deploymentID, proc: proc, graphs: map[string]runs.DeployedGraph{}}
	for id, d := range descs {
		shape, err := Shape(id, d)
		if err != nil {
			proc.Stop()
			return nil, &LoadError{Type: "GraphError", Message: fmt.Sprintf("graph %q cannot be drawn: %v", id, err)}
		}
		rt.graphs[id] = runs.DeployedGraph{Graph: shape, Revision: runs.GraphRevision{DeploymentID: deploymentID, RevisionID: revisionID},
			Foreign: &Graph{ID: id, Runtime: proc.Client, Bridge: a.granter()}}
	}
	a.mu.Lock()
	if a.running == nil {
		a.running = map[string]*appRuntime{}
	}
	a.running[revisionID] = rt
	a.mu.Unlock()
	a.log().Info("started the LangGraph runtime of a revision", "deployment_id", deploymentID, "revision_id", revisionID, "url", proc.BaseURL)
	return rt, nil
}

// Graph implements deployedgraphs.Apps.
func (a *Apps) Graph(ctx context.Context, rg deployments.RevisionGraphs, env map[string]string, graphID string) (runs.DeployedGraph, error) {
	rt, err := a.ensure(ctx, rg.DeploymentID, rg.RevisionID, rg.AppConfig, env)
	var le *LoadError
	switch {
	case errors.As(err, &le):
		return runs.DeployedGraph{}, fail.BadRequest("the LangGraph app of revision %s cannot be loaded: %s", rg.RevisionID, le.Message)
	case err != nil:
		return runs.DeployedGraph{}, err
	}
	g, ok := rt.graphs[graphID]
	if !ok {
		return runs.DeployedGraph{}, fail.NotFound("revision %s of deployment %s has no graph %q", rg.RevisionID, rg.DeploymentID, graphID)
	}
	return g, nil
}

// Activate implements deployedgraphs.Apps: the deployment's other
// revisions' runtimes stop (a run still on one starts it again).
func (a *Apps) Activate(ctx context.Context, rg deployments.RevisionGraphs) error {
	a.stop(func(rev string, rt *appRuntime) bool {
		return rt.deploymentID == rg.DeploymentID && rev != rg.RevisionID
	})
	return nil
}

// Remove implements deployments.AppHost.
func (a *Apps) Remove(ctx context.Context, deploymentID string) error {
	a.stop(func(_ string, rt *appRuntime) bool { return rt.deploymentID == deploymentID })
	return os.RemoveAll(filepath.Join(a.Dir, safeName(deploymentID)))
}

// Close stops every runtime (the server is stopping).
func (a *Apps) Close() {
	a.stop(func(string, *appRuntime) bool { return true })
}

func (a *Apps) stop(which func(rev string, rt *appRuntime) bool) {
	a.mu.Lock()
	var stopping []*appRuntime
	for rev, rt := range a.running {
		if which(rev, rt) {
			stopping = append(stopping, rt)
			delete(a.running, rev)
		}
	}
	a.mu.Unlock()
	for _, rt := range stopping {
		rt.proc.Stop()
	}
}

// Running lists the revisions whose runtime is running (for tests and logs).
func (a *Apps) Running() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for rev := range a.running {
		out = append(out, rev)
	}
	slices.Sort(out)
	return out
}

// logWriter logs a runtime's standard error, line by line.
type logWriter struct {
	log        *slog.Logger
	revisionID string
}

func (w logWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.log.Info("langgraph runtime", "revision_id", w.revisionID, "line", line)
	}
	return len(b), nil
}

var _ io.Writer = logWriter{}

// granter is Bridge as a Granter: nil when there is none (not a nil
// *Bridge inside an interface).
func (a *Apps) granter() Granter {
	if a.Bridge == nil {
		return nil
	}
	return a.Bridge
}

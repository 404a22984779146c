package deployments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/store"
)

// LangGraph apps.
//
// A hosted repository whose graph config is a LangGraph app's langgraph.json
// — its graphs named "./path/file.py:variable" or "module:variable", not
// graph documents — is served by an AppHost (internal/pyapp): while
// building, the repository's files are kept for the revision (Stage); while
// deploying, the app's environment is built and its runtime started, which
// answers the graph ids (Prepare). The revision record keeps only the
// langgraph.json; the app's files live with the AppHost.
//
// Running an app runs the repository's code with the server's permissions:
// a server has an AppHost only when its operator enabled it.

// AppHost builds and runs LangGraph Python apps; internal/pyapp.Apps
// implements it.
type AppHost interface {
	// Stage keeps the files of the revision's app from fsys (a checkout,
	// valid only during the call), configPath being its langgraph.json. A
	// reason says why the app cannot be kept (too large, say).
	Stage(ctx context.Context, app RevisionApp, fsys fs.FS) (reason string, err error)
	// Prepare builds the revision's environment (the app's dependencies)
	// and starts its runtime: the graph ids it serves, or the reason the
	// revision fails (a missing dependency, an import error with its
	// traceback). An error is passing (it is tried again).
	Prepare(ctx context.Context, app RevisionApp) (graphIDs []string, reason string, err error)
	// Remove stops the deployment's runtimes and deletes its apps' files.
	Remove(ctx context.Context, deploymentID string) error
}

// RevisionApp names a revision's app.
type RevisionApp struct {
	OrgID, DeploymentID, RevisionID string
	// ConfigPath is langgraph.json's path in the repository.
	ConfigPath string
	// Env is the environment the app runs with: the revision's secrets.
	Env map[string]string
}

// AppKind is appKind, for `stepgraph dev`'s checks.
func AppKind(config []byte) string { return appKind(config) }

// appKind tells a LangGraph app's langgraph.json apart from a graph
// config: "python" when its graphs are Python graphs, "js" when one is a
// JavaScript graph, "" when it is not an app's (graph documents).
func appKind(config []byte) string {
	var c struct {
		Graphs map[string]json.RawMessage `json:"graphs"`
	}
	if json.Unmarshal(config, &c) != nil || len(c.Graphs) == 0 {
		return ""
	}
	kind := ""
	for _, raw := range c.Graphs {
		var spec string
		if json.Unmarshal(raw, &spec) != nil {
			var obj struct {
				Path string `json:"path"`
			}
			if json.Unmarshal(raw, &obj) != nil || obj.Path == "" {
				return ""
			}
			spec = obj.Path
		}
		i := strings.LastIndex(spec, ":")
		if i <= 0 || strings.Contains(spec, "://") {
			return "" // a document path
		}
		switch strings.ToLower(path.Ext(spec[:i])) {
		case ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".tsx", ".jsx":
			return "js"
		}
		kind = "python"
	}
	return kind
}

// stageApp keeps a LangGraph app while building: the reason the revision
// fails, or the snapshot (its langgraph.json only).
func (l *lifecycle) stageApp(ctx context.Context, fsys fs.FS, configPath string, config []byte, kind string) (*graphSnapshot, string, error) {
	switch {
	case kind == "js":
		return nil, configPath + ": names JavaScript graphs: JavaScript LangGraph apps are not supported (only Python ones)", nil
	case l.s.Apps == nil && l.s.Builder != nil:
		return l.startAppBuild(ctx, fsys, path.Clean(configPath), config)
	case l.s.Apps == nil:
		return nil, configPath + ": is a LangGraph app's (Python graphs): this server does not run LangGraph apps; " +
			"its operator enables them with `stepgraph serve -langgraph-python` (they run the repository's code with the server's permissions)", nil
	}
	clean := path.Clean(configPath)
	reason, err := l.s.Apps.Stage(ctx, l.app(clean, nil), fsys)
	if err != nil || reason != "" {
		return nil, reason, err
	}
	return &graphSnapshot{Config: clean, App: true, Files: map[string][]byte{clean: config}}, "", nil
}

func (l *lifecycle) app(configPath string, env map[string]string) RevisionApp {
	return RevisionApp{OrgID: l.rev.OrgID, DeploymentID: l.rev.DeploymentID, RevisionID: l.rev.ID, ConfigPath: configPath, Env: env}
}

// deployApp builds and starts a LangGraph app's revision while deploying
// (or, built by the AppBuilder, makes its function), and applies the
// organization's rule on graph ids.
func (l *lifecycle) deployApp(ctx context.Context, d store.Deployment, dd deploymentDoc) (string, error) {
	ids, reason, err := l.prepareApp(ctx)
	if err != nil || reason != "" {
		return boundReason(reason), err
	}
	if reason, err := l.s.takenGraphs(ctx, d, ids); err != nil || reason != "" {
		return reason, err
	}
	if l.s.Graphs != nil {
		rg := l.revisionGraphs(d, dd)
		rg.GraphIDs = ids
		if reason, err := l.s.Graphs.Check(ctx, rg); err != nil || reason != "" {
			return boundReason(reason), err
		}
	}
	l.logf(phaseDeploy, levelInfo, "the app serves %s", strings.Join(ids, ", "))
	l.doc.Graphs.Graphs = ids
	return "", nil
}

// prepareApp readies the app's runtime: its graph ids, or the reason the
// revision fails.
func (l *lifecycle) prepareApp(ctx context.Context) ([]string, string, error) {
	if l.doc.AppBuild != nil {
		return l.deployAppFunction(ctx)
	}
	if l.doc.Graphs.Described { // an external_docker runtime that is an app: its graphs are its answer's
		_, ids, reason := describedApp(l.doc.Graphs.Files[describeFile])
		return ids, reason, nil
	}
	if l.s.Apps == nil {
		return nil, "this server does not run LangGraph apps (stepgraph serve -langgraph-python)", nil
	}
	env, reason, err := l.secretEnv(ctx)
	if err != nil || reason != "" {
		return nil, reason, err
	}
	l.logf(phaseDeploy, levelInfo, "building the app's environment and starting its runtime")
	return l.s.Apps.Prepare(ctx, l.app(l.doc.Graphs.Config, env))
}

// secretEnv is the revision's secrets by name: the environment its runtime
// gets.
func (l *lifecycle) secretEnv(ctx context.Context) (map[string]string, string, error) {
	env := map[string]string{}
	for _, sec := range l.doc.Secrets {
		v, err := l.s.Secrets.Get(ctx, sec.Ref)
		if errors.Is(err, secrets.ErrNotFound) {
			return nil, fmt.Sprintf("secret %s of the revision is gone: create a new revision with its value", sec.Name), nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("read secret %s of the revision: %w", sec.Name, err)
		}
		env[sec.Name] = string(v)
	}
	return env, "", nil
}

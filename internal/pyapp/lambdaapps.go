package pyapp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// LambdaApps serves the graphs of LangGraph apps that run as Lambda
// functions: on AWS the deploy worker made a hosted_repo revision's
// function from its build, and the revision's runtime URL is the ARN of
// the version made for it. Each graph is a Graph over LambdaClient with
// DefaultLambdaYield (a run continues over as many invocations as it
// needs), the revision's secrets going with each call. It implements
// deployedgraphs.Apps; there is nothing to start or stop. A graph's shape
// (for the request rules) is described once per version: a version never
// changes.
type LambdaApps struct {
	Invoker FunctionInvoker
	// Bridge gives the graphs' calls their links to the stage's API
	// (StageLinks: the store, tokens, live events), and Mailbox is where
	// the events the calls post are read; nil: none (get_store() is None).
	Bridge  Granter
	Mailbox EventLog

	mu     sync.Mutex
	shapes map[shapeKey]*graph.Graph
}

// shapeKey names a shape by revision too: a custom_url may name a
// function without a version, whose code can change under the same ARN,
// and a new revision is when the platform learns it did.
type shapeKey struct{ revision, function, graphID string }

// maxShapes bounds the shapes kept (they are described again when
// dropped).
const maxShapes = 256

// Graph implements deployedgraphs.Apps.
func (a *LambdaApps) Graph(ctx context.Context, rg deployments.RevisionGraphs, env map[string]string, graphID string) (runs.DeployedGraph, error) {
	if rg.RuntimeURL == "" {
		return runs.DeployedGraph{}, fail.BadRequest("revision %s is a LangGraph app without a function: it cannot be served here", rg.RevisionID)
	}
	rt := &LambdaClient{Function: rg.RuntimeURL, Invoker: a.Invoker, Secrets: env, Mailbox: a.Mailbox}
	shape, err := a.shape(ctx, rt, rg.RevisionID, graphID)
	return deployedAppGraph(rg, shape, err, &Graph{ID: graphID, Runtime: rt, Yield: &DefaultLambdaYield, Bridge: a.Bridge})
}

// deployedAppGraph is a revision's app graph as runs serve it: its shape
// (or why it could not be described: an app that cannot be loaded is a
// 400 naming its error) and g, which runs it.
func deployedAppGraph(rg deployments.RevisionGraphs, shape *graph.Graph, err error, g *Graph) (runs.DeployedGraph, error) {
	var re *RuntimeError
	if errors.As(err, &re) {
		return runs.DeployedGraph{}, fail.BadRequest("the LangGraph app of revision %s cannot be loaded: %s", rg.RevisionID, re.Message)
	}
	if err != nil {
		return runs.DeployedGraph{}, err
	}
	return runs.DeployedGraph{Graph: shape, Revision: runs.GraphRevision{DeploymentID: rg.DeploymentID, RevisionID: rg.RevisionID},
		Foreign: g}, nil
}

func (a *LambdaApps) shape(ctx context.Context, rt *LambdaClient, revisionID, graphID string) (*graph.Graph, error) {
	key := shapeKey{revisionID, rt.Function, graphID}
	a.mu.Lock()
	shape := a.shapes[key]
	a.mu.Unlock()
	if shape != nil {
		return shape, nil
	}
	shape, err := describeShape(ctx, rt, "function "+rt.Function, graphID)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.shapes == nil || len(a.shapes) >= maxShapes {
		a.shapes = map[shapeKey]*graph.Graph{}
	}
	a.shapes[key] = shape
	return shape, nil
}

// describeShape describes graphID of the app at rt (label names it) and
// draws its shape, for the request rules of runs.
func describeShape(ctx context.Context, rt Runtime, label, graphID string) (*graph.Graph, error) {
	descs, err := rt.Describe(ctx, graphID, false)
	if err != nil {
		return nil, err
	}
	d, ok := descs[graphID]
	if !ok {
		return nil, fail.NotFound("the LangGraph app of %s has no graph %q", label, graphID)
	}
	shape, err := Shape(graphID, d)
	if err != nil {
		return nil, fmt.Errorf("graph %q cannot be drawn: %w", graphID, err)
	}
	return shape, nil
}

// CheckApp implements deployedgraphs.AppChecker: the revision's function
// loads the app (its health call) and serves the revision's graphs. A
// function that cannot is a reason (with the app's traceback when it
// failed to import), as a runtime's failed describe call is for images.
func (a *LambdaApps) CheckApp(ctx context.Context, rg deployments.RevisionGraphs, env map[string]string) (string, error) {
	rt := &LambdaClient{Function: rg.RuntimeURL, Invoker: a.Invoker, Secrets: env}
	return checkServes(ctx, rt, "the app's function "+rg.RuntimeURL, rg.GraphIDs), nil
}

// checkServes asks a runtime whether it loads the app and serves ids: the
// reason it does not ("" when it does). label names the runtime.
func checkServes(ctx context.Context, rt interface {
	Health(ctx context.Context) ([]string, error)
}, label string, ids []string) string {
	graphs, err := rt.Health(ctx)
	var re *RuntimeError
	switch {
	case errors.As(err, &re):
		return fmt.Sprintf("%s cannot load the app: %s: %s\n%s", label, re.Type, re.Message, re.Traceback)
	case err != nil:
		return fmt.Sprintf("%s does not answer its health call: %v", label, err)
	}
	var missing []string
	for _, id := range ids {
		if !slices.Contains(graphs, id) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("%s serves %v, not %v", label, graphs, missing)
	}
	return ""
}

// Activate implements deployedgraphs.Apps: functions need no start or
// stop.
func (a *LambdaApps) Activate(context.Context, deployments.RevisionGraphs) error { return nil }

package runs

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// DeployedGraphs serves the graphs of an organization's deployments: what
// runs needs of them. internal/deployedgraphs implements it.
//
// A graph id names a built-in graph or, in an organization, at most one
// graph of its active deployments; the built-in graphs come first.
type DeployedGraphs interface {
	// Current returns the graph graphID of the organization's active
	// deployments, as their active revision declares it; a fail.NotFound
	// when none serves it.
	Current(ctx context.Context, orgID, graphID string) (DeployedGraph, error)
	// At returns graphID as revision rev declares it, whether rev is active
	// or not: a run executes on the revision it was created on. A
	// fail.NotFound when the revision is gone or has no such graph; a
	// fail.Invalid or fail.BadRequest when it cannot be compiled now; any
	// other error is passing (the run is tried again later).
	At(ctx context.Context, orgID, graphID string, rev GraphRevision) (DeployedGraph, error)
	// Names lists the graph ids the organization's active deployments
	// serve, sorted.
	Names(ctx context.Context, orgID string) ([]string, error)
}

// GraphRevision names the deployment revision a deployed graph comes from.
// A run records it (kwargs.graph_revision) when it is created.
type GraphRevision struct {
	DeploymentID string `json:"deployment_id"`
	RevisionID   string `json:"revision_id"`
}

// DeployedGraph is a deployed revision's graph.
type DeployedGraph struct {
	Graph    *graph.Graph
	Revision GraphRevision
	// InputSchema is the JSON Schema a run's input must satisfy (the
	// document's input_schema); nil when it has none.
	InputSchema map[string]any
	// CheckInput reports why a run's input (a state object) does not
	// satisfy InputSchema, as a fail.Invalid naming the fields; nil when it
	// does. Nil when there is no InputSchema.
	CheckInput func(input any) error
	// Foreign is set when a language runtime executes the graph (a LangGraph
	// Python app's); Graph is then its shape only (nodes and edges, for the
	// request rules), never executed.
	Foreign ForeignGraph
}

// DeployedAssistantID is the id of the default assistant of a deployed
// graph: uuid5 in the namespace of the built-in graphs' default assistants
// (graphNamespace), of "<organization id>:<graph id>". It is scoped to the
// organization because a deployed graph id is: two organizations may
// deploy different graphs under one id.
func DeployedAssistantID(orgID, graphID string) string {
	return uuid.NewSHA1(graphNamespace, []byte(orgID+":"+graphID)).String()
}

// runnable is an assistant's graph: built-in (rev nil) or deployed.
type runnable struct {
	g        *graph.Graph
	deployed *DeployedGraph
}

// foreign is the runnable's foreign graph, nil when the engine executes it.
func (r runnable) foreign() ForeignGraph {
	if r.deployed == nil {
		return nil
	}
	return r.deployed.Foreign
}

// currentGraph resolves a graph id to what a new run executes: the built-in
// graph, else the organization's deployed one. A fail.NotFound when there
// is neither.
func (s *Service) currentGraph(ctx context.Context, orgID, graphID string) (runnable, error) {
	if g, ok := s.Graphs.Get(graphID); ok {
		return runnable{g: g}, nil
	}
	if s.Deployed == nil {
		return runnable{}, fail.NotFound("graph %q is not registered", graphID)
	}
	dg, err := s.Deployed.Current(ctx, orgID, graphID)
	if err != nil {
		return runnable{}, err
	}
	return runnable{g: dg.Graph, deployed: &dg}, nil
}

// graphNames lists the built-in and the organization's deployed graph ids.
func (s *Service) graphNames(ctx context.Context, orgID string) ([]string, error) {
	names := s.Graphs.Names()
	if s.Deployed == nil {
		return names, nil
	}
	deployed, err := s.Deployed.Names(ctx, orgID)
	if err != nil {
		return nil, err
	}
	names = append(names, deployed...)
	slices.Sort(names)
	return slices.Compact(names), nil
}

// isDeployed reports whether graphID is a graph of the organization's
// active deployments (and not a built-in one).
func (s *Service) isDeployed(ctx context.Context, orgID, graphID string) (bool, error) {
	if _, builtin := s.Graphs.Get(graphID); builtin || s.Deployed == nil {
		return false, nil
	}
	names, err := s.Deployed.Names(ctx, orgID)
	if err != nil {
		return false, err
	}
	_, found := slices.BinarySearch(names, graphID)
	return found, nil
}

// EnsureDeployedAssistant creates the default assistant of a deployed graph
// (DeployedAssistantID) unless it exists: deployedgraphs calls it when a
// revision is published, and resolving the graph by name does when it is
// missing.
func (s *Service) EnsureDeployedAssistant(ctx context.Context, orgID, graphID, description string) error {
	now := s.now()
	a := store.Assistant{
		ID: DeployedAssistantID(orgID, graphID), OrgID: orgID, GraphID: graphID, Name: graphID,
		Description: description, Config: []byte("{}"), Context: []byte("{}"),
		Metadata: []byte(`{"created_by":"system"}`), Version: 1, CreatedAt: now, UpdatedAt: now,
	}
	if err := s.Store.CreateAssistant(ctx, a); err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	return nil
}

// checkInput applies a deployed graph's input schema to a run's input (a
// state object; commands and resumptions are not checked).
func (r runnable) checkInput(input any) error {
	if r.deployed == nil || r.deployed.CheckInput == nil {
		return nil
	}
	if _, ok := input.(map[string]any); !ok {
		return nil
	}
	err := r.deployed.CheckInput(input)
	if err == nil || fail.KindOf(err) == fail.KindInvalid {
		return err
	}
	return fail.Invalid("input", "%s", strings.TrimSpace(err.Error()))
}

// revisionGraph resolves the graph a stored run executes: the built-in one,
// or the deployed revision's it recorded. A graph that cannot be had any
// more fails the run (failed); another error is passing.
func (s *Service) revisionGraph(ctx context.Context, orgID, graphID string, rev *GraphRevision) (g *graph.Graph, fg ForeignGraph, failed string, err error) {
	if rev == nil {
		if g, ok := s.Graphs.Get(graphID); ok {
			return g, nil, "", nil
		}
		return nil, nil, "graph " + graphID + " is not registered", nil
	}
	if s.Deployed == nil {
		return nil, nil, "graph " + graphID + " of deployment " + rev.DeploymentID + " is not served by this server", nil
	}
	dg, err := s.Deployed.At(ctx, orgID, graphID, *rev)
	switch fail.KindOf(err) {
	case 0:
		if err != nil {
			return nil, nil, "", err
		}
		return dg.Graph, dg.Foreign, "", nil
	case fail.KindUnavailable:
		return nil, nil, "", err
	default:
		return nil, nil, "graph " + graphID + " of revision " + rev.RevisionID + ": " + fail.MessageOf(err), nil
	}
}

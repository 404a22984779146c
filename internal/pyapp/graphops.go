package pyapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/runs"
)

var (
	_ runs.ForeignSupersteps = (*Graph)(nil)
	_ runs.ForeignSubgraphs  = (*Graph)(nil)
)

// BulkUpdateRequest is the bulk_update_state call: a new thread's supersteps.
type BulkUpdateRequest struct {
	Graph      string                      `json:"graph"`
	ThreadID   string                      `json:"thread_id"`
	Checkpoint json.RawMessage             `json:"checkpoint,omitempty"`
	Supersteps [][]runs.ForeignStateUpdate `json:"supersteps"`
	Config     map[string]any              `json:"config,omitempty"`
}

// callOp makes one call of a protocol operation by name (the HTTP path
// without its slash, the Lambda payload's action): what both transports
// give, so the operations below are written once for both.
func (c *Client) callOp(ctx context.Context, op string, req, out any) error {
	return c.call(ctx, "/"+op, req, out)
}

func (c *LambdaClient) callOp(ctx context.Context, op string, req, out any) error {
	return c.call(ctx, op, req, out)
}

// caller makes one call of a protocol operation by name: each transport's
// callOp. The operations below are written once over it.
type caller interface {
	callOp(ctx context.Context, op string, req, out any) error
}

// describe answers the app's graphs (graphID "" for all), drawn with xray
// (false, true or a depth).
func describe(ctx context.Context, rt caller, graphID string, xray any) (map[string]Description, error) {
	body := map[string]any{"xray": xray}
	if xray == nil {
		body["xray"] = false
	}
	if graphID != "" {
		body["graph"] = graphID
	}
	var out struct {
		Graphs map[string]Description `json:"graphs"`
	}
	err := rt.callOp(ctx, "describe", body, &out)
	return out.Graphs, err
}

// updateState applies values as as_node would write them; it answers the
// new checkpoint (graph.Checkpoint's JSON with its native bundle).
func updateState(ctx context.Context, rt caller, req UpdateRequest) (json.RawMessage, error) {
	var out struct {
		Checkpoint json.RawMessage `json:"checkpoint"`
	}
	err := rt.callOp(ctx, "update_state", req, &out)
	return out.Checkpoint, err
}

// state answers the state at the checkpoint, subgraphs' states in tasks[].state.
func state(ctx context.Context, rt caller, req StateRequest) (map[string]any, error) {
	var out struct {
		State map[string]any `json:"state"`
	}
	err := rt.callOp(ctx, "state", req, &out)
	return out.State, err
}

// bulkUpdateState applies supersteps (LangGraph's bulk_update_state); it
// answers the new checkpoints, oldest first.
func bulkUpdateState(ctx context.Context, rt caller, req BulkUpdateRequest) ([]json.RawMessage, error) {
	var out struct {
		Checkpoints []json.RawMessage `json:"checkpoints"`
	}
	err := rt.callOp(ctx, "bulk_update_state", req, &out)
	return out.Checkpoints, err
}

// subgraphs answers the schemas of a graph's subgraphs by namespace
// (LangGraph's get_subgraphs).
func subgraphs(ctx context.Context, rt caller, graphID, namespace string, recurse bool) (map[string]runs.SubgraphSchemas, error) {
	req := map[string]any{"graph": graphID, "recurse": recurse}
	if namespace != "" {
		req["namespace"] = namespace
	}
	var out struct {
		Subgraphs map[string]runs.SubgraphSchemas `json:"subgraphs"`
	}
	err := rt.callOp(ctx, "subgraphs", req, &out)
	return out.Subgraphs, err
}

// BulkUpdateState implements runs.ForeignSupersteps.
func (g *Graph) BulkUpdateState(ctx context.Context, in runs.ForeignBulkUpdate) ([]graph.Checkpoint, error) {
	// The graph id in configurable, as upstream's server applies supersteps.
	raws, err := bulkUpdateState(ctx, g.Runtime, BulkUpdateRequest{Graph: g.ID, ThreadID: in.ThreadID, Supersteps: in.Supersteps,
		Config: map[string]any{"configurable": map[string]any{"graph_id": g.ID}}})
	var reqErr *RequestError
	var rtErr *RuntimeError
	switch {
	case errors.As(err, &reqErr):
		return nil, fail.Invalid("supersteps", "%s", strings.TrimPrefix(reqErr.Detail, "supersteps: "))
	case errors.As(err, &rtErr):
		return nil, fail.Invalid("supersteps", "%s: %s", rtErr.Type, rtErr.Message)
	case err != nil:
		return nil, fail.Unavailable("the LangGraph runtime", err)
	}
	out := make([]graph.Checkpoint, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("the LangGraph runtime sent a checkpoint that is not one: %w", err)
		}
	}
	return out, nil
}

// Subgraphs implements runs.ForeignSubgraphs.
func (g *Graph) Subgraphs(ctx context.Context, namespace string, recurse bool) (map[string]runs.SubgraphSchemas, error) {
	out, err := subgraphs(ctx, g.Runtime, g.ID, namespace, recurse)
	if err != nil {
		return nil, fail.Unavailable("the LangGraph runtime", err)
	}
	if out == nil {
		out = map[string]runs.SubgraphSchemas{}
	}
	return out, nil
}

var _ runs.ForeignState = (*Graph)(nil)

// SubgraphStates implements runs.ForeignState: LangGraph's get_state with
// subgraphs at the checkpoint, its tasks' subgraph states by task id.
func (g *Graph) SubgraphStates(ctx context.Context, in runs.ForeignStateQuery) (map[string]runs.ForeignSubgraphState, error) {
	var out struct {
		State json.RawMessage `json:"state"`
	}
	err := g.Runtime.callOp(ctx, "state", StateRequest{Graph: g.ID, ThreadID: in.ThreadID, Checkpoint: in.At.Native, Subgraphs: true}, &out)
	if err != nil {
		return nil, fail.Unavailable("the LangGraph runtime", err)
	}
	return subgraphStates(out.State, 0)
}

// subgraphStates reads the tasks[].state of a state the runtime answered.
func subgraphStates(raw json.RawMessage, depth int) (map[string]runs.ForeignSubgraphState, error) {
	var st struct {
		Tasks []struct {
			ID    string          `json:"id"`
			State json.RawMessage `json:"state"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("the LangGraph runtime sent a state that is not one: %w", err)
	}
	out := map[string]runs.ForeignSubgraphState{}
	for _, t := range st.Tasks {
		if len(t.State) == 0 || string(t.State) == "null" || depth >= 64 {
			continue
		}
		var sub runs.ForeignSubgraphState
		if err := json.Unmarshal(t.State, &sub.Checkpoint); err != nil {
			return nil, fmt.Errorf("the LangGraph runtime sent a subgraph state that is not one: %w", err)
		}
		tasks, err := subgraphStates(t.State, depth+1)
		if err != nil {
			return nil, err
		}
		sub.Tasks = tasks
		out[t.ID] = sub
	}
	return out, nil
}

package pyapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// Graph is one graph of a LangGraph app as runs executes it
// (runs.ForeignGraph): every call goes to the app's runtime.
type Graph struct {
	ID      string
	Runtime Runtime
	// Yield, when set, bounds each run call (a Lambda runtime's 15 minutes
	// and 6 MB): a call that yields is followed by the next, from its last
	// checkpoint, until the run ends.
	Yield *YieldBudget
	// Bridge hands out the links by which the graph's store operations
	// reach the store API and its token requests agent auth: the loopback
	// Bridge, or StageLinks (the stage's API, for a runtime on Lambda);
	// nil: the graph has neither (get_store() is None, get_token fails).
	Bridge Granter
}

var _ runs.ForeignGraph = (*Graph)(nil)

// Run implements runs.ForeignGraph.
func (g *Graph) Run(ctx context.Context, in runs.ForeignRun, put func(context.Context, graph.Checkpoint) error, emit func(runs.ForeignEvent)) (graph.Outcome, *graph.Checkpoint, error) {
	req := RunRequest{Graph: g.ID, ThreadID: in.ThreadID, Input: in.Input, Command: in.Command,
		Config: runConfig(in), Context: in.Context, CheckpointID: in.CheckpointID, Superseded: in.Superseded,
		StreamMode: in.StreamMode, Subgraphs: in.Subgraphs, Durability: in.Durability}
	if len(in.InterruptBefore) > 0 {
		req.InterruptBefore = nodes(in.InterruptBefore)
	}
	if len(in.InterruptAfter) > 0 {
		req.InterruptAfter = nodes(in.InterruptAfter)
	}
	if in.From != nil {
		req.Checkpoint = in.From.Native
	}
	req.YieldAfter = g.Yield
	scope := CallScope{OrgID: in.OrgID, RunID: in.RunID, AssistantID: in.AssistantID, UserID: RunUser(in.Context, in.Config, in.Metadata)}
	var last *graph.Checkpoint
	var out graph.Outcome
	var err error
	for {
		var yielded bool
		before := last
		yielded, err = g.linkedCall(ctx, scope, req, put, emit, &last, &out)
		if err != nil || !yielded {
			break
		}
		if last == before || last == nil {
			err = errors.New("the LangGraph runtime yielded without a checkpoint to continue from")
			break
		}
		req = continuation(req, last)
	}
	var reqErr *RequestError
	if errors.As(err, &reqErr) {
		// The runtime refused the call: the run's request cannot be run.
		return graph.Outcome{Status: graph.Failed, Error: &graph.Error{Kind: graph.KindValue, Message: reqErr.Detail}}, last, nil
	}
	return out, last, err
}

// linkedCall makes one run call with its own links (each call's grant
// lasts that call only: a signed token expires with the call's budget).
func (g *Graph) linkedCall(ctx context.Context, scope CallScope, req RunRequest, put func(context.Context, graph.Checkpoint) error, emit func(runs.ForeignEvent), last **graph.Checkpoint, out *graph.Outcome) (bool, error) {
	if g.Bridge == nil {
		return g.call(ctx, req, put, emit, last, out)
	}
	links, release, err := g.Bridge.Grant(ctx, scope)
	if err != nil {
		return false, fail.Unavailable("the LangGraph app's links to the platform", err)
	}
	defer release()
	req.Store, req.Auth, req.Events, req.mailbox = links.Store, links.Auth, links.Events, links.Mailbox
	return g.call(ctx, req, put, emit, last, out)
}

// call makes one run call: checkpoints to put, events to emit, the end's
// outcome to out; it answers whether the call yielded.
func (g *Graph) call(ctx context.Context, req RunRequest, put func(context.Context, graph.Checkpoint) error, emit func(runs.ForeignEvent), last **graph.Checkpoint, out *graph.Outcome) (bool, error) {
	yielded := false
	err := g.Runtime.Run(ctx, req, func(m Message) error {
		switch m.Type {
		case "event":
			emit(runs.ForeignEvent{Mode: m.Mode, NS: m.NS, Data: m.Data})
		case "checkpoint":
			var cp graph.Checkpoint
			if err := json.Unmarshal(m.Checkpoint, &cp); err != nil {
				return fmt.Errorf("the LangGraph runtime sent a checkpoint that is not one: %w", err)
			}
			if err := put(ctx, cp); err != nil {
				return err
			}
			*last = &cp
		case "end":
			yielded = m.Status == "yielded"
			*out = outcome(m)
		}
		return nil
	})
	return yielded, err
}

// continuation is the call after one that yielded: no input, from its last
// checkpoint (LangGraph runs the pending step, as after a crash).
func continuation(req RunRequest, last *graph.Checkpoint) RunRequest {
	req.Input, req.Command = nil, nil
	req.CheckpointID, req.Superseded = "", false
	req.Checkpoint = last.Native
	req.Continued = true
	return req
}

// outcome is the run's outcome from the runtime's end message.
func outcome(m Message) graph.Outcome {
	switch m.Status {
	case "interrupted":
		return graph.Outcome{Status: graph.Interrupted, Interrupts: m.Interrupts, Changed: true}
	case "error":
		e := &graph.Error{Kind: "Error", Message: "the graph failed"}
		if m.Error != nil {
			// The exception's type and message, as upstream reports a
			// failed run; the traceback stays in the runtime's log.
			e = &graph.Error{Kind: m.Error.Type, Message: m.Error.Message}
		}
		return graph.Outcome{Status: graph.Failed, Error: e, Changed: true}
	}
	return graph.Outcome{Status: graph.Done, Changed: true}
}

func nodes(n []string) any {
	if len(n) == 1 && n[0] == "*" {
		return "*"
	}
	return n
}

// runConfig is the RunnableConfig of a run: the client's config, with the
// run's metadata and the ids upstream's server puts in configurable and
// metadata.
func runConfig(in runs.ForeignRun) map[string]any {
	cfg := maps.Clone(in.Config)
	if cfg == nil {
		cfg = map[string]any{}
	}
	conf, _ := cfg["configurable"].(map[string]any)
	conf = maps.Clone(conf)
	if conf == nil {
		conf = map[string]any{}
	}
	meta, _ := cfg["metadata"].(map[string]any)
	meta = maps.Clone(meta)
	if meta == nil {
		meta = map[string]any{}
	}
	// The run's metadata goes into the config's, as upstream's server puts it.
	var runMeta map[string]any
	_ = json.Unmarshal(in.Metadata, &runMeta)
	maps.Copy(meta, runMeta)
	for k, v := range map[string]any{"run_id": in.RunID, "thread_id": in.ThreadID, "assistant_id": in.AssistantID, "graph_id": in.GraphID} {
		conf[k] = v
		meta[k] = v
	}
	// As upstream's server without custom auth: no authenticated user (a
	// user_id the client configured stays), and the run's attempt.
	if _, ok := conf["user_id"]; !ok {
		conf["user_id"] = ""
	}
	conf["langgraph_auth_user_id"] = ""
	if in.Attempt > 0 {
		meta["run_attempt"] = in.Attempt
	}
	cfg["configurable"], cfg["metadata"] = conf, meta
	if in.RecursionLimit > 0 {
		cfg["recursion_limit"] = in.RecursionLimit
	}
	return cfg
}

// UpdateState implements runs.ForeignGraph.
func (g *Graph) UpdateState(ctx context.Context, in runs.ForeignUpdate) (graph.Checkpoint, error) {
	// As upstream's server: the graph id in configurable (so in the
	// checkpoint's metadata), the named checkpoint too.
	req := UpdateRequest{Graph: g.ID, ThreadID: in.ThreadID, AsNode: in.AsNode, CheckpointID: in.CheckpointID,
		Config: map[string]any{"configurable": map[string]any{"graph_id": g.ID}}}
	if len(in.Values) > 0 {
		req.Values = in.Values
	}
	if in.From != nil {
		req.Checkpoint = in.From.Native
	}
	raw, err := g.Runtime.UpdateState(ctx, req)
	var reqErr *RequestError
	var rtErr *RuntimeError
	switch {
	case errors.As(err, &reqErr):
		field := "values"
		if strings.Contains(reqErr.Detail, "as_node") || strings.Contains(reqErr.Detail, "Ambiguous update") {
			field = "as_node"
		}
		return graph.Checkpoint{}, fail.Invalid(field, "%s", strings.TrimPrefix(reqErr.Detail, "values: "))
	case errors.As(err, &rtErr):
		return graph.Checkpoint{}, fail.Invalid("values", "%s: %s", rtErr.Type, rtErr.Message)
	case err != nil:
		return graph.Checkpoint{}, fail.Unavailable("the LangGraph runtime", err)
	}
	var cp graph.Checkpoint
	if err := json.Unmarshal(raw, &cp); err != nil {
		return graph.Checkpoint{}, fmt.Errorf("the LangGraph runtime sent a checkpoint that is not one: %w", err)
	}
	return cp, nil
}

// Info implements runs.ForeignGraph: the drawing and schemas of the compiled graph.
func (g *Graph) Info(ctx context.Context, xray any) (graph.Info, runs.GraphSchemas, error) {
	descs, err := g.Runtime.Describe(ctx, g.ID, xray)
	if err != nil {
		return graph.Info{}, runs.GraphSchemas{}, fail.Unavailable("the LangGraph runtime", err)
	}
	d, ok := descs[g.ID]
	if !ok {
		return graph.Info{}, runs.GraphSchemas{}, fail.NotFound("graph %q is not in the app", g.ID)
	}
	return drawing(g.ID, d), runs.GraphSchemas{GraphID: g.ID, InputSchema: d.InputSchema, OutputSchema: d.OutputSchema,
		StateSchema: d.StateSchema, ConfigSchema: d.ConfigSchema, ContextSchema: d.ContextSchema}, nil
}

// drawing is LangChain's drawn graph (Graph.to_json) as graph.Info.
func drawing(id string, d Description) graph.Info {
	info := graph.Info{Name: id, Nodes: []graph.NodeInfo{}, Edges: []graph.EdgeInfo{}, StateSchema: d.StateSchema}
	if d.Description != nil {
		info.Description = *d.Description
	}
	b, _ := json.Marshal(d.Graph)
	var drawn struct {
		Nodes []graph.NodeInfo `json:"nodes"`
		Edges []graph.EdgeInfo `json:"edges"`
	}
	if json.Unmarshal(b, &drawn) == nil {
		if drawn.Nodes != nil {
			info.Nodes = drawn.Nodes
		}
		if drawn.Edges != nil {
			info.Edges = drawn.Edges
		}
	}
	return info
}

// Shape builds the engine graph that stands for an app's graph in the
// request rules (its node names: interrupt_before, as_node); it is never
// executed: its nodes fail if called.
func Shape(id string, d Description) (*graph.Graph, error) {
	b := graph.NewBuilder(id)
	if d.Description != nil {
		b.Describe(*d.Description)
	}
	info := drawing(id, d)
	never := func(context.Context, map[string]any, *graph.Runtime) (*graph.Command, error) {
		return nil, errors.New("this graph is executed by its LangGraph runtime")
	}
	for _, n := range info.Nodes {
		if n.ID != graph.Start && n.ID != graph.End {
			b.AddNode(n.ID, never)
		}
	}
	for _, e := range info.Edges {
		b.AddEdge(e.Source, e.Target)
	}
	return b.Compile()
}

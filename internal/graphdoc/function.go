package graphdoc

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// maxInterrupts bounds the interrupts one function call may raise.
const maxInterrupts = 100

// functionNode runs user code in the deployment's runtime. An interrupt the
// function asks for is raised through the engine; when the run resumes,
// the node calls the function again with the answers so far (Resume), so
// the function replays to where it stopped, as LangGraph nodes do.
type functionNode struct {
	graphID  string
	node     string
	timeout  time.Duration
	runtime  Runtime
	store    Store    // nil: a function's store writes fail the node
	channels []string // the state's channels, sorted
	nodes    []string // the graph's nodes, sorted
	auth     *authSpec
	tokens   Tokens
}

func (f *functionNode) run(ctx context.Context, state map[string]any, rt *graph.Runtime) (*graph.Command, error) {
	req := FunctionRequest{Graph: f.graphID, Node: f.node, State: state,
		Config: runConfig(f.graphID, rt), Context: rt.Context, Resume: []any{}}
	if f.auth != nil {
		// Before the function runs, so a missing token interrupts first.
		tok, err := bearer(ctx, f.node, f.auth, f.tokens, rt)
		if err != nil {
			return nil, err
		}
		req.Auth = &FunctionAuth{Provider: f.auth.Provider, Token: tok}
	}
	for {
		resp, err := f.call(ctx, req)
		if err != nil {
			return nil, err
		}
		// A call that asked a question already answered is replayed by
		// the next call, which emits its events again: they are reported
		// once, as the one run of a resumed LangGraph node does.
		if resp.Interrupt == nil || !rt.Answered() {
			if err := emitEvents(rt, resp.Events); err != nil {
				return nil, err
			}
		}
		switch {
		case resp.Error != nil:
			return nil, nodeError(f.node, resp.Error.Type, "%s", resp.Error.Message)
		case resp.Output != nil:
			return nil, f.misbehaved(`"output" is for tools; a function node answers with update and goto`)
		case resp.Interrupt != nil:
			if len(req.Resume) >= maxInterrupts {
				return nil, f.misbehaved("more than %d interrupts in one call", maxInterrupts)
			}
			req.Resume = append(req.Resume, rt.Interrupt(resp.Interrupt))
			continue
		}
		for _, w := range resp.Update {
			if _, ok := slices.BinarySearch(f.channels, w.Key); !ok {
				return nil, f.misbehaved("the update writes %q, which is not a state channel (channels: %v)", w.Key, f.channels)
			}
		}
		for _, to := range resp.Goto {
			if _, ok := slices.BinarySearch(f.nodes, to); !ok && to != graph.End {
				return nil, f.misbehaved("goto %q: no such node (nodes: %v)", to, f.nodes)
			}
		}
		if err := f.applyStore(ctx, resp.Store); err != nil {
			return nil, err
		}
		return &graph.Command{Update: resp.Update, Goto: resp.Goto}, nil
	}
}

// emitEvents reports the custom events a function emitted (the custom
// stream mode).
func emitEvents(rt *graph.Runtime, events []any) error {
	for _, e := range events {
		if err := rt.Emit(e); err != nil {
			return err
		}
	}
	return nil
}

// applyStore makes a function's store writes, in order. A node run again
// (a retried step) writes them again: puts and deletes are idempotent.
func (f *functionNode) applyStore(ctx context.Context, writes []StoreWrite) error {
	if len(writes) == 0 {
		return nil
	}
	if f.store == nil {
		return f.misbehaved(`"store" writes to the long-term memory store, and this deployment has none`)
	}
	for i, w := range writes {
		var err error
		if w.Op == "put" {
			err = f.store.PutItem(ctx, w.Namespace, w.Key, w.Value, w.TTL, w.Index)
		} else {
			err = f.store.DeleteItem(ctx, w.Namespace, w.Key)
		}
		if err != nil {
			return nodeError(f.node, graph.KindValue, "store write %d (%s): %v", i, w.Op, err)
		}
	}
	return nil
}

func (f *functionNode) call(ctx context.Context, req FunctionRequest) (FunctionResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	resp, err := f.runtime.Call(ctx, req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded && !errors.Is(err, context.Canceled) {
			return resp, nodeError(f.node, graph.KindTimeout, "the function did not answer within %v", f.timeout)
		}
		return resp, runtimeFailed(f.node, err)
	}
	return resp, nil
}

func (f *functionNode) misbehaved(format string, args ...any) error {
	return nodeError(f.node, graph.KindValue, "the function's answer is not valid: "+format, args...)
}

// runtimeFailed reports a failed exchange with the runtime.
func runtimeFailed(node string, err error) error {
	var ce *CallError
	if !errors.As(err, &ce) {
		if errors.Is(err, context.Canceled) {
			return err // the run was abandoned: the engine reports it
		}
		return nodeError(node, graph.KindGeneric, "the function runtime failed: %v", err)
	}
	switch ce.Failure {
	case TimedOut:
		return nodeError(node, graph.KindTimeout, "the function did not answer in time: %v", ce)
	case Unreachable:
		return nodeError(node, kindConnection, "the function runtime is unreachable: %v", ce)
	case BadStatus:
		return nodeError(node, graph.KindGeneric, "the function runtime failed: %v", ce)
	default:
		return nodeError(node, graph.KindValue, "the function's answer is not valid: %v", ce)
	}
}

// runConfig is the config a function receives: run metadata in
// LangGraph's names.
func runConfig(graphID string, rt *graph.Runtime) map[string]any {
	return map[string]any{"metadata": map[string]any{
		"graph_id":          graphID,
		"langgraph_node":    rt.Node,
		"langgraph_step":    rt.Step,
		"langgraph_task_id": rt.TaskID,
	}}
}

package graphdoc

import (
	"context"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// transformNode writes its update, rendered from the state.
func transformNode(n *nodeSpec) graph.NodeFunc {
	return func(_ context.Context, state map[string]any, rt *graph.Runtime) (*graph.Command, error) {
		scope := map[string]any{"state": state, "context": rt.Context}
		return graph.Update(renderAll(n.update, scope)), nil
	}
}

// interruptNode asks for input with its value; the answer (root "resume")
// is written by its update when the run resumes.
func interruptNode(n *nodeSpec) graph.NodeFunc {
	return func(_ context.Context, state map[string]any, rt *graph.Runtime) (*graph.Command, error) {
		scope := map[string]any{"state": state, "context": rt.Context}
		scope["resume"] = rt.Interrupt(n.value.render(scope))
		return graph.Update(renderAll(n.update, scope)), nil
	}
}

// subgraphNode runs another graph of the revision to completion as part of
// the node. Its input is the node's input mapping, or else the state's keys
// the subgraph shares; its final state is written back through the node's
// update, or else its keys the graph shares (as LangGraph does). An
// interrupt inside the subgraph interrupts the node; on resume the subgraph
// runs again from its start and gets the answers in order. The subgraph's
// events reach the run's observer under the node's namespace (streamed
// with stream_subgraphs).
func subgraphNode(node string, n *nodeSpec, child *graph.Graph, channels []string) graph.NodeFunc {
	return func(ctx context.Context, state map[string]any, rt *graph.Runtime) (*graph.Command, error) {
		scope := map[string]any{"state": state, "context": rt.Context}
		input := renderAll(n.input, scope)
		if len(n.input) == 0 {
			input = shared(state, child.Channels())
		}
		// The subgraph runs under the run's limits, one level deeper, its
		// node executions counted against the run's: nesting and fan-out
		// cannot multiply the work past what one run may do.
		opts, err := rt.SubgraphOptions()
		if err != nil {
			return nil, err
		}
		cp, out, err := graph.Run(ctx, child, nil, input, opts, nil)
		for err == nil && out.Status == graph.Interrupted && len(out.Interrupts) > 0 {
			pending := out.Interrupts[0]
			answer := rt.Interrupt(pending.Value)
			resume := graph.Command{Resume: map[string]any{pending.ID: answer}}
			cp, out, err = graph.Run(ctx, child, &cp, resume, opts, nil)
		}
		switch {
		case err != nil:
			return nil, err
		case out.Status == graph.Failed:
			return nil, nodeError(node, out.Error.Kind, "subgraph %q: %s", n.Graph, out.Error.Message)
		case out.Status != graph.Done:
			return nil, nodeError(node, graph.KindGeneric, "subgraph %q stopped (%s) without finishing", n.Graph, out.Status)
		}
		if len(n.update) > 0 {
			scope["result"] = cp.Values
			return graph.Update(renderAll(n.update, scope)), nil
		}
		return graph.Update(shared(cp.Values, channels)), nil
	}
}

// shared returns the values of values under keys.
func shared(values map[string]any, keys []string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := values[k]; ok {
			out[k] = v
		}
	}
	return out
}

// Package chatgraph is the three-node chat graph of bench/cmd/awscost's
// chat workloads (issue 14: "a chat turn (three nodes, 50 KB of state)").
// It is registered beside the built-in graphs in the API and the metered
// run-worker of the measurement only, so it costs what a deployed chat
// graph of the same shape would in checkpoints and state without needing a
// model endpoint: a turn is three super-steps, each ending in a checkpoint
// (five with the input's and the start's; the one-node echo makes three).
package chatgraph

import (
	"context"
	"fmt"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// Name is the graph's id (and its system assistant's).
const Name = "chat"

// New returns the graph: context (what a retrieval or prompt-assembly node
// writes), respond (the reply: "echo: <last message>", as the built-in
// echo graph answers) and remember (a running summary), in that order.
func New() *graph.Graph {
	return graph.NewBuilder(Name).
		Describe("Three-node chat turn for the AWS cost benchmark: context, respond, remember.").
		AddChannel("messages", graph.Channel{Reducer: graph.Append}).
		AddChannel("context", graph.Channel{}).
		AddChannel("summary", graph.Channel{}).
		AddNode("context", contextNode).
		AddNode("respond", respondNode).
		AddNode("remember", rememberNode).
		AddEdge(graph.Start, "context").
		AddEdge("context", "respond").
		AddEdge("respond", "remember").
		AddEdge("remember", graph.End).
		MustCompile()
}

func messages(state map[string]any) []any {
	msgs, _ := state["messages"].([]any)
	return msgs
}

func contextNode(_ context.Context, state map[string]any, _ *graph.Runtime) (*graph.Command, error) {
	chars := 0
	for _, m := range messages(state) {
		if mm, ok := m.(map[string]any); ok {
			s, _ := mm["content"].(string)
			chars += len(s)
		}
	}
	return graph.Update(map[string]any{"context": map[string]any{"messages": len(messages(state)), "chars": chars}}), nil
}

func respondNode(_ context.Context, state map[string]any, _ *graph.Runtime) (*graph.Command, error) {
	content := ""
	if msgs := messages(state); len(msgs) > 0 {
		if last, ok := msgs[len(msgs)-1].(map[string]any); ok {
			content, _ = last["content"].(string)
		}
	}
	return graph.Update(map[string]any{"messages": map[string]any{"role": "assistant", "content": "echo: " + content}}), nil
}

func rememberNode(_ context.Context, state map[string]any, _ *graph.Runtime) (*graph.Command, error) {
	return graph.Update(map[string]any{"summary": fmt.Sprintf("%d messages", len(messages(state)))}), nil
}

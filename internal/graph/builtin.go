package graph

import (
	"context"
	"encoding/json"
)

// Builtins returns the graphs compiled into the binary. They are small and
// exact on purpose: the API's tests rely on their outputs.
func Builtins() []*Graph {
	return []*Graph{echoGraph(), counterGraph(), approvalGraph(), failGraph()}
}

var messagesChannel = Channel{Reducer: Append, Schema: map[string]any{
	"type": "array", "items": map[string]any{"type": "object"},
}}

// echoGraph answers the last message with "echo: <its content>". It uses the
// append reducer, not messages, so no ids are added to the conversation.
func echoGraph() *Graph {
	return NewBuilder("echo").
		Describe("Replies to the last message with \"echo: <content>\".").
		AddChannel("messages", messagesChannel).
		AddNode("echo", echoNode).
		AddEdge(Start, "echo").
		AddEdge("echo", End).
		MustCompile()
}

func echoNode(_ context.Context, state map[string]any, _ *Runtime) (*Command, error) {
	content := ""
	if msgs, _ := state["messages"].([]any); len(msgs) > 0 {
		if last, ok := msgs[len(msgs)-1].(map[string]any); ok {
			content = text(last["content"])
		}
	}
	reply := map[string]any{"role": "assistant", "content": "echo: " + content}
	return Update(map[string]any{"messages": reply}), nil
}

// counterGraph adds 1 to count once per super-step until count reaches
// steps (10 when unset).
func counterGraph() *Graph {
	return NewBuilder("counter").
		Describe("Counts to `steps` (default 10), one super-step per increment.").
		AddChannel("count", Channel{Reducer: Add, Default: 0}).
		AddChannel("steps", Channel{Schema: map[string]any{"type": "integer"}}).
		AddNode("inc", incNode).
		AddEdge(Start, "inc").
		AddConditionalEdges("inc", counterRoute, "inc", End).
		MustCompile()
}

func incNode(context.Context, map[string]any, *Runtime) (*Command, error) {
	return Update(map[string]any{"count": 1}), nil
}

func counterRoute(state map[string]any) ([]string, error) {
	count, _ := Float(state["count"])
	steps := 10.0
	if v, set := state["steps"]; set && v != nil {
		var ok bool
		if steps, ok = Float(v); !ok {
			return nil, Errorf(KindValue, "steps must be a number, got %s", jsonType(v))
		}
	}
	if count < steps {
		return []string{"inc"}, nil
	}
	return []string{End}, nil
}

// approvalGraph asks a human to approve request and stores the answer.
func approvalGraph() *Graph {
	return NewBuilder("approval").
		Describe("Interrupts to ask whether `request` is approved; the resume value becomes `answer`.").
		AddChannel("request", Channel{}).
		AddChannel("answer", Channel{}).
		AddNode("ask", askNode).
		AddEdge(Start, "ask").
		AddEdge("ask", End).
		MustCompile()
}

func askNode(_ context.Context, state map[string]any, rt *Runtime) (*Command, error) {
	answer := rt.Interrupt(map[string]any{"question": "approve " + text(state["request"]) + "?"})
	return Update(map[string]any{"answer": answer}), nil
}

// failGraph always fails with ValueError("boom").
func failGraph() *Graph {
	return NewBuilder("fail").
		Describe("Always fails with ValueError: boom.").
		AddChannel("messages", messagesChannel).
		AddNode("fail", failNode).
		AddEdge(Start, "fail").
		AddEdge("fail", End).
		MustCompile()
}

func failNode(context.Context, map[string]any, *Runtime) (*Command, error) {
	return nil, Errorf(KindValue, "boom")
}

// text renders a state value for a sentence: strings as they are, anything
// else as JSON.
func text(v any) string {
	switch s := v.(type) {
	case nil:
		return ""
	case string:
		return s
	}
	b, _ := json.Marshal(v) // state values are JSON by construction
	return string(b)
}

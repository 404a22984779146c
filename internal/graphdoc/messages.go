package graphdoc

import (
	"encoding/json"
	"fmt"
)

// Messages in state are LangGraph's message dicts: {type or role, content,
// tool_calls, tool_call_id, name, id}. Both spellings are read (human/user,
// ai/assistant, system, tool); nodes write the LangGraph one (type).

// messageType returns a message's LangGraph type: human, ai, system, tool,
// or what it says when that is something else.
func messageType(m map[string]any) string {
	t, _ := m["type"].(string)
	if t == "" {
		t, _ = m["role"].(string)
	}
	switch t {
	case "user":
		return "human"
	case "assistant":
		return "ai"
	case "developer":
		return "system"
	}
	return t
}

// lastMessage returns the last message of the list in channel, or nil.
func lastMessage(state map[string]any, channel string) map[string]any {
	list, _ := state[channel].([]any)
	if len(list) == 0 {
		return nil
	}
	m, _ := list[len(list)-1].(map[string]any)
	return m
}

// toolCalls reads the tool calls of an assistant message, in LangGraph's
// shape ({name, args, id}) or OpenAI's ({id, function: {name, arguments}}).
func toolCalls(m map[string]any) []ToolCall {
	if m == nil || messageType(m) != "ai" {
		return nil
	}
	list, _ := m["tool_calls"].([]any)
	calls := make([]ToolCall, 0, len(list))
	for _, item := range list {
		c, _ := item.(map[string]any)
		if c == nil {
			continue
		}
		call := ToolCall{}
		call.ID, _ = c["id"].(string)
		call.Name, _ = c["name"].(string)
		call.Args, _ = c["args"].(map[string]any)
		if fn, ok := c["function"].(map[string]any); ok {
			call.Name, _ = fn["name"].(string)
			if s, ok := fn["arguments"].(string); ok {
				_ = decodeJSON([]byte(s), &call.Args)
			}
		}
		if call.Args == nil {
			call.Args = map[string]any{}
		}
		calls = append(calls, call)
	}
	return calls
}

// openAIMessages converts state messages to Chat Completions messages.
func openAIMessages(list []any) ([]map[string]any, error) {
	out := make([]map[string]any, 0, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("message %d is not an object", i)
		}
		msg := map[string]any{"content": m["content"]}
		if msg["content"] == nil {
			msg["content"] = ""
		}
		switch t := messageType(m); t {
		case "human":
			msg["role"] = "user"
		case "system":
			msg["role"] = "system"
		case "ai":
			msg["role"] = "assistant"
			if calls := toolCalls(m); len(calls) > 0 {
				msg["tool_calls"] = openAIToolCalls(calls)
				if msg["content"] == "" {
					msg["content"] = nil
				}
			}
		case "tool":
			msg["role"] = "tool"
			msg["tool_call_id"] = m["tool_call_id"]
			if _, ok := msg["content"].(string); !ok {
				msg["content"] = asText(msg["content"])
			}
		default:
			return nil, fmt.Errorf("message %d has type %q, not human, ai, system or tool", i, t)
		}
		if name, ok := m["name"].(string); ok && name != "" && msg["role"] != "tool" {
			msg["name"] = name
		}
		out = append(out, msg)
	}
	return out, nil
}

func openAIToolCalls(calls []ToolCall) []map[string]any {
	out := make([]map[string]any, len(calls))
	for i, c := range calls {
		args, _ := json.Marshal(c.Args) // state values are JSON
		out[i] = map[string]any{"id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": string(args)}}
	}
	return out
}

// toolMessage is the answer to a tool call; status is success or error.
func toolMessage(call ToolCall, content, status string) map[string]any {
	return map[string]any{"type": "tool", "content": content, "tool_call_id": call.ID,
		"name": call.Name, "status": status}
}

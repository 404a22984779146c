package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
)

// partsToInput turns an A2A message's parts into the run's input: text
// parts become messages of the "messages" channel (the sender's role, the
// message's id), data parts' objects are merged into the input. File parts
// are not served (upstream documents text and data only). hasText reports a
// text part, which needs an assistant with a "messages" input.
func partsToInput(parts []json.RawMessage, agent bool, messageID string) (map[string]any, bool, *RPCError) {
	role := "human"
	if agent {
		role = "assistant"
	}
	input := map[string]any{}
	var messages []any
	for i, raw := range parts {
		var part map[string]json.RawMessage
		if json.Unmarshal(raw, &part) != nil || part == nil {
			return nil, false, rpcErr(CodeContentTypeUnsupported, fmt.Sprintf("parts[%d] must be an object with one of 'text' or 'data'", i))
		}
		var present []string
		for _, k := range []string{"text", "file", "data"} {
			if _, ok := part[k]; ok {
				present = append(present, k)
			}
		}
		if len(present) > 1 {
			return nil, false, rpcErr(CodeContentTypeUnsupported, fmt.Sprintf("parts[%d] must contain exactly one of 'text', 'file' or 'data', got %s", i, strings.Join(present, ", ")))
		}
		if len(present) == 0 {
			return nil, false, rpcErr(CodeContentTypeUnsupported, fmt.Sprintf("parts[%d]: unsupported part; this agent takes 'text' and 'data' parts", i))
		}
		switch present[0] {
		case "text":
			var text string
			if json.Unmarshal(part["text"], &text) != nil {
				return nil, false, rpcErr(CodeInvalidParams, fmt.Sprintf("Invalid params: parts[%d].text must be a string", i))
			}
			messages = append(messages, map[string]any{"role": role, "content": text, "id": messageID})
		case "file":
			return nil, false, rpcErr(CodeContentTypeUnsupported, fmt.Sprintf("parts[%d]: file parts are not supported; this agent takes 'text' and 'data' parts", i))
		case "data":
			var data map[string]any
			if json.Unmarshal(part["data"], &data) != nil || data == nil {
				return nil, false, rpcErr(CodeContentTypeUnsupported, fmt.Sprintf("parts[%d].data must be a JSON object", i))
			}
			for k, v := range data {
				input[k] = v
			}
		}
	}
	if messages != nil {
		input["messages"] = messages
	}
	return input, messages != nil, nil
}

// messageRole maps a LangGraph message to an A2A role: agent (true), user
// (false), or none (ok false) for system and tool messages, which are not
// part of the conversation an A2A client sees.
func messageRole(m map[string]any) (agent, ok bool) {
	label := func(k string) string {
		s, _ := m[k].(string)
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	var byType, byRole string
	switch t := label("type"); t {
	case "":
	case "human", "humanmessage", "humanmessagechunk":
		byType = "user"
	case "ai", "aimessage", "aimessagechunk":
		byType = "agent"
	case "chat", "chatmessage", "chatmessagechunk":
	default:
		return false, false
	}
	switch r := label("role"); r {
	case "":
	case "human", "user":
		byRole = "user"
	case "agent", "assistant", "ai":
		byRole = "agent"
	default:
		return false, false
	}
	if byType != "" && byRole != "" && byType != byRole {
		return false, false
	}
	who := byType
	if who == "" {
		who = byRole
	}
	if who == "" {
		return false, false
	}
	return who == "agent", true
}

// contentParts turns a message's content into A2A text parts: a string, or
// the text blocks of a list of content blocks.
func contentParts(content any) []any {
	switch c := content.(type) {
	case string:
		return []any{textPart(c)}
	case nil:
		return nil
	case []any:
		var b strings.Builder
		for _, block := range c {
			switch v := block.(type) {
			case string:
				b.WriteString(v)
			case map[string]any:
				if v["type"] == "text" {
					if t, ok := v["text"].(string); ok {
						b.WriteString(t)
					}
				}
			}
		}
		if b.Len() == 0 {
			return nil
		}
		return []any{textPart(b.String())}
	}
	raw, _ := json.Marshal(content)
	return []any{textPart(string(raw))}
}

func hasContent(parts []any) bool {
	for _, p := range parts {
		if m, ok := p.(map[string]any); ok && m["text"] != "" {
			return true
		}
	}
	return false
}

// history converts the "messages" of a thread's values into A2A messages,
// the last n of them when n is set.
func history(d dialect, values json.RawMessage, taskID, contextID string, n *int) []any {
	var v struct {
		Messages []any `json:"messages"`
	}
	_ = json.Unmarshal(values, &v)
	return historyOf(d, v.Messages, taskID, contextID, n)
}

func historyOf(d dialect, messages []any, taskID, contextID string, n *int) []any {
	out := []any{}
	for _, raw := range messages {
		m, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		agent, ok := messageRole(m)
		if !ok {
			continue
		}
		parts := contentParts(m["content"])
		if agent && !hasContent(parts) {
			continue // a tool-calling turn with no text
		}
		if len(parts) == 0 {
			parts = []any{textPart("")}
		}
		id, _ := m["id"].(string)
		if id == "" {
			id = uuid.NewString()
		}
		out = append(out, map[string]any{"kind": "message", "role": d.role(agent), "parts": parts,
			"messageId": id, "taskId": taskID, "contextId": contextID})
	}
	if n != nil && len(out) > *n {
		out = out[len(out)-*n:]
	}
	return out
}

// responseParts are the parts of a run's answer: the last agent message
// after the last user message, or the whole output as JSON text when the
// graph has no conversation.
func responseParts(out map[string]any, raw json.RawMessage) []any {
	msgs, _ := out["messages"].([]any)
	if len(msgs) == 0 {
		return []any{textPart(string(raw))}
	}
	turn := msgs
	for i := len(msgs) - 1; i >= 0; i-- {
		if m, ok := msgs[i].(map[string]any); ok {
			if agent, ok := messageRole(m); ok && !agent {
				turn = msgs[i+1:]
				break
			}
		}
	}
	for i := len(turn) - 1; i >= 0; i-- {
		m, ok := turn[i].(map[string]any)
		if !ok {
			continue
		}
		if agent, ok := messageRole(m); ok && agent {
			if parts := contentParts(m["content"]); hasContent(parts) {
				return parts
			}
		}
	}
	return []any{textPart("")}
}

// taskFromOutput is the task of a run that ended with output (runs/wait's
// body): failed with the error, input-required with the interrupts as an
// artifact, or completed with the answer as an artifact.
func taskFromOutput(d dialect, taskID, contextID, assistantID string, raw json.RawMessage, n *int) map[string]any {
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	task := map[string]any{"kind": "task", "id": taskID, "contextId": contextID}
	if n == nil || *n > 0 {
		msgs, _ := out["messages"].([]any)
		task["history"] = historyOf(d, msgs, taskID, contextID, n)
	}
	if msg, failed := runError(raw); failed {
		task["status"] = map[string]any{"state": d.state("TASK_STATE_FAILED"), "timestamp": now(),
			"message": agentMessage(d, taskID, contextID, "Error executing assistant: "+msg)}
		return task
	}
	if ints, ok := out["__interrupt__"].([]any); ok && len(ints) > 0 {
		var parts []any
		for _, it := range ints {
			m, _ := it.(map[string]any)
			parts = append(parts, map[string]any{"kind": "data", "data": map[string]any{"id": m["id"], "value": m["value"]}})
		}
		task["status"] = map[string]any{"state": d.state("TASK_STATE_INPUT_REQUIRED"), "timestamp": now()}
		task["artifacts"] = []any{map[string]any{"artifactId": uuid.NewString(), "name": "Interrupt",
			"description": "Agent requires input to continue", "parts": parts}}
		return task
	}
	task["status"] = map[string]any{"state": d.state("TASK_STATE_COMPLETED"), "timestamp": now()}
	task["artifacts"] = []any{map[string]any{"artifactId": uuid.NewString(), "name": "Assistant Response",
		"description": "Response from assistant " + assistantID, "parts": responseParts(out, raw)}}
	return task
}

// AgentCard is the A2A agent card of an assistant; baseURL is where the
// server is reached ("https://host[:port]"), the agent's URL is
// baseURL/a2a/{assistant_id}. A missing assistant, or another
// organization's, is a not-found failure.
func (s *Service) AgentCard(ctx context.Context, orgID, assistantID, baseURL string) (map[string]any, error) {
	a, err := s.runs.GetAssistant(ctx, orgID, assistantID)
	if err != nil {
		if fail.KindOf(err) == fail.KindInvalid {
			return nil, fail.NotFound("assistant %s not found", truncate(assistantID, 100))
		}
		return nil, err
	}
	schemas, err := s.runs.AssistantSchemas(ctx, orgID, a.AssistantID)
	if err != nil {
		return nil, err
	}
	input := schemas.InputSchema
	if input == nil {
		input = schemas.StateSchema
	}
	props, _ := input["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sortStrings(names)
	required, _ := input["required"].([]any)
	if required == nil {
		required = []any{}
	}
	_, supportsMessages := props["messages"]
	desc := a.Name + " assistant"
	if a.Description != nil && *a.Description != "" {
		desc = *a.Description
	}
	modes := []string{"application/json", "text/plain"}
	url := strings.TrimSuffix(baseURL, "/") + "/a2a/" + a.AssistantID
	return map[string]any{
		"name":               a.Name,
		"description":        desc,
		"url":                url,
		"preferredTransport": "JSONRPC",
		"protocolVersion":    "0.3.0",
		"supportedInterfaces": []any{map[string]any{
			"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}},
		"capabilities": map[string]any{
			"streaming": true, "pushNotifications": false, "stateTransitionHistory": false},
		"defaultInputModes":  modes,
		"defaultOutputModes": modes,
		"skills": []any{map[string]any{
			"id": a.AssistantID + "-main", "name": a.Name + " Capabilities", "description": desc,
			"tags": []string{"assistant", "langgraph"}, "examples": []string{},
			"inputModes": modes, "outputModes": modes,
			"metadata": map[string]any{"inputSchema": map[string]any{
				"required": required, "properties": names, "supportsA2A": supportsMessages}},
		}},
		"version": s.version,
	}, nil
}

func sortStrings(s []string) { slices.Sort(s) }

package graph

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// Chat message chunks, as LangChain's AIMessageChunk has them: the pieces
// of a message a chat model streams (Runtime.EmitMessageChunk). A chunk
// holds its piece of the content and tool_call_chunks, each
// {"type": "tool_call_chunk", "index", "id", "name", "args"} with a
// fragment of the call's JSON arguments; its tool_calls are those
// fragments read as partial JSON. Chunks of one message add up
// (AddMessageChunks) to the message so far (ChunkMessage).

// maxPartialJSON bounds the arguments read as partial JSON: a longer one
// is shown as an invalid tool call until the message is complete.
const maxPartialJSON = 64 << 10

// ToolCallsOfChunks reads tool call chunks as LangChain does: arguments
// that read as a (partial) JSON object make a tool call, others an invalid
// tool call carrying the text.
func ToolCallsOfChunks(chunks []any) (calls, invalid []any) {
	calls, invalid = []any{}, []any{}
	for _, c := range chunks {
		tc, _ := c.(map[string]any)
		if tc == nil {
			continue
		}
		args, _ := tc["args"].(string)
		var parsed any = map[string]any{}
		ok := true
		if args != "" {
			parsed, ok = ParsePartialJSON(args)
		}
		obj, isObj := parsed.(map[string]any)
		name, _ := tc["name"].(string)
		if ok && isObj {
			calls = append(calls, map[string]any{"type": "tool_call", "name": name, "args": obj, "id": tc["id"]})
		} else {
			invalid = append(invalid, map[string]any{"type": "invalid_tool_call", "name": tc["name"], "args": tc["args"],
				"id": tc["id"], "error": nil})
		}
	}
	return calls, invalid
}

// ParsePartialJSON reads the start of a JSON text as the value it begins,
// closing what is open (LangChain's parse_partial_json): `{"city": "Par`
// reads as {"city": "Par"}. It reports false when s cannot be completed.
func ParsePartialJSON(s string) (any, bool) {
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		return v, true
	}
	if len(s) > maxPartialJSON {
		return nil, false
	}
	var out []byte
	var stack []byte
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case inString:
			switch {
			case ch == '"' && !escaped:
				inString = false
			case ch == '\n' && !escaped:
				out = append(out, '\\', 'n')
				continue
			case ch == '\\':
				escaped = !escaped
			default:
				escaped = false
			}
		case ch == '"':
			inString, escaped = true, false
		case ch == '{':
			stack = append(stack, '}')
		case ch == '[':
			stack = append(stack, ']')
		case ch == '}' || ch == ']':
			if len(stack) == 0 || stack[len(stack)-1] != ch {
				return nil, false
			}
			stack = stack[:len(stack)-1]
		}
		out = append(out, ch)
	}
	if inString {
		if escaped {
			out = out[:len(out)-1]
		}
		out = append(out, '"')
	}
	slices.Reverse(stack)
	// Drop what cannot end a value (`"key": `, `tru`) from the end, as
	// LangChain does, a bounded number of times.
	for tries := 0; len(out) > 0 && tries < 64; tries++ {
		if json.Unmarshal(append(slices.Clone(out), stack...), &v) == nil {
			return v, true
		}
		out = out[:len(out)-1]
	}
	return nil, false
}

// AddMessageChunks adds chunk b to a, the message's chunks so far (nil
// for none), as LangChain's AIMessageChunk addition: contents are
// concatenated, tool call chunks merged by index (their arguments
// concatenated), metadata merged, usage summed. It returns the sum; a is
// not changed.
func AddMessageChunks(a, b map[string]any) map[string]any {
	if a == nil {
		out := maps.Clone(b)
		chunks := cloneChunks(b["tool_call_chunks"])
		out["tool_call_chunks"] = chunks
		out["tool_calls"], out["invalid_tool_calls"] = ToolCallsOfChunks(chunks)
		return out
	}
	out := maps.Clone(a)
	ac, _ := a["content"].(string)
	bc, _ := b["content"].(string)
	out["content"] = ac + bc
	merged := cloneChunks(a["tool_call_chunks"])
	bchunks, _ := b["tool_call_chunks"].([]any)
	for _, c := range bchunks {
		tc, _ := c.(map[string]any)
		if tc == nil {
			continue
		}
		i := slices.IndexFunc(merged, func(m any) bool {
			return tc["index"] != nil && jsonEqual(m.(map[string]any)["index"], tc["index"])
		})
		if i < 0 {
			merged = append(merged, maps.Clone(tc))
			continue
		}
		m := merged[i].(map[string]any)
		for _, k := range []string{"id", "name"} {
			if s, _ := m[k].(string); s == "" && tc[k] != nil {
				m[k] = tc[k]
			}
		}
		x, _ := m["args"].(string)
		y, _ := tc["args"].(string)
		m["args"] = x + y
	}
	out["tool_call_chunks"] = merged
	for _, k := range []string{"response_metadata", "additional_kwargs"} {
		am, _ := a[k].(map[string]any)
		bm, _ := b[k].(map[string]any)
		m := maps.Clone(am)
		if m == nil {
			m = map[string]any{}
		}
		maps.Copy(m, bm)
		out[k] = m
	}
	if bu, ok := b["usage_metadata"].(map[string]any); ok {
		au, _ := a["usage_metadata"].(map[string]any)
		sum := maps.Clone(au)
		if sum == nil {
			sum = map[string]any{}
		}
		for k, v := range bu {
			sum[k] = sumTokens(sum[k], v)
		}
		out["usage_metadata"] = sum
	}
	calls, invalid := ToolCallsOfChunks(merged)
	out["tool_calls"], out["invalid_tool_calls"] = calls, invalid
	return out
}

// ChunkMessage is the message the chunks so far make (LangChain's
// message_chunk_to_message): an "ai" message without tool call chunks.
func ChunkMessage(sum map[string]any) map[string]any {
	msg := maps.Clone(sum)
	delete(msg, "tool_call_chunks")
	delete(msg, "chunk_position")
	if t, _ := msg["type"].(string); strings.HasSuffix(t, "Chunk") {
		msg["type"] = "ai"
	}
	return msg
}

func cloneChunks(v any) []any {
	list, _ := v.([]any)
	out := make([]any, 0, len(list))
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			out = append(out, maps.Clone(m))
		}
	}
	return out
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// sumTokens sums two token counts of normalized values; anything but two
// numbers keeps b.
func sumTokens(a, b any) any {
	y, ok := b.(json.Number)
	if !ok {
		return b
	}
	x, ok := a.(json.Number)
	if !ok {
		if a != nil {
			return b
		}
		x = "0"
	}
	if s, err := addNumbers(x, y); err == nil {
		return s
	}
	return b
}

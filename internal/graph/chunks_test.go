package graph

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParsePartialJSON(t *testing.T) {
	for _, c := range []struct {
		in, want string // want "" : cannot be completed
	}{
		{`{"city": "Paris"}`, `{"city":"Paris"}`},
		{`{"city": "Par`, `{"city":"Par"}`},
		{`{"city": `, `{}`},
		{`{"city"`, `{}`},
		{`{"ci`, `{}`},
		{`{"a": [1, 2`, `{"a":[1,2]}`},
		{`{"a": {"b": tru`, `{"a":{}}`},
		{`{"a": "line\`, `{"a":"line"}`},
		{"{\"a\": \"two\nlines", `{"a":"two\nlines"}`},
		{`{"a": 1}}`, ``},
		{`]`, ``},
		{`ty": "Par`, ``},
		{`"x`, `"x"`},
	} {
		v, ok := ParsePartialJSON(c.in)
		got := ""
		if ok {
			b, _ := json.Marshal(v)
			got = string(b)
		}
		if got != c.want {
			t.Errorf("ParsePartialJSON(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	if _, ok := ParsePartialJSON(`{"a": "` + strings.Repeat("x", maxPartialJSON)); ok {
		t.Error("arguments longer than the bound were read")
	}
}

func TestAddMessageChunks(t *testing.T) {
	chunk := func(s string) map[string]any {
		var m map[string]any
		if err := decodeJSON([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	pieces := []string{
		`{"type": "AIMessageChunk", "id": "m", "content": "It ", "response_metadata": {}, "tool_call_chunks": [
			{"type": "tool_call_chunk", "index": 0, "id": "c1", "name": "lookup", "args": "{\"or"}]}`,
		`{"type": "AIMessageChunk", "id": "m", "content": "is", "response_metadata": {}, "tool_call_chunks": [
			{"type": "tool_call_chunk", "index": 0, "id": null, "name": null, "args": "der\": 4"},
			{"type": "tool_call_chunk", "index": 1, "id": "c2", "name": "other", "args": ""}]}`,
		`{"type": "AIMessageChunk", "id": "m", "content": "", "response_metadata": {"finish_reason": "stop"},
			"usage_metadata": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}, "tool_call_chunks": [
			{"type": "tool_call_chunk", "index": 0, "id": null, "name": null, "args": "2}"}]}`,
	}
	var sum map[string]any
	var sums []string
	for _, p := range pieces {
		c := chunk(p)
		before, _ := json.Marshal(sum)
		next := AddMessageChunks(sum, c)
		if after, _ := json.Marshal(sum); string(before) != string(after) {
			t.Fatalf("AddMessageChunks changed its first argument: %s", after)
		}
		sum = next
		b, _ := json.Marshal(ChunkMessage(sum))
		sums = append(sums, string(b))
	}
	want := []string{
		`{"content":"It ","id":"m","invalid_tool_calls":[],"response_metadata":{},"tool_calls":[{"args":{},"id":"c1","name":"lookup","type":"tool_call"}],"type":"ai"}`,
		`{"additional_kwargs":{},"content":"It is","id":"m","invalid_tool_calls":[],"response_metadata":{},"tool_calls":[{"args":{"order":4},"id":"c1","name":"lookup","type":"tool_call"},{"args":{},"id":"c2","name":"other","type":"tool_call"}],"type":"ai"}`,
		`{"additional_kwargs":{},"content":"It is","id":"m","invalid_tool_calls":[],"response_metadata":{"finish_reason":"stop"},"tool_calls":[{"args":{"order":42},"id":"c1","name":"lookup","type":"tool_call"},{"args":{},"id":"c2","name":"other","type":"tool_call"}],"type":"ai","usage_metadata":{"input_tokens":3,"output_tokens":2,"total_tokens":5}}`,
	}
	for i := range want {
		if sums[i] != want[i] {
			t.Errorf("after chunk %d:\n%s\nwant\n%s", i, sums[i], want[i])
		}
	}
	// Usage adds up, as LangChain's chunk addition does.
	twice := AddMessageChunks(sum, chunk(pieces[2]))
	if b, _ := json.Marshal(twice["usage_metadata"]); string(b) != `{"input_tokens":6,"output_tokens":4,"total_tokens":10}` {
		t.Errorf("usage %s", b)
	}
}

package interop

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestToolName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"echo", "echo"},
		{"  my  support\tagent ", "my_support_agent"},
		{"a/b:c", "abc"},
		{"v1.2-beta_x", "v1.2-beta_x"},
		{"émoji 🙂 name", "moji__name"},
		{"!!!", ""},
		{strings.Repeat("x", 200), strings.Repeat("x", 128)},
	} {
		if got := ToolName(tc.in); got != tc.want {
			t.Errorf("ToolName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNegotiate(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"2024-11-05", "2024-11-05"}, {"2025-03-26", "2025-03-26"}, {"2025-06-18", "2025-06-18"},
		{"2025-11-25", "2025-11-25"}, {"2026-07-28", "2025-11-25"}, {"", "2025-11-25"}, {"garbage", "2025-11-25"},
	} {
		if got := negotiate(tc.in); got != tc.want {
			t.Errorf("negotiate(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAccepts(t *testing.T) {
	for _, tc := range []struct {
		header, media string
		want          bool
	}{
		{"application/json, text/event-stream", "application/json", true},
		{"application/json, text/event-stream", "text/event-stream", true},
		{"text/event-stream", "application/json", false},
		{"*/*", "text/event-stream", true},
		{"application/*;q=0.5", "application/json", true},
		{"text/*", "application/json", false},
		{"APPLICATION/JSON; charset=utf-8", "application/json", true},
		{"", "application/json", false},
		{"application/jsonx", "application/json", false},
	} {
		if got := accepts(tc.header, tc.media); got != tc.want {
			t.Errorf("accepts(%q, %q) = %v", tc.header, tc.media, got)
		}
	}
}

func TestDecodeEnvelope(t *testing.T) {
	for _, tc := range []struct {
		body string
		code int // 0: no error
		kind kind
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, kindRequest},
		{`{"jsonrpc":"2.0","id":"a","method":"ping","params":{}}`, 0, kindRequest},
		{`{"jsonrpc":"2.0","id":0,"method":"ping"}`, 0, kindRequest},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, kindNotification},
		{`{"jsonrpc":"2.0","id":null,"method":"x"}`, 0, kindNotification},
		{`{"jsonrpc":"2.0","id":3,"result":{}}`, 0, kindResponse},
		{`{"jsonrpc":"2.0","id":3}`, 0, kindInvalid},
		{`{"jsonrpc":"2.0"}`, 0, kindInvalid},
		{`{`, CodeParseError, kindInvalid},
		{``, CodeParseError, kindInvalid},
		{`[]`, CodeInvalidRequest, kindInvalid},
		{`12`, CodeInvalidRequest, kindInvalid},
		{`{"id":1,"method":"ping"}`, CodeInvalidRequest, kindInvalid},
		{`{"jsonrpc":2,"id":1,"method":"ping"}`, CodeInvalidRequest, kindInvalid},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, CodeInvalidRequest, kindInvalid},
		{`{"jsonrpc":"2.0","id":[1],"method":"ping"}`, CodeInvalidRequest, kindInvalid},
		{`{"jsonrpc":"2.0","id":1,"method":7}`, CodeMethodNotFound, kindInvalid},
		{`{"jsonrpc":"2.0","id":1,"method":""}`, CodeMethodNotFound, kindInvalid},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}`, CodeInvalidParams, kindInvalid},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`, CodeInvalidParams, kindInvalid},
	} {
		env, err := decodeEnvelope([]byte(tc.body))
		switch {
		case tc.code == 0 && err != nil:
			t.Errorf("%s: error %v", tc.body, err)
		case tc.code != 0 && (err == nil || err.Code != tc.code):
			t.Errorf("%s: error %v, want code %d", tc.body, err, tc.code)
		case tc.code == 0 && env.kind() != tc.kind:
			t.Errorf("%s: kind %d, want %d", tc.body, env.kind(), tc.kind)
		}
	}
}

func TestTaskState(t *testing.T) {
	for _, tc := range []struct{ run, thread, want string }{
		{"pending", "busy", "TASK_STATE_SUBMITTED"},
		{"running", "busy", "TASK_STATE_WORKING"},
		{"success", "idle", "TASK_STATE_COMPLETED"},
		{"success", "interrupted", "TASK_STATE_INPUT_REQUIRED"},
		{"interrupted", "idle", "TASK_STATE_CANCELED"},
		{"error", "error", "TASK_STATE_FAILED"},
		{"timeout", "error", "TASK_STATE_FAILED"},
	} {
		if got := taskState(tc.run, tc.thread); got != tc.want {
			t.Errorf("taskState(%s, %s) = %s, want %s", tc.run, tc.thread, got, tc.want)
		}
	}
	legacy, v1 := dialect{}, dialect{v1: true}
	if legacy.state("TASK_STATE_INPUT_REQUIRED") != "input-required" || v1.state("TASK_STATE_WORKING") != "TASK_STATE_WORKING" {
		t.Errorf("dialect states")
	}
	if legacy.role(true) != "agent" || v1.role(false) != "ROLE_USER" {
		t.Errorf("dialect roles")
	}
}

func TestMessageRole(t *testing.T) {
	for _, tc := range []struct {
		msg       map[string]any
		agent, ok bool
	}{
		{map[string]any{"role": "user"}, false, true},
		{map[string]any{"role": "human"}, false, true},
		{map[string]any{"role": "assistant"}, true, true},
		{map[string]any{"type": "ai"}, true, true},
		{map[string]any{"type": "AIMessageChunk"}, true, true},
		{map[string]any{"type": "human", "role": "assistant"}, false, false}, // contradictory
		{map[string]any{"type": "tool"}, false, false},
		{map[string]any{"role": "system"}, false, false},
		{map[string]any{"type": "chat", "role": "user"}, false, true},
		{map[string]any{}, false, false},
	} {
		agent, ok := messageRole(tc.msg)
		if agent != tc.agent || ok != tc.ok {
			t.Errorf("messageRole(%v) = %v, %v", tc.msg, agent, ok)
		}
	}
}

func TestPartsToInput(t *testing.T) {
	parts := func(s ...string) []json.RawMessage {
		var out []json.RawMessage
		for _, p := range s {
			out = append(out, json.RawMessage(p))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		parts []json.RawMessage
		agent bool
		want  map[string]any
		text  bool
		code  int
	}{
		{"text", parts(`{"kind":"text","text":"hi"}`), false,
			map[string]any{"messages": []any{map[string]any{"role": "human", "content": "hi", "id": "m"}}}, true, 0},
		{"agent text, 1.0 form", parts(`{"text":"yo"}`), true,
			map[string]any{"messages": []any{map[string]any{"role": "assistant", "content": "yo", "id": "m"}}}, true, 0},
		{"data merged", parts(`{"kind":"data","data":{"a":1}}`, `{"data":{"b":2}}`), false,
			map[string]any{"a": float64(1), "b": float64(2)}, false, 0},
		{"text and data", parts(`{"text":"x"}`, `{"data":{"k":"v"}}`), false,
			map[string]any{"k": "v", "messages": []any{map[string]any{"role": "human", "content": "x", "id": "m"}}}, true, 0},
		{"file", parts(`{"kind":"file","file":{"uri":"u"}}`), false, nil, false, CodeContentTypeUnsupported},
		{"two kinds", parts(`{"text":"x","data":{}}`), false, nil, false, CodeContentTypeUnsupported},
		{"none", parts(`{"kind":"text"}`), false, nil, false, CodeContentTypeUnsupported},
		{"not an object", parts(`"x"`), false, nil, false, CodeContentTypeUnsupported},
		{"data array", parts(`{"data":[1]}`), false, nil, false, CodeContentTypeUnsupported},
		{"text not a string", parts(`{"text":5}`), false, nil, false, CodeInvalidParams},
	} {
		got, text, err := partsToInput(tc.parts, tc.agent, "m")
		if tc.code != 0 {
			if err == nil || err.Code != tc.code {
				t.Errorf("%s: error %v, want code %d", tc.name, err, tc.code)
			}
			continue
		}
		if err != nil || text != tc.text || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v %v %v, want %v %v", tc.name, got, text, err, tc.want, tc.text)
		}
	}
}

func TestResponseParts(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{`{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`, "b"},
		// Only the current turn counts: an earlier answer is not this one's.
		{`{"messages":[{"role":"assistant","content":"old"},{"role":"user","content":"q"}]}`, ""},
		{`{"messages":[{"role":"user","content":"q"},{"type":"ai","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]},{"type":"tool","content":"t"}]}`, "xy"},
		{`{"count":3}`, `{"count":3}`},
	} {
		var out map[string]any
		_ = json.Unmarshal([]byte(tc.out), &out)
		parts := responseParts(out, json.RawMessage(tc.out))
		if got := parts[0].(map[string]any)["text"]; got != tc.want {
			t.Errorf("%s: %v, want %q", tc.out, got, tc.want)
		}
	}
}

func TestRunError(t *testing.T) {
	for _, tc := range []struct {
		out, msg string
		failed   bool
	}{
		{`{"__error__":{"error":"ValueError","message":"boom"}}`, "ValueError: boom", true},
		{`{"__error__":{"message":"m"}}`, "m", true},
		{`{"messages":[]}`, "", false},
		{`[1]`, "", false},
	} {
		msg, failed := runError(json.RawMessage(tc.out))
		if msg != tc.msg || failed != tc.failed {
			t.Errorf("runError(%s) = %q, %v", tc.out, msg, failed)
		}
	}
}

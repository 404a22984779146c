package testmodel

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Turn is the model's answer to one request.
type Turn struct {
	// Content is the answer's text, in the pieces it is streamed in.
	Content []string
	// ToolCalls are the calls the model makes; each call's arguments
	// are streamed in the pieces of Args.
	ToolCalls []ToolCall
	// FinishReason defaults to "tool_calls" with tool calls, "stop"
	// without.
	FinishReason string
	// Usage is prompt, completion and total tokens (none when nil).
	Usage *[3]int
	// Plain answers one completion (application/json) even when the
	// request asks for a stream: an endpoint that does not stream.
	Plain bool
	// Hold, when not nil, stops a streamed answer after HoldAfter pieces
	// of content until it yields (or the request ends): a model that is
	// still answering.
	Hold      <-chan struct{}
	HoldAfter int
}

// ToolCall is a call of the answer.
type ToolCall struct {
	ID, Name string
	Args     []string
}

// Request is what reached the endpoint.
type Request struct {
	Body          map[string]any
	Authorization string
}

// Messages are the request's messages.
func (r Request) Messages() []map[string]any {
	list, _ := r.Body["messages"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, m := range list {
		if mm, ok := m.(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}

// Server is the fake endpoint. Its base URL for a chat_model node is
// URL + "/v1".
type Server struct {
	*httptest.Server
	key    string
	script func(Request) Turn

	mu       sync.Mutex
	requests []Request
}

// Model is the model name the answers carry.
const Model = "gpt-4o-mini"

// Start starts the endpoint on 127.0.0.1 until the test ends. Requests
// without "Authorization: Bearer <key>" (key not empty) are refused with
// 401.
func Start(t testing.TB, key string, script func(Request) Turn) *Server {
	t.Helper()
	s := New(key, script)
	t.Cleanup(s.Close)
	return s
}

// New starts the endpoint on 127.0.0.1; the caller closes it.
func New(key string, script func(Request) Turn) *Server {
	s := &Server{key: key, script: script}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	s.Listener = l
	s.Start()
	return s
}

// Requests are the requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	if s.key != "" && r.Header.Get("Authorization") != "Bearer "+s.key {
		http.Error(w, `{"error": {"message": "bad API key"}}`, http.StatusUnauthorized)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error": {"message": "the body is not JSON"}}`, http.StatusBadRequest)
		return
	}
	req := Request{Body: body, Authorization: r.Header.Get("Authorization")}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	turn := s.script(req)
	finish := turn.FinishReason
	if finish == "" {
		finish = "stop"
		if len(turn.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	if stream, _ := body["stream"].(bool); !stream || turn.Plain {
		writeWhole(w, turn, finish)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = w.Write([]byte("data: " + string(b) + "\n\n"))
		if flusher != nil {
			flusher.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for i, piece := range turn.Content {
		if turn.Hold != nil && i == turn.HoldAfter {
			select {
			case <-turn.Hold:
			case <-r.Context().Done():
				return
			}
		}
		send(chunk(map[string]any{"content": piece}, nil))
	}
	for i, tc := range turn.ToolCalls {
		send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""}}}}, nil))
		for _, piece := range tc.Args {
			send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i,
				"function": map[string]any{"arguments": piece}}}}, nil))
		}
	}
	send(chunk(map[string]any{}, finish))
	if u := turn.Usage; u != nil {
		if opts, _ := body["stream_options"].(map[string]any); opts["include_usage"] == true {
			send(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": Model, "choices": []any{},
				"usage": map[string]any{"prompt_tokens": u[0], "completion_tokens": u[1], "total_tokens": u[2]}})
		}
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
}

func writeWhole(w http.ResponseWriter, turn Turn, finish string) {
	message := map[string]any{"role": "assistant", "content": nil}
	if len(turn.Content) > 0 {
		message["content"] = strings.Join(turn.Content, "")
	}
	if len(turn.ToolCalls) > 0 {
		var calls []any
		for _, tc := range turn.ToolCalls {
			calls = append(calls, map[string]any{"id": tc.ID, "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": strings.Join(tc.Args, "")}})
		}
		message["tool_calls"] = calls
	}
	answer := map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": Model,
		"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}}}
	if u := turn.Usage; u != nil {
		answer["usage"] = map[string]any{"prompt_tokens": u[0], "completion_tokens": u[1], "total_tokens": u[2]}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// The chat model of the stream-chat workload: a local OpenAI-compatible
// Chat Completions endpoint on 127.0.0.1, started by loadgen and shared by
// every server (stepgraph's chat_model node, the peers' ChatOpenAI). It
// answers the last user message with a fixed text of `chunks` tokens
// (modelAnswer), one token every `delay`, so a model's own time to first
// token is `delay` and its whole answer takes chunks×delay — whether the
// client asked for a stream (`"stream": true`: SSE chat.completion.chunk
// events, then `data: [DONE]`) or not (one chat.completion after the same
// time, as a real model generates the same tokens either way).

// modelAPIKey is what the endpoint expects as its bearer token: a dummy,
// not a secret (the endpoint is local and answers nothing of value).
const modelAPIKey = "sk-bench-local-model"

// modelName is the model every server asks for.
const modelName = "bench-model"

type fakeModel struct {
	chunks int
	delay  time.Duration
	seq    atomic.Int64 // completion ids
	srv    *http.Server
	url    string // base URL, ".../v1"
}

// startFakeModel listens on a free loopback port.
func startFakeModel(chunks int, delay time.Duration) (*fakeModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &fakeModel{chunks: chunks, delay: delay}
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	m.url = "http://" + ln.Addr().String() + "/v1"
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

func (m *fakeModel) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
}

// modelAnswer is the answer to a user message: its first token names the
// message (so an answer meant for another request is caught), then
// numbered words; chunks tokens in all.
func modelAnswer(question string, chunks int) []string {
	toks := []string{"re: " + question}
	for i := 1; i < chunks; i++ {
		toks = append(toks, fmt.Sprintf(" w%d", i))
	}
	return toks
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+modelAPIKey {
		http.Error(w, `{"error": {"message": "bad API key"}}`, http.StatusUnauthorized)
		return
	}
	var body struct {
		Model         string           `json:"model"`
		Messages      []map[string]any `json:"messages"`
		Stream        bool             `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil || len(body.Messages) == 0 {
		http.Error(w, `{"error": {"message": "bad request"}}`, http.StatusBadRequest)
		return
	}
	var question string
	for _, msg := range body.Messages {
		if msg["role"] == "user" {
			question, _ = msg["content"].(string)
		}
	}
	if question == "" {
		http.Error(w, `{"error": {"message": "no user message with text content"}}`, http.StatusBadRequest)
		return
	}
	toks := modelAnswer(question, m.chunks)
	usage := map[string]any{"prompt_tokens": len(body.Messages), "completion_tokens": len(toks),
		"total_tokens": len(body.Messages) + len(toks)}
	id := fmt.Sprintf("chatcmpl-bench-%d", m.seq.Add(1))
	created := time.Now().Unix()
	if !body.Stream {
		if !sleepCtx(r.Context(), time.Duration(len(toks))*m.delay) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": created,
			"model": body.Model, "choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": strings.Join(toks, "")}}},
			"usage": usage})
		return
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": body.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	// As OpenAI streams: the role first with empty content, then the
	// content tokens, then the finish reason, then (when asked) the usage.
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, t := range toks {
		if !sleepCtx(r.Context(), m.delay) {
			return
		}
		send(chunk(map[string]any{"content": t}, nil))
	}
	send(chunk(map[string]any{}, "stop"))
	if body.StreamOptions.IncludeUsage {
		send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": body.Model,
			"choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// sleepCtx waits d unless ctx ends first; it reports whether it waited.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

package lambdaapp_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/cors"
)

// Behind the REST API a preflight of a streamed path (ANY to the stream's
// function, infra/stack) goes through the streaming handler: 204 with the
// CORS headers and no body; a stream's answer to an allowed origin exposes
// Content-Location (the SDKs' run).
func TestStreamedPreflightAndCORS(t *testing.T) {
	const studio = "https://smith.langchain.com"
	shape := newAWSShape(t, func(c *api.Config) { c.CORS = &cors.Policy{Origins: []string{studio}} })
	srv := newGateway(t, shape.api, 2*time.Second)
	var th struct {
		ThreadID string `json:"thread_id"`
	}
	mustJSON(t, do(t, srv, shape.key, "POST", "/threads", map[string]any{}), &th)
	path := "/threads/" + th.ThreadID + "/runs/stream"

	resp := do(t, srv, "", "OPTIONS", path, nil, "Origin", studio, "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "content-type,x-api-key")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != studio ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "X-Api-Key") || len(body) != 0 {
		t.Fatalf("streamed preflight: %d %v %q", resp.StatusCode, resp.Header, body)
	}

	close(shape.release) // the run goes through
	resp = do(t, srv, shape.key, "POST", path, map[string]any{"assistant_id": "gate", "input": map[string]any{"step": 0},
		"stream_mode": []string{"values"}}, "Origin", studio)
	readSSE(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != studio ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Content-Location") || resp.Header.Get("Content-Location") == "" {
		t.Fatalf("stream from Studio: %d %v", resp.StatusCode, resp.Header)
	}
}

package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/stepgraph/stepgraph/internal/interop"
)

// MCP (POST /mcp, and /mcp/ as upstream's document names it; GET and
// DELETE as upstream's endpoint answers them) and A2A (POST
// /a2a/{assistant_id}, the agent cards):
// the protocol rules are internal/interop's; these handlers only carry
// bodies, headers and statuses, and frame message/stream as server-sent
// events.

func (s *Server) postMCP(w http.ResponseWriter, r *request) error {
	rep := s.interop.MCP(r.Context(), r.orgID, r.body, r.Header.Get("Accept"), r.Header.Get("MCP-Protocol-Version"))
	writeReply(w, rep)
	return nil
}

// getMCP answers GET /mcp as upstream's endpoint does (langgraph-api
// api/mcp/_handlers.py handle_get_request: 405): the stateless endpoint
// opens no server-to-client SSE stream, and the Streamable HTTP transport
// has a server without one answer GET with 405.
func (s *Server) getMCP(w http.ResponseWriter, r *request) error {
	w.Header().Set("Allow", "POST, DELETE")
	writeDetail(w, http.StatusMethodNotAllowed, "GET opens no stream: the MCP endpoint is stateless; send JSON-RPC messages with POST")
	return nil
}

// deleteMCP answers DELETE /mcp as upstream's endpoint does
// (api/mcp/_handlers.py handle_delete_request: 404): a stateless endpoint
// has no session to end, and the transport's answer to a session the
// server does not know is 404.
func (s *Server) deleteMCP(w http.ResponseWriter, r *request) error {
	writeDetail(w, http.StatusNotFound, "no MCP session to end: the MCP endpoint is stateless and keeps none")
	return nil
}

func (s *Server) postA2A(w http.ResponseWriter, r *request) error {
	rep, stream := s.interop.A2A(r.Context(), r.orgID, r.PathValue("assistant_id"), r.body, r.Header.Get("Accept"))
	if stream == nil {
		writeReply(w, rep)
		return nil
	}
	s.serveA2AStream(w, r, stream)
	return nil
}

// agentCard answers an assistant's agent card (GET /a2a/{assistant_id} and
// its well-known paths).
func (s *Server) agentCard(w http.ResponseWriter, r *request) error {
	card, err := s.interop.AgentCard(r.Context(), r.orgID, r.PathValue("assistant_id"), baseURL(r.Request))
	return answer(w, card, err)
}

// rootAgentCard answers GET /.well-known/agent-card.json?assistant_id=.
func (s *Server) rootAgentCard(w http.ResponseWriter, r *request) error {
	card, err := s.interop.AgentCard(r.Context(), r.orgID, r.URL.Query().Get("assistant_id"), baseURL(r.Request))
	return answer(w, card, err)
}

// baseURL is where the caller reached the server: the scheme (as a proxy
// in front says it, else the connection's) and the Host header.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return scheme + "://" + r.Host
}

func writeReply(w http.ResponseWriter, rep interop.Reply) {
	if rep.Body == nil {
		w.WriteHeader(rep.Status)
		return
	}
	writeJSON(w, rep.Status, rep.Body)
}

// serveA2AStream frames a message/stream answer as upstream does: each
// JSON-RPC response is one "message" event; a comment heartbeat keeps a
// quiet stream open while the run works.
func (s *Server) serveA2AStream(w http.ResponseWriter, r *request, stream *interop.Stream) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events := make(chan interop.Response)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = stream.Run(ctx, func(resp interop.Response) error {
			select {
			case events <- resp:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	every := s.cfg.StreamHeartbeat
	if every <= 0 {
		every = DefaultStreamHeartbeat
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for {
		select {
		case resp := <-events:
			data, err := json.Marshal(resp)
			if err != nil {
				data, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": resp.ID,
					"error": map[string]any{"code": interop.CodeInternalError, "message": "Internal error"}})
			}
			if !write(append(append([]byte("event: message\r\ndata: "), data...), "\r\n\r\n"...)) {
				cancel()
				<-done
				return
			}
		case <-tick.C:
			if !write([]byte(": heartbeat\r\n\r\n")) {
				cancel()
				<-done
				return
			}
		case <-done:
			return
		}
	}
}

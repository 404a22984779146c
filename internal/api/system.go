package api

import (
	"fmt"
	"net/http"
)

func (s *Server) ok(w http.ResponseWriter, r *request) error {
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

func (s *Server) info(w http.ResponseWriter, r *request) error {
	writeJSON(w, http.StatusOK, map[string]any{
		"version": s.cfg.Version,
		"flags": map[string]bool{
			"oauth_providers": true,
			"deployments":     true,
			"idempotency":     true,
			"assistants":      s.cfg.Runs != nil,
			"threads":         s.cfg.Runs != nil,
			"runs":            s.cfg.Runs != nil,
			"webhooks":        s.cfg.Runs != nil && s.cfg.Runs.Webhooks != nil,
			"crons":           s.cfg.Crons != nil,
		},
	})
	return nil
}

func (s *Server) openapi(w http.ResponseWriter, r *request) error {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.spec.JSON)
	return nil
}

// graphSchema serves one of the graph documents' JSON Schemas.
func (s *Server) graphSchema(schema []byte) handlerFunc {
	return func(w http.ResponseWriter, r *request) error {
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write(schema)
		return nil
	}
}

func (s *Server) docsPage(w http.ResponseWriter, r *request) error {
	s.docs.ServeHTTP(w, r.Request)
	return nil
}

// consolePage serves the web console's page and assets (internal/console).
func (s *Server) consolePage(w http.ResponseWriter, r *request) error {
	s.console.ServeHTTP(w, r.Request)
	return nil
}

// uiComponent answers POST /ui/{graph_id} as upstream does for a graph
// without a generative UI bundle (langgraph-api api/ui.py handle_ui: 404
// "UI not found for graph ..."): stepgraph builds no UI bundles.
func (s *Server) uiComponent(w http.ResponseWriter, r *request) error {
	writeDetail(w, http.StatusNotFound, fmt.Sprintf("UI not found for graph %q: stepgraph builds no generative UI bundles", r.PathValue("graph_id")))
	return nil
}

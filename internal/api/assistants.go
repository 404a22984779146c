package api

import (
	"net/http"

	"github.com/stepgraph/stepgraph/internal/runs"
)

func (s *Server) createAssistant(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.AssistantInput) (any, error) { return s.cfg.Runs.CreateAssistant(r.Context(), r.orgID, in) })
}

func (s *Server) searchAssistants(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.AssistantSearch) (any, error) {
		return s.cfg.Runs.SearchAssistants(r.Context(), r.orgID, in)
	})
}

func (s *Server) getAssistant(w http.ResponseWriter, r *request) error {
	a, err := s.cfg.Runs.GetAssistant(r.Context(), r.orgID, r.PathValue("assistant_id"))
	return answer(w, a, err)
}

func (s *Server) deleteAssistant(w http.ResponseWriter, r *request) error {
	return noContent(w, s.cfg.Runs.DeleteAssistant(r.Context(), r.orgID, r.PathValue("assistant_id")))
}

func (s *Server) getAssistantGraph(w http.ResponseWriter, r *request) error {
	info, err := s.cfg.Runs.AssistantGraph(r.Context(), r.orgID, r.PathValue("assistant_id"))
	return answer(w, map[string]any{"nodes": info.Nodes, "edges": info.Edges}, err)
}

func (s *Server) getAssistantSchemas(w http.ResponseWriter, r *request) error {
	sc, err := s.cfg.Runs.AssistantSchemas(r.Context(), r.orgID, r.PathValue("assistant_id"))
	return answer(w, sc, err)
}

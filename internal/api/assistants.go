package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/runs"
)

func (s *Server) createAssistant(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.AssistantInput) (any, error) { return s.cfg.Runs.CreateAssistant(r.Context(), r.orgID, in) })
}

func (s *Server) searchAssistants(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.AssistantSearch) (any, error) {
		return s.cfg.Runs.SearchAssistantsSelected(r.Context(), r.orgID, in)
	})
}

func (s *Server) countAssistants(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.AssistantCount) (any, error) {
		return s.cfg.Runs.CountAssistants(r.Context(), r.orgID, in)
	})
}

func (s *Server) patchAssistant(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.AssistantPatch) (any, error) {
		return s.cfg.Runs.PatchAssistant(r.Context(), r.orgID, r.PathValue("assistant_id"), in)
	})
}

func (s *Server) getAssistantVersions(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.AssistantVersionsQuery) (any, error) {
		return s.cfg.Runs.AssistantVersions(r.Context(), r.orgID, r.PathValue("assistant_id"), in)
	})
}

func (s *Server) setLatestAssistantVersion(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.AssistantLatest) (any, error) {
		return s.cfg.Runs.SetLatestAssistantVersion(r.Context(), r.orgID, r.PathValue("assistant_id"), in)
	})
}

func (s *Server) getAssistantSubgraphs(w http.ResponseWriter, r *request) error {
	recurse := r.URL.Query().Get("recurse")
	subs, err := s.cfg.Runs.AssistantSubgraphs(r.Context(), r.orgID, r.PathValue("assistant_id"),
		r.PathValue("namespace"), recurse == "true" || recurse == "True")
	return answer(w, subs, err)
}

func (s *Server) getAssistant(w http.ResponseWriter, r *request) error {
	a, err := s.cfg.Runs.GetAssistant(r.Context(), r.orgID, r.PathValue("assistant_id"))
	return answer(w, a, err)
}

func (s *Server) deleteAssistant(w http.ResponseWriter, r *request) error {
	return noContent(w, s.cfg.Runs.DeleteAssistant(r.Context(), r.orgID, r.PathValue("assistant_id")))
}

func (s *Server) getAssistantGraph(w http.ResponseWriter, r *request) error {
	xray, err := parseXray(r.URL.Query().Get("xray"))
	if err != nil {
		return err
	}
	info, err := s.cfg.Runs.AssistantGraph(r.Context(), r.orgID, r.PathValue("assistant_id"), xray)
	return answer(w, map[string]any{"nodes": info.Nodes, "edges": info.Edges}, err)
}

// parseXray reads upstream's xray query parameter: true, false or a
// positive depth.
func parseXray(v string) (any, error) {
	switch strings.ToLower(v) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 64 {
		return nil, fail.Invalid("xray", "must be true, false or a depth from 1 to 64")
	}
	return n, nil
}

func (s *Server) getAssistantSchemas(w http.ResponseWriter, r *request) error {
	sc, err := s.cfg.Runs.AssistantSchemas(r.Context(), r.orgID, r.PathValue("assistant_id"))
	return answer(w, sc, err)
}

package api

import (
	"net/http"

	"github.com/stepgraph/stepgraph/internal/providers"
)

func (s *Server) listProviders(w http.ResponseWriter, r *request) error {
	list, err := s.cfg.Providers.List(r.Context(), r.orgID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) createProvider(w http.ResponseWriter, r *request) error {
	var in providers.CreateInput
	if err := r.decode(&in); err != nil {
		return err
	}
	p, err := s.cfg.Providers.Create(r.Context(), r.orgID, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) getProvider(w http.ResponseWriter, r *request) error {
	p, err := s.cfg.Providers.Get(r.Context(), r.orgID, r.PathValue("provider_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) updateProvider(w http.ResponseWriter, r *request) error {
	var in providers.UpdateInput
	if err := r.decode(&in); err != nil {
		return err
	}
	p, err := s.cfg.Providers.Update(r.Context(), r.orgID, r.PathValue("provider_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) deleteProvider(w http.ResponseWriter, r *request) error {
	id := r.PathValue("provider_id")
	if err := s.cfg.Providers.Delete(r.Context(), r.orgID, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": "provider " + id + " deleted"})
	return nil
}

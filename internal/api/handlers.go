package api

import (
	"net/http"
	"strings"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/graphdoc"
	"github.com/stepgraph/stepgraph/internal/providers"
)

// handlers binds every operationId of openapi.yaml to its handler.
func (s *Server) handlers() map[string]handlerFunc {
	return map[string]handlerFunc{
		"ok":        s.ok,
		"info":      s.info,
		"openapi":   s.openapi,
		"docs":      s.docsPage,
		"docsAsset": s.docsPage,

		"getGraphSchema":       s.graphSchema(graphdoc.DocumentSchema),
		"getGraphConfigSchema": s.graphSchema(graphdoc.ConfigSchema),

		"listProviders":  s.listProviders,
		"createProvider": s.idempotent(s.createProvider),
		"getProvider":    s.getProvider,
		"updateProvider": s.updateProvider,
		"deleteProvider": s.deleteProvider,

		"listDeployments":  s.listDeployments,
		"createDeployment": s.idempotent(s.createDeployment),
		"getDeployment":    s.getDeployment,
		"updateDeployment": s.updateDeployment,
		"deleteDeployment": s.deleteDeployment,
		"listRevisions":    s.listRevisions,
		"createRevision":   s.createRevision,
		"getRevision":      s.getRevision,
		"redeployRevision": s.redeployRevision,
	}
}

// --- meta ---

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
			"crons":           false,
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

// --- OAuth providers ---

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

// --- deployments ---

func (s *Server) listDeployments(w http.ResponseWriter, r *request) error {
	q := deployments.ListQuery{
		Limit:        r.intQuery("limit", 20),
		Offset:       r.intQuery("offset", 0),
		NameContains: r.URL.Query().Get("name_contains"),
		Status:       r.URL.Query().Get("status"),
	}
	page, err := s.cfg.Deployments.List(r.Context(), r.orgID, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) createDeployment(w http.ResponseWriter, r *request) error {
	var in deployments.CreateInput
	if err := r.decode(&in); err != nil {
		return err
	}
	d, err := s.cfg.Deployments.Create(r.Context(), r.orgID, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, d)
	return nil
}

func (s *Server) getDeployment(w http.ResponseWriter, r *request) error {
	d, err := s.cfg.Deployments.Get(r.Context(), r.orgID, r.PathValue("deployment_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) updateDeployment(w http.ResponseWriter, r *request) error {
	var in deployments.UpdateInput
	if err := r.decode(&in); err != nil {
		return err
	}
	d, err := s.cfg.Deployments.Update(r.Context(), r.orgID, r.PathValue("deployment_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) deleteDeployment(w http.ResponseWriter, r *request) error {
	if err := s.cfg.Deployments.Delete(r.Context(), r.orgID, r.PathValue("deployment_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listRevisions(w http.ResponseWriter, r *request) error {
	q := deployments.RevisionQuery{
		Limit:  r.intQuery("limit", 20),
		Offset: r.intQuery("offset", 0),
	}
	if st := r.URL.Query().Get("status"); st != "" {
		q.Status = strings.Split(st, ",")
	}
	page, err := s.cfg.Deployments.ListRevisions(r.Context(), r.orgID, r.PathValue("deployment_id"), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) createRevision(w http.ResponseWriter, r *request) error {
	var in deployments.RevisionInput
	if err := r.decode(&in); err != nil {
		return err
	}
	rev, err := s.cfg.Deployments.CreateRevision(r.Context(), r.orgID, r.PathValue("deployment_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, rev)
	return nil
}

func (s *Server) getRevision(w http.ResponseWriter, r *request) error {
	rev, err := s.cfg.Deployments.Revision(r.Context(), r.orgID, r.PathValue("deployment_id"), r.PathValue("revision_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rev)
	return nil
}

func (s *Server) redeployRevision(w http.ResponseWriter, r *request) error {
	d, err := s.cfg.Deployments.Redeploy(r.Context(), r.orgID, r.PathValue("deployment_id"), r.PathValue("revision_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

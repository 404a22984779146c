package api

import (
	"net/http"
	"strings"

	"github.com/stepgraph/stepgraph/internal/deployments"
)

func (s *Server) listDeployments(w http.ResponseWriter, r *request) error {
	q := deployments.ListQuery{
		Limit:        r.intQuery("limit", 20),
		Offset:       r.intQuery("offset", 0),
		NameContains: r.URL.Query().Get("name_contains"),
		Name:         r.URL.Query().Get("name"),
		Status:       r.URL.Query().Get("status"),
	}
	page, err := s.cfg.Deployments.List(r.Context(), r.orgID, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) deploymentLogs(kind string) handlerFunc {
	return func(w http.ResponseWriter, r *request) error {
		return decodeAndAnswer(w, r, func(in deployments.LogQuery) (any, error) {
			return s.cfg.Deployments.Logs(r.Context(), r.orgID, r.PathValue("project_id"), r.PathValue("revision_id"), kind, in)
		})
	}
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

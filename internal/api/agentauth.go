package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/stepgraph/stepgraph/internal/agentauth"
	"github.com/stepgraph/stepgraph/internal/fail"
)

// Agent auth (/v2/auth/authenticate, wait, callback, tokens): the routes
// the official langchain-auth client calls. Without an agent-auth store
// (Config.AgentAuth nil) they answer 404.

func (s *Server) agentAuth() (*agentauth.Service, error) {
	if s.cfg.AgentAuth == nil {
		return nil, fail.NotFound("agent auth is not enabled on this server")
	}
	return s.cfg.AgentAuth, nil
}

func (s *Server) authenticate(w http.ResponseWriter, r *request) error {
	aa, err := s.agentAuth()
	if err != nil {
		return err
	}
	var in agentauth.AuthenticateInput
	if err := r.decode(&in); err != nil {
		return err
	}
	res, err := aa.Authenticate(r.Context(), r.orgID, in)
	if err != nil {
		return err
	}
	// The one answer, with Wait's, that carries a token: never cached.
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) waitAuth(w http.ResponseWriter, r *request) error {
	aa, err := s.agentAuth()
	if err != nil {
		return err
	}
	timeout := time.Duration(r.intQuery("timeout", 30)) * time.Second
	res, err := aa.Wait(r.Context(), r.orgID, r.PathValue("auth_id"), timeout)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, res)
	return nil
}

// authCallback is where the provider sends the user's browser back: no API
// key (the browser has none); the state is the credential.
func (s *Server) authCallback(w http.ResponseWriter, r *request) error {
	aa, err := s.agentAuth()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	res, err := aa.Callback(r.Context(), r.PathValue("provider_id"),
		agentauth.CallbackInput{Code: q.Get("code"), State: q.Get("state"), Error: q.Get("error")})
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) tokenExists(w http.ResponseWriter, r *request) error {
	aa, err := s.agentAuth()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	ok, err := aa.TokenExists(r.Context(), r.orgID, q.Get("provider_id"), q.Get("user_id"), q.Get("agent_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"has_token": ok})
	return nil
}

func (s *Server) revokeTokens(w http.ResponseWriter, r *request) error {
	aa, err := s.agentAuth()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	provider := q.Get("provider_id")
	n, err := aa.RevokeTokens(r.Context(), r.orgID, provider, q.Get("user_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "tokens revoked", "provider_id": provider, "revoked": n})
	return nil
}

// authCallbackFinalize is upstream's frontend-bridged callback: the
// application's page got code and state from the browser and posts them
// with its API key; the attempt must be the caller organization's.
func (s *Server) authCallbackFinalize(w http.ResponseWriter, r *request) error {
	aa, err := s.agentAuth()
	if err != nil {
		return err
	}
	var in struct {
		Code  *string `json:"code"`
		State *string `json:"state"`
	}
	if err := r.decode(&in); err != nil {
		return err
	}
	var c fail.Checks
	c.Add(in.Code == nil, "code", "is required")
	c.Add(in.State == nil, "state", "is required")
	if err := c.Err(); err != nil {
		return err
	}
	res, err := aa.Callback(r.Context(), r.PathValue("provider_id"),
		agentauth.CallbackInput{Code: *in.Code, State: *in.State, OrgID: r.orgID})
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) listTokens(w http.ResponseWriter, r *request) error {
	aa, err := s.agentAuth()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit, offset := 100, 0
	var c fail.Checks
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		c.Add(err != nil, "limit", "must be a whole number")
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		c.Add(err != nil, "offset", "must be a whole number")
		offset = n
	}
	if err := c.Err(); err != nil {
		return err
	}
	out, err := aa.ListTokens(r.Context(), r.orgID, q.Get("provider_id"), q.Get("user_id"), limit, offset)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteToken(w http.ResponseWriter, r *request) error {
	aa, err := s.agentAuth()
	if err != nil {
		return err
	}
	if err := aa.DeleteToken(r.Context(), r.orgID, r.PathValue("token_id"), r.URL.Query().Get("user_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

package api

import (
	"net/http"
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
	ok, err := aa.TokenExists(r.Context(), r.orgID, q.Get("provider_id"), q.Get("user_id"))
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

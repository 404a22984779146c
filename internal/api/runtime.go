package api

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/stepgraph/stepgraph/internal/calltoken"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	"github.com/stepgraph/stepgraph/internal/reqid"
	"github.com/stepgraph/stepgraph/internal/store"
)

// AppCalls serves the routes a LangGraph app's graph calls during one run
// call when its runtime cannot reach the platform's loopback bridge (a
// Lambda function): /runtime/store and /runtime/auth/token, authenticated
// by the call's signed token (calltoken), not an API key, and answered as
// the loopback bridge answers (pyapp.CallRoutes).
type AppCalls struct {
	Tokens  *calltoken.Signer
	Budgets store.CallBudgets
	Routes  *pyapp.CallRoutes
}

// tokenBudget: a call's token requests, counted across the stage's
// function instances.
var tokenBudget = calltoken.Limit{Route: "auth", Requests: pyapp.MaxTokenRequests}

func (s *Server) runtimeStore(w http.ResponseWriter, r *request) error {
	c, ok := s.callClaims(w, r)
	if ok {
		s.cfg.AppCalls.Routes.ServeStore(w, r.rewound(), pyapp.ScopeOf(c))
	}
	return nil
}

func (s *Server) runtimeToken(w http.ResponseWriter, r *request) error {
	c, ok := s.callClaims(w, r)
	if ok {
		count := func() error {
			return calltoken.Spend(r.Context(), s.cfg.AppCalls.Budgets, c, tokenBudget, requestID(r), int64(len(r.body)))
		}
		s.cfg.AppCalls.Routes.ServeToken(w, r.rewound(), pyapp.ScopeOf(c), count)
	}
	return nil
}

// callClaims verifies the call's bearer token, answering 401 (naming the
// rule, never the token) or 503 (the organization's key could not be read)
// when it cannot.
func (s *Server) callClaims(w http.ResponseWriter, r *request) (calltoken.Claims, bool) {
	if s.cfg.AppCalls == nil {
		writeDetail(w, http.StatusNotFound, "LangGraph apps' run calls are not served here")
		return calltoken.Claims{}, false
	}
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	c, err := s.cfg.AppCalls.Tokens.Verify(r.Context(), bearer)
	switch {
	case errors.Is(err, calltoken.ErrInvalid):
		writeDetail(w, http.StatusUnauthorized, err.Error())
		return calltoken.Claims{}, false
	case err != nil:
		s.log.Error("a run call's token could not be verified", "error", err)
		writeDetail(w, http.StatusServiceUnavailable, "the call's token could not be verified now; try again")
		return calltoken.Claims{}, false
	}
	return c, true
}

// rewound is the request with its body, already read, to read again.
func (r *request) rewound() *http.Request {
	hr := r.Request.Clone(r.Context())
	hr.Body = io.NopCloser(bytes.NewReader(r.body))
	return hr
}

// requestID names a request within its call, so a retried count of it
// counts once: the request's id, else a random one.
func requestID(r *request) string {
	if id := reqid.From(r.Context()); id != "" {
		return id
	}
	raw := make([]byte, 12)
	_, _ = rand.Read(raw)
	return hex.EncodeToString(raw)
}

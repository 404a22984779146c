package api

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/calltoken"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	"github.com/stepgraph/stepgraph/internal/reqid"
	"github.com/stepgraph/stepgraph/internal/store"
)

// AppCalls serves the routes a LangGraph app's graph calls during one run
// call when its runtime cannot reach the platform's loopback bridge (a
// Lambda function): /runtime/store and /runtime/auth/token, answered as the
// loopback bridge answers (pyapp.CallRoutes), and /runtime/events, the
// events the call posts as it runs; all authenticated by the call's signed
// token (calltoken), not an API key.
type AppCalls struct {
	Tokens  *calltoken.Signer
	Budgets store.CallBudgets
	Routes  *pyapp.CallRoutes
	// Events keeps the calls' mailboxes of posted events
	// (/runtime/events); nil answers that route 404.
	Events store.Events
}

// Bounds of a call's posted events: each small enough for an event log
// item without the payload store, few per batch, a call's total bounded.
const (
	maxPostedEvent  = 12 << 10
	maxPostedBatch  = 50
	mailboxLifetime = time.Hour // past the call's token: the worker reads it at the call's end
)

// eventsBudget bounds what one call posts (a batch every 0.2 s for the 10
// minutes of a Lambda call's budget is 3,000).
var eventsBudget = calltoken.Limit{Route: "events", Requests: 4_000, Bytes: 64 << 20}

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

// runtimeEvents appends a batch of a call's events, posted as it runs, to
// the call's mailbox (pyapp.Mailbox), where the run worker reads them.
func (s *Server) runtimeEvents(w http.ResponseWriter, r *request) error {
	c, ok := s.callClaims(w, r)
	if !ok {
		return nil
	}
	if s.cfg.AppCalls.Events == nil {
		writeDetail(w, http.StatusNotFound, "live events of LangGraph apps are not served here")
		return nil
	}
	events, err := postedEvents(r.body)
	if err != nil {
		return err
	}
	if err := calltoken.Spend(r.Context(), s.cfg.AppCalls.Budgets, c, eventsBudget, requestID(r), int64(len(r.body))); err != nil {
		return err
	}
	if _, err := s.cfg.AppCalls.Events.AppendRunEvents(r.Context(), c.OrgID, pyapp.MailboxKey(c.ID), events, c.Expires.Add(mailboxLifetime)); err != nil {
		return err
	}
	return answer(w, map[string]int{"appended": len(events)}, nil)
}

// postedEvents reads a batch of posted events: {"events": [message, ...]},
// each an event message numbered in its call.
func postedEvents(body []byte) ([]store.RunEvent, error) {
	var in struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fail.Invalid("events", "must be a list of the call's event messages")
	}
	if len(in.Events) == 0 || len(in.Events) > maxPostedBatch {
		return nil, fail.Invalid("events", "must hold 1 to %d events", maxPostedBatch)
	}
	out := make([]store.RunEvent, len(in.Events))
	for i, raw := range in.Events {
		var m pyapp.Message
		switch {
		case len(raw) > maxPostedEvent:
			return nil, fail.Invalid(fmt.Sprintf("events[%d]", i), "is at most %d bytes", maxPostedEvent)
		case json.Unmarshal(raw, &m) != nil || m.Type != "event" || m.Seq < 1:
			return nil, fail.Invalid(fmt.Sprintf("events[%d]", i), "must be an event message with its seq (1, 2, ... in the call)")
		}
		out[i] = store.RunEvent{Event: pyapp.MailboxEvent, Data: raw}
	}
	return out, nil
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
// counts once: 48 bits of the request's id (else random ones), short
// because the DynamoDB counter keeps every id of the call in its item.
func requestID(r *request) string {
	if id := reqid.From(r.Context()); id != "" {
		sum := sha256.Sum256([]byte(id))
		return hex.EncodeToString(sum[:6])
	}
	raw := make([]byte, 6)
	_, _ = rand.Read(raw)
	return hex.EncodeToString(raw)
}

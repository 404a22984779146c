package pyapp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/stepgraph/stepgraph/internal/agentauth"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graphdoc"
)

// Authenticator is what the bridge needs of agent auth
// (agentauth.Service): the user's token for a provider, or the URL of a
// new authorization.
type Authenticator interface {
	Authenticate(ctx context.Context, orgID string, in agentauth.AuthenticateInput) (agentauth.AuthenticateResult, error)
}

// Bounds of the token requests of one run call: a graph that loops on
// get_token cannot start authorizations without end.
const (
	maxTokenBody = 64 << 10
	// MaxTokenRequests is how many token requests one run call may make
	// (the loopback Bridge counts them in its grant, the stage's API in
	// store.CallBudgets).
	MaxTokenRequests = 100
)

// UserKey is the key naming the run's user: in the run's context, its
// config's configurable, or its metadata (as graph documents' nodes).
const UserKey = "user_id"

// RunUser is the run's user under UserKey, by graphdoc.RunUser's rule
// (context, config's configurable, metadata) on the run's JSON.
func RunUser(context json.RawMessage, config map[string]any, metadata json.RawMessage) string {
	var ctxMap, metaMap map[string]any
	_ = json.Unmarshal(context, &ctxMap)
	_ = json.Unmarshal(metadata, &metaMap)
	conf, _ := config["configurable"].(map[string]any)
	return graphdoc.RunUser(UserKey, ctxMap, conf, metaMap)
}

// tokenRequest is a graph's get_token: agent_id absent means the run's
// assistant, null the unscoped token, a string that agent.
type tokenRequest struct {
	Provider *string         `json:"provider"`
	Scopes   *[]string       `json:"scopes"`
	AgentID  json.RawMessage `json:"agent_id"`
}

// ServeToken answers a graph's token request for the scope's run: the
// token, or the authorization URL the node interrupts with. count counts
// the request against the call's bound (a fail.Quota over it).
func (b *CallRoutes) ServeToken(w http.ResponseWriter, r *http.Request, scope CallScope, count func() error) {
	if b.Auth == nil {
		bridgeAnswer(w, http.StatusNotFound, map[string]any{"detail": "agent auth is not available here"})
		return
	}
	if err := count(); err != nil {
		if fail.KindOf(err) == fail.KindQuota {
			bridgeAnswer(w, http.StatusTooManyRequests, map[string]any{"detail": fail.MessageOf(err)})
			return
		}
		b.Log.Error("a LangGraph app's token request could not be counted", "org_id", scope.OrgID, "error", err)
		bridgeAnswer(w, http.StatusServiceUnavailable, map[string]any{"detail": "the call's budget could not be read; try again"})
		return
	}
	in, err := readTokenRequest(r.Body, scope)
	if err != nil {
		bridgeAnswer(w, http.StatusUnprocessableEntity, map[string]any{"detail": fail.MessageOf(err)})
		return
	}
	res, err := b.Auth.Authenticate(r.Context(), scope.OrgID, in)
	if err != nil {
		b.authFailed(w, scope, err)
		return
	}
	if res.Status == "completed" {
		bridgeAnswer(w, http.StatusOK, map[string]any{"status": "completed", "token": res.Token})
		return
	}
	bridgeAnswer(w, http.StatusOK, map[string]any{"status": "pending", "auth_url": res.URL})
}

// readTokenRequest reads a token request as agent auth's input for the
// grant's run: its user, and its assistant as the agent by default.
func readTokenRequest(body io.Reader, scope CallScope) (agentauth.AuthenticateInput, error) {
	raw, err := io.ReadAll(io.LimitReader(body, maxTokenBody+1))
	if err != nil || len(raw) > maxTokenBody {
		return agentauth.AuthenticateInput{}, fail.Invalid("body", "is at most %d bytes", maxTokenBody)
	}
	var req tokenRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return agentauth.AuthenticateInput{}, fail.Invalid("body", "is not a token request: %v", err)
	}
	if scope.UserID == "" {
		return agentauth.AuthenticateInput{}, fail.Invalid(UserKey, "the run names no user: set %q in the run's context "+
			"(or config.configurable, or the run's metadata) to the user whose token the graph asks for", UserKey)
	}
	user := scope.UserID
	in := agentauth.AuthenticateInput{Provider: req.Provider, Scopes: req.Scopes, UserID: &user}
	switch {
	case len(req.AgentID) == 0:
		if scope.AssistantID != "" {
			agent := scope.AssistantID
			in.AgentID = &agent
		}
	case !bytes.Equal(req.AgentID, []byte("null")):
		var agent string
		if err := json.Unmarshal(req.AgentID, &agent); err != nil {
			return agentauth.AuthenticateInput{}, fail.Invalid("agent_id", "must be a string or null")
		}
		in.AgentID = &agent
	}
	return in, nil
}

// authFailed answers agent auth's refusal with its caller-safe message;
// anything else is logged here and answered in general words.
func (b *CallRoutes) authFailed(w http.ResponseWriter, scope CallScope, err error) {
	msg := fail.MessageOf(err)
	switch fail.KindOf(err) {
	case fail.KindInvalid:
		bridgeAnswer(w, http.StatusUnprocessableEntity, map[string]any{"detail": msg})
	case fail.KindNotFound:
		bridgeAnswer(w, http.StatusNotFound, map[string]any{"detail": msg})
	case fail.KindBadRequest, fail.KindConflict, fail.KindQuota:
		bridgeAnswer(w, http.StatusBadRequest, map[string]any{"detail": msg})
	default:
		b.Log.Error("agent auth: a LangGraph app's token request failed", "org_id", scope.OrgID, "error", err)
		bridgeAnswer(w, http.StatusServiceUnavailable, map[string]any{"detail": "the token store could not be read; try again"})
	}
}

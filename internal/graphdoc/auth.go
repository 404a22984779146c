package graphdoc

import (
	"cmp"
	"context"
	"fmt"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// Tokens gives nodes a provider token of the run's user (agent auth,
// internal/agentauth, bound to the deployment's organization).
type Tokens interface {
	// Token returns the user's access token for the provider with the
	// scopes — scoped to agentID, or the user's unscoped token when it is
	// "" — or, when none is stored and usable, the URL where the user
	// grants one (token "").
	Token(ctx context.Context, userID, agentID, provider string, scopes []string) (token, authURL string, err error)
}

// authSpec is a node's `auth`: which provider token it sends, and where
// the run says who the user is.
type authSpec struct {
	Provider string   `json:"provider"`
	Scopes   []string `json:"scopes"`
	// UserKey is the key holding the user id: in the run's context, else
	// in the run's metadata (RunUser).
	UserKey string `json:"user_key"`
	// Agent scopes the token to the run's assistant (upstream's default
	// for agents; langchain-auth sends the assistant id as agent_id).
	// False: the user's unscoped token, which documents written before
	// agent scoping keep using.
	Agent bool `json:"agent"`
}

// DefaultUserKey is the key of the user id (in the run's context or
// metadata) when a node's auth names none.
const DefaultUserKey = "user_id"

// RunUser is the rule of agent auth's run user, the user whose provider
// tokens a graph gets (a graph document's node auth; a LangGraph app's
// get_token through pyapp): the first non-empty string under key in the
// run's context, its config's configurable, then its metadata. The context
// comes first: it is the run's own input, while metadata is often set once
// per thread or by a client library. The authenticated caller is no
// source: a stepgraph API key names an organization, not a person. It
// lives here, below the use cases, because graph documents' nodes apply it
// (the format cannot import a use case).
func RunUser(key string, context, configurable, metadata map[string]any) string {
	for _, m := range []map[string]any{context, configurable, metadata} {
		if u, _ := m[key].(string); u != "" {
			return u
		}
	}
	return ""
}

// bearer returns the token a node's auth asks for. Without one it
// interrupts the run with upstream's value (langchain-auth's
// {message, auth_url, provider, scopes}); resuming runs the node again,
// which then finds the token the user granted. A resume without the grant
// fails the node, as upstream's client raises then.
//
// It must run on the node's own goroutine (graph.Runtime.Interrupt).
func bearer(ctx context.Context, node string, a *authSpec, tokens Tokens, rt *graph.Runtime) (string, error) {
	key := cmp.Or(a.UserKey, DefaultUserKey)
	user := RunUser(key, rt.Context, nil, rt.Metadata) // a node's runtime has no configurable
	if user == "" {
		return "", nodeError(node, graph.KindValue, "auth: neither the run's context nor its metadata has %q: it names the user whose %s token the node sends", key, a.Provider)
	}
	scopes := a.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	agent := ""
	if a.Agent {
		// The worker sets it to the run's assistant (runs.runMetadata).
		if agent, _ = rt.Metadata["assistant_id"].(string); agent == "" {
			return "", nodeError(node, graph.KindValue, "auth: agent: true needs the run's assistant id, which this run has not")
		}
	}
	tok, authURL, err := tokens.Token(ctx, user, agent, a.Provider, scopes)
	if err != nil {
		return "", nodeError(node, "AuthError", "auth: %v", err)
	}
	if tok != "" {
		return tok, nil
	}
	rt.Interrupt(map[string]any{
		"message":  fmt.Sprintf("OAuth authentication required for provider '%s'.", a.Provider),
		"auth_url": authURL, "provider": a.Provider, "scopes": scopes,
	})
	return "", nodeError(node, graph.KindValue, "auth: OAuth authentication for provider %q was not completed: visit the authorization URL, then resume", a.Provider)
}

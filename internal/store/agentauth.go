package store

import (
	"context"
	"time"
)

// AuthAttempt is one agent-auth authorization in progress (internal/agentauth):
// the consent a user was sent to give at a provider, until the callback
// ends it. The state sent to the provider is kept only as a hash, so the
// store alone cannot complete an attempt.
type AuthAttempt struct {
	ID         string // the auth_id of the API
	OrgID      string
	UserID     string
	ProviderID string
	Scopes     []string // sorted, without duplicates
	// AgentID is the agent the token will be scoped to ("": the user's
	// unscoped token); the callback stores the token under it.
	AgentID   string
	StateHash string // hex SHA-256 of the state parameter
	// Status is pending, exchanging (the callback holds it), completed or
	// failed.
	Status string
	// Error says why a failed attempt failed, in words safe for the caller
	// (never a token, a code or a secret).
	Error     string
	TokenID   string // the token a completed attempt stored
	CreatedAt time.Time
	ExpiresAt time.Time
	UpdatedAt time.Time
}

// AgentToken is the record of a token a user granted an organization for a
// provider. The token values (access and refresh token) are in the secrets
// store under SecretRef; the record holds only what is needed to choose
// and refresh one.
type AgentToken struct {
	ID         string
	OrgID      string
	UserID     string
	ProviderID string
	Scopes     []string // sorted, without duplicates; part of the key
	// AgentID is the agent (an assistant id) the token is scoped to, part
	// of the key; "" is the user's unscoped token (every token stored
	// before agent scoping is).
	AgentID   string
	SecretRef string
	// ExpiresAt is when the access token expires (zero: the provider did
	// not say).
	ExpiresAt time.Time
	// Usable is false once a refresh failed: the token is kept for the
	// record but never handed out, and the next authenticate starts a new
	// authorization.
	Usable    bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// AgentAuth stores agent-auth attempts and the token records.
type AgentAuth interface {
	// CreateAuthAttempt stores a new attempt.
	CreateAuthAttempt(ctx context.Context, a AuthAttempt) error
	// AuthAttempt returns one attempt of the organization; ErrNotFound
	// when there is none (or it is another organization's).
	AuthAttempt(ctx context.Context, orgID, id string) (AuthAttempt, error)
	// AuthAttemptByState finds an attempt by the hash of its state, in any
	// organization (the callback carries no API key); ErrNotFound.
	AuthAttemptByState(ctx context.Context, stateHash string) (AuthAttempt, error)
	// SetAuthAttemptStatus moves the attempt from status from to a.Status
	// (with a.Error, a.TokenID, a.UpdatedAt): ErrStale when its status is
	// no longer from (someone else moved it: a replayed state),
	// ErrNotFound when there is no such attempt.
	SetAuthAttemptStatus(ctx context.Context, a AuthAttempt, from string) error
	// DeleteExpiredAuthAttempts removes the organization's attempts that
	// expired before t.
	DeleteExpiredAuthAttempts(ctx context.Context, orgID string, t time.Time) (int, error)

	// PutAgentToken stores t under its key (OrgID, UserID, ProviderID,
	// Scopes, AgentID), replacing a token with the same key; it returns the secret
	// reference of the replaced one ("" when there was none), which the
	// caller deletes from the secrets store.
	PutAgentToken(ctx context.Context, t AgentToken) (replacedRef string, err error)
	// AgentToken returns one token record of the organization.
	AgentToken(ctx context.Context, orgID, id string) (AgentToken, error)
	// AgentTokens lists the organization's tokens for a provider, of one
	// user or (userID "") of all users, of every agent and unscoped,
	// oldest first.
	AgentTokens(ctx context.Context, orgID, providerID, userID string) ([]AgentToken, error)
	// UpdateAgentToken replaces the token's SecretRef, ExpiresAt, Usable
	// and UpdatedAt if its SecretRef is still fromRef: ErrStale otherwise
	// (another refresh won), ErrNotFound when it is gone.
	UpdateAgentToken(ctx context.Context, t AgentToken, fromRef string) error
	// DeleteAgentTokens removes the organization's tokens for a provider,
	// of one user or (userID "") of all, of every agent and unscoped, and
	// returns the removed records.
	DeleteAgentTokens(ctx context.Context, orgID, providerID, userID string) ([]AgentToken, error)
	// DeleteAgentToken removes one token record of the organization and
	// returns it; ErrNotFound when there is none (or it is another
	// organization's).
	DeleteAgentToken(ctx context.Context, orgID, id string) (AgentToken, error)
}

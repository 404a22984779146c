// Package agentauth makes the OAuth provider registry usable by agents
// ("agent auth", /v2/auth/authenticate, callback, wait, tokens): it starts
// an authorization-code flow for a user and a provider, checks the
// callback's state, exchanges the code at the provider's token endpoint
// through the guarded outbound client, and keeps the tokens in a vault —
// the values in the secrets port, a record of each (organization, user,
// provider, scopes, agent) in the store — refreshing them before they expire.
//
// It owns the rules of that flow: state (unguessable, single use, bound to
// one attempt, short-lived, stored only as a hash), PKCE (the verifier is
// derived on the server from the state and an organization key, so it is
// never stored and never leaves the server), the client authentication
// methods, the bounds on the token endpoint (time and body), and which
// token a caller may have. Provider registrations themselves are
// internal/providers'; this package reads them and their client secrets.
//
// Token values never appear in an error, a log line or a stored record
// other than the secrets store; the only answers that carry one are
// Authenticate's and Wait's, to the organization that owns the token.
package agentauth

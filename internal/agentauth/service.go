package agentauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/providers"
	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Defaults of the Service's durations.
const (
	// DefaultAttemptTTL is how long an authorization URL can be used: the
	// time for a person to read a consent page, short enough that a
	// forgotten URL is soon worthless.
	DefaultAttemptTTL = 10 * time.Minute
	// DefaultRefreshSkew: a token expiring sooner than this is refreshed
	// before it is handed out, so a caller never gets one that expires
	// while in use.
	DefaultRefreshSkew = 2 * time.Minute
	// MaxWait bounds GET /v2/auth/wait (upstream's client waits 300 s by
	// default).
	MaxWait = 300 * time.Second
	// DefaultWaitPoll is how often a wait reads the attempt: the callback
	// may land on another process (AWS), so the store is the one truth.
	DefaultWaitPoll = 250 * time.Millisecond
)

// Attempt statuses.
const (
	statusPending    = "pending"
	statusExchanging = "exchanging"
	statusCompleted  = "completed"
	statusFailed     = "failed"
)

// Service runs the agent-auth use cases.
type Service struct {
	Store     store.AgentAuth
	Providers *providers.Service
	// Vault keeps the token values (the secrets port: the AES-GCM file
	// locally; see docs/agent-auth.md for AWS).
	Vault secrets.Store
	// StateKey returns the organization's key from which PKCE verifiers
	// are derived (auth.OrgKey.Get).
	StateKey func(ctx context.Context, orgID string) ([]byte, error)
	// HTTPClient calls the providers' token endpoints: the guarded
	// outbound client (weburl.GuardedClient).
	HTTPClient *http.Client
	// CallbackBase is the public base URL of this server; the redirect URI
	// of provider p is CallbackBase + "/v2/auth/callback/" + p.
	CallbackBase string
	Log          *slog.Logger
	Now          func() time.Time

	AttemptTTL   time.Duration // DefaultAttemptTTL when 0
	RefreshSkew  time.Duration // DefaultRefreshSkew when 0
	TokenTimeout time.Duration // DefaultTokenTimeout when 0
	// RevocationBudget bounds the revocation calls of one deletion
	// (DefaultRevocationBudget when 0).
	RevocationBudget time.Duration
	WaitPoll         time.Duration // DefaultWaitPoll when 0

	refreshing sync.Map // token id → *sync.Mutex: one refresh per token per process
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC().Truncate(time.Microsecond)
	}
	return time.Now().UTC().Truncate(time.Microsecond)
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

func orDur(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// AuthenticateResult is upstream's AuthAuthenticateResponse.
type AuthenticateResult struct {
	Status string `json:"status"` // completed or pending
	Token  string `json:"token,omitempty"`
	URL    string `json:"url,omitempty"`
	AuthID string `json:"auth_id,omitempty"`
	UserID string `json:"user_id"`
	// ExpiresAt is when the returned token expires, when the provider said.
	ExpiresAt string `json:"expires_at,omitempty"`
}

// Authenticate hands out the user's token for the provider when one that
// covers the scopes is stored and usable (refreshing it first when it is
// about to expire), and otherwise starts an authorization: the answer is
// then pending, with the URL the user must visit and the auth id to wait
// on.
func (s *Service) Authenticate(ctx context.Context, orgID string, in AuthenticateInput) (AuthenticateResult, error) {
	r, err := in.check()
	if err != nil {
		return AuthenticateResult{}, err
	}
	p, err := s.Providers.Get(ctx, orgID, r.provider)
	if err != nil {
		return AuthenticateResult{}, err
	}
	if !r.forceNew {
		tok, value, err := s.usableToken(ctx, p, r.userID, r.agentID, r.scopes)
		if err != nil {
			return AuthenticateResult{}, err
		}
		if value != "" {
			res := AuthenticateResult{Status: statusCompleted, Token: value, UserID: r.userID}
			if !tok.ExpiresAt.IsZero() {
				res.ExpiresAt = tok.ExpiresAt.Format(time.RFC3339)
			}
			return res, nil
		}
	}
	return s.start(ctx, p, r)
}

// usableToken finds a stored token of the user and agent ("": the user's
// unscoped token) covering scopes and returns its access token, refreshed
// if needed ("" when there is none usable).
func (s *Service) usableToken(ctx context.Context, p providers.Provider, userID, agentID string, scopes []string) (store.AgentToken, string, error) {
	toks, err := s.Store.AgentTokens(ctx, p.OrganizationID, p.ProviderID, userID)
	if err != nil {
		return store.AgentToken{}, "", err
	}
	// The newest usable token with the fewest extra scopes.
	var best *store.AgentToken
	for i := range toks {
		t := &toks[i]
		if !t.Usable || t.UserID != userID || t.AgentID != agentID || !covers(t.Scopes, scopes) {
			continue
		}
		if best == nil || len(t.Scopes) < len(best.Scopes) || (len(t.Scopes) == len(best.Scopes) && t.UpdatedAt.After(best.UpdatedAt)) {
			best = t
		}
	}
	if best == nil {
		return store.AgentToken{}, "", nil
	}
	return s.fresh(ctx, p, *best)
}

// start stores a new attempt and returns its authorization URL.
func (s *Service) start(ctx context.Context, p providers.Provider, r request) (AuthenticateResult, error) {
	if s.callbackBase(ctx) == "" {
		return AuthenticateResult{}, fail.Conflict("agent auth is not configured on this server: it has no public URL for the OAuth redirect URI (STEPGRAPH_PUBLIC_URL)")
	}
	state, err := randomToken()
	if err != nil {
		return AuthenticateResult{}, err
	}
	now := s.now()
	a := store.AuthAttempt{ID: uuid.NewString(), OrgID: p.OrganizationID, UserID: r.userID, ProviderID: p.ProviderID,
		Scopes: r.scopes, AgentID: r.agentID, StateHash: stateHash(state), Status: statusPending,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(orDur(s.AttemptTTL, DefaultAttemptTTL))}
	target, err := url.Parse(p.AuthURL)
	if err != nil {
		return AuthenticateResult{}, fail.Invalid("provider", "the provider's auth_url is not a URL")
	}
	q := target.Query()
	q.Set("response_type", "code")
	q.Set("client_id", p.ClientID)
	q.Set("redirect_uri", s.redirectURI(ctx, p.ProviderID))
	if len(r.scopes) > 0 {
		q.Set("scope", strings.Join(r.scopes, " "))
	}
	q.Set("state", state)
	if p.UsesPKCE {
		verifier, err := s.verifier(ctx, p.OrganizationID, state)
		if err != nil {
			return AuthenticateResult{}, err
		}
		q.Set("code_challenge", challenge(p.CodeChallengeMethod, verifier))
		q.Set("code_challenge_method", p.CodeChallengeMethod)
	}
	if p.ProviderType != nil && *p.ProviderType == "microsoft" {
		// As upstream: Microsoft issues refresh tokens only with offline_access.
		if !strings.Contains(" "+q.Get("scope")+" ", " offline_access ") {
			q.Set("scope", strings.TrimSpace(q.Get("scope")+" offline_access"))
		}
	}
	target.RawQuery = q.Encode()
	if err := s.Store.CreateAuthAttempt(ctx, a); err != nil {
		return AuthenticateResult{}, err
	}
	// An organization's expired attempts are dropped as its new ones come:
	// no sweeper needed, and no organization pays for another's.
	if _, err := s.Store.DeleteExpiredAuthAttempts(context.WithoutCancel(ctx), p.OrganizationID, now.Add(-time.Hour)); err != nil {
		s.log().Warn("agent auth: deleting expired attempts failed", "error", err)
	}
	return AuthenticateResult{Status: statusPending, URL: target.String(), AuthID: a.ID, UserID: r.userID}, nil
}

func (s *Service) redirectURI(ctx context.Context, providerID string) string {
	return strings.TrimRight(s.callbackBase(ctx), "/") + "/v2/auth/callback/" + url.PathEscape(providerID)
}

type publicURLKey struct{}

// WithPublicURL returns ctx carrying the public base URL of the request it
// serves, for a server without a configured CallbackBase: on AWS, the API
// Gateway address the request came to, which API Gateway itself reports
// (internal/lambdaapp). Never pass a value taken from a request's Host or
// X-Forwarded-Host header: the callback would then be wherever a client
// says. The callback request derives the same base as its authenticate,
// since the browser follows the redirect URI built from it.
func WithPublicURL(ctx context.Context, base string) context.Context {
	return context.WithValue(ctx, publicURLKey{}, base)
}

// callbackBase is CallbackBase, or the request's public URL without one.
func (s *Service) callbackBase(ctx context.Context) string {
	if s.CallbackBase != "" {
		return s.CallbackBase
	}
	v, _ := ctx.Value(publicURLKey{}).(string)
	return v
}

// verifier derives the PKCE code verifier of an attempt from its state:
// HMAC-SHA256 under the organization's key, base64url (43 characters, RFC
// 7636 §4.1). Nothing needs to be stored, and the state alone (which the
// browser and the provider see) does not give the verifier.
func (s *Service) verifier(ctx context.Context, orgID, state string) (string, error) {
	key, err := s.StateKey(ctx, orgID)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("agentauth-pkce-verifier\x00" + state))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// CallbackInput is the query of the provider's redirect.
type CallbackInput struct {
	Code, State, Error string
	// OrgID, when set, is the organization of the caller (the
	// frontend-bridged POST callback, which has an API key): an attempt of
	// another organization is then as unknown as a wrong state.
	OrgID string
}

// CallbackResult is the callback's answer: the attempt's outcome, never
// the token.
type CallbackResult struct {
	Status     string `json:"status"` // completed or failed
	AuthID     string `json:"auth_id"`
	ProviderID string `json:"provider_id"`
	Error      string `json:"error,omitempty"`
}

// errBadState is the one answer for every state that cannot be used, so
// the callback is no oracle of which states exist.
var errBadState = fail.Invalid("state", "is unknown, expired or already used")

// Callback ends an attempt: it checks the state (known, for this provider,
// unexpired, not used before — the first callback takes the attempt, a
// replay finds it taken), exchanges the code and stores the token. A
// provider's refusal or a token endpoint that fails ends the attempt as
// failed, with nothing stored.
func (s *Service) Callback(ctx context.Context, providerID string, in CallbackInput) (CallbackResult, error) {
	if in.State == "" {
		return CallbackResult{}, fail.Invalid("state", "is required")
	}
	if len(in.State) > 512 || len(in.Code) > 4096 {
		return CallbackResult{}, errBadState
	}
	a, err := s.Store.AuthAttemptByState(ctx, stateHash(in.State))
	if errors.Is(err, store.ErrNotFound) {
		return CallbackResult{}, errBadState
	}
	if err != nil {
		return CallbackResult{}, err
	}
	now := s.now()
	if a.ProviderID != providerID || a.Status != statusPending || !now.Before(a.ExpiresAt) || (in.OrgID != "" && a.OrgID != in.OrgID) {
		return CallbackResult{}, errBadState
	}
	taken := a
	taken.Status, taken.UpdatedAt = statusExchanging, now
	if err := s.Store.SetAuthAttemptStatus(ctx, taken, statusPending); err != nil {
		if errors.Is(err, store.ErrStale) || errors.Is(err, store.ErrNotFound) {
			return CallbackResult{}, errBadState
		}
		return CallbackResult{}, err
	}
	// From here the attempt is ours: it ends completed or failed, even if
	// the caller goes away.
	ctx = context.WithoutCancel(ctx)
	tokenID, why := s.exchange(ctx, taken, in)
	end := taken
	end.UpdatedAt = s.now()
	if why != "" {
		end.Status, end.Error = statusFailed, why
	} else {
		end.Status, end.TokenID = statusCompleted, tokenID
	}
	if err := s.Store.SetAuthAttemptStatus(ctx, end, statusExchanging); err != nil {
		return CallbackResult{}, err
	}
	return CallbackResult{Status: end.Status, AuthID: a.ID, ProviderID: a.ProviderID, Error: end.Error}, nil
}

// exchange turns the callback into a stored token; it returns the token
// record's id, or why it could not (for the caller: no values).
func (s *Service) exchange(ctx context.Context, a store.AuthAttempt, in CallbackInput) (string, string) {
	if in.Error != "" {
		return "", "the provider answered error " + providerErrorCode(in.Error) + " (the user denied access, or the request was refused)"
	}
	if in.Code == "" {
		return "", "the provider's redirect carried no code"
	}
	p, err := s.Providers.Get(ctx, a.OrgID, a.ProviderID)
	if err != nil {
		return "", "the provider is no longer registered"
	}
	secret, err := s.Providers.ClientSecret(ctx, a.OrgID, a.ProviderID)
	if err != nil {
		s.log().Error("agent auth: reading the client secret failed", "provider_id", a.ProviderID, "org_id", a.OrgID, "error", err)
		return "", "the provider's client secret could not be read"
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {in.Code}, "redirect_uri": {s.redirectURI(ctx, a.ProviderID)}}
	if p.UsesPKCE {
		v, err := s.verifier(ctx, a.OrgID, in.State)
		if err != nil {
			return "", "the organization's key could not be read"
		}
		form.Set("code_verifier", v)
	}
	now := s.now()
	tr, err := s.callTokenEndpoint(ctx, p, secret, form)
	if err != nil {
		s.log().Warn("agent auth: code exchange failed", "provider_id", a.ProviderID, "org_id", a.OrgID, "error", err)
		return "", err.Error()
	}
	tok := store.AgentToken{ID: uuid.NewString(), OrgID: a.OrgID, UserID: a.UserID, ProviderID: a.ProviderID,
		Scopes: a.Scopes, AgentID: a.AgentID, ExpiresAt: tr.expiry(now), Usable: true, CreatedAt: now, UpdatedAt: now}
	if err := s.storeToken(ctx, &tok, tr.tokenValue); err != nil {
		s.log().Error("agent auth: storing a token failed", "provider_id", a.ProviderID, "org_id", a.OrgID, "error", err)
		return "", "the token could not be stored"
	}
	return tok.ID, ""
}

// storeToken writes the value to the vault and then the record; a record
// that cannot be written takes the value with it, so no half-token stays.
func (s *Service) storeToken(ctx context.Context, t *store.AgentToken, v tokenValue) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ref, err := s.Vault.Create(ctx, vaultHint(t.OrgID, t.ProviderID, t.UserID), raw)
	if err != nil {
		return fmt.Errorf("vault: %w", err)
	}
	t.SecretRef = ref
	replaced, err := s.Store.PutAgentToken(ctx, *t)
	if err != nil {
		_ = s.Vault.Delete(ctx, ref)
		return err
	}
	if replaced != "" {
		s.forget(ctx, replaced)
	}
	return nil
}

// vaultHint names the organization, provider and user of a value (the
// user as a digest: user ids may be e-mail addresses, and the hint shows in
// references, logs and, on AWS, in KMS's encryption context and CloudTrail).
// The KMS vault binds each value's data key to its hint.
func vaultHint(orgID, providerID, userID string) string {
	sum := sha256.Sum256([]byte(userID))
	return "agentauth/" + orgID + "/" + providerID + "/" + hex.EncodeToString(sum[:16])
}

// forget deletes a vault value nothing points at any more. A failure
// leaves an orphan no record references (harmless), logged by reference.
func (s *Service) forget(ctx context.Context, ref string) {
	if err := s.Vault.Delete(context.WithoutCancel(ctx), ref); err != nil {
		s.log().Warn("agent auth: deleting a replaced token value failed", "ref", ref, "error", err)
	}
}

// fresh returns the token's access token, refreshed first when it expires
// within the skew. A refresh the provider refuses marks the token unusable
// ("" then, so the caller starts a new authorization).
func (s *Service) fresh(ctx context.Context, p providers.Provider, t store.AgentToken) (store.AgentToken, string, error) {
	if !s.expiring(t) {
		v, err := s.read(ctx, t)
		return t, v.AccessToken, err
	}
	mu, _ := s.refreshing.LoadOrStore(t.ID, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	// Another refresh (here or in another process) may have won meanwhile.
	cur, err := s.Store.AgentToken(ctx, t.OrgID, t.ID)
	if errors.Is(err, store.ErrNotFound) {
		return store.AgentToken{}, "", nil
	}
	if err != nil {
		return store.AgentToken{}, "", err
	}
	if !cur.Usable {
		return store.AgentToken{}, "", nil
	}
	if !s.expiring(cur) {
		v, err := s.read(ctx, cur)
		return cur, v.AccessToken, err
	}
	old, err := s.read(ctx, cur)
	if err != nil {
		return store.AgentToken{}, "", err
	}
	if old.RefreshToken == "" {
		if !cur.ExpiresAt.After(s.now()) {
			return store.AgentToken{}, "", s.markUnusable(ctx, cur, "expired and the provider gave no refresh token")
		}
		return cur, old.AccessToken, nil // still valid for a little while
	}
	secret, err := s.Providers.ClientSecret(ctx, p.OrganizationID, p.ProviderID)
	if err != nil {
		return store.AgentToken{}, "", err
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {old.RefreshToken}}
	now := s.now()
	tr, err := s.callTokenEndpoint(ctx, p, secret, form)
	if err != nil {
		return store.AgentToken{}, "", s.markUnusable(ctx, cur, err.Error())
	}
	if tr.RefreshToken == "" {
		tr.RefreshToken = old.RefreshToken // RFC 6749 §6: the old one stays valid
	}
	raw, err := json.Marshal(tr.tokenValue)
	if err != nil {
		return store.AgentToken{}, "", err
	}
	ref, err := s.Vault.Create(ctx, vaultHint(cur.OrgID, cur.ProviderID, cur.UserID), raw)
	if err != nil {
		return store.AgentToken{}, "", fmt.Errorf("vault: %w", err)
	}
	next := cur
	next.SecretRef, next.ExpiresAt, next.UpdatedAt = ref, tr.expiry(now), now
	if err := s.Store.UpdateAgentToken(ctx, next, cur.SecretRef); err != nil {
		_ = s.Vault.Delete(context.WithoutCancel(ctx), ref)
		if errors.Is(err, store.ErrStale) || errors.Is(err, store.ErrNotFound) {
			// Another process refreshed (or revoked) it first: use theirs.
			return s.reread(ctx, p, t)
		}
		return store.AgentToken{}, "", err
	}
	s.forget(ctx, cur.SecretRef)
	return next, tr.AccessToken, nil
}

func (s *Service) reread(ctx context.Context, p providers.Provider, t store.AgentToken) (store.AgentToken, string, error) {
	cur, err := s.Store.AgentToken(ctx, t.OrgID, t.ID)
	if errors.Is(err, store.ErrNotFound) {
		return store.AgentToken{}, "", nil
	}
	if err != nil || !cur.Usable {
		return store.AgentToken{}, "", err
	}
	v, err := s.read(ctx, cur)
	return cur, v.AccessToken, err
}

func (s *Service) expiring(t store.AgentToken) bool {
	return !t.ExpiresAt.IsZero() && !s.now().Add(orDur(s.RefreshSkew, DefaultRefreshSkew)).Before(t.ExpiresAt)
}

func (s *Service) markUnusable(ctx context.Context, t store.AgentToken, why string) error {
	s.log().Warn("agent auth: token refresh failed; the token is marked unusable", "token_id", t.ID,
		"provider_id", t.ProviderID, "org_id", t.OrgID, "reason", why)
	next := t
	next.Usable, next.UpdatedAt = false, s.now()
	if err := s.Store.UpdateAgentToken(ctx, next, t.SecretRef); err != nil && !errors.Is(err, store.ErrStale) && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

func (s *Service) read(ctx context.Context, t store.AgentToken) (tokenValue, error) {
	raw, err := s.Vault.Get(ctx, t.SecretRef)
	if err != nil {
		return tokenValue{}, fmt.Errorf("vault: token %s: %w", t.ID, err)
	}
	var v tokenValue
	if err := json.Unmarshal(raw, &v); err != nil {
		return tokenValue{}, fmt.Errorf("vault: token %s is not readable", t.ID)
	}
	return v, nil
}

// WaitResult is upstream's AuthWaitResponse, with failed and its error for
// an attempt that ended without a token.
type WaitResult struct {
	Status string `json:"status"` // completed, pending, timeout, not_found, failed
	Token  string `json:"token,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Wait waits up to timeout (at most MaxWait) for the attempt to end.
func (s *Service) Wait(ctx context.Context, orgID, authID string, timeout time.Duration) (WaitResult, error) {
	if timeout < 0 || timeout > MaxWait {
		return WaitResult{}, fail.Invalid("timeout", "must be between 0 and %d seconds", int(MaxWait.Seconds()))
	}
	// A request that must answer sooner (a Lambda behind API Gateway's 30 s)
	// answers timeout a second before it must, never an error.
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - time.Second; left < timeout {
			timeout = max(left, 0)
		}
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(orDur(s.WaitPoll, DefaultWaitPoll))
	defer tick.Stop()
	for {
		a, err := s.Store.AuthAttempt(ctx, orgID, authID)
		if errors.Is(err, store.ErrNotFound) {
			return WaitResult{Status: "not_found"}, nil
		}
		if err != nil {
			return WaitResult{}, err
		}
		switch a.Status {
		case statusCompleted:
			return s.completed(ctx, a)
		case statusFailed:
			return WaitResult{Status: statusFailed, Error: a.Error}, nil
		}
		if !s.now().Before(a.ExpiresAt) && a.Status == statusPending {
			return WaitResult{Status: "not_found", Error: "the authorization expired"}, nil
		}
		select {
		case <-ctx.Done():
			return WaitResult{}, ctx.Err()
		case <-deadline.C:
			return WaitResult{Status: "timeout"}, nil
		case <-tick.C:
		}
	}
}

func (s *Service) completed(ctx context.Context, a store.AuthAttempt) (WaitResult, error) {
	t, err := s.Store.AgentToken(ctx, a.OrgID, a.TokenID)
	if errors.Is(err, store.ErrNotFound) {
		return WaitResult{Status: statusFailed, Error: "the token was revoked since"}, nil
	}
	if err != nil {
		return WaitResult{}, err
	}
	if !t.Usable {
		return WaitResult{Status: statusFailed, Error: "the token is no longer usable"}, nil
	}
	p, err := s.Providers.Get(ctx, a.OrgID, a.ProviderID)
	if err != nil {
		return WaitResult{Status: statusFailed, Error: "the provider is no longer registered"}, nil
	}
	_, v, err := s.fresh(ctx, p, t)
	if err != nil {
		return WaitResult{}, err
	}
	if v == "" {
		return WaitResult{Status: statusFailed, Error: "the token is no longer usable"}, nil
	}
	return WaitResult{Status: statusCompleted, Token: v}, nil
}

// TokenExists reports whether a usable token of the provider is stored for
// the user (userID "": for any user of the organization) and the agent
// (agentID "": any agent's or an unscoped one, as langchain-auth asks).
func (s *Service) TokenExists(ctx context.Context, orgID, providerID, userID, agentID string) (bool, error) {
	var c fail.Checks
	c.AddErr(checkUserFilter(userID))
	c.AddErr(checkAgentFilter(agentID))
	if err := c.Err(); err != nil {
		return false, err
	}
	if _, err := s.Providers.Get(ctx, orgID, providerID); err != nil {
		return false, err
	}
	toks, err := s.Store.AgentTokens(ctx, orgID, providerID, userID)
	if err != nil {
		return false, err
	}
	for _, t := range toks {
		if t.Usable && (agentID == "" || t.AgentID == agentID) {
			return true, nil
		}
	}
	return false, nil
}

// RevokeTokens deletes the provider's tokens of the user (userID "": of
// every user of the organization): records first, then (having asked the
// provider to revoke them, when it has a revocation endpoint) their values.
func (s *Service) RevokeTokens(ctx context.Context, orgID, providerID, userID string) (int, error) {
	p, err := s.Providers.Get(ctx, orgID, providerID)
	if err != nil {
		return 0, err
	}
	return s.deleteTokens(ctx, p, userID)
}

// DeleteProviderTokens removes every token of a provider: the providers
// service calls it before it deletes the registration.
func (s *Service) DeleteProviderTokens(ctx context.Context, orgID, providerID string) error {
	p, err := s.Providers.Get(ctx, orgID, providerID)
	if fail.KindOf(err) == fail.KindNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.deleteTokens(ctx, p, "")
	return err
}

func (s *Service) deleteTokens(ctx context.Context, p providers.Provider, userID string) (int, error) {
	gone, err := s.Store.DeleteAgentTokens(ctx, p.OrganizationID, p.ProviderID, userID)
	if err != nil {
		return 0, err
	}
	s.revokeAndForget(ctx, p, gone)
	return len(gone), nil
}

// revokeAndForget revokes deleted tokens at the provider (within the
// revocation bounds) and deletes their values. The records are gone
// already: nothing hands these tokens out any more, whatever the provider
// answers; a revocation that fails is logged by host and status.
func (s *Service) revokeAndForget(ctx context.Context, p providers.Provider, gone []store.AgentToken) {
	ctx = context.WithoutCancel(ctx)
	revoke := p.RevocationURL != nil && *p.RevocationURL != ""
	var secret string
	if revoke && p.TokenEndpointAuthMethod != "none" {
		var err error
		if secret, err = s.Providers.ClientSecret(ctx, p.OrganizationID, p.ProviderID); err != nil {
			s.log().Warn("agent auth: no client secret to revoke tokens at the provider", "provider_id", p.ProviderID, "org_id", p.OrganizationID, "error", err)
			revoke = false
		}
	}
	budget := s.RevocationBudget
	if budget <= 0 {
		budget = DefaultRevocationBudget
	}
	rctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	skipped := 0
	for i, t := range gone {
		if revoke && (i >= maxRevocations || rctx.Err() != nil) {
			skipped++
		} else if revoke {
			if v, err := s.read(rctx, t); err != nil {
				s.log().Warn("agent auth: reading a token to revoke it failed", "token_id", t.ID, "provider_id", p.ProviderID, "error", err)
			} else if err := s.revokeAtProvider(rctx, p, secret, v); err != nil {
				s.log().Warn("agent auth: revocation at the provider failed; the token is deleted here", "token_id", t.ID,
					"provider_id", p.ProviderID, "org_id", p.OrganizationID, "error", err)
			}
		}
		s.forget(ctx, t.SecretRef)
	}
	if skipped > 0 {
		s.log().Warn("agent auth: tokens past the revocation bound were deleted here without revocation at the provider",
			"count", skipped, "provider_id", p.ProviderID, "org_id", p.OrganizationID)
	}
}

// DeleteToken deletes one token (revoking it at the provider first when
// the provider has a revocation endpoint). A token of another
// organization, or (userID given) of another user, is not found.
func (s *Service) DeleteToken(ctx context.Context, orgID, tokenID, userID string) error {
	if err := checkUserFilter(userID); err != nil {
		return err
	}
	t, err := s.Store.AgentToken(ctx, orgID, tokenID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && userID != "" && t.UserID != userID) {
		return fail.NotFound("token %q not found", tokenID)
	}
	if err != nil {
		return err
	}
	gone, err := s.Store.DeleteAgentToken(ctx, orgID, tokenID)
	if errors.Is(err, store.ErrNotFound) {
		return fail.NotFound("token %q not found", tokenID)
	}
	if err != nil {
		return err
	}
	p, err := s.Providers.Get(ctx, orgID, gone.ProviderID)
	if err != nil {
		// The provider went meanwhile: nothing to revoke at.
		s.forget(ctx, gone.SecretRef)
		return nil
	}
	s.revokeAndForget(ctx, p, []store.AgentToken{gone})
	return nil
}

// TokenSummary is upstream's OAuthTokenSummary ("no sensitive data"), with
// the user the token belongs to and whether it can still be handed out.
type TokenSummary struct {
	ID         string `json:"id"`
	ProviderID string `json:"provider_id"`
	UserID     string `json:"user_id"`
	// AgentID is the agent the token is scoped to; null for the user's
	// unscoped token.
	AgentID              *string  `json:"agent_id"`
	ProviderAccountLabel *string  `json:"provider_account_label"`
	Scopes               []string `json:"scopes"`
	ExpiresAt            *string  `json:"expires_at"`
	IsDefault            bool     `json:"is_default"`
	Usable               bool     `json:"usable"`
	CreatedAt            string   `json:"created_at"`
	UpdatedAt            string   `json:"updated_at"`
}

// MaxListTokens bounds one page of ListTokens.
const MaxListTokens = 1000

// ListTokens lists the organization's token records (never values): of
// one provider or (providerID "") of every provider, of one user or
// (userID "") of all, oldest first per provider, providers in their order;
// limit (1..MaxListTokens) and offset page through them.
func (s *Service) ListTokens(ctx context.Context, orgID, providerID, userID string, limit, offset int) ([]TokenSummary, error) {
	var c fail.Checks
	c.Add(limit < 1 || limit > MaxListTokens, "limit", "must be from 1 to %d", MaxListTokens)
	c.Add(offset < 0, "offset", "must be 0 or more")
	if err := c.Err(); err != nil {
		return nil, err
	}
	if err := checkUserFilter(userID); err != nil {
		return nil, err
	}
	var ids []string
	if providerID != "" {
		if _, err := s.Providers.Get(ctx, orgID, providerID); err != nil {
			return nil, err
		}
		ids = []string{providerID}
	} else {
		ps, err := s.Providers.List(ctx, orgID)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			ids = append(ids, p.ProviderID)
		}
	}
	out := []TokenSummary{}
	skip := offset
	for _, id := range ids {
		toks, err := s.Store.AgentTokens(ctx, orgID, id, userID)
		if err != nil {
			return nil, err
		}
		for _, t := range toks {
			if skip > 0 {
				skip--
				continue
			}
			if len(out) == limit {
				return out, nil
			}
			out = append(out, summary(t))
		}
	}
	return out, nil
}

func summary(t store.AgentToken) TokenSummary {
	sum := TokenSummary{ID: t.ID, ProviderID: t.ProviderID, UserID: t.UserID, Scopes: t.Scopes, Usable: t.Usable,
		CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339Nano), UpdatedAt: t.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	if sum.Scopes == nil {
		sum.Scopes = []string{}
	}
	if t.AgentID != "" {
		sum.AgentID = &t.AgentID
	}
	if !t.ExpiresAt.IsZero() {
		e := t.ExpiresAt.UTC().Format(time.RFC3339Nano)
		sum.ExpiresAt = &e
	}
	return sum
}

// OrgTokens is the service bound to one organization, for the graphs of
// its deployments (graphdoc.Tokens): a node's token is Authenticate's.
type OrgTokens struct {
	s     *Service
	orgID string
}

// ForOrg binds the service to an organization.
func (s *Service) ForOrg(orgID string) OrgTokens { return OrgTokens{s: s, orgID: orgID} }

// Token returns the user's token (scoped to agentID, or unscoped when it
// is ""), or the URL of a new authorization.
func (o OrgTokens) Token(ctx context.Context, userID, agentID, provider string, scopes []string) (string, string, error) {
	in := AuthenticateInput{Provider: &provider, Scopes: &scopes, UserID: &userID}
	if agentID != "" {
		in.AgentID = &agentID
	}
	res, err := o.s.Authenticate(ctx, o.orgID, in)
	if err != nil {
		// A run's error is kept and shown: only caller-safe words go there.
		if msg := fail.MessageOf(err); msg != "" {
			return "", "", errors.New(msg)
		}
		o.s.log().Error("agent auth: a graph's token request failed", "org_id", o.orgID, "provider_id", provider, "error", err)
		return "", "", errors.New("the token store could not be read; try again")
	}
	return res.Token, res.URL, nil
}

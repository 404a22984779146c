package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/oauthtest"
	"github.com/stepgraph/stepgraph/internal/testserver"
)

// The agent-auth tests run the whole flow against a real OAuth 2.0 server
// (mock-oauth2-server on loopback, one for the package), with the consent
// driven as a browser does.

var (
	oauthOnce   sync.Once
	oauthServer *oauthtest.Server
	oauthErr    error
)

func oauthIssuer(t *testing.T) string {
	t.Helper()
	oauthOnce.Do(func() {
		root, err := testserver.RepoRoot()
		if err != nil {
			oauthErr = err
			return
		}
		oauthServer, oauthErr = oauthtest.Start(root)
		if oauthErr == nil {
			afterAll = append(afterAll, oauthServer.Stop)
		}
	})
	if oauthErr != nil {
		t.Fatal(oauthErr)
	}
	return oauthServer.Issuer
}

// clock is the agent-auth service's clock, moved by tests (no sleeping).
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

type authEnv struct {
	*env
	front *oauthtest.Front
	clock *clock
}

func newAuthEnv(t *testing.T) *authEnv {
	// The real authorization server (a JVM) may be slow to answer on a
	// loaded machine: the bound is generous, a safety net only.
	return newAuthEnvBounded(t, time.Minute)
}

// newAuthEnvBounded is newAuthEnv with the token endpoint's time bound:
// short only where the test waits for it to pass (a hanging endpoint).
func newAuthEnvBounded(t *testing.T, tokenTimeout time.Duration) *authEnv {
	issuer := oauthIssuer(t)
	c := &clock{}
	e := newEnv(t, func(cfg *api.Config) {
		cfg.AgentAuth.Now = c.now
		cfg.AgentAuth.TokenTimeout = tokenTimeout
		cfg.AgentAuth.WaitPoll = 10 * time.Millisecond
	})
	f := oauthtest.NewFront(oauthServer)
	f.Issued = func(v string) { secret(v) }
	t.Cleanup(f.Close)
	_ = issuer
	return &authEnv{env: e, front: f, clock: c}
}

// provider registers a provider of the real server behind the front.
func (a *authEnv) provider(id string, fields map[string]any) {
	body := map[string]any{"provider_id": id, "name": id, "client_id": "client-" + id,
		"auth_url": oauthServer.Issuer + "/authorize", "token_url": a.front.TokenURL}
	for k, v := range fields {
		body[k] = v
	}
	a.must(200, "POST", "/v2/auth/providers", a.keyA, body)
}

// private sends a request whose answer carries a token: it is not recorded
// for the leak scan (the one place a token may appear), every other answer
// is.
func (a *authEnv) private(method, path, key string, body any) map[string]any {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = strings.NewReader(string(raw))
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	res, err := a.client.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		recorder{}.Write(raw)
		a.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		a.t.Fatal(err)
	}
	return m
}

func (a *authEnv) authenticate(provider, user string, scopes ...string) map[string]any {
	a.t.Helper()
	if scopes == nil {
		scopes = []string{"openid", "read"}
	}
	return a.private("POST", "/v2/auth/authenticate", a.keyA, map[string]any{"provider": provider, "scopes": scopes, "user_id": user})
}

// consent drives the browser through the authorization URL to the callback.
func (a *authEnv) consent(authURL string) map[string]any {
	a.t.Helper()
	status, body, final, err := oauthtest.Consent(context.Background(), authURL)
	if err != nil {
		a.t.Fatal(err)
	}
	recorder{}.Write(body)
	if !strings.HasPrefix(final.String(), a.url+"/v2/auth/callback/") {
		a.t.Fatalf("the consent ended at %s, not at the callback (status %d): %s", final.Redacted(), status, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil || status != 200 {
		a.t.Fatalf("callback: %d %s", status, body)
	}
	return m
}

func TestAgentAuthFlows(t *testing.T) {
	a := newAuthEnv(t)
	cases := []struct {
		name, authMethod, challenge string
		pkce                        bool
	}{
		{"pkce-S256-basic", "client_secret_basic", "S256", true},
		{"pkce-plain-post", "client_secret_post", "plain", true},
		{"no-pkce-post", "client_secret_post", "", false},
		{"no-pkce-basic", "client_secret_basic", "", false},
		{"public-client-S256", "none", "S256", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a.t = t
			fields := map[string]any{"token_endpoint_auth_method": tc.authMethod, "uses_pkce": tc.pkce}
			clientSecret := ""
			if tc.authMethod != "none" {
				clientSecret = secret("cs-" + tc.name + "-s3cr3t-value")
				fields["client_secret"] = clientSecret
			}
			if tc.challenge != "" {
				fields["code_challenge_method"] = tc.challenge
			}
			a.provider(tc.name, fields)
			res := a.authenticate(tc.name, "user-1")
			if res["status"] != "pending" || res["token"] != nil {
				t.Fatalf("first authenticate: %v", res)
			}
			u, err := url.Parse(res["url"].(string))
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			if got := q.Get("redirect_uri"); got != a.url+"/v2/auth/callback/"+tc.name {
				t.Errorf("redirect_uri = %q", got)
			}
			if len(q.Get("state")) < 43 || q.Get("client_id") != "client-"+tc.name || q.Get("scope") != "openid read" {
				t.Errorf("authorization URL query: %v", q)
			}
			if q.Has("code_verifier") || q.Has("client_secret") {
				t.Errorf("the authorization URL carries a verifier or secret: %v", q)
			}
			if tc.pkce != q.Has("code_challenge") || q.Get("code_challenge_method") != tc.challenge {
				t.Errorf("PKCE in the URL: challenge %q method %q, want pkce=%v method %q", q.Get("code_challenge"), q.Get("code_challenge_method"), tc.pkce, tc.challenge)
			}
			cb := a.consent(u.String())
			if cb["status"] != "completed" || cb["auth_id"] != res["auth_id"] {
				t.Fatalf("callback: %v", cb)
			}
			ex := a.front.Last()
			if ex.GrantType != "authorization_code" || ex.Status != 200 {
				t.Fatalf("token request: %+v", ex)
			}
			// The client authentication is the registered one, and only it.
			switch tc.authMethod {
			case "client_secret_basic":
				if ex.BasicUser != "client-"+tc.name || ex.BasicPass != clientSecret || ex.Form.Has("client_secret") {
					t.Errorf("client_secret_basic: basic %q, form secret %v", ex.BasicUser, ex.Form.Has("client_secret"))
				}
			case "client_secret_post":
				if ex.BasicUser != "" || ex.Form.Get("client_id") != "client-"+tc.name || ex.Form.Get("client_secret") != clientSecret {
					t.Errorf("client_secret_post: basic %q, form %v", ex.BasicUser, ex.Form.Has("client_secret"))
				}
			case "none":
				if ex.BasicUser != "" || ex.Form.Has("client_secret") || ex.Form.Get("client_id") != "client-"+tc.name {
					t.Errorf("public client sent credentials")
				}
			}
			// PKCE: the real server checked the verifier against the
			// challenge (it refuses a wrong one); here we check one was sent
			// exactly when the provider uses PKCE, and recompute it.
			if tc.pkce != ex.Form.Has("code_verifier") {
				t.Errorf("code_verifier sent = %v, want %v", ex.Form.Has("code_verifier"), tc.pkce)
			}
			if tc.pkce && tc.challenge == "plain" && ex.Form.Get("code_verifier") != q.Get("code_challenge") {
				t.Errorf("plain: verifier differs from the challenge")
			}
			w := a.private("GET", "/v2/auth/wait/"+res["auth_id"].(string)+"?timeout=5", a.keyA, nil)
			if w["status"] != "completed" || w["token"] != ex.AccessToken {
				t.Fatalf("wait: status %v, token is the issued one: %v", w["status"], w["token"] == ex.AccessToken)
			}
			again := a.authenticate(tc.name, "user-1", "read") // a subset of the granted scopes
			if again["status"] != "completed" || again["token"] != ex.AccessToken {
				t.Fatalf("second authenticate: status %v", again["status"])
			}
			if other := a.authenticate(tc.name, "user-2"); other["status"] != "pending" {
				t.Errorf("another user got %v", other["status"])
			}
			if more := a.authenticate(tc.name, "user-1", "openid", "read", "write"); more["status"] != "pending" {
				t.Errorf("more scopes than granted got %v", more["status"])
			}
			if got := a.must(200, "GET", "/v2/auth/tokens/exists?provider_id="+tc.name+"&user_id=user-1", a.keyA, nil); got["has_token"] != true {
				t.Errorf("tokens/exists = %v", got)
			}
		})
	}
}

// TestAgentAuthStateRules: a replayed, tampered, foreign or missing state
// changes nothing; a denial or a bad code ends the attempt as failed with
// nothing stored.
func TestAgentAuthStateRules(t *testing.T) {
	a := newAuthEnv(t)
	a.provider("gh", map[string]any{"client_secret": secret("cs-gh-state-rules-secret"), "uses_pkce": true})
	a.provider("other", map[string]any{"client_secret": secret("cs-other-state-rules-secret")})
	ctx := context.Background()

	res := a.authenticate("gh", "u1")
	redirect, err := oauthtest.Redirect(ctx, res["url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	q := redirect.Query()
	state, code := q.Get("state"), q.Get("code")
	callback := func(provider string, v url.Values) response {
		return a.do("GET", "/v2/auth/callback/"+provider+"?"+v.Encode(), "", nil)
	}
	bad := func(name string, r response) {
		t.Helper()
		if r.Status != 422 || !strings.Contains(r.detail(t), "state") {
			t.Errorf("%s: %d %s, want 422 naming state", name, r.Status, r.Body)
		}
	}
	tampered := []byte(state)
	tampered[5] ^= 1
	bad("tampered state", callback("gh", url.Values{"state": {string(tampered)}, "code": {code}}))
	bad("another provider's callback", callback("other", url.Values{"state": {state}, "code": {code}}))
	bad("no state", callback("gh", url.Values{"code": {code}}))
	// The genuine callback still works after those.
	if r := callback("gh", url.Values{"state": {state}, "code": {code}}); r.Status != 200 || r.json(t)["status"] != "completed" {
		t.Fatalf("genuine callback: %d %s", r.Status, r.Body)
	}
	n := len(a.front.Requests())
	bad("replayed state", callback("gh", url.Values{"state": {state}, "code": {code}}))
	if len(a.front.Requests()) != n {
		t.Errorf("a replayed state reached the token endpoint")
	}

	// Denial: the provider sends the browser back with error=access_denied.
	res = a.authenticate("gh", "u-denied")
	u, _ := url.Parse(res["url"].(string))
	r := callback("gh", url.Values{"state": {u.Query().Get("state")}, "error": {"access_denied"}, "error_description": {"<script>x</script>"}})
	if r.Status != 200 || r.json(t)["status"] != "failed" || !strings.Contains(r.json(t)["error"].(string), "access_denied") {
		t.Errorf("denial: %d %s", r.Status, r.Body)
	}
	if strings.Contains(string(r.Body), "script") {
		t.Errorf("the provider's error_description was echoed: %s", r.Body)
	}
	w := a.must(200, "GET", "/v2/auth/wait/"+res["auth_id"].(string)+"?timeout=1", a.keyA, nil)
	if w["status"] != "failed" || w["token"] != nil {
		t.Errorf("wait after denial: %v", w)
	}
	if again := a.authenticate("gh", "u-denied"); again["status"] != "pending" {
		t.Errorf("after a denial authenticate answered %v", again["status"])
	}

	// An invalid code: the provider refuses it; nothing is stored.
	// (mock-oauth2-server issues tokens for codes it never issued, so the
	// refusal is its front's, answered as RFC 6749 §5.2 says.)
	a.front.RefuseCode("not-a-code")
	res = a.authenticate("gh", "u-badcode")
	redirect, _ = oauthtest.Redirect(ctx, res["url"].(string))
	r = callback("gh", url.Values{"state": {redirect.Query().Get("state")}, "code": {"not-a-code"}})
	if r.Status != 200 || r.json(t)["status"] != "failed" || !strings.Contains(r.json(t)["error"].(string), "invalid_grant") {
		t.Errorf("invalid code: %d %s", r.Status, r.Body)
	}
	if got := a.must(200, "GET", "/v2/auth/tokens/exists?provider_id=gh&user_id=u-badcode", a.keyA, nil); got["has_token"] != false {
		t.Errorf("a failed exchange stored a token")
	}

	// Another organization sees nothing of these.
	if w := a.must(200, "GET", "/v2/auth/wait/"+res["auth_id"].(string)+"?timeout=0", a.keyB, nil); w["status"] != "not_found" {
		t.Errorf("org B waited on org A's attempt: %v", w)
	}
	if r := a.do("GET", "/v2/auth/tokens/exists?provider_id=gh", a.keyB, nil); r.Status != 404 {
		t.Errorf("org B tokens/exists of A's provider: %d", r.Status)
	}

	// An expired attempt's state is refused too.
	res = a.authenticate("gh", "u-late")
	redirect, _ = oauthtest.Redirect(ctx, res["url"].(string))
	a.clock.advance(11 * time.Minute)
	bad("expired state", callback("gh", redirect.Query()))
}

// TestAgentAuthTokenEndpointFailures: a token endpoint that answers garbage,
// too much, an error, or nothing ends the attempt as failed within the
// bound, never a 500, with nothing stored.
func TestAgentAuthTokenEndpointFailures(t *testing.T) {
	a := newAuthEnvBounded(t, 2*time.Second) // the hanging endpoint ends at the bound
	hang := make(chan struct{})
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/garbage":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>surprise</html>")
		case "/huge":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"access_token":"`+strings.Repeat("a", 200<<10)+`"}`)
		case "/error":
			w.WriteHeader(500)
			io.WriteString(w, "stack trace here")
		case "/notbearer":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"access_token":"x","token_type":"mac"}`)
		case "/hang":
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(bad.Close)
	t.Cleanup(func() { close(hang) }) // runs first: releases the hanging handler
	for _, tc := range []struct{ path, want string }{
		{"/garbage", "not a token response"},
		{"/huge", "more than"},
		{"/error", "status 500"},
		{"/notbearer", "not a token response"},
		{"/hang", "did not answer within"},
	} {
		t.Run(tc.path[1:], func(t *testing.T) {
			a.t = t
			id := "bad-" + tc.path[1:]
			a.provider(id, map[string]any{"client_secret": secret("cs-" + id + "-secret"), "token_url": bad.URL + tc.path})
			res := a.authenticate(id, "u1")
			redirect, err := oauthtest.Redirect(context.Background(), res["url"].(string))
			if err != nil {
				t.Fatal(err)
			}
			r := a.do("GET", "/v2/auth/callback/"+id+"?"+redirect.RawQuery, "", nil)
			if r.Status != 200 || r.json(t)["status"] != "failed" || !strings.Contains(r.json(t)["error"].(string), tc.want) {
				t.Fatalf("callback: %d %s, want failed with %q", r.Status, r.Body, tc.want)
			}
			if strings.Contains(string(r.Body), "surprise") || strings.Contains(string(r.Body), "stack trace") {
				t.Errorf("the endpoint's body was echoed: %s", r.Body)
			}
			if got := a.must(200, "GET", "/v2/auth/tokens/exists?provider_id="+id, a.keyA, nil); got["has_token"] != false {
				t.Errorf("a failed exchange stored a token")
			}
		})
	}
}

// TestAgentAuthVault: refresh after expiry, a refused refresh makes the
// token unusable (the next authenticate starts over), revocation, secret
// rotation keeps tokens, deleting the provider deletes them.
func TestAgentAuthVault(t *testing.T) {
	a := newAuthEnv(t)
	a.provider("gh", map[string]any{"client_secret": secret("cs-gh-vault-secret-one"), "uses_pkce": true})
	obtain := func(user string) string {
		t.Helper()
		res := a.authenticate("gh", user)
		if res["status"] != "pending" {
			t.Fatalf("authenticate: %v", res["status"])
		}
		a.consent(res["url"].(string))
		w := a.private("GET", "/v2/auth/wait/"+res["auth_id"].(string)+"?timeout=5", a.keyA, nil)
		if w["status"] != "completed" {
			t.Fatalf("wait: %v", w["status"])
		}
		return w["token"].(string)
	}
	first := obtain("u1")

	// The server issues one-hour tokens: an hour later the vault refreshes
	// before handing the token out.
	a.clock.advance(time.Hour)
	n := len(a.front.Requests())
	res := a.authenticate("gh", "u1")
	if res["status"] != "completed" || res["token"] == first {
		t.Fatalf("after expiry: status %v, same token %v", res["status"], res["token"] == first)
	}
	reqs := a.front.Requests()[n:]
	if len(reqs) != 1 || reqs[0].GrantType != "refresh_token" || reqs[0].Status != 200 {
		t.Fatalf("refresh requests: %+v", reqs)
	}
	if res["token"] != reqs[0].AccessToken {
		t.Errorf("authenticate did not hand out the refreshed token")
	}
	// Fresh again: no further refresh.
	if again := a.authenticate("gh", "u1"); again["token"] != res["token"] || len(a.front.Requests()) != n+1 {
		t.Errorf("a fresh token was refreshed again")
	}

	// Rotating the client secret keeps the tokens.
	a.must(200, "PATCH", "/v2/auth/providers/gh", a.keyA, map[string]any{"client_secret": secret("cs-gh-vault-secret-two")})
	if r := a.authenticate("gh", "u1"); r["status"] != "completed" {
		t.Errorf("after rotation: %v", r["status"])
	}

	// The provider refuses the refresh (grant revoked at the provider).
	a.front.RefuseRefresh(true)
	a.clock.advance(time.Hour)
	if r := a.authenticate("gh", "u1"); r["status"] != "pending" || r["url"] == nil {
		t.Fatalf("after a refused refresh: %v", r["status"])
	}
	if got := a.must(200, "GET", "/v2/auth/tokens/exists?provider_id=gh&user_id=u1", a.keyA, nil); got["has_token"] != false {
		t.Errorf("an unusable token counts as existing")
	}
	a.front.RefuseRefresh(false)
	if r := a.private("POST", "/v2/auth/authenticate", a.keyA, map[string]any{"provider": "gh", "scopes": []string{"openid", "read"}, "user_id": "u1"}); r["status"] != "pending" {
		t.Errorf("the unusable token came back: %v", r["status"])
	}

	// Revocation of one user's tokens.
	obtain("u2")
	obtain("u3")
	got := a.must(200, "DELETE", "/v2/auth/tokens?provider_id=gh&user_id=u2", a.keyA, nil)
	if got["provider_id"] != "gh" || got["message"] == nil {
		t.Errorf("revoke: %v", got)
	}
	if r := a.authenticate("gh", "u2"); r["status"] != "pending" {
		t.Errorf("after revocation: %v", r["status"])
	}
	if r := a.authenticate("gh", "u3"); r["status"] != "completed" {
		t.Errorf("revoking u2 revoked u3: %v", r["status"])
	}

	// Deleting the provider deletes its tokens: a new one with the same id
	// starts from nothing.
	a.must(200, "DELETE", "/v2/auth/providers/gh", a.keyA, nil)
	a.provider("gh", map[string]any{"client_secret": secret("cs-gh-vault-secret-three")})
	if got := a.must(200, "GET", "/v2/auth/tokens/exists?provider_id=gh", a.keyA, nil); got["has_token"] != false {
		t.Errorf("tokens outlived their provider")
	}
}

// TestAgentAuthInput: bad requests are 422 naming the field.
func TestAgentAuthInput(t *testing.T) {
	a := newAuthEnv(t)
	a.provider("gh", map[string]any{"client_secret": secret("cs-gh-input-secret")})
	for _, tc := range []struct {
		body  any
		field string
	}{
		{map[string]any{"scopes": []string{"a"}, "user_id": "u"}, "provider"},
		{map[string]any{"provider": "gh", "user_id": "u"}, "scopes"},
		{map[string]any{"provider": "gh", "scopes": []string{"a"}}, "user_id"},
		{map[string]any{"provider": "gh", "scopes": []string{"a b"}, "user_id": "u"}, "scopes"},
		{map[string]any{"provider": "gh", "scopes": []string{"a"}, "user_id": "u\x00"}, "user_id"},
	} {
		r := a.do("POST", "/v2/auth/authenticate", a.keyA, tc.body)
		if r.Status != 422 || !strings.Contains(r.detail(t), tc.field) {
			t.Errorf("%v: %d %s, want 422 naming %s", tc.body, r.Status, r.Body, tc.field)
		}
	}
	if r := a.do("POST", "/v2/auth/authenticate", a.keyA, map[string]any{"provider": "nope", "scopes": []string{}, "user_id": "u"}); r.Status != 404 {
		t.Errorf("unknown provider: %d", r.Status)
	}
	if r := a.do("POST", "/v2/auth/authenticate", a.keyB, map[string]any{"provider": "gh", "scopes": []string{}, "user_id": "u"}); r.Status != 404 {
		t.Errorf("another organization's provider: %d", r.Status)
	}
	if r := a.do("GET", "/v2/auth/wait/x?timeout=301", a.keyA, nil); r.Status != 422 {
		t.Errorf("wait timeout 301: %d", r.Status)
	}
	if r := a.do("POST", "/v2/auth/authenticate", "", map[string]any{"provider": "gh", "scopes": []string{}, "user_id": "u"}); r.Status != 401 {
		t.Errorf("no key: %d", r.Status)
	}
}

// TestAgentAuthRefreshBeforeExpiry: a token is refreshed within the skew
// (2 minutes) before it expires, not only after: with 3 minutes left it is
// handed out as it is; with 1 minute left the provider's token endpoint is
// called with grant_type=refresh_token and the new access token is handed
// out. The server issues one-hour tokens; the service's clock is moved.
func TestAgentAuthRefreshBeforeExpiry(t *testing.T) {
	a := newAuthEnv(t)
	a.provider("gh", map[string]any{"client_secret": secret("cs-gh-skew-secret"), "uses_pkce": true})
	res := a.authenticate("gh", "u1")
	a.consent(res["url"].(string))
	w := a.private("GET", "/v2/auth/wait/"+res["auth_id"].(string)+"?timeout=5", a.keyA, nil)
	first, _ := w["token"].(string)
	if w["status"] != "completed" || first == "" {
		t.Fatalf("wait: %v", w["status"])
	}
	expires, err := time.Parse(time.RFC3339, a.authenticate("gh", "u1")["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	n := len(a.front.Requests())

	a.clock.advance(time.Until(expires) - 3*time.Minute)
	if got := a.authenticate("gh", "u1"); got["token"] != first {
		t.Errorf("3 minutes before expiry: a new token was handed out (status %v)", got["status"])
	}
	if reqs := a.front.Requests()[n:]; len(reqs) != 0 {
		t.Fatalf("3 minutes before expiry the token endpoint was called: %+v", reqs)
	}

	a.clock.advance(2 * time.Minute) // 1 minute left: within the skew
	got := a.authenticate("gh", "u1")
	reqs := a.front.Requests()[n:]
	if len(reqs) != 1 || reqs[0].GrantType != "refresh_token" || reqs[0].Status != 200 {
		t.Fatalf("1 minute before expiry, token requests: %+v", reqs)
	}
	if got["status"] != "completed" || got["token"] == first || got["token"] != reqs[0].AccessToken {
		t.Errorf("1 minute before expiry: status %v, the refreshed token handed out: %v", got["status"], got["token"] == reqs[0].AccessToken)
	}
}

package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/oauthtest"
)

// TestAgentAuthTokenRoutes: listing token metadata (never values), deleting
// one token, and revocation at the provider (RFC 7009) against the real
// server's /revoke, through a recording front.
func TestAgentAuthTokenRoutes(t *testing.T) {
	a := newAuthEnv(t)
	a.provider("gh", map[string]any{"client_secret": secret("cs-gh-token-routes-secret"),
		"token_endpoint_auth_method": "client_secret_basic", "revocation_url": a.front.RevokeURL})
	if got := a.must(200, "GET", "/v2/auth/providers/gh", a.keyA, nil); got["revocation_url"] != a.front.RevokeURL {
		t.Fatalf("revocation_url read back as %v", got["revocation_url"])
	}
	obtain := func(user string) (token, refresh string) {
		t.Helper()
		res := a.authenticate("gh", user)
		if res["status"] != "pending" {
			t.Fatalf("authenticate %s: %v", user, res["status"])
		}
		a.consent(res["url"].(string))
		last := a.front.Last()
		if last.RefreshToken == "" {
			t.Fatalf("the server issued no refresh token: %+v", last.Status)
		}
		return last.AccessToken, last.RefreshToken
	}
	_, refresh1 := obtain("u1")
	_, refresh2 := obtain("u2")

	list := func(key, query string) []map[string]any {
		t.Helper()
		r := a.do("GET", "/v2/auth/tokens"+query, key, nil)
		if r.Status != 200 {
			t.Fatalf("GET /v2/auth/tokens%s: %d %s", query, r.Status, r.Body)
		}
		var out []map[string]any
		if err := json.Unmarshal(r.Body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	all := list(a.keyA, "")
	if len(all) != 2 || all[0]["user_id"] != "u1" || all[1]["user_id"] != "u2" {
		t.Fatalf("list: %v", all)
	}
	for _, s := range all {
		for _, k := range []string{"id", "provider_id", "scopes", "created_at", "updated_at", "expires_at", "usable", "is_default"} {
			if _, ok := s[k]; !ok {
				t.Errorf("summary without %s: %v", k, s)
			}
		}
		for k := range s {
			if strings.Contains(k, "token") && k != "token_id" || k == "secret_ref" {
				t.Errorf("summary field %s", k)
			}
		}
	}
	if got := list(a.keyA, "?user_id=u2&provider_id=gh"); len(got) != 1 || got[0]["id"] != all[1]["id"] {
		t.Errorf("u2's: %v", got)
	}
	if got := list(a.keyA, "?limit=1&offset=1"); len(got) != 1 || got[0]["id"] != all[1]["id"] {
		t.Errorf("page 2 of 1: %v", got)
	}
	if got := list(a.keyB, ""); len(got) != 0 {
		t.Errorf("another organization lists %v", got)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?offset=-1", "?user_id=%00"} {
		if r := a.do("GET", "/v2/auth/tokens"+q, a.keyA, nil); r.Status != 422 {
			t.Errorf("GET /v2/auth/tokens%s: %d %s, want 422", q, r.Status, r.Body)
		}
	}
	if r := a.do("GET", "/v2/auth/tokens?provider_id=nope", a.keyA, nil); r.Status != 404 {
		t.Errorf("unknown provider: %d", r.Status)
	}

	// Deleting one token: not another organization's, not (with user_id)
	// another user's; revoked at the provider, then gone.
	id1 := all[0]["id"].(string)
	for _, tc := range []struct{ key, query string }{{a.keyB, ""}, {a.keyA, "?user_id=u2"}} {
		if r := a.do("DELETE", "/v2/auth/tokens/"+id1+tc.query, tc.key, nil); r.Status != 404 {
			t.Errorf("DELETE %s%s: %d, want 404", id1, tc.query, r.Status)
		}
	}
	if n := len(a.front.Revocations()); n != 0 {
		t.Fatalf("%d revocations before any delete", n)
	}
	if r := a.do("DELETE", "/v2/auth/tokens/"+id1+"?user_id=u1", a.keyA, nil); r.Status != 204 || len(r.Body) != 0 {
		t.Fatalf("DELETE token: %d %s", r.Status, r.Body)
	}
	revs := a.front.Revocations()
	if len(revs) != 1 {
		t.Fatalf("revocations: %d, want 1", len(revs))
	}
	rv := revs[0]
	if rv.Status != 200 || rv.Form.Get("token") != refresh1 || rv.Form.Get("token_type_hint") != "refresh_token" ||
		rv.BasicUser != "client-gh" || rv.BasicPass != "cs-gh-token-routes-secret" || rv.Form.Get("client_secret") != "" {
		t.Errorf("revocation: status %d, the refresh token %v, hint %q, basic user %q (secret right %v), secret in form %v",
			rv.Status, rv.Form.Get("token") == refresh1, rv.Form.Get("token_type_hint"), rv.BasicUser,
			rv.BasicPass == "cs-gh-token-routes-secret", rv.Form.Get("client_secret") != "")
	}
	if r := a.do("DELETE", "/v2/auth/tokens/"+id1, a.keyA, nil); r.Status != 404 {
		t.Errorf("DELETE twice: %d, want 404", r.Status)
	}
	if got := list(a.keyA, ""); len(got) != 1 || got[0]["user_id"] != "u2" {
		t.Errorf("after delete: %v", got)
	}
	if r := a.authenticate("gh", "u1"); r["status"] != "pending" {
		t.Errorf("u1 after the delete: %v", r["status"])
	}

	// Deleting by provider and user revokes too; a provider whose
	// revocation endpoint fails does not keep the token here.
	a.front.FailRevocation(503)
	got := a.must(200, "DELETE", "/v2/auth/tokens?provider_id=gh&user_id=u2", a.keyA, nil)
	if got["revoked"] != float64(1) {
		t.Errorf("revoke u2: %v", got)
	}
	revs = a.front.Revocations()
	if len(revs) != 2 || revs[1].Form.Get("token") != refresh2 || revs[1].Status != 503 {
		t.Errorf("u2's revocation: %d requests", len(revs))
	}
	a.front.FailRevocation(0)
	if got := list(a.keyA, ""); len(got) != 0 {
		t.Errorf("left after a failed revocation: %v", got)
	}

	// Without a revocation URL nothing is called; "" removes it.
	a.must(200, "PATCH", "/v2/auth/providers/gh", a.keyA, map[string]any{"revocation_url": ""})
	if got := a.must(200, "GET", "/v2/auth/providers/gh", a.keyA, nil); got["revocation_url"] != nil {
		t.Errorf("revocation_url after removal: %v", got["revocation_url"])
	}
	obtain("u3")
	a.must(200, "DELETE", "/v2/auth/tokens?provider_id=gh", a.keyA, nil)
	if n := len(a.front.Revocations()); n != 2 {
		t.Errorf("%d revocations with no revocation_url, want still 2", n)
	}
	for _, bad := range []any{"ftp://example.com/revoke", "http://example.com/revoke", "https://example.com/r#f", 7} {
		r := a.do("PATCH", "/v2/auth/providers/gh", a.keyA, map[string]any{"revocation_url": bad})
		if r.Status != 422 || !strings.Contains(r.detail(t), "revocation_url") {
			t.Errorf("revocation_url %v: %d %s, want 422 naming it", bad, r.Status, r.Body)
		}
	}
}

// TestAgentAuthCallbackPost: upstream's frontend-bridged callback takes
// code and state with an API key; a state of another organization's
// attempt is unknown to it, and a used one cannot be replayed.
func TestAgentAuthCallbackPost(t *testing.T) {
	a := newAuthEnv(t)
	a.provider("gh", map[string]any{"client_secret": secret("cs-gh-callback-post-secret"), "uses_pkce": true})
	res := a.authenticate("gh", "u1")
	redirect, err := oauthtest.Redirect(context.Background(), res["url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	q := redirect.Query()
	body := map[string]any{"code": q.Get("code"), "state": q.Get("state")}
	// Another organization (its key is valid, the attempt is not its own).
	if r := a.do("POST", "/v2/auth/callback/gh", a.keyB, body); r.Status != 422 || !strings.Contains(r.detail(t), "state") {
		t.Fatalf("another organization's callback: %d %s, want 422", r.Status, r.Body)
	}
	if r := a.do("POST", "/v2/auth/callback/gh", "", body); r.Status != 401 {
		t.Errorf("no key: %d, want 401", r.Status)
	}
	for _, b := range []map[string]any{{"code": "c"}, {"state": "s"}} {
		if r := a.do("POST", "/v2/auth/callback/gh", a.keyA, b); r.Status != 422 {
			t.Errorf("%v: %d, want 422", b, r.Status)
		}
	}
	got := a.must(200, "POST", "/v2/auth/callback/gh", a.keyA, body)
	if got["status"] != "completed" || got["auth_id"] != res["auth_id"] || got["token"] != nil {
		t.Fatalf("callback: %v", got)
	}
	if w := a.private("GET", "/v2/auth/wait/"+res["auth_id"].(string)+"?timeout=5", a.keyA, nil); w["status"] != "completed" || w["token"] == "" {
		t.Errorf("wait: %v", w["status"])
	}
	if r := a.do("POST", "/v2/auth/callback/gh", a.keyA, body); r.Status != 422 {
		t.Errorf("replayed: %d, want 422", r.Status)
	}
}

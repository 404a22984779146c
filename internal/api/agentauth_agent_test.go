package api_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAgentAuthAgentScope: a token granted through an authenticate with
// agent_id is that agent's (upstream: "tokens are scoped to the calling
// agent using the Assistant ID"); without agent_id it is the user's
// unscoped token. tokens/exists takes agent_id, the listing shows it, bad
// agent ids are 422 naming the field, and deleting a user's tokens deletes
// every agent's.
func TestAgentAuthAgentScope(t *testing.T) {
	a := newAuthEnv(t)
	a.provider("gh", map[string]any{"client_secret": secret("cs-gh-agent-scope-secret"), "uses_pkce": true})
	authAs := func(agent any) map[string]any {
		t.Helper()
		body := map[string]any{"provider": "gh", "scopes": []string{"openid", "read"}, "user_id": "u1"}
		if agent != nil {
			body["agent_id"] = agent
		}
		return a.private("POST", "/v2/auth/authenticate", a.keyA, body)
	}
	grant := func(agent any) string {
		t.Helper()
		res := authAs(agent)
		if res["status"] != "pending" {
			t.Fatalf("authenticate as %v: %v, want pending", agent, res["status"])
		}
		if cb := a.consent(res["url"].(string)); cb["status"] != "completed" {
			t.Fatalf("callback: %v", cb)
		}
		w := a.private("GET", "/v2/auth/wait/"+res["auth_id"].(string)+"?timeout=5", a.keyA, nil)
		if w["status"] != "completed" {
			t.Fatalf("wait: %v", w["status"])
		}
		return w["token"].(string)
	}
	exists := func(query string) any {
		t.Helper()
		return a.must(200, "GET", "/v2/auth/tokens/exists?provider_id=gh&user_id=u1"+query, a.keyA, nil)["has_token"]
	}

	tokA := grant("agent-a")
	if got := authAs("agent-a"); got["status"] != "completed" || got["token"] != tokA {
		t.Errorf("agent A: status %v, A's token %v", got["status"], got["token"] == tokA)
	}
	if got := authAs("agent-b"); got["status"] != "pending" || got["token"] != nil {
		t.Errorf("agent B got A's token: %v", got["status"])
	}
	if got := authAs(nil); got["status"] != "pending" || got["token"] != nil {
		t.Errorf("no agent got A's token: %v", got["status"])
	}
	if exists("&agent_id=agent-a") != true || exists("&agent_id=agent-b") != false || exists("") != true {
		t.Errorf("tokens/exists: A %v, B %v, any %v; want true, false, true",
			exists("&agent_id=agent-a"), exists("&agent_id=agent-b"), exists(""))
	}

	// The user's unscoped token is another record; A keeps its own.
	unscoped := grant(nil)
	if unscoped == tokA {
		t.Fatal("the server issued the same token twice")
	}
	if got := authAs(nil); got["status"] != "completed" || got["token"] != unscoped {
		t.Errorf("no agent: status %v, the unscoped token %v", got["status"], got["token"] == unscoped)
	}
	if got := authAs("agent-a"); got["token"] != tokA {
		t.Errorf("agent A after the unscoped grant: A's token %v", got["token"] == tokA)
	}
	r := a.do("GET", "/v2/auth/tokens?provider_id=gh&user_id=u1", a.keyA, nil)
	var list []map[string]any
	if err := json.Unmarshal(r.Body, &list); r.Status != 200 || err != nil {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	if len(list) != 2 || list[0]["agent_id"] != "agent-a" {
		t.Errorf("listing: %v, want A's token then the unscoped one", list)
	}
	if v, ok := list[len(list)-1]["agent_id"]; !ok || v != nil {
		t.Errorf("the unscoped token's agent_id: %v (present %v), want null", v, ok)
	}

	// Bad agent ids: 422 naming agent_id, nothing started.
	for _, bad := range []any{7, true, strings.Repeat("x", 257), "", "a\x00b"} {
		body := map[string]any{"provider": "gh", "scopes": []string{"read"}, "user_id": "u1", "agent_id": bad}
		if r := a.do("POST", "/v2/auth/authenticate", a.keyA, body); r.Status != 422 || !strings.Contains(r.detail(t), "agent_id") {
			t.Errorf("agent_id %.20q: %d %s, want 422 naming agent_id", bad, r.Status, r.Body)
		}
	}
	for _, q := range []string{"&agent_id=" + strings.Repeat("x", 257), "&agent_id=a%00b"} {
		if r := a.do("GET", "/v2/auth/tokens/exists?provider_id=gh"+q, a.keyA, nil); r.Status != 422 || !strings.Contains(r.detail(t), "agent_id") {
			t.Errorf("tokens/exists%.30s: %d %s, want 422 naming agent_id", q, r.Status, r.Body)
		}
	}

	// Deleting the user's tokens deletes every agent's (upstream: "across
	// agents").
	if got := a.must(200, "DELETE", "/v2/auth/tokens?provider_id=gh&user_id=u1", a.keyA, nil); got["revoked"] != float64(2) {
		t.Errorf("revoked %v, want 2", got["revoked"])
	}
	if got := authAs("agent-a"); got["status"] != "pending" {
		t.Errorf("agent A after deletion: %v", got["status"])
	}
	if exists("&agent_id=agent-a") != false || exists("") != false {
		t.Errorf("tokens/exists after deletion")
	}
}

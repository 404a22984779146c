package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// authToolsYAML is a deployed graph whose tools node executes an http tool
// with the run's user's token of provider "gh".
const authToolsYAML = `state:
  messages: {reducer: append}
tools:
  list_repos: {kind: http, description: The user's repositories, url: RESOURCE_URL, method: GET}
nodes:
  tools: {kind: tools, auth: {provider: gh, scopes: [openid, read]}}
edges:
  - {from: __start__, to: tools}
`

// TestToolsNodeAuth: a tools node's http tool call carries the run's
// user's bearer token; with none stored the run interrupts with the
// authorization URL before any tool is called, and after the user's
// consent (a browser at the real OAuth server) resuming the run executes
// the tool call with the token.
func TestToolsNodeAuth(t *testing.T) {
	a := newAuthEnv(t)
	a.provider("gh", map[string]any{"client_secret": secret("cs-gh-tools-secret"), "uses_pkce": true})

	resource := newBearerRecorder(t, `{"repos": ["alpha", "beta"]}`)
	a.deployGraph(t, "auth-tools", "tooling", "tools.yaml", strings.Replace(authToolsYAML, "RESOURCE_URL", resource.URL+"/repos", 1))

	ai := map[string]any{"role": "assistant", "content": "",
		"tool_calls": []any{map[string]any{"id": "call-1", "name": "list_repos", "args": map[string]any{}}}}
	tid := a.newThread(a.keyA)
	run := map[string]any{"assistant_id": "tooling", "input": map[string]any{"messages": []any{ai}}, "context": map[string]any{"user_id": "ada"}}
	out := waitBody(t, a.do("POST", "/threads/"+tid+"/runs/wait", a.keyA, run))
	ints, _ := out["__interrupt__"].([]any)
	if len(ints) != 1 {
		t.Fatalf("no interrupt: %v", out)
	}
	value, _ := ints[0].(map[string]any)["value"].(map[string]any)
	authURL, _ := value["auth_url"].(string)
	if value["provider"] != "gh" || !strings.HasPrefix(authURL, oauthServer.Issuer+"/authorize?") || value["message"] == nil {
		t.Fatalf("interrupt value: %v", value)
	}
	seen := resource.seen()
	if len(seen) != 0 {
		t.Fatalf("the tool was called without a token: %q", seen)
	}

	if cb := a.consent(authURL); cb["status"] != "completed" {
		t.Fatalf("callback: %v", cb)
	}
	issued := a.front.Last().AccessToken
	resume := map[string]any{"assistant_id": "tooling", "command": map[string]any{"resume": "done"}, "context": map[string]any{"user_id": "ada"}}
	out = waitBody(t, a.do("POST", "/threads/"+tid+"/runs/wait", a.keyA, resume))
	msgs, _ := out["messages"].([]any)
	if out["__interrupt__"] != nil || len(msgs) != 2 {
		t.Fatalf("resumed run: %v", out)
	}
	toolMsg, _ := msgs[1].(map[string]any)
	if toolMsg["tool_call_id"] != "call-1" || toolMsg["status"] != "success" || !strings.Contains(fmt.Sprint(toolMsg["content"]), "alpha") {
		t.Errorf("tool message: %v", toolMsg)
	}
	seen = resource.seen()
	if len(seen) != 1 || seen[0] != "Bearer "+issued {
		t.Errorf("the resource server saw %d calls; with the issued token: %v", len(seen), len(seen) == 1 && seen[0] == "Bearer "+issued)
	}
}

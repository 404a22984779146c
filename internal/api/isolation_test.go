package api_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"testing"
)

// isolationBodies are valid bodies for the operations that take one, so a
// request from another organization passes validation and reaches the
// ownership check.
var isolationBodies = map[string]any{
	"updateProvider":   map[string]any{"name": "renamed"},
	"updateDeployment": map[string]any{"source_config": map[string]any{"custom_url": "https://x.test"}},
	"createRevision":   map[string]any{},
	"patchThread":      map[string]any{"metadata": map[string]any{"a": 1}},
	"getThreadHistory": map[string]any{},
	"createRun":        map[string]any{"assistant_id": "echo"},
	"waitRun":          map[string]any{"assistant_id": "echo"},
	"stream_run_threads__thread_id__runs_stream_post": map[string]any{"assistant_id": "echo"},
	"createThreadCron":            map[string]any{"assistant_id": "echo", "schedule": "0 * * * *"},
	"updateCron":                  map[string]any{"enabled": false},
	"protocol_thread_events_post": map[string]any{"channels": []string{"values"}},
	// run.start creates the caller's own thread of that id (as runs with
	// if_not_exists create do); answering an interrupt needs the thread.
	"protocol_thread_command_post": map[string]any{"id": 1, "method": "input.respond",
		"params": map[string]any{"interrupt_id": "0123456789abcdef0123456789abcdef", "response": "yes"}},
	"updateThreadState":         map[string]any{"values": map[string]any{"count": 1}},
	"patchThreadState":          map[string]any{"metadata": map[string]any{"a": 1}},
	"postThreadStateAt":         map[string]any{"checkpoint": map[string]any{}},
	"setLatestAssistantVersion": map[string]any{"version": 1},
}

// isolationStatus are the operations whose answer for another
// organization's resource is, by design, the answer for an unknown one
// other than 404 (and so reveals nothing either):
//   - waitAuth answers 200 {"status": "not_found"}, upstream's answer for
//     an unknown auth id, which langchain-auth's client expects;
//   - authCallback is public (the browser has no key): the single-use state
//     is the credential, not the organization, and a request without one is
//     a 422;
//   - authCallbackFinalize (the POST callback, with a key) answers another
//     organization's state as it answers an unknown one: 422 "state: is
//     unknown, expired or already used" (and leaves the attempt pending:
//     alpha completes it below).
var isolationStatus = map[string]int{"waitAuth": 200, "authCallback": 422, "authCallbackFinalize": 422}

// jsonRPCIsolation are the JSON-RPC operations: they answer every request
// with HTTP 200 and carry the refusal as a JSON-RPC error object (A2A's
// rule, upstream's answer); another organization's assistant is the code
// here, as a missing one is.
var jsonRPCIsolation = map[string]int{"post_a2a": -32602}

func init() {
	isolationBodies["post_a2a"] = map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send",
		"params": map[string]any{"message": map[string]any{"role": "user", "messageId": "m", "parts": []any{map[string]any{"text": "hi"}}}}}
}

// TestOrganizationIsolationEveryOperation is generated from the document:
// every operation that names a resource in its path is sent with the other
// organization's key for alpha's resources. Each must answer 404 and reveal
// nothing of the resource.
func TestOrganizationIsolationEveryOperation(t *testing.T) {
	e := newEnv(t)
	dep := e.must(201, "POST", "/v2/deployments", e.keyA, imageDeployment("isolated"))
	e.must(200, "POST", "/v2/auth/providers", e.keyA, map[string]any{"provider_id": "alpha-idp", "name": "Alpha IdP",
		"client_id": "alpha-client", "client_secret": secret("cs-alpha-idp-Tz4"), "auth_url": "https://a.test/a", "token_url": "https://a.test/t"})
	asst := e.must(200, "POST", "/assistants", e.keyA, map[string]any{"graph_id": "echo", "name": "alpha-assistant"})
	thread := e.newThread(e.keyA)
	waitBody(t, e.do("POST", "/threads/"+thread+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 2}}))
	runs := e.do("GET", "/threads/"+thread+"/runs", e.keyA, nil)
	var runList []map[string]any
	json.Unmarshal(runs.Body, &runList)
	state := e.must(200, "GET", "/threads/"+thread+"/state", e.keyA, nil)
	cron := e.must(200, "POST", "/runs/crons", e.keyA, map[string]any{"assistant_id": "echo", "schedule": "0 * * * *"})
	attempt := e.must(200, "POST", "/v2/auth/authenticate", e.keyA, map[string]any{"provider": "alpha-idp", "scopes": []string{"read"}, "user_id": "alpha-user"})
	ids := map[string]string{
		"provider_id":   "alpha-idp",
		"deployment_id": dep["id"].(string),
		"revision_id":   dep["latest_revision_id"].(string),
		"assistant_id":  asst["assistant_id"].(string),
		"thread_id":     thread,
		"run_id":        runList[0]["run_id"].(string),
		"checkpoint_id": state["checkpoint"].(map[string]any)["checkpoint_id"].(string),
		"cron_id":       cron["cron_id"].(string),
		"auth_id":       attempt["auth_id"].(string),
		"namespace":     "inner",
		"project_id":    dep["id"].(string),
		// No token can be stored without an OAuth server here: an id no
		// organization has. TestAgentAuthTokenRoutes deletes alpha's real
		// token with beta's key (404) against mock-oauth2-server.
		"token_id": "00000000-0000-4000-8000-000000000000",
		// The JS SDK's getComponent names an assistant as the graph.
		"graph_id": asst["assistant_id"].(string),
	}
	authURL, err := url.Parse(attempt["url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	bodies := maps.Clone(isolationBodies)
	// Alpha's real state, sent by beta.
	bodies["authCallbackFinalize"] = map[string]any{"code": "beta-code", "state": authURL.Query().Get("state")}
	secretsOfAlpha := []string{"alpha-client", "Alpha IdP", "ghcr.io/acme", "alpha-assistant", `"count"`}

	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	raw := e.do("GET", "/openapi.json", "", nil)
	if err := json.Unmarshal(raw.Body, &doc); err != nil {
		t.Fatal(err)
	}
	tested := 0
	for path, ops := range doc.Paths {
		// The reference page's and the console's assets belong to no one.
		if !strings.Contains(path, "{") || strings.HasPrefix(path, "/docs") || strings.HasPrefix(path, "/console/") {
			continue
		}
		for method, opRaw := range ops {
			var op struct {
				ID string `json:"operationId"`
			}
			if json.Unmarshal(opRaw, &op) != nil || op.ID == "" {
				continue // path-level parameters
			}
			concrete := path
			for name, id := range ids {
				concrete = strings.ReplaceAll(concrete, "{"+name+"}", id)
			}
			if strings.Contains(concrete, "{") {
				t.Errorf("%s %s: no alpha resource for its path parameters", op.ID, path)
				continue
			}
			r := e.do(strings.ToUpper(method), concrete, e.keyB, bodies[op.ID], "Accept", "application/json")
			tested++
			if code, ok := jsonRPCIsolation[op.ID]; ok {
				var m struct {
					Error *struct{ Code int } `json:"error"`
				}
				if r.Status != 200 || json.Unmarshal(r.Body, &m) != nil || m.Error == nil || m.Error.Code != code {
					t.Errorf("%s as beta on alpha's resources: %d %s, want 200 with JSON-RPC error %d", op.ID, r.Status, r.Body, code)
				}
			} else {
				want := 404
				if st, ok := isolationStatus[op.ID]; ok {
					want = st
				}
				if r.Status != want {
					t.Errorf("%s as beta on alpha's resources: %d %s, want %d", op.ID, r.Status, r.Body, want)
				}
				if op.ID == "waitAuth" && !strings.Contains(string(r.Body), `"not_found"`) {
					t.Errorf("waitAuth as beta on alpha's attempt: %s", r.Body)
				}
			}
			for _, s := range secretsOfAlpha {
				if strings.Contains(string(r.Body), s) {
					t.Errorf("%s as beta reveals %q: %s", op.ID, s, r.Body)
				}
			}
		}
	}
	if tested < 20 {
		t.Errorf("only %d operations tested", tested)
	}
	// Alpha still sees everything.
	e.must(200, "GET", fmt.Sprintf("/threads/%s/runs/%s", thread, ids["run_id"]), e.keyA, nil)
	e.must(200, "GET", "/v2/auth/providers/alpha-idp", e.keyA, nil)
	// Beta's use of alpha's state left the attempt pending.
	if w := e.must(200, "GET", "/v2/auth/wait/"+ids["auth_id"]+"?timeout=0", e.keyA, nil); w["status"] != "pending" && w["status"] != "timeout" {
		t.Errorf("alpha's attempt after beta's callback: %v", w["status"])
	}
}

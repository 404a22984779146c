package api_test

import (
	"strings"
	"testing"
)

// TestA2AMessageStreamTokens: message/stream follows the agent's chat
// model as it streams, as upstream does: working status-updates whose
// message is the agent's answer so far (only its prose: the tool call's
// fragments and the tool's result are not agent speech), growing to the
// answer, then the answer as an artifact and the final status.
func TestA2AMessageStreamTokens(t *testing.T) {
	e := newEnv(t)
	apiKey := secret("sk-a2a-tokens-7Qx2")
	model, rt := supportModel(t, apiKey), newTestRuntime(t)
	d := e.must(201, "POST", "/v2/deployments", e.keyA, agentDeployment("a2a-agent", agentRepo(t, model.URL+"/v1"), rt.url, apiKey))
	e.waitFor(e.keyA, "/v2/deployments/"+d["id"].(string), status("READY"))

	for _, tc := range []struct {
		method, working, done, role, statusKey, artKey string
	}{
		{"message/stream", "working", "completed", "agent", "", ""},
		{"SendStreamingMessage", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "ROLE_AGENT", "statusUpdate", "artifactUpdate"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			r := e.do("POST", "/a2a/support", e.keyA, a2aSend(tc.method, "Where is my order 42?", nil), "Accept", "text/event-stream")
			if r.Status != 200 {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			if strings.Contains(string(r.Body), apiKey) {
				t.Fatal("the model's key is in the stream")
			}
			evs := sse(t, r.Body)
			unwrap := func(i int, key string) map[string]any {
				res := rpcResult(t, evs[i])
				if key != "" {
					res, _ = res[key].(map[string]any)
				}
				return res
			}
			// After the submitted task and the first working update: the
			// token updates, then the artifact and the final status.
			var texts []string
			var ids = map[string]bool{}
			for i := 2; i < len(evs)-2; i++ {
				up := unwrap(i, tc.statusKey)
				st, _ := up["status"].(map[string]any)
				msg, _ := st["message"].(map[string]any)
				if up["kind"] != "status-update" || up["final"] != false || st["state"] != tc.working || msg == nil {
					t.Fatalf("event %d is no working update with a message: %v", i, evs[i])
				}
				if msg["role"] != tc.role || msg["kind"] != "message" || msg["taskId"] != up["taskId"] || msg["contextId"] != up["contextId"] {
					t.Errorf("token message %v", msg)
				}
				ids[msg["messageId"].(string)] = true
				texts = append(texts, msg["parts"].([]any)[0].(map[string]any)["text"].(string))
			}
			const answer = "Order 42 is shipped (carrier UPS)."
			if len(texts) < 2 || texts[len(texts)-1] != answer {
				t.Fatalf("token updates %q, want the answer growing to %q", texts, answer)
			}
			for i := 1; i < len(texts); i++ {
				if !strings.HasPrefix(texts[i], texts[i-1]) || texts[i] == texts[i-1] {
					t.Errorf("update %d (%q) does not grow %q", i, texts[i], texts[i-1])
				}
			}
			if len(ids) != 1 {
				t.Errorf("the growing answer has %d message ids, want its one: %v", len(ids), ids)
			}
			for _, s := range texts {
				if strings.Contains(s, "order_id") || strings.Contains(s, "lookup_order") {
					t.Errorf("a token update carries the tool call or result: %q", s)
				}
			}
			art := unwrap(len(evs)-2, tc.artKey)
			if art["kind"] != "artifact-update" || art["artifact"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"] != answer {
				t.Errorf("artifact event %v", art)
			}
			last := unwrap(len(evs)-1, tc.statusKey)
			if last["final"] != true || last["status"].(map[string]any)["state"] != tc.done {
				t.Errorf("final event %v", last)
			}
		})
	}
}

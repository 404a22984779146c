package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// fuzzOps are the operations whose request decoding and validation the fuzz
// target drives, with ids of records that exist ({thread}, {deployment}).
var fuzzOps = []struct{ method, path string }{
	{"POST", "/v2/auth/providers"},
	{"PATCH", "/v2/auth/providers/p1"},
	{"POST", "/v2/deployments"},
	{"PATCH", "/v2/deployments/{deployment}"},
	{"POST", "/v2/deployments/{deployment}/revisions"},
	{"GET", "/v2/deployments"},
	{"GET", "/v2/deployments/{deployment}/revisions"},
	{"POST", "/assistants"},
	{"POST", "/assistants/search"},
	{"POST", "/threads"},
	{"POST", "/threads/search"},
	{"PATCH", "/threads/{thread}"},
	{"POST", "/threads/{thread}/history"},
	{"POST", "/threads/{thread}/runs"},
	{"POST", "/runs"},
	{"GET", "/threads/{thread}/runs"},
}

// FuzzRequests sends arbitrary bodies and query strings to every operation
// above: whatever arrives, the answer is never a 5xx, and every error is a
// JSON {"detail": ...}.
func FuzzRequests(f *testing.F) {
	seeds := []string{
		`{}`, `[]`, `null`, `"x"`, `{"name":null}`, `{"provider_id":"..","name":"x","client_id":"c","auth_url":"https://a.test/a","token_url":"https://a.test/t"}`,
		`{"name":"a","source":"external_docker","source_config":{"resource_spec":{"cpu":1e400}},"source_revision_config":{"image_uri":"nginx"}}`,
		`{"secrets":[{"name":"A","value":null},{"name":"A"}]}`, `{"assistant_id":"echo","input":{"messages":[]},"after_seconds":1e9}`,
		`{"assistant_id":"counter","command":{"goto":{"node":"inc"},"update":[["a"]]}}`, `{"limit":-1,"before":{"checkpoint_id":7}}`,
		`{"metadata":{"a":[1,{"b":null}]},"values":"x"}`, "{\"name\":\"\u0000\"}", `{"source_config":{"resource_spec":[]}}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s), "")
	}
	f.Add(uint8(5), []byte(nil), "limit=0&offset=-1&status=x")
	f.Add(uint8(6), []byte(nil), "limit=99999999999999999999&status=DEPLOYED,NOPE")

	e := newEnv(f)
	repo := e.must(201, "POST", "/v2/deployments", e.keyA, imageDeployment("fuzzed"))
	e.must(200, "POST", "/v2/auth/providers", e.keyA, map[string]any{"provider_id": "p1", "name": "P", "client_id": "c",
		"client_secret": secret("cs-fuzz-p1-Vb8"), "auth_url": "https://a.test/a", "token_url": "https://a.test/t"})
	thread := e.newThread(e.keyA)

	f.Fuzz(func(t *testing.T, op uint8, body []byte, query string) {
		o := fuzzOps[int(op)%len(fuzzOps)]
		path := strings.NewReplacer("{thread}", thread, "{deployment}", repo["id"].(string)).Replace(o.path)
		if query != "" {
			path += "?" + strings.NewReplacer("#", "%23", " ", "%20").Replace(query)
		}
		e.t = t
		var sent any
		if body != nil {
			sent = body
		}
		if _, err := http.NewRequest(o.method, e.url+path, nil); err != nil {
			return // not a request a client could send
		}
		r := e.do(o.method, path, e.keyA, sent)
		if r.Status >= 500 {
			t.Fatalf("%s %s with %q: %d %s", o.method, path, body, r.Status, r.Body)
		}
		if r.Status >= 400 {
			var m map[string]any
			if json.Unmarshal(r.Body, &m) != nil || m["detail"] == "" || m["detail"] == nil {
				t.Fatalf("%s %s with %q: %d without a JSON detail: %s", o.method, path, body, r.Status, r.Body)
			}
		}
	})
}

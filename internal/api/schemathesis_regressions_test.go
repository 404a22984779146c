package api_test

// Regression tests for what Schemathesis (test/schemathesis) found: answers
// the server gives, rightly, that the document did not list. Each test makes
// the server give that answer and checks the document lists it.

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/deployments"
)

// docOp is one operation of the served document, as far as these tests need.
type docOp struct {
	ID        string
	Method    string
	Path      string
	Secured   bool
	HasBody   bool
	Responses map[string]json.RawMessage
}

// operations reads /openapi.json from the server and returns its operations by id.
func (e *env) operations(t *testing.T) map[string]docOp {
	t.Helper()
	r := e.do("GET", "/openapi.json", "", nil)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatalf("GET /openapi.json: %v", err)
	}
	ops := map[string]docOp{}
	for path, item := range doc.Paths {
		for method, raw := range item {
			var op struct {
				ID          string                     `json:"operationId"`
				Security    *[]any                     `json:"security"`
				RequestBody json.RawMessage            `json:"requestBody"`
				Responses   map[string]json.RawMessage `json:"responses"`
			}
			if json.Unmarshal(raw, &op) != nil || op.ID == "" {
				continue // path-level parameters
			}
			ops[op.ID] = docOp{
				ID: op.ID, Method: strings.ToUpper(method), Path: path,
				Secured:   op.Security == nil || len(*op.Security) > 0,
				HasBody:   op.RequestBody != nil,
				Responses: op.Responses,
			}
		}
	}
	if len(ops) < 30 {
		t.Fatalf("only %d operations in the served document", len(ops))
	}
	return ops
}

// documents fails the test unless operation id lists status among its responses.
func documents(t *testing.T, ops map[string]docOp, id string, status int) {
	t.Helper()
	op, ok := ops[id]
	if !ok {
		t.Fatalf("operation %s not in the document", id)
	}
	if _, ok := op.Responses[strconv.Itoa(status)]; !ok {
		codes := make([]string, 0, len(op.Responses))
		for c := range op.Responses {
			codes = append(codes, c)
		}
		t.Errorf("%s (%s %s) answers %d, which the document does not list (it lists %s)",
			id, op.Method, op.Path, status, strings.Join(codes, ", "))
	}
}

// Finding: every operation that needs a key answered 401 without one, and
// none but listProviders documented it. Now every secured operation lists 401
// (missing or unknown key) and 429 (rate limit), every operation with a body
// 413 (too large) and 422 (malformed or invalid), and each is answered so.
func TestSchemathesisDocumentsSharedErrorStatuses(t *testing.T) {
	e := newEnv(t)
	ops := e.operations(t)
	secured := 0
	for id, op := range ops {
		if op.Secured {
			secured++
			documents(t, ops, id, 401)
			documents(t, ops, id, 429)
		}
		if op.HasBody {
			documents(t, ops, id, 413)
			documents(t, ops, id, 422)
		}
	}
	if secured < 30 {
		t.Errorf("only %d secured operations", secured)
	}
}

// Every secured operation, called without a key or with an unknown one,
// answers a JSON 401 before anything else (path parameters need not exist).
func TestSchemathesisMissingKeyIs401OnEveryOperation(t *testing.T) {
	e := newEnv(t)
	ops := e.operations(t)
	for id, op := range ops {
		if !op.Secured {
			continue
		}
		path := op.Path
		for strings.Contains(path, "{") {
			i, j := strings.Index(path, "{"), strings.Index(path, "}")
			path = path[:i] + "x" + path[j+1:]
		}
		for _, key := range []string{"", "sg_" + strings.Repeat("A", 43)} {
			r := e.do(op.Method, path, key, nil)
			if r.Status != http.StatusUnauthorized {
				t.Errorf("%s %s (%s) with key %q: %d %s, want 401", op.Method, path, id, key, r.Status, r.Body)
				continue
			}
			if r.detail(t) == "" {
				t.Errorf("%s %s: 401 without a detail: %s", op.Method, path, r.Body)
			}
		}
	}
}

// The rate limit's 429 carries Retry-After, a whole number of seconds ≥ 1,
// as documented.
func TestSchemathesisRateLimitIsDocumented429(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.RateLimit = &auth.Limiter{Rate: 0.01, Burst: 1} })
	ops := e.operations(t) // public: not limited
	e.do("POST", "/threads/search", e.keyA, map[string]any{})
	r := e.do("POST", "/threads/search", e.keyA, map[string]any{})
	if r.Status != http.StatusTooManyRequests {
		t.Fatalf("second request: %d %s, want 429", r.Status, r.Body)
	}
	documents(t, ops, "searchThreads", 429)
	if n, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("Retry-After %q, want a whole number ≥ 1", r.Header.Get("Retry-After"))
	}
}

// A body over the limit is a JSON 413, as documented.
func TestSchemathesisOversizedBodyIsDocumented413(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.MaxBodyBytes = 256 })
	ops := e.operations(t)
	r := e.do("POST", "/threads", e.keyA, map[string]any{"metadata": map[string]any{"pad": strings.Repeat("x", 1024)}})
	if r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d %s, want 413", r.Status, r.Body)
	}
	documents(t, ops, "createThread", 413)
}

// Finding: GET /assistants/{id}/graph with an id that is neither a UUID nor
// a graph name answered 422 (as getAssistant does), undocumented.
func TestSchemathesisAssistantGraphInvalidIDIsDocumented422(t *testing.T) {
	e := newEnv(t)
	ops := e.operations(t)
	r := e.do("GET", "/assistants/%1D/graph", e.keyA, nil)
	if r.Status != http.StatusUnprocessableEntity || !strings.HasPrefix(r.detail(t), "assistant_id:") {
		t.Fatalf("status %d %s, want 422 naming assistant_id", r.Status, r.Body)
	}
	documents(t, ops, "getAssistantGraph", 422)
	// A UUID nobody has is still 404.
	e.must(404, "GET", "/assistants/00000000-0000-4000-8000-000000000000/graph", e.keyA, nil)
	documents(t, ops, "getAssistantGraph", 404)
}

// keepOnDelete provisions as usual but never finishes a deletion, so a
// deleted deployment stays AWAITING_DELETE for as long as the test needs.
type keepOnDelete struct{ deployments.Provisioner }

func (keepOnDelete) StartDelete(orgID, deploymentID string) {}

// Found by reading the handlers while fixing the above: a deployment being
// deleted answers 409 to PATCH, to a new revision and to a redeploy; the
// document listed 409 for none of them.
func TestSchemathesisDeploymentBeingDeletedIsDocumented409(t *testing.T) {
	e := newEnv(t, func(c *api.Config) {
		c.Deployments.Provisioner = keepOnDelete{c.Deployments.Provisioner}
	})
	ops := e.operations(t)
	dep := e.must(201, "POST", "/v2/deployments", e.keyA, imageDeployment("being-deleted"))
	id := dep["id"].(string)
	path := "/v2/deployments/" + id
	deployed := e.waitFor(e.keyA, path, status("READY"))
	rev := deployed["active_revision_id"].(string)
	e.must(204, "DELETE", path, e.keyA, nil)

	cases := []struct {
		op, method, path string
		body             any
	}{
		{"updateDeployment", "PATCH", path, map[string]any{"source_config": map[string]any{"custom_url": "https://x.test"}}},
		{"createRevision", "POST", path + "/revisions", map[string]any{}},
		{"redeployRevision", "POST", path + "/revisions/" + rev + "/redeploy", nil},
	}
	for _, c := range cases {
		r := e.do(c.method, c.path, e.keyA, c.body)
		if r.Status != http.StatusConflict || !strings.Contains(r.detail(t), "is being deleted") {
			t.Errorf("%s on a deployment being deleted: %d %s, want 409", c.op, r.Status, r.Body)
		}
		documents(t, ops, c.op, 409)
	}
}

// The document now bounds after_seconds as the server does (0 to 7 days), so
// a client (or Schemathesis) knows the longest delay before it is sent.
func TestSchemathesisAfterSecondsBoundsMatchDocument(t *testing.T) {
	e := newEnv(t)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Minimum *float64 `json:"minimum"`
					Maximum *float64 `json:"maximum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(e.do("GET", "/openapi.json", "", nil).Body, &doc); err != nil {
		t.Fatal(err)
	}
	p := doc.Components.Schemas["RunCreate"].Properties["after_seconds"]
	if p.Minimum == nil || *p.Minimum != 0 || p.Maximum == nil || *p.Maximum != 7*24*3600 {
		t.Fatalf("RunCreate.after_seconds bounds: minimum %v, maximum %v; want 0 and 604800", p.Minimum, p.Maximum)
	}
	tid := e.newThread(e.keyA)
	for _, v := range []float64{-0.5, 604800.5} {
		r := e.do("POST", "/threads/"+tid+"/runs", e.keyA, map[string]any{"assistant_id": "echo", "after_seconds": v})
		if r.Status != http.StatusUnprocessableEntity || !strings.HasPrefix(r.detail(t), "after_seconds:") {
			t.Errorf("after_seconds %v: %d %s, want 422 naming after_seconds", v, r.Status, r.Body)
		}
	}
	run := e.must(200, "POST", "/threads/"+tid+"/runs", e.keyA, map[string]any{"assistant_id": "echo", "after_seconds": 604800})
	e.must(202, "POST", "/threads/"+tid+"/runs/"+run["run_id"].(string)+"/cancel", e.keyA, nil)
}

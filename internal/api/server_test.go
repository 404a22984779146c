package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/providers"
)

func TestMetaEndpointsArePublic(t *testing.T) {
	e := newEnv(t)
	if got := e.must(200, "GET", "/ok", "", nil); got["ok"] != true {
		t.Errorf("/ok = %v", got)
	}
	info := e.must(200, "GET", "/info", "", nil)
	if info["version"] != "test" || info["flags"] == nil {
		t.Errorf("/info = %v", info)
	}
	// The crons flag says whether the server has crons (the SDKs and
	// Studio read it before offering them).
	if flags, _ := info["flags"].(map[string]any); flags["crons"] != true {
		t.Errorf("/info flags.crons = %v, want true: the server has crons", flags["crons"])
	}
	spec := e.must(200, "GET", "/openapi.json", "", nil)
	if spec["openapi"] != "3.1.0" {
		t.Errorf("/openapi.json openapi = %v", spec["openapi"])
	}
	r := e.do("GET", "/docs", "", nil)
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.Body), "/v2/deployments") {
		t.Errorf("/docs: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
}

func TestAPIKeyRequired(t *testing.T) {
	e := newEnv(t)
	for _, key := range []string{"", "sg_unknown", e.keyA + "x", strings.ToUpper(e.keyA)} {
		for _, path := range []string{"/v2/auth/providers", "/v2/deployments"} {
			r := e.do("GET", path, key, nil)
			if r.Status != http.StatusUnauthorized || r.detail(t) == "" {
				t.Errorf("GET %s with key %q: %d %s", path, key, r.Status, r.Body)
			}
		}
	}
	// Authentication comes before validation: a bad body without a key is a 401.
	if r := e.do("POST", "/v2/auth/providers", "", `{not json`); r.Status != 401 {
		t.Errorf("unauthenticated bad body: %d", r.Status)
	}
}

// Every operation that needs a key documents the answers any of them can
// give besides its own: no key (401), the key's rate limit (429) and failed
// storage (503, see cmd/stepgraph's disk tests).
func TestDocumentedCommonAnswers(t *testing.T) {
	e := newEnv(t)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(e.do("GET", "/openapi.json", "", nil).Body, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, item := range doc.Paths {
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var op struct {
				OperationID string                     `json:"operationId"`
				Security    *[]any                     `json:"security"`
				Responses   map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if op.Security != nil && len(*op.Security) == 0 {
				continue // public
			}
			n++
			for _, status := range []string{"401", "429", "503"} {
				if _, ok := op.Responses[status]; !ok {
					t.Errorf("%s (%s %s) does not document %s", op.OperationID, method, path, status)
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("only %d operations need a key", n)
	}
}

// Every operation of the document is routed: a request to it never meets the
// router's "no route" answer, and unknown paths or methods answer JSON.
func TestRoutesComeFromTheDocument(t *testing.T) {
	e := newEnv(t)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(e.do("GET", "/openapi.json", "", nil).Body, &doc); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	n := 0
	for path, item := range doc.Paths {
		for method := range item {
			if method == "parameters" {
				continue
			}
			n++
			concrete := param.ReplaceAllString(path, "00000000-0000-0000-0000-000000000000")
			r := e.do(strings.ToUpper(method), concrete, e.keyA, "{}")
			// An unknown route's answers; an operation may answer 405
			// itself (MCP's GET opens no stream), naming no method.
			d := string(r.Body)
			if strings.Contains(d, "no route for") || r.Status == http.StatusMethodNotAllowed && strings.Contains(d, " not allowed on ") {
				t.Errorf("%s %s is in the document but not routed: %d %s", method, path, r.Status, r.Body)
			}
		}
	}
	if n < 19 {
		t.Errorf("only %d operations in the document", n)
	}
	if r := e.do("GET", "/v2/nowhere", e.keyA, nil); r.Status != 404 || !strings.Contains(r.detail(t), "no route") {
		t.Errorf("unknown path: %d %s", r.Status, r.Body)
	}
	r := e.do("PUT", "/v2/auth/providers", e.keyA, "{}")
	if r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") == "" {
		t.Errorf("wrong method: %d %v %s", r.Status, r.Header, r.Body)
	}
}

func TestQueryParametersValidated(t *testing.T) {
	e := newEnv(t)
	cases := map[string]string{
		"/v2/deployments?limit=0":        "limit: minimum: got 0, want 1",
		"/v2/deployments?limit=101":      "limit: maximum: got 101, want 100",
		"/v2/deployments?limit=ten":      "limit: must be an integer",
		"/v2/deployments?offset=-1":      "offset: minimum: got -1, want 0",
		"/v2/deployments?status=RUNNING": "status: value must be one of",
	}
	for path, want := range cases {
		r := e.do("GET", path, e.keyA, nil)
		if r.Status != 422 || !strings.Contains(r.detail(t), want) {
			t.Errorf("GET %s: %d %s, want 422 %q", path, r.Status, r.Body, want)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.MaxBodyBytes = 1 << 10 })
	big := `{"provider_id": "big", "name": "` + strings.Repeat("x", 2<<10) + `"}`
	r := e.do("POST", "/v2/auth/providers", e.keyA, big)
	if r.Status != http.StatusRequestEntityTooLarge || !strings.Contains(r.detail(t), "1 KiB") {
		t.Errorf("oversized body: %d %s", r.Status, r.Body)
	}
}

func TestDefaultBodyLimitIs10MiB(t *testing.T) {
	e := newEnv(t)
	big := `{"provider_id": "big", "name": "` + strings.Repeat("x", 10<<20) + `"}`
	if r := e.do("POST", "/v2/auth/providers", e.keyA, big); r.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("11 MiB body: %d", r.Status)
	}
}

func TestPanicIsRecovered(t *testing.T) {
	// A providers service without a store panics on first use.
	e := newEnv(t, func(c *api.Config) { c.Providers = &providers.Service{} })
	r := e.do("GET", "/v2/auth/providers", e.keyA, nil)
	if r.Status != http.StatusInternalServerError {
		t.Fatalf("status %d", r.Status)
	}
	d := r.detail(t)
	id := r.Header.Get("X-Request-Id")
	if id == "" || !strings.Contains(d, id) || strings.Contains(d, "nil pointer") || strings.Contains(d, "goroutine") {
		t.Errorf("500 detail %q (request id %q) must name the request id and nothing internal", d, id)
	}
	exposure.Lock()
	logged := strings.Contains(exposure.said.String(), `"msg":"panic in handler","request_id":"`+id+`"`)
	exposure.Unlock()
	if !logged {
		t.Errorf("panic not logged with its request id")
	}
	// The server keeps serving.
	e.must(200, "GET", "/ok", "", nil)
}

func TestRateLimitPerKey(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.RateLimit = &auth.Limiter{Rate: 0.5, Burst: 3} })
	for range 3 {
		e.must(200, "GET", "/v2/auth/providers", e.keyA, nil)
	}
	r := e.do("GET", "/v2/auth/providers", e.keyA, nil)
	if r.Status != 429 || r.Header.Get("Retry-After") != "2" || !strings.Contains(r.detail(t), "rate limit") {
		t.Errorf("4th request: %d Retry-After=%q %s", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	e.must(200, "GET", "/v2/auth/providers", e.keyB, nil) // another key is not limited by it
	e.must(200, "GET", "/ok", "", nil)                    // public operations are not limited
}

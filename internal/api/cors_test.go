package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/cors"
)

const studio = "https://smith.langchain.com"

// A browser on an allowed origin passes the preflight of any route (Studio,
// useStream) and can read the answers, the streams' run included; any other
// origin is refused at the preflight and gets no CORS headers.
func TestCORSAllowList(t *testing.T) {
	e := newEnv(t, func(c *api.Config) {
		c.CORS = &cors.Policy{Origins: []string{studio, "http://localhost:3000"}}
	})
	preflight := func(origin, path string) response {
		t.Helper()
		return e.do("OPTIONS", path, "", nil, "Origin", origin,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type,x-api-key")
	}
	for _, tc := range []struct{ origin, path string }{
		{studio, "/threads/00000000-0000-4000-8000-000000000000/runs/stream"},
		{"http://LOCALHOST:3000", "/runs/wait"},
		{studio, "/assistants/search"},
		{studio, "/no/such/route"}, // the preflight does not know routes
	} {
		r := preflight(tc.origin, tc.path)
		if r.Status != http.StatusNoContent {
			t.Fatalf("preflight of %s from %s: %d %s", tc.path, tc.origin, r.Status, r.Body)
		}
		h := r.Header
		if h.Get("Access-Control-Allow-Origin") != tc.origin || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
			!strings.Contains(h.Get("Access-Control-Allow-Headers"), "X-Api-Key") || h.Get("Access-Control-Max-Age") != "7200" ||
			h.Get("Vary") != "Origin" || h.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("preflight of %s from %s: headers %v", tc.path, tc.origin, h)
		}
	}
	r := preflight("https://evil.example", "/runs/wait")
	if r.Status != http.StatusForbidden || r.Header.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(r.detail(t), "not allowed") {
		t.Errorf("preflight from another origin: %d %v %s", r.Status, r.Header, r.Body)
	}

	// Answers: allowed origins see them and the headers the SDKs read.
	res := e.do("POST", "/threads", e.keyA, map[string]any{}, "Origin", studio)
	if res.Status != 200 || res.Header.Get("Access-Control-Allow-Origin") != studio ||
		!strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "Content-Location") {
		t.Errorf("POST /threads from Studio: %d %v", res.Status, res.Header)
	}
	// Errors too (a browser reads the 401's detail), and never for
	// another origin.
	if res := e.do("GET", "/assistants/search", "", nil, "Origin", studio); res.Status != 401 && res.Status != 405 ||
		res.Header.Get("Access-Control-Allow-Origin") != studio {
		t.Errorf("an error to Studio: %d %v", res.Status, res.Header)
	}
	if res := e.do("POST", "/threads", e.keyA, map[string]any{}, "Origin", "https://evil.example"); res.Status != 200 ||
		res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin's request: %d %v", res.Status, res.Header)
	}
	// Without an Origin (SDKs outside browsers) nothing changes.
	if res := e.do("GET", "/ok", "", nil); res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("no Origin: %v", res.Header)
	}
}

// "*" allows any origin, without Vary; no policy keeps OPTIONS what it was
// (an unknown method of the path).
func TestCORSWildcardAndNone(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.CORS = &cors.Policy{Origins: []string{"*"}} })
	r := e.do("OPTIONS", "/runs/wait", "", nil, "Origin", "https://any.example", "Access-Control-Request-Method", "POST")
	if r.Status != 204 || r.Header.Get("Access-Control-Allow-Origin") != "*" || r.Header.Get("Vary") != "" {
		t.Errorf("wildcard preflight: %d %v", r.Status, r.Header)
	}
	none := newEnv(t)
	r = none.do("OPTIONS", "/runs/wait", "", nil, "Origin", studio, "Access-Control-Request-Method", "POST")
	if r.Status != 405 || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("no policy: %d %v", r.Status, r.Header)
	}
}

func TestCORSInvalidOrigin(t *testing.T) {
	if _, err := api.New(api.Config{CORS: &cors.Policy{Origins: []string{"nope"}}}); err == nil {
		t.Error("api.New accepted an invalid origin")
	}
}

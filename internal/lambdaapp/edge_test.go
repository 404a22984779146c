package lambdaapp

import (
	"context"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/auth"
)

// An API function with the stage's allow-list (infra/stack sets
// EnvCORSOrigins) answers a preflight that reaches it and marks its answers
// for an allowed origin — what the REST API's browsers read, since there
// the gateway passes the function's headers through — and nothing for
// another origin.
func TestAPIFunctionCORS(t *testing.T) {
	const studio = "https://smith.langchain.com"
	h, key, _ := apiOnEmulator(t, map[string]string{EnvCORSOrigins: studio + ",http://localhost:3000"})

	ev := request("OPTIONS", "/threads")
	ev.Headers["origin"] = studio
	ev.Headers["access-control-request-method"] = "POST"
	if resp := serve(t, h, ev); resp.StatusCode != 204 || resp.Headers["Access-Control-Allow-Origin"] != studio {
		t.Fatalf("preflight: %d %v %s", resp.StatusCode, resp.Headers, resp.Body)
	}
	ev = keyed("GET", "/v2/auth/providers", key)
	ev.Headers["origin"] = studio
	if resp := serve(t, h, ev); resp.StatusCode != 200 || resp.Headers["Access-Control-Allow-Origin"] != studio ||
		resp.Headers["Access-Control-Expose-Headers"] == "" {
		t.Fatalf("a request from Studio: %d %v", resp.StatusCode, resp.Headers)
	}
	ev = keyed("GET", "/v2/auth/providers", key)
	ev.Headers["origin"] = "https://evil.example"
	if resp := serve(t, h, ev); resp.StatusCode != 200 || resp.Headers["Access-Control-Allow-Origin"] != "" {
		t.Fatalf("another origin: %d %v", resp.StatusCode, resp.Headers)
	}
}

// An API function remembers a key for AuthCacheTTL: a key deleted from the
// table by another process (an operator's revocation) keeps working in it
// until then and not after. The clock is the App's, moved by the test.
func TestAPIFunctionKeyRevocationLatency(t *testing.T) {
	a, key, _ := appOnEmulator(t, nil)
	if a.Keys.CacheTTL != AuthCacheTTL {
		t.Fatalf("an API function's key cache: %v, want %v", a.Keys.CacheTTL, AuthCacheTTL)
	}
	clock := time.Now().UTC()
	a.Keys.Now = func() time.Time { return clock }
	status := func() int {
		t.Helper()
		return serve(t, a.Handler, keyed("GET", "/v2/auth/providers", key)).StatusCode
	}
	if s := status(); s != 200 {
		t.Fatalf("before the revocation: %d", s)
	}
	// Revoked by another process: the store only.
	if err := a.Store.DeleteAPIKey(context.Background(), auth.Hash(key)); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(AuthCacheTTL - time.Second)
	if s := status(); s != 200 {
		t.Fatalf("within the TTL: %d, want the remembered key accepted", s)
	}
	clock = clock.Add(time.Second)
	if s := status(); s != 401 {
		t.Fatalf("after the TTL: %d, want 401", s)
	}
}

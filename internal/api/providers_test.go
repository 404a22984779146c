package api_test

import (
	"net/http"
	"strings"
	"testing"
)

func validProvider(id string) map[string]any {
	return map[string]any{
		"provider_id":   id,
		"name":          "GitHub",
		"client_id":     "Iv1.abc",
		"client_secret": secret("cs-" + id + "-Xq7pL2"),
		"auth_url":      "https://github.com/login/oauth/authorize",
		"token_url":     "https://github.com/login/oauth/access_token",
	}
}

func with(base map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		if kv[i+1] == deleteField {
			delete(out, k)
			continue
		}
		out[k] = kv[i+1]
	}
	return out
}

type deleteMarker struct{}

var deleteField = deleteMarker{}

func TestProviderCreateDefaultsAndShape(t *testing.T) {
	e := newEnv(t)
	got := e.must(200, "POST", "/v2/auth/providers", e.keyA, validProvider("gh"))
	want := map[string]any{
		"provider_id": "gh", "name": "GitHub", "client_id": "Iv1.abc",
		"auth_url": "https://github.com/login/oauth/authorize", "token_url": "https://github.com/login/oauth/access_token",
		"uses_pkce": false, "code_challenge_method": "S256", "token_endpoint_auth_method": "client_secret_post",
		"provider_type": nil, "is_dynamic_client": false, "mcp_server_url": nil,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	for _, k := range []string{"id", "organization_id", "created_at", "updated_at"} {
		if s, _ := got[k].(string); s == "" {
			t.Errorf("%s missing in %v", k, got)
		}
	}
	if !strings.HasSuffix(got["created_at"].(string), "Z") {
		t.Errorf("created_at %v is not UTC RFC 3339", got["created_at"])
	}
	if _, ok := got["client_secret"]; ok {
		t.Errorf("client_secret returned: %v", got)
	}
	// Optional fields are honoured.
	opt := e.must(200, "POST", "/v2/auth/providers", e.keyA, with(validProvider("ms"),
		"uses_pkce", true, "code_challenge_method", "plain", "provider_type", "microsoft",
		"token_endpoint_auth_method", "client_secret_basic"))
	if opt["uses_pkce"] != true || opt["code_challenge_method"] != "plain" || opt["provider_type"] != "microsoft" || opt["token_endpoint_auth_method"] != "client_secret_basic" {
		t.Errorf("optional fields not kept: %v", opt)
	}
}

func TestProviderCreateRules(t *testing.T) {
	e := newEnv(t)
	base := validProvider("p")
	long := strings.Repeat("a", 65)
	cases := []struct {
		name   string
		body   any
		detail string // every listed fragment must appear
	}{
		{"provider_id missing", with(base, "provider_id", deleteField), "provider_id: is required"},
		{"name missing", with(base, "name", deleteField), "name: is required"},
		{"client_id missing", with(base, "client_id", deleteField), "client_id: is required"},
		{"auth_url missing", with(base, "auth_url", deleteField), "auth_url: is required"},
		{"token_url missing", with(base, "token_url", deleteField), "token_url: is required"},
		{"provider_id empty", with(base, "provider_id", ""), "provider_id: must be 1-64 characters"},
		{"provider_id too long", with(base, "provider_id", long), "provider_id: must be 1-64 characters"},
		{"provider_id bad chars", with(base, "provider_id", "a b/c"), "provider_id: must be 1-64 characters of letters, digits"},
		{"name empty", with(base, "name", " "), "name: must not be empty"},
		{"name too long", with(base, "name", strings.Repeat("n", 201)), "name: must be at most 200 characters"},
		{"client_id empty", with(base, "client_id", ""), "client_id: must not be empty"},
		{"client_id too long", with(base, "client_id", strings.Repeat("c", 513)), "client_id: must be at most 512 characters"},
		{"client_secret too long", with(base, "client_secret", strings.Repeat("s", 4097)), "client_secret: must be at most 4096 characters"},
		{"auth_url relative", with(base, "auth_url", "/authorize"), "auth_url: must be an absolute URL"},
		{"auth_url ftp", with(base, "auth_url", "ftp://idp.example.com/a"), "auth_url: must use https"},
		{"auth_url http remote", with(base, "auth_url", "http://idp.example.com/a"), "auth_url: must use https (http is accepted only for loopback hosts"},
		{"auth_url fragment", with(base, "auth_url", "https://idp.example.com/a#x"), "auth_url: must not contain a fragment"},
		{"auth_url credentials", with(base, "auth_url", "https://u:p@idp.example.com/a"), "auth_url: must not contain credentials"},
		{"token_url empty", with(base, "token_url", ""), "token_url: must not be empty"},
		{"token_url too long", with(base, "token_url", "https://x.test/"+strings.Repeat("t", 2048)), "token_url: must be at most 2048 characters"},
		{"code_challenge_method", with(base, "code_challenge_method", "S512"), "code_challenge_method: value must be one of 'S256', 'plain'"},
		{"token_endpoint_auth_method", with(base, "token_endpoint_auth_method", "jwt"), "token_endpoint_auth_method: value must be one of"},
		{"provider_type", with(base, "provider_type", "google"), "provider_type: value must be one of"},
		{"public client with secret", with(base, "token_endpoint_auth_method", "none"), "client_secret: must not be set when token_endpoint_auth_method is none"},
		{"client_secret missing", with(base, "client_secret", deleteField), "client_secret: is required unless token_endpoint_auth_method is none"},
		{"client_secret null", with(base, "client_secret", nil), "client_secret: is required unless token_endpoint_auth_method is none"},
		{"client_secret missing, basic", with(base, "client_secret", deleteField, "token_endpoint_auth_method", "client_secret_basic"), "client_secret: is required"},
		{"client_secret missing, post", with(base, "client_secret", deleteField, "token_endpoint_auth_method", "client_secret_post"), "client_secret: is required"},
		{"client_secret blank", with(base, "client_secret", "   "), "client_secret: must not be empty or only whitespace"},
		{"client_secret whitespace", with(base, "client_secret", "\t\n "), "client_secret: must not be empty or only whitespace"},
		{"uses_pkce type", with(base, "uses_pkce", "yes"), "uses_pkce: got string, want boolean"},
		{"provider_id type", with(base, "provider_id", 7), "provider_id: got number, want string"},
		{"several at once", with(base, "name", "", "auth_url", "x"), "name: must not be empty"},
		{"body not an object", `[1,2]`, "body: got array, want object"},
		{"malformed JSON", `{"provider_id": `, "body: is not valid JSON"},
		{"empty body", ``, "body: is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/v2/auth/providers", e.keyA, c.body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
			}
			if d := r.detail(t); !strings.Contains(d, c.detail) {
				t.Errorf("detail %q does not contain %q", d, c.detail)
			}
		})
	}
	if got := e.must(200, "GET", "/v2/auth/providers", e.keyA, nil); got != nil {
		t.Fatalf("list is not an array")
	}
	if r := e.do("GET", "/v2/auth/providers", e.keyA, nil); string(r.Body) != "[]\n" {
		t.Errorf("rejected requests left records behind: %s", r.Body)
	}
}

func TestProviderLoopbackHTTPAccepted(t *testing.T) {
	e := newEnv(t)
	for i, u := range []string{"http://127.0.0.1:9000/authorize", "http://localhost/authorize", "http://[::1]:8/a"} {
		id := "loop" + string(rune('a'+i))
		e.must(200, "POST", "/v2/auth/providers", e.keyA, with(validProvider(id), "auth_url", u, "token_url", u))
	}
}

func TestProviderDuplicateAndIsolation(t *testing.T) {
	e := newEnv(t)
	e.must(200, "POST", "/v2/auth/providers", e.keyA, validProvider("dup"))
	r := e.do("POST", "/v2/auth/providers", e.keyA, validProvider("dup"))
	if r.Status != http.StatusConflict || !strings.Contains(r.detail(t), "provider_id") {
		t.Fatalf("duplicate: %d %s", r.Status, r.Body)
	}
	// The same provider_id in another organization is independent.
	e.must(200, "POST", "/v2/auth/providers", e.keyB, validProvider("dup"))

	// Organization beta sees only its own; alpha's private one is a 404 for beta.
	e.must(200, "POST", "/v2/auth/providers", e.keyA, validProvider("alpha-only"))
	missing := e.do("GET", "/v2/auth/providers/never-created", e.keyB, nil)
	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v2/auth/providers/alpha-only", nil},
		{"PATCH", "/v2/auth/providers/alpha-only", map[string]any{"name": "stolen"}},
		{"DELETE", "/v2/auth/providers/alpha-only", nil},
	} {
		r := e.do(req.method, req.path, e.keyB, req.body)
		if r.Status != http.StatusNotFound || strings.Contains(string(r.Body), "GitHub") {
			t.Errorf("%s %s as beta: %d %s", req.method, req.path, r.Status, r.Body)
		}
		if r.Status != missing.Status {
			t.Errorf("another org's provider answers %d, a missing one %d", r.Status, missing.Status)
		}
	}
	if r := e.do("GET", "/v2/auth/providers", e.keyB, nil); strings.Contains(string(r.Body), "alpha-only") {
		t.Errorf("beta lists alpha's provider: %s", r.Body)
	}
	if got := e.must(200, "GET", "/v2/auth/providers/alpha-only", e.keyA, nil); got["name"] != "GitHub" {
		t.Errorf("beta's attempts changed alpha's provider: %v", got)
	}
}

func TestProviderUpdate(t *testing.T) {
	e := newEnv(t)
	created := e.must(200, "POST", "/v2/auth/providers", e.keyA, validProvider("up"))

	got := e.must(200, "PATCH", "/v2/auth/providers/up", e.keyA, map[string]any{
		"name": "Renamed", "client_secret": secret("rotated-9fK2"), "uses_pkce": true, "client_id": nil,
	})
	if got["name"] != "Renamed" || got["uses_pkce"] != true || got["client_id"] != "Iv1.abc" {
		t.Errorf("partial update wrong (null must leave client_id): %v", got)
	}
	if got["id"] != created["id"] || got["created_at"] != created["created_at"] {
		t.Errorf("id/created_at changed: %v vs %v", got, created)
	}
	cases := []struct {
		body   any
		status int
		detail string
	}{
		{map[string]any{"provider_id": "other"}, 422, "provider_id: cannot be changed"},
		{map[string]any{"auth_url": "http://evil.example.com/"}, 422, "auth_url: must use https"},
		{map[string]any{"name": ""}, 422, "name: must not be empty"},
		{map[string]any{"code_challenge_method": "S1"}, 422, "code_challenge_method: value must be one of"},
		{map[string]any{"token_endpoint_auth_method": "none"}, 422, "client_secret: must not be set when token_endpoint_auth_method is none"},
		{`{"name":`, 422, "body: is not valid JSON"},
	}
	for _, c := range cases {
		r := e.do("PATCH", "/v2/auth/providers/up", e.keyA, c.body)
		if r.Status != c.status || !strings.Contains(r.detail(t), c.detail) {
			t.Errorf("PATCH %v: %d %s, want %d %q", c.body, r.Status, r.Body, c.status, c.detail)
		}
	}
	if r := e.do("PATCH", "/v2/auth/providers/nope", e.keyA, map[string]any{"name": "x"}); r.Status != 404 {
		t.Errorf("PATCH missing: %d", r.Status)
	}
	// provider_id equal to the current one is accepted (immutable, not forbidden).
	e.must(200, "PATCH", "/v2/auth/providers/up", e.keyA, map[string]any{"provider_id": "up"})
}

func TestProviderDelete(t *testing.T) {
	e := newEnv(t)
	e.must(200, "POST", "/v2/auth/providers", e.keyA, validProvider("gone"))
	got := e.must(200, "DELETE", "/v2/auth/providers/gone", e.keyA, nil)
	if got["message"] == nil {
		t.Errorf("delete answer: %v", got)
	}
	e.must(404, "GET", "/v2/auth/providers/gone", e.keyA, nil)
	e.must(404, "DELETE", "/v2/auth/providers/gone", e.keyA, nil)
	// The id is free again.
	e.must(200, "POST", "/v2/auth/providers", e.keyA, validProvider("gone"))
}

func TestProviderListOldestFirst(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"c", "a", "b"} {
		e.must(200, "POST", "/v2/auth/providers", e.keyA, validProvider(id))
	}
	r := e.do("GET", "/v2/auth/providers", e.keyA, nil)
	s := string(r.Body)
	if !(strings.Index(s, `"provider_id":"c"`) < strings.Index(s, `"provider_id":"a"`) && strings.Index(s, `"provider_id":"a"`) < strings.Index(s, `"provider_id":"b"`)) {
		t.Errorf("not oldest first: %s", s)
	}
}

func TestProviderIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	body := validProvider("idem")
	first := e.do("POST", "/v2/auth/providers", e.keyA, body, "Idempotency-Key", "k1")
	second := e.do("POST", "/v2/auth/providers", e.keyA, body, "Idempotency-Key", "k1")
	if first.Status != 200 || second.Status != 200 || string(first.Body) != string(second.Body) {
		t.Fatalf("retry did not replay the first answer:\n%d %s\n%d %s", first.Status, first.Body, second.Status, second.Body)
	}
	if second.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay not marked")
	}
	other := e.do("POST", "/v2/auth/providers", e.keyA, with(body, "name", "Other"), "Idempotency-Key", "k1")
	if other.Status != 409 || !strings.Contains(other.detail(t), "Idempotency-Key") {
		t.Errorf("same key, different body: %d %s", other.Status, other.Body)
	}
	// Another organization's identical key is independent.
	e.must(200, "POST", "/v2/auth/providers", e.keyB, body, "Idempotency-Key", "k1")
	// A failed request does not burn its key.
	bad := e.do("POST", "/v2/auth/providers", e.keyA, with(body, "provider_id", "x y"), "Idempotency-Key", "k2")
	if bad.Status != 422 {
		t.Fatalf("bad: %d", bad.Status)
	}
	e.must(200, "POST", "/v2/auth/providers", e.keyA, with(body, "provider_id", "later"), "Idempotency-Key", "k2")
}

// Create refuses edge values: provider ids of only dots, an empty
// client_secret, control characters, and URLs with an out-of-range port or a
// space. Dots among other characters stay valid.
func TestProviderCreateEdgeValueRules(t *testing.T) {
	e := newEnv(t)
	base := validProvider("p")
	cases := []struct {
		name   string
		body   any
		detail string
	}{
		{"provider_id one dot", with(base, "provider_id", "."), "provider_id: must not be only dots"},
		{"provider_id two dots", with(base, "provider_id", ".."), "provider_id: must not be only dots"},
		{"provider_id three dots", with(base, "provider_id", "..."), "provider_id: must not be only dots"},
		{"client_secret empty", with(base, "client_secret", ""), "client_secret: must not be empty"},
		{"name with control character", with(base, "name", "Git\x00Hub"), "name: must not contain control characters"},
		{"name with newline", with(base, "name", "Git\nHub"), "name: must not contain control characters"},
		{"client_id with control character", with(base, "client_id", "Iv1\x7f"), "client_id: must not contain control characters"},
		{"auth_url port out of range", with(base, "auth_url", "https://idp.example.com:70000/a"), "auth_url: must have a port between 1 and 65535"},
		{"token_url port zero", with(base, "token_url", "https://idp.example.com:0/t"), "token_url: must have a port between 1 and 65535"},
		{"token_url with space", with(base, "token_url", "https://idp.example.com/a b"), "token_url: must not contain spaces or control characters"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/v2/auth/providers", e.keyA, c.body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
			}
			if d := r.detail(t); !strings.Contains(d, c.detail) {
				t.Errorf("detail %q does not contain %q", d, c.detail)
			}
		})
	}
	// Dots mixed with other characters stay valid.
	e.must(200, "POST", "/v2/auth/providers", e.keyA, validProvider("a.b"))
	e.must(200, "GET", "/v2/auth/providers/a.b", e.keyA, nil)
}

func TestProviderUpdateRules(t *testing.T) {
	e := newEnv(t)
	created := e.must(200, "POST", "/v2/auth/providers", e.keyA, validProvider("upd"))
	cases := []struct {
		name   string
		body   any
		detail []string
	}{
		{"token_url relative", map[string]any{"token_url": "/token"}, []string{"token_url: must be an absolute URL"}},
		{"token_url http remote", map[string]any{"token_url": "http://idp.example.com/t"}, []string{"token_url: must use https"}},
		{"token_url bad port", map[string]any{"token_url": "https://idp.example.com:65536/t"}, []string{"token_url: must have a port between 1 and 65535"}},
		{"client_id too long", map[string]any{"client_id": strings.Repeat("c", 513)}, []string{"client_id: must be at most 512 characters"}},
		{"client_id control character", map[string]any{"client_id": "a\tb"}, []string{"client_id: must not contain control characters"}},
		{"provider_type unknown", map[string]any{"provider_type": "google"}, []string{"provider_type: value must be one of"}},
		{"token_endpoint_auth_method unknown", map[string]any{"token_endpoint_auth_method": "private_key_jwt"}, []string{"token_endpoint_auth_method:"}},
		{"client_secret empty", map[string]any{"client_secret": ""}, []string{"client_secret: must not be empty"}},
		{"client_secret blank", map[string]any{"client_secret": "   "}, []string{"client_secret: must not be empty or only whitespace"}},
		{"uses_pkce type", map[string]any{"uses_pkce": "yes"}, []string{"uses_pkce: got string, want boolean"}},
		{"name type", map[string]any{"name": 5}, []string{"name: got number, want string"}},
		{"auth_url type", map[string]any{"auth_url": []any{"https://x.test"}}, []string{"auth_url: got array, want string"}},
		{"body not an object", `"x"`, []string{"body: got string, want object"}},
		{"no body", ``, []string{"body: is required"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("PATCH", "/v2/auth/providers/upd", e.keyA, c.body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
			}
			d := r.detail(t)
			for _, frag := range c.detail {
				if !strings.Contains(d, frag) {
					t.Errorf("detail %q does not contain %q", d, frag)
				}
			}
			if strings.Contains(d, "float64") || strings.Contains(d, "providers.") {
				t.Errorf("detail %q names Go types", d)
			}
		})
	}
	// An empty object changes nothing, not even updated_at.
	got := e.must(200, "PATCH", "/v2/auth/providers/upd", e.keyA, map[string]any{})
	for k, v := range created {
		if got[k] != v {
			t.Errorf("empty PATCH changed %s: %v → %v", k, v, got[k])
		}
	}
	// Nulls are "leave as is" too.
	got = e.must(200, "PATCH", "/v2/auth/providers/upd", e.keyA, map[string]any{"name": nil, "client_secret": nil, "provider_type": nil})
	if got["name"] != created["name"] || got["updated_at"] != created["updated_at"] {
		t.Errorf("null PATCH changed the provider: %v", got)
	}
}

// A confidential client needs its secret, a public one
// (token_endpoint_auth_method none) must not have one, on create and
// through updates alike.
func TestProviderPublicAndConfidentialClients(t *testing.T) {
	e := newEnv(t)
	public := with(validProvider("pub"), "client_secret", deleteField, "token_endpoint_auth_method", "none")
	got := e.must(200, "POST", "/v2/auth/providers", e.keyA, public)
	if got["token_endpoint_auth_method"] != "none" {
		t.Fatalf("public client: %v", got)
	}
	e.must(200, "POST", "/v2/auth/providers", e.keyA, with(public, "provider_id", "pub-null", "client_secret", nil))
	cases := []struct {
		name   string
		body   map[string]any
		status int
		detail string
	}{
		{"becoming confidential without a secret", map[string]any{"token_endpoint_auth_method": "client_secret_basic"}, 422,
			"client_secret: is required unless token_endpoint_auth_method is none"},
		{"a secret for a public client", map[string]any{"client_secret": secret("cs-pub-Lm3")}, 422,
			"client_secret: must not be set when token_endpoint_auth_method is none"},
		{"an unrelated change", map[string]any{"name": "Public"}, 200, ""},
		{"becoming confidential with a secret", map[string]any{"token_endpoint_auth_method": "client_secret_post", "client_secret": secret("cs-pub-Qr5")}, 200, ""},
		{"then a change keeps the stored secret", map[string]any{"name": "Confidential"}, 200, ""},
		{"back to public while the secret is stored", map[string]any{"token_endpoint_auth_method": "none"}, 422,
			"client_secret: must not be set when token_endpoint_auth_method is none"},
	}
	for _, c := range cases {
		r := e.do("PATCH", "/v2/auth/providers/pub", e.keyA, c.body)
		if r.Status != c.status || c.detail != "" && !strings.Contains(r.detail(t), c.detail) {
			t.Errorf("%s: %d %s, want %d %q", c.name, r.Status, r.Body, c.status, c.detail)
		}
	}
}

package lambdaapp

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

func TestPublicBase(t *testing.T) {
	const d = "a1b2c3.execute-api.eu-west-1.amazonaws.com"
	for _, tc := range []struct{ domain, stage, want string }{
		{d, "$default", "https://" + d},
		{d, "", "https://" + d},
		{d, "prod", "https://" + d + "/prod"},
		{"a1b2c3.execute-api.cn-north-1.amazonaws.com.cn", "v1", "https://a1b2c3.execute-api.cn-north-1.amazonaws.com.cn/v1"},
		{d, "pr od", ""},
		{d, "a/b", ""},
		{"agents.example.com", "$default", ""}, // a custom domain: its path mapping is unknown
		{"evil.example/" + d, "$default", ""},
		{d + ".evil.example", "$default", ""},
		{"", "$default", ""},
	} {
		if got := publicBase(tc.domain, tc.stage); got != tc.want {
			t.Errorf("publicBase(%q, %q) = %q, want %q", tc.domain, tc.stage, got, tc.want)
		}
	}
}

// Without STEPGRAPH_PUBLIC_URL, agent auth's redirect URI is the API
// Gateway address the request came to, from the request context that API
// Gateway sets — never the Host or X-Forwarded-Host a client sends; behind
// a custom domain (unknown path mapping) authenticate answers 409; with the
// variable set, it wins.
func TestRedirectURIFromTheRequestContext(t *testing.T) {
	const domain = "a1b2c3.execute-api.us-east-1.amazonaws.com"
	for _, tc := range []struct {
		name, env, domain, stage string
		v1                       bool
		status                   int
		want                     string
	}{
		{name: "HTTP API default stage", domain: domain, stage: "$default", status: 200, want: "https://" + domain},
		{name: "REST API stage", domain: domain, stage: "prod", v1: true, status: 200, want: "https://" + domain + "/prod"},
		{name: "custom domain", domain: "agents.example.com", stage: "$default", status: 409},
		{name: "configured", env: "https://agents.example.com/api", domain: domain, stage: "$default", status: 200, want: "https://agents.example.com/api"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{EnvRateLimit: "0"}
			if tc.env != "" {
				env[EnvPublicURL] = tc.env
			}
			h, key, _ := apiOnEmulator(t, env)
			body := func(v any) string { b, _ := json.Marshal(v); return string(b) }
			ev := keyed("POST", "/v2/auth/providers", key)
			ev.Body = body(map[string]any{"provider_id": "gh", "name": "GitHub", "client_id": "cid", "client_secret": "cs",
				"auth_url": "https://github.com/login/oauth/authorize", "token_url": "https://github.com/login/oauth/access_token"})
			ev.Headers["content-type"] = "application/json"
			if resp := serve(t, h, ev); resp.StatusCode/100 != 2 {
				t.Fatalf("create provider: %d %s", resp.StatusCode, resp.Body)
			}
			authBody := body(map[string]any{"provider": "gh", "scopes": []string{"repo"}, "user_id": "u1"})
			// A client's claims about the host, which must not count.
			hostile := map[string]string{"content-type": "application/json", "x-api-key": key,
				"host": "evil.example", "x-forwarded-host": "evil.example", "forwarded": "host=evil.example"}
			var status int
			var raw string
			if tc.v1 {
				resp, err := NewHTTPHandler(h).HandleV1(context.Background(), events.APIGatewayProxyRequest{
					HTTPMethod: "POST", Path: "/v2/auth/authenticate", Headers: hostile, Body: authBody,
					RequestContext: events.APIGatewayProxyRequestContext{DomainName: tc.domain, Stage: tc.stage},
				})
				if err != nil {
					t.Fatal(err)
				}
				status, raw = resp.StatusCode, resp.Body
			} else {
				ev := request("POST", "/v2/auth/authenticate")
				ev.RequestContext.DomainName, ev.RequestContext.Stage = tc.domain, tc.stage
				ev.Headers, ev.Body = hostile, authBody
				resp := serve(t, h, ev)
				status, raw = resp.StatusCode, resp.Body
			}
			if status != tc.status {
				t.Fatalf("authenticate: %d %s, want %d", status, raw, tc.status)
			}
			if strings.Contains(raw, "evil.example") {
				t.Fatalf("authenticate answered with the client's host: %s", raw)
			}
			if tc.status != 200 {
				if !strings.Contains(raw, "STEPGRAPH_PUBLIC_URL") {
					t.Errorf("409 %s: want it to name STEPGRAPH_PUBLIC_URL", raw)
				}
				return
			}
			var out struct {
				Status, URL string
			}
			if err := json.Unmarshal([]byte(raw), &out); err != nil || out.Status != "pending" {
				t.Fatalf("authenticate: %s", raw)
			}
			u, err := url.Parse(out.URL)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := u.Query().Get("redirect_uri"), tc.want+"/v2/auth/callback/gh"; got != want {
				t.Errorf("redirect_uri %q, want %q", got, want)
			}
		})
	}
}

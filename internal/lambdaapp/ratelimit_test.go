package lambdaapp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// apiOnEmulator wires an API function from env (the table and secrets
// prefixes and state machines added) on the emulator's tables, and returns
// its API handler (serve puts it behind HTTPHandler) and two keys of one organization.
func apiOnEmulator(t *testing.T, env map[string]string) (http.Handler, string, string) {
	t.Helper()
	a, k1, k2 := appOnEmulator(t, env)
	return a.Handler, k1, k2
}

// appOnEmulator is apiOnEmulator's App.
func appOnEmulator(t *testing.T, env map[string]string) (*App, string, string) {
	t.Helper()
	ep := awstest.Start(t)
	prefix := awstest.Prefix(t)
	ctx := context.Background()
	if err := dynamo.New(ep.Config, dynamo.DeployedOptions(prefix)).CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	full := map[string]string{
		EnvTablePrefix:   prefix,
		EnvSecretsPrefix: prefix,
		// Never called here: no request below starts an execution.
		EnvRunStateMachineARN:    "arn:aws:states:us-east-1:000000000000:stateMachine:" + prefix + "run",
		EnvDeployStateMachineARN: "arn:aws:states:us-east-1:000000000000:stateMachine:" + prefix + "deploy",
	}
	for k, v := range env {
		full[k] = v
	}
	cfg, err := FromEnv(RoleAPI, lookupIn(full))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Open(cfg, ep.Config, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	org, _, err := a.Keys.EnsureOrganization(ctx, "ratelimit")
	if err != nil {
		t.Fatal(err)
	}
	k1, err := a.Keys.Create(ctx, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := a.Keys.Create(ctx, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	return a, k1, k2
}

// keyed is a request with an API key (a new event, headers included).
func keyed(method, path, key string) events.APIGatewayV2HTTPRequest {
	ev := request(method, path)
	if key != "" {
		ev.Headers["x-api-key"] = key
	}
	return ev
}

// An API function limits requests per API key, as the local server does:
// past the limit, 429 with Retry-After (F9 of the 2026-11 security review:
// the AWS shape had no limit at all). The rate here is one request per 1000
// s, so no token comes back while the test runs: the outcome does not
// depend on timing.
func TestAPIRateLimitPerKey(t *testing.T) {
	h, key, other := apiOnEmulator(t, map[string]string{EnvRateLimit: "0.001"})
	const list = "/v2/auth/providers"
	for _, step := range []struct {
		name, path, key string
		status          int
	}{
		{"first request of the key", list, key, 200},
		{"over the limit", list, key, 429},
		{"still over", list, key, 429},
		{"another key has its own bucket", list, other, 200},
		{"public routes are not limited", "/ok", "", 200},
	} {
		resp := serve(t, h, keyed("GET", step.path, step.key))
		if resp.StatusCode != step.status {
			t.Fatalf("%s: %d %s, want %d", step.name, resp.StatusCode, resp.Body, step.status)
		}
		if step.status != 429 {
			continue
		}
		secs, err := strconv.Atoi(resp.Headers["Retry-After"])
		if err != nil || secs < 1 {
			t.Errorf("%s: Retry-After %q, want a positive number of seconds", step.name, resp.Headers["Retry-After"])
		}
		var body struct{ Detail string }
		if err := json.Unmarshal([]byte(resp.Body), &body); err != nil || !strings.Contains(body.Detail, "rate limit") {
			t.Errorf("%s: body %q, want a detail naming the rate limit", step.name, resp.Body)
		}
		if strings.Contains(resp.Body, key) {
			t.Errorf("%s: the answer shows the API key", step.name)
		}
	}
}

// STEPGRAPH_RATE_LIMIT=0 turns the limit off.
func TestAPIRateLimitOff(t *testing.T) {
	h, key, _ := apiOnEmulator(t, map[string]string{EnvRateLimit: "0"})
	for i := range 5 {
		if resp := serve(t, h, keyed("GET", "/v2/auth/providers", key)); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
}

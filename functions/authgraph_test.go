package functions_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/store"
)

// describeRuntime deploys, on the emulator, a Python Lambda that answers
// the runtime protocol's describe with config (a graph config, documents
// inline), and returns its ARN: a deployment whose custom_url it is serves
// those graphs.
func (g *grantsTest) describeRuntime(ctx context.Context, name string, config any) string {
	t := g.t
	t.Helper()
	doc, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf("import json\nCONFIG = json.loads(%q)\n\n"+
		"def lambda_handler(event, context=None):\n"+
		"    if isinstance(event, dict) and event.get(\"action\") == \"describe\":\n"+
		"        return CONFIG\n"+
		"    raise ValueError(\"describe only\")\n", doc)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("runtime.py")
	if err == nil {
		_, err = w.Write([]byte(src))
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	lc := lambda.NewFromConfig(g.plain)
	out, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName: aws.String(g.calls.prefix + name),
		Runtime:      ltypes.RuntimePython311,
		Handler:      aws.String("runtime.lambda_handler"),
		Role:         aws.String("arn:aws:iam::000000000000:role/grants-test-runtime"),
		Code:         &ltypes.FunctionCode{ZipFile: buf.Bytes()},
		Timeout:      aws.Int32(30),
	})
	if err != nil {
		t.Fatalf("create the runtime %s: %v", name, err)
	}
	waiter := lambda.NewFunctionActiveV2Waiter(lc, func(o *lambda.FunctionActiveV2WaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
	})
	if err := waiter.Wait(ctx, &lambda.GetFunctionInput{FunctionName: out.FunctionArn}, time.Minute); err != nil {
		t.Fatalf("runtime %s: %v", name, err)
	}
	return aws.ToString(out.FunctionArn)
}

// authGraph: a deployed graph whose http node carries auth runs in the
// run-worker, which reads agent auth's records, the vault and the
// provider's client secret, as on AWS:
//
//   - the user's stored token is about to expire: the worker reads it from
//     the vault and refreshes it with the provider's client secret; the
//     token endpoint cannot answer here (no test reaches the internet), so
//     the token is marked unusable and the run interrupts with a new
//     authorization (PKCE: the organization's key), its redirect URI on the
//     public URL (EnvPublicURL, the worker has no request to take it from);
//   - a usable token is then stored (as a code exchange would) and the run
//     resumed: the node sends it to the resource server. The worker's
//     outbound guard refuses loopback addresses (deployed graphs reach no
//     private address on AWS), so the call is refused before it leaves:
//     the run fails naming the host only, where without the token it
//     would have interrupted again. The bearer header itself is proved on
//     a real server by internal/api's TestAgentAuthInGraph.
func (g *grantsTest) authGraph(ctx context.Context) {
	t := g.t
	var mu sync.Mutex
	var seen []string
	// https: a deployed document's URLs must be (http only for loopback
	// in development, which the functions are not).
	resource := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"repos": ["alpha"]}`)
	}))
	defer resource.Close()
	resURL, _ := url.Parse(resource.URL)

	g.must("POST", "/v2/auth/providers", map[string]any{"provider_id": "res", "name": "Resource", "client_id": "res-client",
		"client_secret": "s3cret-res", "uses_pkce": true,
		"auth_url": "https://idp.invalid/authorize", "token_url": "https://idp.invalid/token"}, "idempotency-key", uuid.NewString())
	arn := g.describeRuntime(ctx, "auth-runtime", map[string]any{"graphs": map[string]any{"repos": map[string]any{
		"state": map[string]any{"repos": map[string]any{}},
		"nodes": map[string]any{"list": map[string]any{"kind": "http", "url": resource.URL + "/repos",
			"auth":   map[string]any{"provider": "res", "scopes": []string{"read"}},
			"update": map[string]any{"repos": "{{ response.body.repos }}"}}},
		"edges": []any{map[string]any{"from": "__start__", "to": "list"}},
	}}})
	d := g.must("POST", "/v2/deployments", map[string]any{"name": "auth-graph", "source": "external_docker",
		"source_config":          map[string]any{"custom_url": arn},
		"source_revision_config": map[string]any{"image_uri": "registry.example/auth:1"}}, "idempotency-key", uuid.NewString())
	dep := d["id"].(string)
	if !g.becomes("/v2/deployments/"+dep, "READY") {
		execs, err := g.sfn.ListExecutions(ctx, &awssfn.ListExecutionsInput{StateMachineArn: aws.String(g.calls.deployARN)})
		if err == nil {
			for _, e := range execs.Executions {
				t.Logf("deploy execution %s %s", aws.ToString(e.Name), e.Status)
			}
		}
		_, logs := g.call("POST", "/v1/projects/"+dep+"/deploy_logs", map[string]any{})
		t.Fatalf("the deployment of the auth graph never became READY: %v; deploy logs %s", err, logs)
	}

	// The user's token, stored by an earlier consent, about to expire.
	now := time.Now()
	const expiring = "at-expiring-Qx7"
	ref, err := g.vault.Create(ctx, "agentauth/"+g.orgID+"/res/u2", []byte(`{"access_token":"`+expiring+`","refresh_token":"rt-expiring"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.tables.PutAgentToken(ctx, store.AgentToken{ID: uuid.NewString(), OrgID: g.orgID, UserID: "u2", ProviderID: "res",
		Scopes: []string{"read"}, SecretRef: ref, ExpiresAt: now.Add(30 * time.Second), Usable: true, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}

	th := g.must("POST", "/threads", map[string]any{})["thread_id"].(string)
	run := map[string]any{"assistant_id": "repos", "input": map[string]any{}, "context": map[string]any{"user_id": "u2"}}
	out := g.must("POST", "/threads/"+th+"/runs/wait", run)
	ints, _ := out["__interrupt__"].([]any)
	if len(ints) != 1 {
		t.Fatalf("the graph node without a usable token: no interrupt: %v", out)
	}
	value, _ := ints[0].(map[string]any)["value"].(map[string]any)
	authURL, err := url.Parse(fmt.Sprint(value["auth_url"]))
	if err != nil || value["provider"] != "res" || authURL.Host != "idp.invalid" || authURL.Path != "/authorize" {
		t.Fatalf("interrupt value: %v", value)
	}
	q := authURL.Query()
	if got := q.Get("redirect_uri"); got != "https://stepgraph.example.test/v2/auth/callback/res" {
		t.Errorf("the interrupt's redirect_uri %q, want it on the public URL", got)
	}
	if q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256" || q.Get("state") == "" {
		t.Errorf("the interrupt's authorization URL has no PKCE challenge or state: %s", authURL)
	}
	if strings.Contains(fmt.Sprint(out), expiring) {
		t.Errorf("the run's answer shows the token: %v", out)
	}

	// A usable token, stored as a code exchange stores it; the resume
	// runs the node again, now with it.
	const usable = "at-usable-Hn3"
	ref, err = g.vault.Create(ctx, "agentauth/"+g.orgID+"/res/u2", []byte(`{"access_token":"`+usable+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	now = time.Now()
	if _, err := g.tables.PutAgentToken(ctx, store.AgentToken{ID: uuid.NewString(), OrgID: g.orgID, UserID: "u2", ProviderID: "res",
		Scopes: []string{"read"}, SecretRef: ref, ExpiresAt: now.Add(time.Hour), Usable: true, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	out = g.must("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "repos",
		"command": map[string]any{"resume": "done"}, "context": map[string]any{"user_id": "u2"}})
	failure := fmt.Sprint(out["__error__"])
	if out["__interrupt__"] != nil || !strings.Contains(failure, "host "+resURL.Hostname()+" is refused") {
		t.Fatalf("the resumed run: %v, want the node's call refused by the outbound guard (loopback), past the token", out)
	}
	if strings.Contains(fmt.Sprint(out), usable) {
		t.Errorf("the run's error shows the token: %v", out)
	}
	mu.Lock()
	if len(seen) != 0 {
		t.Errorf("the loopback resource server was reached through the guard: %d calls", len(seen))
	}
	mu.Unlock()

	g.must("DELETE", "/v2/auth/tokens?provider_id=res", nil)
	g.must("DELETE", "/v2/auth/providers/res", nil)
	g.must("DELETE", "/v2/deployments/"+dep, nil)
	g.waitGone("/v2/deployments/" + dep)
	if _, err := lambda.NewFromConfig(g.plain).DeleteFunction(ctx, &lambda.DeleteFunctionInput{FunctionName: aws.String(arn)}); err != nil {
		var gone *ltypes.ResourceNotFoundException
		if !errors.As(err, &gone) {
			t.Errorf("delete the runtime: %v", err)
		}
	}
}

// becomes polls until the resource has the status, and says whether it
// did (a generous deadline, as waitStatus).
func (g *grantsTest) becomes(path, want string) bool {
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		status, raw := g.call("GET", path, nil)
		var body struct{ Status string }
		if status == 200 && json.Unmarshal([]byte(raw), &body) == nil && body.Status == want {
			return true
		}
	}
	return false
}

package stack

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/stepgraph/stepgraph/internal/cors"
)

// apiFunctionEnv is the environment of every function by name (without the
// resource prefix).
func functionEnvs(js map[string]any, stage string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, r := range resources(js, "AWS::Lambda::Function") {
		p := props(r)
		name := strings.TrimPrefix(p["FunctionName"].(string), ResourcePrefix(stage))
		env, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		out[name] = env
	}
	return out
}

func isAPIFunction(name string) bool {
	i := slices.IndexFunc(Functions, func(f FunctionSpec) bool { return f.Name == name })
	return i >= 0 && Functions[i].API
}

// The default stage: CORS for LangGraph Studio on both APIs — the HTTP
// API's own configuration, a MOCK OPTIONS method on every REST resource (no
// preflight reaches a function, so none reaches system's 405), the
// allow-list in the API functions' environment (their answers' headers) —
// and the WAF web ACL on the REST API's stage.
func TestEdgeCORSAndWAF(t *testing.T) {
	_, js := synth(t)
	for id, a := range resources(js, "AWS::ApiGatewayV2::Api") {
		got, _ := json.Marshal(props(a)["CorsConfiguration"])
		want, _ := json.Marshal(map[string]any{"AllowHeaders": cors.AllowHeaders, "AllowMethods": cors.Methods,
			"AllowOrigins": DefaultCORSOrigins, "ExposeHeaders": cors.ExposeHeaders, "MaxAge": cors.MaxAge})
		if string(got) != string(want) {
			t.Errorf("HTTP API %s CORS %s, want %s", id, got, want)
		}
	}

	// Every path of a route answers a preflight in a function that serves
	// it (ANY, or OPTIONS where two functions share the path): system only
	// for its own paths, never as the catch-all's 405. All of them have
	// the allow-list (below).
	methods, _ := restMethodsOf(t, js)
	for _, op := range openapiOperations(t) {
		method, path, _ := strings.Cut(op, " ")
		fn, ok := methods["ANY "+path]
		if !ok {
			fn, ok = methods["OPTIONS "+path]
		}
		own, _ := briefFunction(method, path)
		if !ok || (fn == FnSystem && own != FnSystem) {
			t.Errorf("a preflight of %s reaches %q", path, fn)
		}
	}

	for name, env := range functionEnvs(js, testStage) {
		got, ok := env[EnvCORSOrigins]
		if isAPIFunction(name) != ok || (ok && got != strings.Join(DefaultCORSOrigins, ",")) {
			t.Errorf("%s: %s = %v (set %v), want the allow-list on API functions only", name, EnvCORSOrigins, got, ok)
		}
	}

	acls := resources(js, "AWS::WAFv2::WebACL")
	if len(acls) != 1 {
		t.Fatalf("%d web ACLs, want 1", len(acls))
	}
	var aclID string
	for id, acl := range acls {
		aclID = id
		p := props(acl)
		if p["Scope"] != "REGIONAL" || p["DefaultAction"] == nil {
			t.Errorf("web ACL %v", p)
		}
		rules, _ := p["Rules"].([]any)
		if len(rules) != 2 {
			t.Fatalf("rules %v", rules)
		}
		want := []string{
			`{"AggregateKeyType":"CUSTOM_KEYS","CustomKeys":[{"Header":{"Name":"x-api-key","TextTransformations":[{"Priority":0,"Type":"NONE"}]}}],"EvaluationWindowSec":60,"Limit":6000}`,
			`{"AggregateKeyType":"IP","EvaluationWindowSec":300,"Limit":30000}`,
		}
		for i, r := range rules {
			rule := r.(map[string]any)
			got, _ := json.Marshal(rule["Statement"].(map[string]any)["RateBasedStatement"])
			if string(got) != want[i] {
				t.Errorf("rule %v: %s, want %s", rule["Name"], got, want[i])
			}
			action, _ := json.Marshal(rule["Action"])
			if string(action) != `{"Block":{"CustomResponse":{"CustomResponseBodyKey":"rate-limited","ResponseCode":429}}}` {
				t.Errorf("rule %v: action %s, want a 429", rule["Name"], action)
			}
		}
		// No sampled requests anywhere: WAF would keep their headers, API
		// keys included.
		if raw, _ := json.Marshal(p); strings.Contains(string(raw), `"SampledRequestsEnabled":true`) || !strings.Contains(string(raw), `"SampledRequestsEnabled":false`) {
			t.Errorf("the web ACL keeps sampled requests (their X-Api-Key headers): %s", raw)
		}
		body, _ := json.Marshal(p["CustomResponseBodies"])
		if !strings.Contains(string(body), `\"detail\"`) {
			t.Errorf("the 429's body %s is not the API's error shape", body)
		}
	}
	assocs := resources(js, "AWS::WAFv2::WebACLAssociation")
	if len(assocs) != 1 {
		t.Fatalf("%d web ACL associations, want 1", len(assocs))
	}
	for _, a := range assocs {
		p := props(a)
		if got := str(p["WebACLArn"]); got != "{GetAtt:"+aclID+".Arn}" {
			t.Errorf("association's web ACL %s", got)
		}
		if got := str(p["ResourceArn"]); !strings.Contains(got, "/restapis/{Ref:RestApi") || !strings.HasSuffix(got, "/stages/{Ref:RestApiDeploymentStageapi"+got[strings.LastIndex(got, "Stageapi")+8:]) {
			t.Errorf("association's resource %s, want the REST API's stage", got)
		}
	}

	// CloudFormation takes at most 500 resources in a stack. The stack was
	// at 459 on 2026-12-07, most of them routes: 105 HTTP API routes, 98
	// REST resources and 84 REST methods. The guard leaves room for a few
	// more functions; the step after it is the REST API in a nested stack
	// (one resource here), docs/aws.md "Not done here".
	if all, _ := js["Resources"].(map[string]any); len(all) > 475 {
		t.Errorf("%d resources: too close to CloudFormation's 500", len(all))
	}
}

// Set edge properties reach the template; NoCORS and NoWAF take the edge
// away (an emulator without WAF).
func TestEdgeCORSAndWAFFromProps(t *testing.T) {
	synthWith := func(e EdgeProps) map[string]any {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
		s, err := New(app, "edge", Props{Stage: "edge", RepoRoot: repoRoot(t), LambdaDir: placeholderLambdas(t), Edge: e})
		if err != nil {
			t.Fatal(err)
		}
		return *assertions.Template_FromStack(s, nil).ToJSON()
	}
	js := synthWith(EdgeProps{CORSOrigins: []string{"https://app.example.com", "http://localhost:3000"}, WAFKeyLimit: 120, WAFIPLimit: 1000})
	for _, a := range resources(js, "AWS::ApiGatewayV2::Api") {
		if got, _ := json.Marshal(props(a)["CorsConfiguration"].(map[string]any)["AllowOrigins"]); string(got) != `["https://app.example.com","http://localhost:3000"]` {
			t.Errorf("HTTP API origins %s", got)
		}
	}
	for name, env := range functionEnvs(js, "edge") {
		if isAPIFunction(name) && env[EnvCORSOrigins] != "https://app.example.com,http://localhost:3000" {
			t.Errorf("%s: %v", name, env[EnvCORSOrigins])
		}
	}
	for _, acl := range resources(js, "AWS::WAFv2::WebACL") {
		raw, _ := json.Marshal(props(acl)["Rules"])
		if !strings.Contains(string(raw), `"Limit":120`) || !strings.Contains(string(raw), `"Limit":1000`) {
			t.Errorf("limits %s", raw)
		}
	}

	js = synthWith(EdgeProps{NoCORS: true, NoWAF: true})
	if n := len(resources(js, "AWS::WAFv2::WebACL")) + len(resources(js, "AWS::WAFv2::WebACLAssociation")); n != 0 {
		t.Errorf("NoWAF: %d WAF resources", n)
	}
	for _, a := range resources(js, "AWS::ApiGatewayV2::Api") {
		if props(a)["CorsConfiguration"] != nil {
			t.Errorf("NoCORS: HTTP API CORS %v", props(a)["CorsConfiguration"])
		}
	}
	for id, m := range resources(js, "AWS::ApiGateway::Method") {
		if props(m)["HttpMethod"] == "OPTIONS" {
			t.Errorf("NoCORS: OPTIONS method %s", id)
		}
	}
	for name, env := range functionEnvs(js, "edge") {
		if _, ok := env[EnvCORSOrigins]; ok {
			t.Errorf("NoCORS: %s has %s", name, EnvCORSOrigins)
		}
	}
}

func TestEdgePropsRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    EdgeProps
		err  string
	}{
		{"defaults", EdgeProps{}, ""},
		{"wildcard", EdgeProps{CORSOrigins: []string{"*"}}, ""},
		{"origin with a path", EdgeProps{CORSOrigins: []string{"https://a.example/app"}}, "corsOrigins"},
		{"key limit under WAF's minimum", EdgeProps{WAFKeyLimit: 5}, "wafKeyLimit 5"},
		{"negative address limit", EdgeProps{WAFIPLimit: -1}, "wafIpLimit -1"},
	} {
		e := tc.e
		err := e.check()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.err)
		}
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/stepgraph/stepgraph/infra/stack"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close() // stops the node process and removes its temporary directory
	os.Exit(code)
}

type template struct {
	Resources map[string]struct {
		Type           string
		Properties     map[string]any
		DeletionPolicy string
	}
}

// synthApp runs the app as `cdk synth` does, with context (plus a lambdaDir
// of placeholder bootstraps), and returns the template of stack id. The
// main module is found from the working directory (infra/).
func synthApp(t *testing.T, id string, context map[string]any) template {
	t.Helper()
	lambdas := t.TempDir()
	for _, f := range stack.Functions {
		if err := os.MkdirAll(filepath.Join(lambdas, f.Name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(lambdas, f.Name, "bootstrap"), []byte(f.Name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	context["lambdaDir"] = lambdas
	out := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out), Context: &context})
	if err := build(app); err != nil {
		t.Fatal(err)
	}
	app.Synth(nil)
	raw, err := os.ReadFile(filepath.Join(out, id+".template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl template
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func TestAppSynthesizesFromContext(t *testing.T) {
	tmpl := synthApp(t, "stepgraph-ci", map[string]any{
		"stage": "ci", "arch": "x86_64", "logLevel": "debug", "retain": "false",
		"throttleRate": "25", "throttleBurst": "50", "runWorkerConcurrency": "none",
		"deployWorkerConcurrency": "3", "accountConcurrency": "110", "rateLimit": "7", "expressRuns": "false",
	})
	fns, tables, machines := 0, 0, 0
	for id, r := range tmpl.Resources {
		switch r.Type {
		case "AWS::StepFunctions::StateMachine":
			// expressRuns=false: the run and deploy machines, both Standard.
			machines++
			if r.Properties["StateMachineType"] != "STANDARD" {
				t.Errorf("%s: type %v with expressRuns=false", id, r.Properties["StateMachineType"])
			}
		case "AWS::IAM::Policy":
			if doc, _ := json.Marshal(r.Properties); strings.Contains(string(doc), "run-express") {
				t.Errorf("%s: a grant on the Express front with expressRuns=false: %s", id, doc)
			}
		case "AWS::Lambda::Function":
			fns++
			name, _ := r.Properties["FunctionName"].(string)
			env, _ := r.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
			arch, _ := r.Properties["Architectures"].([]any)
			if !strings.HasPrefix(name, "stepgraph-ci-") || env["STEPGRAPH_LOG_LEVEL"] != "debug" ||
				len(arch) != 1 || arch[0] != "x86_64" {
				t.Errorf("%s: name %v, log level %v, architectures %v", id, name, env["STEPGRAPH_LOG_LEVEL"], arch)
			}
			var reserved any
			if name == "stepgraph-ci-deploy-worker" {
				reserved = float64(3)
			}
			if got := r.Properties["ReservedConcurrentExecutions"]; got != reserved {
				t.Errorf("%s: reserved concurrency %v, want %v", name, got, reserved)
			}
			if api := !strings.HasSuffix(name, "-worker") && name != "stepgraph-ci-cron-fire" && name != "stepgraph-ci-teardown"; api != (env["STEPGRAPH_RATE_LIMIT"] == "7") {
				t.Errorf("%s: STEPGRAPH_RATE_LIMIT %v", name, env["STEPGRAPH_RATE_LIMIT"])
			}
			if v, ok := env[stack.EnvRunExpressStateMachineARN]; ok {
				t.Errorf("%s: %s = %v with expressRuns=false", name, stack.EnvRunExpressStateMachineARN, v)
			}
		case "AWS::ApiGatewayV2::Stage":
			if got, _ := json.Marshal(r.Properties["DefaultRouteSettings"]); string(got) != `{"ThrottlingBurstLimit":50,"ThrottlingRateLimit":25}` {
				t.Errorf("%s: throttle %s", id, got)
			}
		case "AWS::DynamoDB::Table":
			tables++
			if r.DeletionPolicy != "Delete" {
				t.Errorf("%s: deletion policy %q with retain=false", id, r.DeletionPolicy)
			}
		}
	}
	// The functions and the teardown's (the deploy-worker's bootstrap).
	if fns != len(stack.Functions)+1 || tables != 7 || machines != 2 {
		t.Errorf("%d functions, %d tables and %d state machines", fns, tables, machines)
	}
}

// Without context the stack is stage dev on arm64, keeps its data, and has
// the edge's defaults.
func TestAppDefaults(t *testing.T) {
	tmpl := synthApp(t, "stepgraph-dev", map[string]any{})
	express, teardowns := 0, 0
	for id, r := range tmpl.Resources {
		switch r.Type {
		case "AWS::StepFunctions::StateMachine":
			if r.Properties["StateMachineType"] == "EXPRESS" {
				express++
			}
		case "AWS::Lambda::Function":
			if arch, _ := r.Properties["Architectures"].([]any); len(arch) != 1 || arch[0] != "arm64" {
				t.Errorf("%s: architectures %v", id, arch)
			}
			want := map[string]any{"stepgraph-dev-run-worker": float64(stack.DefaultRunWorkerConcurrency),
				"stepgraph-dev-deploy-worker": float64(stack.DefaultDeployWorkerConcurrency)}
			name, _ := r.Properties["FunctionName"].(string)
			if got := r.Properties["ReservedConcurrentExecutions"]; got != want[name] {
				t.Errorf("%s: reserved concurrency %v, want %v", name, got, want[name])
			}
		case "AWS::ApiGatewayV2::Stage":
			got, _ := json.Marshal(r.Properties["DefaultRouteSettings"])
			if want := fmt.Sprintf(`{"ThrottlingBurstLimit":%d,"ThrottlingRateLimit":%d}`, stack.DefaultThrottleBurst, stack.DefaultThrottleRate); string(got) != want {
				t.Errorf("%s: throttle %s, want %s", id, got, want)
			}
		case "AWS::DynamoDB::Table", "AWS::Logs::LogGroup", "AWS::S3::Bucket":
			// Kept, except by the rollback of a failed first create: the
			// next create of the same names then finds none of them.
			if r.DeletionPolicy != "RetainExceptOnCreate" {
				t.Errorf("%s: deletion policy %q, want RetainExceptOnCreate by default", id, r.DeletionPolicy)
			}
		case "Custom::Teardown":
			teardowns++
			if r.Properties[stack.TeardownRetainProperty] != "true" {
				t.Errorf("%s: %s %v, want true: the teardown keeps the secrets of a stack that keeps its data", id,
					stack.TeardownRetainProperty, r.Properties[stack.TeardownRetainProperty])
			}
		case "AWS::IAM::Policy":
			// The teardown of a stack keeping its data deletes no
			// secret and no payload.
			if doc, _ := json.Marshal(r.Properties); strings.Contains(string(doc), "secretsmanager:DeleteSecret") &&
				strings.Contains(string(doc), "lambda:ListFunctions") {
				t.Errorf("%s: the teardown may delete secrets of a stack that keeps its data: %s", id, doc)
			}
		}
	}
	if teardowns != 1 {
		t.Errorf("%d teardown custom resources, want 1", teardowns)
	}
	if express != 1 {
		t.Errorf("%d Express state machines, want the run machine's front by default", express)
	}
}

// Context values of the edge that are not numbers (or none) fail the
// synth, naming the key; 0 is refused for a reservation (to Lambda it
// stops the function).
func TestEdgeContext(t *testing.T) {
	for _, tc := range []struct {
		key, value, err string
	}{
		{"throttleRate", "fast", "throttleRate"},
		{"throttleRate", "0", "throttleRate"},
		{"throttleBurst", "1.5", "throttleBurst"},
		{"throttleBurst", "none", "throttleBurst"},
		{"runWorkerConcurrency", "0", "none for no reservation"},
		{"runWorkerConcurrency", "-3", "runWorkerConcurrency"},
		{"deployWorkerConcurrency", "ten", "deployWorkerConcurrency"},
		{"accountConcurrency", "none", "accountConcurrency"},
		{"runWorkerConcurrency", "none", ""},
		{"throttleRate", "0.5", ""},
		{"rateLimit", "0", ""},
		{"corsOrigins", "https://app.example.com,http://localhost:3000", ""},
		{"corsOrigins", "none", ""},
		{"corsOrigins", "*", ""},
		{"corsOrigins", "https://app.example.com/ui", "corsOrigins"},
		{"waf", "false", ""},
		{"waf", "off", "waf"},
		{"wafKeyLimit", "120", ""},
		{"wafKeyLimit", "lots", "wafKeyLimit"},
		{"wafIpLimit", "0", "wafIpLimit"},
	} {
		ctx := func(key, def string) string {
			if key == tc.key {
				return tc.value
			}
			return def
		}
		_, err := edgeContext(ctx)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s=%s: %v", tc.key, tc.value, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s=%s: %v, want an error with %q", tc.key, tc.value, err, tc.err)
		}
	}
}

// The repository root's cdk.json runs the same app as infra/cdk.json (the
// design card puts cdk.json at the root): the pinned CLI, run from the
// root, synthesizes the stack into infra/cdk.out, with the same context.
func TestCDKFromRepositoryRoot(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	read := func(path string) map[string]any {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return m
	}
	rootCfg, infraCfg := read(filepath.Join(root, "cdk.json")), read(filepath.Join(root, "infra", "cdk.json"))
	if fmt.Sprint(rootCfg["context"]) != fmt.Sprint(infraCfg["context"]) {
		t.Errorf("context: root %v, infra %v", rootCfg["context"], infraCfg["context"])
	}
	cdk, err := filepath.Abs("node_modules/.bin/cdk")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cdk); err != nil {
		t.Fatalf("the pinned CDK CLI (scripts/install-cdk.sh): %v", err)
	}
	lambdas := t.TempDir()
	for _, f := range stack.Functions {
		if err := os.MkdirAll(filepath.Join(lambdas, f.Name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(lambdas, f.Name, "bootstrap"), []byte(f.Name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stage := "rootcheck"
	out := filepath.Join(root, "infra", "cdk.out", "stepgraph-"+stage+".template.json")
	_ = os.Remove(out)
	t.Cleanup(func() { _ = os.Remove(out) })
	cmd := exec.Command(cdk, "synth", "--quiet", "--no-notices", "--no-version-reporting", "-c", "stage="+stage, "-c", "lambdaDir="+lambdas)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CDK_DISABLE_VERSION_CHECK=1", "CDK_DISABLE_CLI_TELEMETRY=true", "AWS_EC2_METADATA_DISABLED=true")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cdk synth from the repository root: %v\n%s", err, b)
	}
	var tmpl template
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("cdk synth from the root wrote no %s: %v", out, err)
	}
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	functions := 0
	for _, r := range tmpl.Resources {
		if r.Type == "AWS::Lambda::Function" {
			functions++
		}
	}
	if functions != len(stack.Functions)+1 { // and the teardown's
		t.Errorf("%d functions in the root's synth, want %d", functions, len(stack.Functions)+1)
	}
}

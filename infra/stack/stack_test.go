package stack

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/jsii-runtime-go"
	"gopkg.in/yaml.v3"

	"github.com/stepgraph/stepgraph/internal/awsflow"
	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

const testStage = "test"

// repoRoot is the main module's directory (this package is infra/stack).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "internal", "api", "openapi.yaml")); err != nil {
		t.Fatal(err)
	}
	return root
}

// placeholderLambdas writes an empty bootstrap per function: the synth only
// hashes and stages the directories, so the template does not depend on
// `make lambdas` having run.
func placeholderLambdas(t testing.TB) string {
	dir := t.TempDir()
	for _, f := range Functions {
		if err := os.MkdirAll(filepath.Join(dir, f.Name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name, "bootstrap"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	placeholderCLI(t, dir)
	return dir
}

// placeholderCLI writes an empty stepgraph CLI for the app builds' asset.
func placeholderCLI(t testing.TB, lambdas string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(lambdas, BuildCLIDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lambdas, BuildCLIDir, "stepgraph"), []byte("cli"), 0o755); err != nil {
		t.Fatal(err)
	}
}

var (
	synthOnce sync.Once
	synthTmpl assertions.Template
	synthJSON map[string]any
	synthErr  error
	synthOut  string // the cloud assembly directory
	tempDirs  []string
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range tempDirs {
		os.RemoveAll(d)
	}
	jsii.Close() // stops the node process and removes its temporary directory
	os.Exit(code)
}

// synth synthesizes the stack once per test binary (the jsii runtime makes
// it take seconds) for the tests to share.
func synth(t *testing.T) (assertions.Template, map[string]any) {
	t.Helper()
	synthOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stepgraph-infra-test-")
		if err != nil {
			synthErr = err
			return
		}
		tempDirs = append(tempDirs, dir)
		lambdas := filepath.Join(dir, "lambdas")
		for _, f := range Functions {
			// A bootstrap per function, different for each (so each is
			// its own asset), and the bootstrap.zip `make lambdas` also
			// writes, which the asset must leave out.
			if err = os.MkdirAll(filepath.Join(lambdas, f.Name), 0o755); err == nil {
				err = os.WriteFile(filepath.Join(lambdas, f.Name, "bootstrap"), []byte(f.Name), 0o755)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(lambdas, f.Name, "bootstrap.zip"), []byte("zip"), 0o644)
			}
			if err != nil {
				synthErr = err
				return
			}
		}
		placeholderCLI(t, lambdas)
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(dir, "cdk.out"))})
		s, err := New(app, "stepgraph-"+testStage, Props{Stage: testStage, RepoRoot: repoRoot(t), LambdaDir: lambdas})
		if err != nil {
			synthErr = err
			return
		}
		synthTmpl = assertions.Template_FromStack(s, nil)
		synthJSON = *synthTmpl.ToJSON()
		synthOut = filepath.Join(dir, "cdk.out")
	})
	if synthErr != nil {
		t.Fatal(synthErr)
	}
	return synthTmpl, synthJSON
}

// assert runs an assertion of the assertions package, which panics when it
// fails, as a test error.
func assert(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%v", r)
		}
	}()
	f()
}

// resources returns the template's resources of one type by logical ID.
func resources(tmpl map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	all, _ := tmpl["Resources"].(map[string]any)
	for id, r := range all {
		res, _ := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// str renders a value with intrinsic functions as text: Fn::Join joined,
// {Ref:X}, {GetAtt:X.Y}, so ARNs built by the stack can be compared.
func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		if j, ok := v["Fn::Join"].([]any); ok && len(j) == 2 {
			sep, _ := j[0].(string)
			parts, _ := j[1].([]any)
			var ss []string
			for _, p := range parts {
				ss = append(ss, str(p))
			}
			return strings.Join(ss, sep)
		}
		if r, ok := v["Ref"].(string); ok {
			return "{Ref:" + r + "}"
		}
		if g, ok := v["Fn::GetAtt"].([]any); ok && len(g) == 2 {
			return fmt.Sprintf("{GetAtt:%v.%v}", g[0], g[1])
		}
	}
	return fmt.Sprint(v)
}

func TestTablesMatchTableDefinitions(t *testing.T) {
	tmpl, js := synth(t)
	defs := dynamo.TableDefinitionsFor(dynamo.DeployedOptions(TablePrefix(testStage)))
	assert(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(len(defs))) })
	tables := map[string]map[string]any{}
	for _, r := range resources(js, "AWS::DynamoDB::Table") {
		tables[props(r)["TableName"].(string)] = r
	}
	// On AWS the Step Functions execution owns a run (ClaimRunByID): the
	// queue index, which only ClaimRun reads, is not deployed (nor does a
	// run write the lease index, which stays for its other partitions),
	// and the indexes whose readers get items by key copy keys only
	// (review findings #3, #5, #20).
	projections := map[string]string{}
	for _, r := range resources(js, "AWS::DynamoDB::Table") {
		gsis, _ := props(r)["GlobalSecondaryIndexes"].([]any)
		for _, g := range gsis {
			g := g.(map[string]any)
			projections[strings.TrimPrefix(props(r)["TableName"].(string), TablePrefix(testStage))+":"+g["IndexName"].(string)] =
				g["Projection"].(map[string]any)["ProjectionType"].(string)
		}
	}
	wantProjections := map[string]string{"threads:org": "KEYS_ONLY", "threads:lease": "ALL", "deployments:status": "KEYS_ONLY", "crons:due": "ALL"}
	if !reflect.DeepEqual(projections, wantProjections) {
		t.Errorf("indexes: %v, want %v", projections, wantProjections)
	}
	for _, in := range defs {
		name := aws.ToString(in.TableName)
		r, ok := tables[name]
		if !ok {
			t.Errorf("no table %s", name)
			continue
		}
		p := props(r)
		// The expected CloudFormation properties, built from the
		// CreateTable input here rather than by the stack's translation.
		keys := func(ks any) []any {
			var out []any
			v := reflect.ValueOf(ks)
			for i := range v.Len() {
				e := v.Index(i)
				out = append(out, map[string]any{
					"AttributeName": aws.ToString(e.FieldByName("AttributeName").Interface().(*string)),
					"KeyType":       fmt.Sprint(e.FieldByName("KeyType").Interface()),
				})
			}
			return out
		}
		var attrs []any
		for _, a := range in.AttributeDefinitions {
			attrs = append(attrs, map[string]any{"AttributeName": aws.ToString(a.AttributeName), "AttributeType": string(a.AttributeType)})
		}
		want := map[string]any{
			"TableName":                        name,
			"BillingMode":                      "PAY_PER_REQUEST",
			"AttributeDefinitions":             attrs,
			"KeySchema":                        keys(in.KeySchema),
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
		}
		if len(in.GlobalSecondaryIndexes) > 0 {
			var gsis []any
			for _, g := range in.GlobalSecondaryIndexes {
				gsis = append(gsis, map[string]any{
					"IndexName":  aws.ToString(g.IndexName),
					"KeySchema":  keys(g.KeySchema),
					"Projection": map[string]any{"ProjectionType": string(g.Projection.ProjectionType)},
				})
			}
			want["GlobalSecondaryIndexes"] = gsis
		}
		short := strings.TrimPrefix(name, TablePrefix(testStage))
		if short == dynamo.TableIdempotency || short == dynamo.TableThreads {
			want["TimeToLiveSpecification"] = map[string]any{"AttributeName": "ttl", "Enabled": true}
		}
		if !reflect.DeepEqual(p, want) {
			t.Errorf("table %s:\n got %v\nwant %v", name, p, want)
		}
	}
}

func TestFunctions(t *testing.T) {
	tmpl, js := synth(t)
	// The functions and the teardown's (TestTeardown).
	assert(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(len(Functions)+1)) })
	// One per function, the Express front's (TestStateMachines), the
	// runtimes', the teardown's (TestTeardown) and the app builds'
	// (TestAppBuildProject).
	assert(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::Logs::LogGroup"), jsii.Number(len(Functions)+4)) })
	byName := map[string]map[string]any{}
	for _, r := range resources(js, "AWS::Lambda::Function") {
		byName[props(r)["FunctionName"].(string)] = props(r)
	}
	names := []string{"create-provider", "create-deployment", "thread-run-wait", "stateless-run-wait",
		"providers", "deployments", "assistants", "threads", "runs", "run-stream", "system", "run-worker", "deploy-worker",
		"crons", "cron-fire"}
	streams := map[string]bool{}
	for _, f := range routesFunctions(t) {
		streams[f.Name] = f.Stream
	}
	prefix := ResourcePrefix(testStage)
	for _, n := range names {
		p, ok := byName[prefix+n]
		if !ok {
			t.Errorf("no function %s", prefix+n)
			continue
		}
		if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" ||
			!reflect.DeepEqual(p["Architectures"], []any{"arm64"}) {
			t.Errorf("function %s: runtime %v handler %v architectures %v", n, p["Runtime"], p["Handler"], p["Architectures"])
		}
		// The asset holds the function's bootstrap and nothing else.
		key, _ := p["Code"].(map[string]any)["S3Key"].(string)
		staged := filepath.Join(synthOut, "asset."+strings.TrimSuffix(key, ".zip"))
		entries, err := os.ReadDir(staged)
		if err != nil || len(entries) != 1 || entries[0].Name() != "bootstrap" {
			t.Errorf("function %s: asset %s holds %v (%v), want its bootstrap only", n, staged, entries, err)
		} else if b, _ := os.ReadFile(filepath.Join(staged, "bootstrap")); string(b) != n {
			t.Errorf("function %s: asset holds the bootstrap of %q", n, b)
		}
		env, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		wantEnv := 5
		if n == FnDeployWorker {
			// The role of the runtimes it makes from images, and their
			// log group.
			wantEnv = 7
			if got := str(env[EnvRuntimeRoleARN]); got != "{GetAtt:Roleruntime"+roleSuffix(t, js)+".Arn}" {
				t.Errorf("deploy-worker: %s = %s, want the runtime role's ARN", EnvRuntimeRoleARN, got)
			}
			if got := str(env[EnvRuntimeLogGroup]); got != "{Ref:"+runtimesLogGroupID(t, js)+"}" {
				t.Errorf("deploy-worker: %s = %s, want the runtimes' log group", EnvRuntimeLogGroup, got)
			}
		}
		if n == FnCrons || n == FnCronFire {
			// Where the crons' schedules are: group, target, role.
			wantEnv = 8
			for k, want := range map[string]string{
				EnvCronScheduleGroup: "stepgraph-test-crons",
				EnvCronTargetARN:     "arn:{Ref:AWS::Partition}:lambda:{Ref:AWS::Region}:{Ref:AWS::AccountId}:function:stepgraph-test-cron-fire",
				EnvCronRoleARN:       "{GetAtt:" + roleNamed(t, js, "Rolecronscheduler") + ".Arn}",
			} {
				if got := str(env[k]); got != want {
					t.Errorf("function %s: %s = %s, want %s", n, k, got, want)
				}
			}
		}
		if n != FnSystem {
			// Every function that reaches a table reaches the payloads.
			wantEnv++
			if got := str(env[EnvPayloadBucket]); got != "{Ref:"+payloadBucketID(t, js)+"}" {
				t.Errorf("function %s: %s = %s, want the payload bucket", n, EnvPayloadBucket, got)
			}
		}
		if n == FnProviders {
			// The vault's KMS key (TestVaultKey).
			wantEnv++
		}
		if slices.Contains(routesGrants(t)[n].Executions, "start-run-express") {
			// The run machine's Express front, where runs start.
			wantEnv++
			if got, want := str(env[EnvRunExpressStateMachineARN]), "arn:{Ref:AWS::Partition}:states:{Ref:AWS::Region}:{Ref:AWS::AccountId}:stateMachine:stepgraph-test-run-express"; got != want {
				t.Errorf("function %s: %s = %s, want %s", n, EnvRunExpressStateMachineARN, got, want)
			}
		}
		if isAPIFunction(n) {
			// The stage's CORS allow-list (TestEdgeCORSAndWAF).
			wantEnv++
		}
		if n == FnRunWorker {
			// The vault's KMS key, the public URL of graph nodes'
			// authorization URLs and the tenant role (TestVaultKey,
			// TestPublicURL, TestTenantRole).
			wantEnv += 3
		}
		if slices.Contains(routesGrants(t)[n].Builds, BuildsStart) {
			// The app builds' project (TestAppBuildProject).
			wantEnv++
			if got := str(env[EnvBuildProject]); got != "stepgraph-test-app-build" {
				t.Errorf("function %s: %s = %s", n, EnvBuildProject, got)
			}
		}
		if len(env) != wantEnv {
			t.Errorf("function %s: environment %v, want the %d STEPGRAPH_ variables", n, env, wantEnv)
		}
		for k, want := range map[string]string{
			"STEPGRAPH_TABLE_PREFIX":             "stepgraph-test-",
			"STEPGRAPH_SECRETS_PREFIX":           "stepgraph/test/",
			"STEPGRAPH_LOG_LEVEL":                "info",
			"STEPGRAPH_RUN_STATE_MACHINE_ARN":    "arn:{Ref:AWS::Partition}:states:{Ref:AWS::Region}:{Ref:AWS::AccountId}:stateMachine:stepgraph-test-run",
			"STEPGRAPH_DEPLOY_STATE_MACHINE_ARN": "arn:{Ref:AWS::Partition}:states:{Ref:AWS::Region}:{Ref:AWS::AccountId}:stateMachine:stepgraph-test-deploy",
		} {
			if got := str(env[k]); got != want {
				t.Errorf("function %s: %s = %s, want %s", n, k, got, want)
			}
		}
		timeout, _ := p["Timeout"].(float64)
		isAPI := !strings.HasSuffix(n, "-worker") && n != FnCronFire
		switch {
		case isAPI && streams[n] && timeout != 900:
			t.Errorf("API function %s streams: timeout %v s, want the 900 s a REST API streams a response", n, timeout)
		case isAPI && !streams[n] && (timeout < 10 || timeout > 29):
			t.Errorf("API function %s: timeout %v s, want within the 29 s of a buffered integration", n, timeout)
		}
		if !isAPI && timeout < 60 {
			t.Errorf("worker %s: timeout %v s", n, timeout)
		}
		if lc, _ := p["LoggingConfig"].(map[string]any); lc["LogGroup"] == nil {
			t.Errorf("function %s: no log group of its own: %v", n, p["LoggingConfig"])
		}
	}
	for _, r := range resources(js, "AWS::Logs::LogGroup") {
		if props(r)["RetentionInDays"] == nil {
			t.Errorf("log group %v without retention", props(r)["LogGroupName"])
		}
	}
}

// The state machines' ARNs the functions get must be the ones declared.
func TestStateMachines(t *testing.T) {
	tmpl, js := synth(t)
	assert(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::StepFunctions::StateMachine"), jsii.Number(3)) })
	fnID := map[string]string{}
	for id, r := range resources(js, "AWS::Lambda::Function") {
		fnID[strings.TrimPrefix(props(r)["FunctionName"].(string), ResourcePrefix(testStage))] = id
	}
	runASL, deployASL := Definitions()
	want := map[string]struct {
		asl  string
		subs map[string]string
	}{
		"stepgraph-test-run":    {runASL, map[string]string{"RunWorkerArn": fnID[FnRunWorker]}},
		"stepgraph-test-deploy": {deployASL, map[string]string{"DeployWorkerArn": fnID[FnDeployWorker]}},
	}
	seen := 0
	for id, r := range resources(js, "AWS::StepFunctions::StateMachine") {
		p := props(r)
		name, _ := p["StateMachineName"].(string)
		if name == "stepgraph-test-run-express" {
			checkExpressMachine(t, js, id, p, fnID[FnRunWorker])
			continue
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("unexpected state machine %s", name)
			continue
		}
		seen++
		if p["StateMachineType"] != "STANDARD" {
			t.Errorf("%s: type %v, want STANDARD", name, p["StateMachineType"])
		}
		if str(p["DefinitionString"]) != w.asl {
			t.Errorf("%s: definition differs from internal/awsflow's", name)
		}
		subs, _ := p["DefinitionSubstitutions"].(map[string]any)
		if len(subs) != len(w.subs) {
			t.Errorf("%s: substitutions %v, want %v", name, subs, w.subs)
		}
		for k, fn := range w.subs {
			if got := str(subs[k]); got != "{GetAtt:"+fn+".Arn}" {
				t.Errorf("%s: ${%s} = %s, want the ARN of %s", name, k, got, fn)
			}
		}
		// The role may invoke the worker and nothing else.
		roleID := strings.TrimSuffix(strings.TrimPrefix(str(p["RoleArn"]), "{GetAtt:"), ".Arn}")
		for _, st := range statementsOfRole(js, roleID) {
			if st.actions() == strings.Join(XRayMachineActions, ",") && strings.Join(st.resources(), ",") == "*" {
				continue // tracing (TestTracingAndAlarms)
			}
			if st.actions() != "lambda:InvokeFunction" {
				t.Errorf("%s: role statement %v", name, st)
			}
			for _, res := range st.resources() {
				if !slices.ContainsFunc(slices.Collect(mapValues(w.subs)), func(fn string) bool {
					return strings.HasPrefix(res, "{GetAtt:"+fn+".Arn}")
				}) {
					t.Errorf("%s: may invoke %s", name, res)
				}
			}
		}
	}
	if seen != 2 {
		t.Errorf("found %d of the 2 state machines", seen)
	}
	outputs, _ := js["Outputs"].(map[string]any)
	for o, want := range map[string]string{
		"ApiUrl":                "https://{Ref:RestApi",
		"HttpApiUrl":            "{GetAtt:HttpApi",
		"RunStateMachineArn":    "{Ref:StateMachinerun",
		"DeployStateMachineArn": "{Ref:StateMachinedeploy",
	} {
		out, _ := outputs[o].(map[string]any)
		if got := str(out["Value"]); !strings.HasPrefix(got, want) {
			t.Errorf("output %s = %q, want %s...", o, got, want)
		}
	}
}

func mapValues(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// openapiOperations lists "METHOD /path" of every operation of the document,
// read here independently of RoutesFromOpenAPI.
func openapiOperations(t *testing.T) []string {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "internal", "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for path, item := range doc.Paths {
		for m := range item {
			switch m {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				ops = append(ops, strings.ToUpper(m)+" "+path)
			}
		}
	}
	sort.Strings(ops)
	if len(ops) < 10 {
		t.Fatalf("only %d operations in the document", len(ops))
	}
	return ops
}

// Every operation of the OpenAPI document has a route, to the function the
// brief's rules assign (briefFunction: functions/routes.json must agree),
// and there is no other route but $default.
func TestEveryOperationHasARoute(t *testing.T) {
	_, js := synth(t)
	fnByID := map[string]string{}
	for id, r := range resources(js, "AWS::Lambda::Function") {
		fnByID[id] = strings.TrimPrefix(props(r)["FunctionName"].(string), ResourcePrefix(testStage))
	}
	fnByIntegration := map[string]string{}
	for id, r := range resources(js, "AWS::ApiGatewayV2::Integration") {
		p := props(r)
		uri := str(p["IntegrationUri"])
		id2 := strings.TrimSuffix(strings.TrimPrefix(uri, "{GetAtt:"), ".Arn}")
		if fnByID[id2] == "" || p["IntegrationType"] != "AWS_PROXY" || p["PayloadFormatVersion"] != "2.0" {
			t.Errorf("integration %s: %v", id, p)
		}
		fnByIntegration[id] = fnByID[id2]
	}
	routes := map[string]string{}
	for _, r := range resources(js, "AWS::ApiGatewayV2::Route") {
		p := props(r)
		key := p["RouteKey"].(string)
		target := strings.TrimPrefix(str(p["Target"]), "integrations/{Ref:")
		target = strings.TrimSuffix(target, "}")
		if _, dup := routes[key]; dup {
			t.Errorf("route %s declared twice", key)
		}
		routes[key] = fnByIntegration[target]
	}
	for _, op := range openapiOperations(t) {
		method, path, _ := strings.Cut(op, " ")
		want, err := briefFunction(method, path)
		if err != nil {
			t.Error(err)
			continue
		}
		got, ok := routes[op]
		if !ok {
			t.Errorf("operation %s has no route", op)
			continue
		}
		if got != want {
			t.Errorf("route %s goes to %q, want %q", op, got, want)
		}
		delete(routes, op)
	}
	if routes["$default"] != FnSystem {
		t.Errorf("$default route goes to %q, want %s", routes["$default"], FnSystem)
	}
	delete(routes, "$default")
	if len(routes) > 0 {
		t.Errorf("routes not in the OpenAPI document: %v", routes)
	}
	// Every API function serves a route; the workers serve none.
	served := map[string]bool{}
	for _, fn := range fnByIntegration {
		served[fn] = true
	}
	for _, f := range Functions {
		if served[f.Name] != f.API {
			t.Errorf("function %s: serves routes %v, API %v", f.Name, served[f.Name], f.API)
		}
	}
	apis := resources(js, "AWS::ApiGatewayV2::Api")
	if len(apis) != 1 {
		t.Fatalf("%d HTTP APIs", len(apis))
	}
	for _, a := range apis {
		if props(a)["ProtocolType"] != "HTTP" {
			t.Errorf("API protocol %v", props(a)["ProtocolType"])
		}
	}
	for _, st := range resources(js, "AWS::ApiGatewayV2::Stage") {
		if props(st)["StageName"] != "$default" {
			t.Errorf("stage %v: a named stage would prefix every path", props(st)["StageName"])
		}
	}
}

// briefFunction is the assignment of operations to functions the stack was
// specified with: the four seeded endpoints have their own function, every
// other operation goes to the function of its resource group.
func briefFunction(method, path string) (string, error) {
	under := func(prefix string) bool {
		return path == prefix || strings.HasPrefix(path, prefix+"/")
	}
	// segs: the path's segments with every {parameter} as "{}".
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i] = "{}"
		}
	}
	is := func(pattern ...string) bool { return slices.Equal(segs, pattern) }
	threadRuns := len(segs) >= 3 && segs[0] == "threads" && segs[1] == "{}" && segs[2] == "runs"
	switch {
	case method == "POST" && is("v2", "auth", "providers"):
		return FnCreateProvider, nil
	case under("/v2/auth/providers"), under("/v2/auth"):
		// The /v2/auth group: the provider registry and agent auth.
		return FnProviders, nil
	case method == "POST" && is("v2", "deployments"):
		return FnCreateDeployment, nil
	case under("/v2/deployments"), under("/v1/projects"): // a project is a deployment (its logs)
		return FnDeployments, nil
	case method == "POST" && is("threads", "{}", "runs", "wait"):
		return FnThreadRunWait, nil
	case method == "POST" && is("runs", "wait"):
		return FnStatelessRunWait, nil
	case method == "POST" && (is("threads", "{}", "runs", "stream") || is("runs", "stream")),
		method == "GET" && (is("threads", "{}", "runs", "{}", "stream") || is("threads", "{}", "runs", "{}", "join") || is("threads", "{}", "stream")),
		method == "POST" && is("threads", "{}", "stream", "events"):
		return FnRunStream, nil
	case under("/assistants"), under("/ui"): // the JS SDK's getComponent names an assistant
		return FnAssistants, nil
	case under("/runs/crons"), threadRuns && len(segs) == 4 && segs[3] == "crons":
		return FnCrons, nil
	case threadRuns, under("/runs"):
		return FnRuns, nil
	case is("threads", "{}", "commands"), is("mcp"), under("/a2a"), is(".well-known", "agent-card.json"):
		// The thread event protocol's commands start runs, and MCP and A2A
		// run assistants as the runs routes do: the runs function has the
		// grants (the threads function starts no run).
		return FnRuns, nil
	case under("/threads"), is("metrics"):
		// GET /metrics reads the organization's run queue on its threads.
		return FnThreads, nil
	case under("/store"):
		return FnStore, nil
	case under("/runtime"):
		return FnAppCalls, nil
	case is("ok"), is("info"), is("openapi.json"), under("/docs"), is("v2", "graph-schema"), is("v2", "graph-config-schema"),
		path == "/", under("/console"): // the web console (internal/console)
		return FnSystem, nil
	}
	return "", fmt.Errorf("no function is specified for %s %s", method, path)
}

func TestAssignRejectsDrift(t *testing.T) {
	ops := []string{"GET /ok", "POST /runs/wait"}
	ok := []FunctionEntry{
		{Name: "system", Role: "api", Routes: []string{"GET /ok"}},
		{Name: "stateless-run-wait", Role: "api", Routes: []string{"POST /runs/wait"}},
		{Name: "run-worker", Role: "run-worker"},
	}
	routes, err := assign(ops, ok)
	if err != nil || len(routes) != 2 || routes[1] != (Route{"POST", "/runs/wait", "stateless-run-wait", false}) {
		t.Fatalf("assign: %v, %v", routes, err)
	}
	for name, c := range map[string]struct {
		ops []string
		fns []FunctionEntry
		err string
	}{
		"operation without a function": {append(ops, "GET /info"), ok, "GET /info of internal/api/openapi.yaml has no function"},
		"route not in the document":    {ops[:1], ok, "not an operation"},
		"operation routed twice": {ops, append(slices.Clone(ok),
			FunctionEntry{Name: "runs", Role: "api", Routes: []string{"POST /runs/wait"}}), "routed to both"},
		"worker with routes": {ops, append(slices.Clone(ok),
			FunctionEntry{Name: "deploy-worker", Role: "deploy-worker", Routes: []string{"GET /ok"}}), "has routes"},
	} {
		if _, err := assign(c.ops, c.fns); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.err)
		}
	}
}

func TestCheckFunctions(t *testing.T) {
	var entries []FunctionEntry
	for _, f := range Functions {
		role := "api"
		if !f.API {
			role = f.Name
		}
		entries = append(entries, FunctionEntry{Name: f.Name, Role: role, Stream: f.Timeout == streamTimeout})
	}
	tables := []string{"organizations", "threads"}
	if err := checkFunctions(entries, tables); err != nil {
		t.Fatal(err)
	}
	// A streamed function needs the 15 minutes of a streamed response; a
	// buffered one no more than its integration waits.
	for i, e := range entries {
		if e.Role != "api" {
			continue
		}
		flipped := slices.Clone(entries)
		flipped[i].Stream = !e.Stream
		if err := checkFunctions(flipped, tables); err == nil {
			t.Errorf("%s with stream=%v and its timeout went unnoticed", e.Name, !e.Stream)
		}
	}
	if err := checkFunctions(append(slices.Clone(entries), FunctionEntry{Name: "webhook", Role: "api"}), tables); err == nil {
		t.Error("a function without a spec went unnoticed")
	}
	if err := checkFunctions(entries[1:], tables); err == nil {
		t.Error("a spec without a function went unnoticed")
	}
	bad := slices.Clone(entries)
	bad[len(bad)-1].Role = "api"
	if err := checkFunctions(bad, tables); err == nil {
		t.Error("a worker routed as an API function went unnoticed")
	}
	// A word of the grants the stack does not know fails: a grant is never
	// dropped or widened by a typo.
	for name, g := range map[string]Grants{
		"unknown table":    {Tables: map[string]string{"thread": "read"}},
		"unknown access":   {Tables: map[string]string{"threads": "admin"}},
		"unknown kind":     {Secrets: map[string][]string{"keys": {"get"}}},
		"unknown action":   {Secrets: map[string][]string{"orgs": {"rotate"}}},
		"no action":        {Secrets: map[string][]string{"orgs": {}}},
		"unknown machine":  {Executions: []string{"start-cron"}},
		"unknown runtimes": {Runtimes: []string{"admin"}},
	} {
		bad := slices.Clone(entries)
		bad[0].Grants = g
		if err := checkFunctions(bad, tables); err == nil {
			t.Errorf("%s: went unnoticed", name)
		}
	}
}

type statement map[string]any

func (s statement) list(key string) []string {
	switch v := s[key].(type) {
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, str(e))
		}
		return out
	case nil:
		return nil
	default:
		return []string{str(v)}
	}
}
func (s statement) actions() string     { return strings.Join(s.list("Action"), ",") }
func (s statement) resources() []string { return s.list("Resource") }

// statementsOfRole returns the statements of every policy attached to the
// role with the logical ID, inline or AWS::IAM::Policy.
func statementsOfRole(js map[string]any, roleID string) []statement {
	var out []statement
	add := func(doc any) {
		d, _ := doc.(map[string]any)
		sts, _ := d["Statement"].([]any)
		for _, s := range sts {
			m, _ := s.(map[string]any)
			out = append(out, statement(m))
		}
	}
	if role, ok := resources(js, "AWS::IAM::Role")[roleID]; ok {
		pols, _ := props(role)["Policies"].([]any)
		for _, p := range pols {
			pm, _ := p.(map[string]any)
			add(pm["PolicyDocument"])
		}
	}
	for _, r := range resources(js, "AWS::IAM::Policy") {
		p := props(r)
		roles, _ := p["Roles"].([]any)
		for _, ro := range roles {
			if str(ro) == "{Ref:"+roleID+"}" {
				add(p["PolicyDocument"])
			}
		}
	}
	return out
}

// routesGrants reads every function's grants from functions/routes.json,
// here, apart from the stack's own reading.
func routesGrants(t *testing.T) map[string]Grants {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "functions", "routes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fns []struct {
		Name   string `json:"name"`
		Grants Grants `json:"grants"`
	}
	if err := json.Unmarshal(raw, &fns); err != nil {
		t.Fatal(err)
	}
	out := map[string]Grants{}
	for _, f := range fns {
		out[f.Name] = f.Grants
	}
	if len(out) != len(Functions) {
		t.Fatalf("routes.json lists %d functions, the stack %d", len(out), len(Functions))
	}
	return out
}

// No IAM statement is on every resource, no managed policy is attached, and
// each function's role holds exactly the grants functions/routes.json gives
// it (F15 of the 2026-11 security review: every role had every table and
// every secret), translated here on their own: tables at their access,
// indexes queried only, secrets by kind under their own prefix, the state
// machines' actions, the runtimes. MiniStack enforces no IAM, so this test
// is what holds the roles; functions/grants_test holds the grants to what
// the functions do.
func TestLeastPrivilege(t *testing.T) {
	_, js := synth(t)
	for id, r := range resources(js, "AWS::IAM::Policy") {
		doc, _ := props(r)["PolicyDocument"].(map[string]any)
		sts, _ := doc["Statement"].([]any)
		for _, s := range sts {
			st := statement(s.(map[string]any))
			if st["Effect"] != "Allow" {
				continue
			}
			for _, res := range st.resources() {
				xray := st.actions() == strings.Join(XRayActions, ",") || st.actions() == strings.Join(XRayMachineActions, ",")
				logDelivery := slices.Equal(sorted(st.list("Action")), sorted(LogDeliveryActions))
				// The teardown's listings have no resource-level permissions either.
				listing := st.actions() == "lambda:ListFunctions" || st.actions() == "secretsmanager:ListSecrets"
				if res == "*" && !xray && !logDelivery && !listing { // X-Ray and log delivery have no resource-level permissions
					t.Errorf("policy %s: %s on every resource", id, st.actions())
				}
				if strings.HasSuffix(res, ":secret:stepgraph/test/*") && st["Condition"] == nil {
					t.Errorf("policy %s: %s on every secret of the stage, not one kind's", id, st.actions())
				}
			}
			for _, a := range st.list("Action") {
				if strings.Contains(a, "*") {
					t.Errorf("policy %s: wildcard action %s", id, a)
				}
				if a == "dynamodb:Scan" || a == "dynamodb:BatchGetItem" || a == "dynamodb:DescribeTable" || a == "secretsmanager:DescribeSecret" {
					t.Errorf("policy %s: %s, which no function calls", id, a)
				}
			}
		}
	}
	for id, r := range resources(js, "AWS::IAM::Role") {
		if props(r)["ManagedPolicyArns"] != nil {
			t.Errorf("role %s: managed policies %v", id, props(r)["ManagedPolicyArns"])
		}
	}
	tableID := map[string]string{} // table name without the prefix → logical ID
	hasIndexes := map[string]bool{}
	for tid, tr := range resources(js, "AWS::DynamoDB::Table") {
		name := strings.TrimPrefix(props(tr)["TableName"].(string), TablePrefix(testStage))
		tableID[name] = tid
		hasIndexes[name] = props(tr)["GlobalSecondaryIndexes"] != nil
	}
	const (
		arnHead     = "arn:{Ref:AWS::Partition}:states:{Ref:AWS::Region}:{Ref:AWS::AccountId}:"
		secretsHead = "arn:{Ref:AWS::Partition}:secretsmanager:{Ref:AWS::Region}:{Ref:AWS::AccountId}:secret:stepgraph/test/"
		runtimes    = "arn:{Ref:AWS::Partition}:lambda:{Ref:AWS::Region}:{Ref:AWS::AccountId}:function:stepgraph-test-rt-*"
		schedules   = "arn:{Ref:AWS::Partition}:scheduler:{Ref:AWS::Region}:{Ref:AWS::AccountId}:schedule/stepgraph-test-crons/*"
		logActions  = "logs:CreateLogStream,logs:PutLogEvents"
		readActions = "dynamodb:GetItem,dynamodb:Query,dynamodb:ConditionCheckItem"
	)
	tableActions := map[string]string{
		"read":  readActions,
		"write": readActions + ",dynamodb:PutItem,dynamodb:UpdateItem,dynamodb:DeleteItem,dynamodb:BatchWriteItem",
	}
	// create and delete read the owner's map and write it back with
	// compare-and-set (internal/secrets/aws, grouped values).
	casWrite := []string{"secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "secretsmanager:UpdateSecretVersionStage"}
	secretActions := map[string][]string{"create": append([]string{"secretsmanager:CreateSecret", "secretsmanager:TagResource"}, casWrite...),
		"get": {"secretsmanager:GetSecretValue"}, "delete": append([]string{"secretsmanager:DeleteSecret"}, casWrite...)}
	executions := map[string][2]string{
		"start-run":         {"states:StartExecution", arnHead + "stateMachine:stepgraph-test-run"},
		"start-run-express": {"states:StartExecution", arnHead + "stateMachine:stepgraph-test-run-express"},
		"describe-run":      {"states:DescribeExecution", arnHead + "execution:stepgraph-test-run:*"},
		"start-deploy":      {"states:StartExecution", arnHead + "stateMachine:stepgraph-test-deploy"},
		"list-deploy":       {"states:ListExecutions", arnHead + "stateMachine:stepgraph-test-deploy"},
		"wake-run":          {"states:SendTaskSuccess", arnHead + "stateMachine:stepgraph-test-run"},
	}
	table := routesGrants(t)
	for _, r := range resources(js, "AWS::Lambda::Function") {
		p := props(r)
		name := strings.TrimPrefix(p["FunctionName"].(string), ResourcePrefix(testStage))
		if name == TeardownFunctionName {
			continue // not in routes.json: TestTeardown
		}
		g, ok := table[name]
		if !ok {
			t.Errorf("function %s is not in routes.json", name)
			continue
		}
		roleID := strings.TrimSuffix(strings.TrimPrefix(str(p["Role"]), "{GetAtt:"), ".Arn}")
		got := map[string][]string{}
		for _, st := range statementsOfRole(js, roleID) {
			got[st.actions()] = append(got[st.actions()], st.resources()...)
		}
		want := map[string][]string{logActions: nil} // the log group: checked below
		if name != FnSystem {
			want[strings.Join(XRayActions, ",")] = []string{"*"} // active tracing
		}
		for tname, access := range g.Tables {
			key := tableActions[access]
			want[key] = append(want[key], "{GetAtt:"+tableID[tname]+".Arn}")
			if hasIndexes[tname] {
				want["dynamodb:Query"] = append(want["dynamodb:Query"], "{GetAtt:"+tableID[tname]+".Arn}/index/*")
			}
		}
		for kind, actions := range g.Secrets {
			var iam []string
			for _, a := range actions {
				for _, x := range secretActions[a] {
					if !slices.Contains(iam, x) {
						iam = append(iam, x)
					}
				}
			}
			sort.Strings(iam)
			key := strings.Join(iam, ",")
			want[key] = append(want[key], secretsHead+kind+"/*")
		}
		for _, e := range g.Executions {
			want[executions[e][0]] = append(want[executions[e][0]], executions[e][1])
		}
		switch g.PayloadAccess() {
		case "write":
			bucket := "{GetAtt:" + payloadBucketID(t, js) + ".Arn}"
			want["s3:GetObject,s3:PutObject,s3:DeleteObject"] = []string{bucket + "/*"}
			want["s3:ListBucket"] = []string{bucket}
		case "read":
			want["s3:GetObject"] = []string{"{GetAtt:" + payloadBucketID(t, js) + ".Arn}/*"}
		}
		if slices.Contains(g.Runtimes, "invoke") {
			want["lambda:InvokeFunction"] = []string{runtimes}
		}
		if slices.Contains(g.Runtimes, "manage") {
			want["lambda:CreateFunction,lambda:TagResource,lambda:UpdateFunctionCode,lambda:UpdateFunctionConfiguration,lambda:GetFunction,lambda:DeleteFunction"] = []string{runtimes}
			want["iam:PassRole"] = []string{"{GetAtt:Roleruntime" + roleSuffix(t, js) + ".Arn}"}
			want["ecr:BatchGetImage,ecr:GetDownloadUrlForLayer"] = []string{"arn:{Ref:AWS::Partition}:ecr:{Ref:AWS::Region}:{Ref:AWS::AccountId}:repository/*"}
		}
		if name == FnRunWorker { // the asynchronous invocations it failed on (TestRunFailuresRule)
			want["sqs:SendMessage"] = []string{"{GetAtt:" + runFailuresQueueID(t, js) + ".Arn}"}
		}
		if g.Tenant != nil { // its tenant role (TestTenantRole)
			want["sts:AssumeRole,sts:TagSession"] = []string{"{GetAtt:" + roleNamed(t, js, "Role"+strings.ReplaceAll(name, "-", "")+"tenant") + ".Arn}"}
		}
		if len(g.Vault) > 0 {
			want["kms:Decrypt,kms:GenerateDataKey"] = []string{"{GetAtt:" + vaultKeyID(t, js) + ".Arn}"}
		}
		if slices.Contains(g.Builds, BuildsStart) { // TestAppBuildProject
			want["codebuild:StartBuild,codebuild:BatchGetBuilds"] = []string{"{GetAtt:AppBuild.Arn}"}
			want["logs:GetLogEvents"] = []string{"{GetAtt:" + appBuildLogsID(t, js) + ".Arn}"}
		}
		if slices.Contains(g.Schedules, "manage") {
			want["scheduler:CreateSchedule,scheduler:UpdateSchedule,scheduler:DeleteSchedule"] = []string{schedules}
			want["iam:PassRole"] = []string{"{GetAtt:" + roleNamed(t, js, "Rolecronscheduler") + ".Arn}"}
		}
		lc, _ := p["LoggingConfig"].(map[string]any)
		logGroup := strings.TrimSuffix(strings.TrimPrefix(str(lc["LogGroup"]), "{Ref:"), "}")
		if logs := got[logActions]; len(logs) != 1 || logs[0] != "{GetAtt:"+logGroup+".Arn}" {
			t.Errorf("%s: logs on %v, want its log group %s", name, logs, logGroup)
		}
		got[logActions] = nil
		for k := range got {
			sort.Strings(got[k])
		}
		for k := range want {
			sort.Strings(want[k])
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: grants\n got %v\nwant %v", name, got, want)
		}
	}
}

// vaultKeyID is the logical ID of the vault's KMS key.
// appBuildLogsID is the logical ID of the app builds' log group.
func appBuildLogsID(t *testing.T, js map[string]any) string {
	t.Helper()
	for id, r := range resources(js, "AWS::Logs::LogGroup") {
		if str(props(r)["LogGroupName"]) == "/aws/codebuild/stepgraph-test-app-build" {
			return id
		}
	}
	t.Fatal("no log group /aws/codebuild/stepgraph-test-app-build")
	return ""
}

// The builds of hosted_repo LangGraph apps: one CodeBuild project, python
// 3.11 on the stack's architecture, the buildspec of awsflow, the CLI as
// an asset, its own log group; its role may read a build's source, write
// its zip and manifest, read the CLI and write the project's logs, and
// nothing else. Only the deploy worker may start and read its builds
// (TestLeastPrivilege).
func TestAppBuildProject(t *testing.T) {
	_, js := synth(t)
	projects := resources(js, "AWS::CodeBuild::Project")
	if len(projects) != 1 {
		t.Fatalf("%d CodeBuild projects, want 1", len(projects))
	}
	p := props(projects["AppBuild"])
	env, _ := p["Environment"].(map[string]any)
	src, _ := p["Source"].(map[string]any)
	if str(p["Name"]) != "stepgraph-test-app-build" || str(env["Type"]) != "ARM_CONTAINER" ||
		str(env["Image"]) != BuildImages["arm64"] || str(src["Type"]) != "NO_SOURCE" || str(src["BuildSpec"]) != awsflow.AppBuildspec {
		t.Errorf("project %v", p)
	}
	vars, _ := env["EnvironmentVariables"].([]any)
	if len(vars) != 1 || str(vars[0].(map[string]any)["Name"]) != awsflow.BuildEnvCLI ||
		!strings.Contains(str(vars[0].(map[string]any)["Value"]), "s3://") {
		t.Errorf("project environment variables %v, want the CLI's asset", vars)
	}
	logsCfg, _ := p["LogsConfig"].(map[string]any)
	cw, _ := logsCfg["CloudWatchLogs"].(map[string]any)
	logsID := appBuildLogsID(t, js)
	if str(cw["Status"]) != "ENABLED" || str(cw["GroupName"]) != "{Ref:"+logsID+"}" {
		t.Errorf("project logs %v", logsCfg)
	}
	roleID := strings.TrimSuffix(strings.TrimPrefix(str(p["ServiceRole"]), "{GetAtt:"), ".Arn}")
	trust := str(props(resources(js, "AWS::IAM::Role")[roleID])["AssumeRolePolicyDocument"])
	if !strings.Contains(trust, "codebuild.amazonaws.com") {
		t.Errorf("role %s trusts %s", roleID, trust)
	}
	got := map[string][]string{}
	for _, st := range statementsOfRole(js, roleID) {
		if str(st["Effect"]) != "Allow" {
			t.Errorf("statement %v", st)
		}
		got[str(st["Sid"])+" "+st.actions()] = st.resources()
	}
	bucket := "{GetAtt:" + payloadBucketID(t, js) + ".Arn}"
	if len(got) != 4 || !reflect.DeepEqual(got["ReadSource s3:GetObject"], []string{bucket + "/builds/*/source.zip"}) ||
		!reflect.DeepEqual(got["WriteBuild s3:PutObject"], []string{bucket + "/builds/*/app.zip", bucket + "/builds/*/stepgraph_build.json"}) ||
		!reflect.DeepEqual(got["WriteLogs logs:CreateLogStream,logs:PutLogEvents"], []string{"{GetAtt:" + logsID + ".Arn}"}) ||
		len(got["ReadCLI s3:GetObject"]) != 1 || !strings.Contains(got["ReadCLI s3:GetObject"][0], "cdk-") {
		t.Errorf("the build role's statements %v", got)
	}
}

func vaultKeyID(t *testing.T, js map[string]any) string {
	t.Helper()
	keys := resources(js, "AWS::KMS::Key")
	if len(keys) != 1 {
		t.Fatalf("%d KMS keys, want 1 (the vault's)", len(keys))
	}
	for id := range keys {
		return id
	}
	return ""
}

// Agent auth's vault: one KMS key, rotated; only the functions granted
// vault actions (the /v2/auth group's, the run-worker for graph nodes
// with auth, app-calls for LangGraph apps' get_token) get it, in their environment and in
// a statement that holds only under the vault's encryption context.
func TestVaultKey(t *testing.T) {
	_, js := synth(t)
	id := vaultKeyID(t, js)
	key := resources(js, "AWS::KMS::Key")[id]
	if props(key)["EnableKeyRotation"] != true {
		t.Errorf("vault key: rotation %v, want on", props(key)["EnableKeyRotation"])
	}
	table := routesGrants(t)
	granted := 0
	for _, r := range resources(js, "AWS::Lambda::Function") {
		p := props(r)
		name := strings.TrimPrefix(p["FunctionName"].(string), ResourcePrefix(testStage))
		env, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		g := table[name]
		got, has := env[EnvVaultKeyID]
		if has != opensVault(g) || (has && str(got) != "{GetAtt:"+id+".Arn}") {
			t.Errorf("%s: %s = %v (set %v), want the vault key's ARN exactly when granted vault actions (%v)", name, EnvVaultKeyID, got, has, g.Vault)
		}
		roleID := strings.TrimSuffix(strings.TrimPrefix(str(p["Role"]), "{GetAtt:"), ".Arn}")
		for _, st := range statementsOfRole(js, roleID) {
			if !strings.HasPrefix(st.actions(), "kms:") {
				continue
			}
			granted++
			cond, _ := json.Marshal(st["Condition"])
			want := `{"ForAllValues:StringEquals":{"kms:EncryptionContextKeys":["stepgraph:vault"]},"StringLike":{"kms:EncryptionContext:stepgraph:vault":"agentauth/*"}}`
			if string(cond) != want {
				t.Errorf("%s: KMS statement condition %s, want %s", name, cond, want)
			}
		}
	}
	// The run-worker opens it in its tenant sessions only
	// (TestTenantRole: under agentauth/<the session's org>/*).
	if granted != 2 {
		t.Errorf("%d functions' roles may use the vault key, want 2 (providers; app-calls, for LangGraph apps' get_token)", granted)
	}
	for _, fn := range []string{FnProviders, FnAppCalls} {
		if g := table[fn]; !slices.Equal(g.Vault, []string{"create", "get", "delete"}) {
			t.Errorf("%s: vault %v", fn, g.Vault)
		}
	}
	if g := table[FnRunWorker]; len(g.Vault) > 0 || g.Tenant == nil || !slices.Equal(g.Tenant.Vault, []string{"create", "get", "delete"}) {
		t.Errorf("%s: vault %v, tenant %+v", FnRunWorker, g.Vault, g.Tenant)
	}
}

// STEPGRAPH_PUBLIC_URL: by default only the run-worker has it, the REST
// API's URL (graph nodes' authorization URLs; the API functions take the
// API Gateway address of each request), with no cycle; with a publicUrl,
// which must be https, the API functions and the run-worker have that.
func TestPublicURL(t *testing.T) {
	_, js := synth(t)
	restURL := ""
	for _, r := range resources(js, "AWS::Lambda::Function") {
		name := strings.TrimPrefix(props(r)["FunctionName"].(string), ResourcePrefix(testStage))
		env, _ := props(r)["Environment"].(map[string]any)["Variables"].(map[string]any)
		v, ok := env[EnvPublicURL]
		if name == FnRunWorker {
			restURL = str(v)
			continue
		}
		if ok {
			t.Errorf("%v: %s = %v without publicUrl", props(r)["FunctionName"], EnvPublicURL, v)
		}
	}
	// The REST API's URL: its id, region, and its stage (api).
	stages := resources(js, "AWS::ApiGateway::Stage")
	restIDs := resources(js, "AWS::ApiGateway::RestApi")
	if len(stages) != 1 || len(restIDs) != 1 {
		t.Fatalf("%d REST stages, %d REST APIs", len(stages), len(restIDs))
	}
	for stageID, st := range stages {
		for apiID := range restIDs {
			want := "https://{Ref:" + apiID + "}.execute-api.{Ref:AWS::Region}.{Ref:AWS::URLSuffix}/{Ref:" + stageID + "}/"
			if restURL != want || props(st)["StageName"] != "api" {
				t.Errorf("run-worker: %s = %s, want the REST API's URL %s (stage %v)", EnvPublicURL, restURL, want, props(st)["StageName"])
			}
		}
	}
	if cycle := dependencyCycle(js); cycle != nil {
		t.Errorf("the template has a dependency cycle: %v", cycle)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	s, err := New(app, "pub", Props{Stage: "pub", RepoRoot: repoRoot(t), LambdaDir: placeholderLambdas(t),
		PublicURL: "https://agents.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	pub := *assertions.Template_FromStack(s, nil).ToJSON()
	for _, r := range resources(pub, "AWS::Lambda::Function") {
		p := props(r)
		name := strings.TrimPrefix(p["FunctionName"].(string), ResourcePrefix("pub"))
		env, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		if name == TeardownFunctionName {
			if _, ok := env[EnvPublicURL]; ok {
				t.Errorf("the teardown has %s", EnvPublicURL)
			}
			continue
		}
		spec := Functions[slices.IndexFunc(Functions, func(f FunctionSpec) bool { return f.Name == name })]
		want := spec.API || name == FnRunWorker
		if got, ok := env[EnvPublicURL]; ok != want || (ok && got != "https://agents.example.com") {
			t.Errorf("%s: %s = %v (set %v), want it on API functions and the run-worker only", name, EnvPublicURL, got, ok)
		}
	}
	for _, bad := range []string{"http://agents.example.com", "https://", "https://a.example/?x=1", "https://u:p@a.example"} {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
		if _, err := New(app, "bad", Props{Stage: "bad", RepoRoot: repoRoot(t), LambdaDir: placeholderLambdas(t), PublicURL: bad}); err == nil {
			t.Errorf("publicUrl %q: no error", bad)
		}
	}
}

// dependencyCycle is a cycle of the template's resources (through Ref,
// Fn::GetAtt and DependsOn), as CloudFormation would refuse it, or nil.
func dependencyCycle(js map[string]any) []string {
	all, _ := js["Resources"].(map[string]any)
	deps := map[string][]string{}
	var walk func(id string, v any)
	walk = func(id string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["Ref"].(string); ok && all[ref] != nil {
				deps[id] = append(deps[id], ref)
			}
			if ga, ok := x["Fn::GetAtt"].([]any); ok && len(ga) > 0 {
				if ref, _ := ga[0].(string); all[ref] != nil {
					deps[id] = append(deps[id], ref)
				}
			}
			for _, e := range x {
				walk(id, e)
			}
		case []any:
			for _, e := range x {
				walk(id, e)
			}
		}
	}
	for id, r := range all {
		res, _ := r.(map[string]any)
		walk(id, res["Properties"])
		switch d := res["DependsOn"].(type) {
		case string:
			deps[id] = append(deps[id], d)
		case []any:
			for _, e := range d {
				deps[id] = append(deps[id], e.(string))
			}
		}
	}
	state := map[string]int{} // 1 on the path, 2 done
	var path []string
	var visit func(id string) []string
	visit = func(id string) []string {
		switch state[id] {
		case 1:
			return append(slices.Clone(path[slices.Index(path, id):]), id)
		case 2:
			return nil
		}
		state[id] = 1
		path = append(path, id)
		for _, d := range deps[id] {
			if c := visit(d); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[id] = 2
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(all)) {
		if c := visit(id); c != nil {
			return c
		}
	}
	return nil
}

// A few grants pinned here too, apart from routes.json: the public system
// function has nothing but its logs; only the run functions start runs;
// only the deploy worker makes runtimes; API functions read the keys, and
// no API function writes the organizations but the two creates that record
// the organization's request-hash key (Idempotency-Key records) on it, and
// the /v2/auth group's, which records the organization's PKCE key of agent
// auth on first use.
func TestGrantsPinned(t *testing.T) {
	table := routesGrants(t)
	if g := table[FnSystem]; len(g.Tables)+len(g.Secrets)+len(g.Executions)+len(g.Runtimes) != 0 {
		t.Errorf("system: %+v, want no grant", g)
	}
	for _, f := range Functions {
		g := table[f.Name]
		startsRuns := slices.Contains(g.Executions, "start-run")
		if want := f.Name == FnThreadRunWait || f.Name == FnStatelessRunWait || f.Name == FnRuns || f.Name == FnRunStream || f.Name == FnCronFire; startsRuns != want {
			t.Errorf("%s: starts runs %v, want %v", f.Name, startsRuns, want)
		}
		if slices.Contains(g.Runtimes, "manage") != (f.Name == FnDeployWorker) {
			t.Errorf("%s: runtimes %v", f.Name, g.Runtimes)
		}
		// The token vault: agent auth's routes, the run-worker for graph
		// nodes with auth (in its tenant sessions), and the runtime
		// function for LangGraph apps' get_token on Lambda.
		if opensVault(g) != (f.Name == FnProviders || f.Name == FnRunWorker || f.Name == FnAppCalls) {
			t.Errorf("%s: vault %v", f.Name, g.Vault)
		}
		want := "read" // authentication, nothing more
		if f.Name == FnCreateProvider || f.Name == FnCreateDeployment {
			// The two creates that take an Idempotency-Key record the
			// organization's request-hash key on it, on first use.
			want = "write"
		}
		if f.Name == FnProviders || f.Name == FnAppCalls {
			// Agent auth records the organization's PKCE key on it, on
			// first use (internal/agentauth): from its routes, or from a
			// LangGraph app's get_token on Lambda.
			want = "write"
		}
		if f.API && f.Name != FnSystem && g.Tables["organizations"] != want {
			t.Errorf("%s: organizations %q, want %s", f.Name, g.Tables["organizations"], want)
		}
	}
}

// roleNamed is the logical ID of the role whose ID starts with prefix.
func roleNamed(t *testing.T, js map[string]any, prefix string) string {
	t.Helper()
	for id := range resources(js, "AWS::IAM::Role") {
		if strings.HasPrefix(id, prefix) {
			return id
		}
	}
	t.Fatalf("no role %s*", prefix)
	return ""
}

// The crons' scheduler role: assumed by EventBridge Scheduler, allowed only
// to invoke cron-fire; the schedule group is the stage's.
func TestCronSchedulerRole(t *testing.T) {
	_, js := synth(t)
	id := roleNamed(t, js, "Rolecronscheduler")
	role := props(resources(js, "AWS::IAM::Role")[id])
	trust, _ := json.Marshal(role["AssumeRolePolicyDocument"])
	if !strings.Contains(string(trust), `"Service":"scheduler.amazonaws.com"`) {
		t.Errorf("cron scheduler role trust %s, want EventBridge Scheduler", trust)
	}
	got := map[string][]string{}
	for _, st := range statementsOfRole(js, id) {
		got[st.actions()] = append(got[st.actions()], st.resources()...)
	}
	want := map[string][]string{"lambda:InvokeFunction": {"arn:{Ref:AWS::Partition}:lambda:{Ref:AWS::Region}:{Ref:AWS::AccountId}:function:stepgraph-test-cron-fire"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cron scheduler role grants\n got %v\nwant %v", got, want)
	}
	groups := resources(js, "AWS::Scheduler::ScheduleGroup")
	if len(groups) != 1 {
		t.Fatalf("%d schedule groups, want 1", len(groups))
	}
	for _, g := range groups {
		if props(g)["Name"] != "stepgraph-test-crons" {
			t.Errorf("schedule group %v", props(g)["Name"])
		}
	}
}

// roleSuffix is the hash CDK appends to the runtime role's logical ID.
func roleSuffix(t *testing.T, js map[string]any) string {
	t.Helper()
	for id := range resources(js, "AWS::IAM::Role") {
		if strings.HasPrefix(id, "Roleruntime") {
			return strings.TrimPrefix(id, "Roleruntime")
		}
	}
	t.Fatal("no runtime role")
	return ""
}

// The runtimes' role: assumed by Lambda, and allowed only to write the
// runtimes' own log groups — a deployment's code reaches no table, no
// secret, no state machine.
func TestRuntimeRole(t *testing.T) {
	_, js := synth(t)
	id := "Roleruntime" + roleSuffix(t, js)
	role := props(resources(js, "AWS::IAM::Role")[id])
	trust, _ := json.Marshal(role["AssumeRolePolicyDocument"])
	if !strings.Contains(string(trust), `"Service":"lambda.amazonaws.com"`) {
		t.Errorf("runtime role trust %s, want Lambda", trust)
	}
	got := map[string][]string{}
	for _, st := range statementsOfRole(js, id) {
		got[st.actions()] = append(got[st.actions()], st.resources()...)
	}
	// Only the stack's runtimes log group (not a group of their own,
	// which would never expire and outlive the stack): no CreateLogGroup.
	want := map[string][]string{"logs:CreateLogStream,logs:PutLogEvents": {"{GetAtt:" + runtimesLogGroupID(t, js) + ".Arn}"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("runtime role grants\n got %v\nwant %v", got, want)
	}
	// Only the deploy-worker may pass it, and only to Lambda.
	for _, r := range resources(js, "AWS::IAM::Policy") {
		doc, _ := props(r)["PolicyDocument"].(map[string]any)
		sts, _ := doc["Statement"].([]any)
		for _, s := range sts {
			st := statement(s.(map[string]any))
			if st.actions() != "iam:PassRole" {
				continue
			}
			cond, _ := json.Marshal(st["Condition"])
			toScheduler := strings.Join(st.resources(), ",") == "{GetAtt:"+roleNamed(t, js, "Rolecronscheduler")+".Arn}"
			switch {
			case toScheduler && string(cond) == `{"StringEquals":{"iam:PassedToService":"scheduler.amazonaws.com"}}`:
				// the crons' scheduler role, to EventBridge Scheduler only
			case string(cond) != `{"StringEquals":{"iam:PassedToService":"lambda.amazonaws.com"}}`:
				t.Errorf("iam:PassRole with condition %s", cond)
			}
		}
	}
}

func TestCheckDefinition(t *testing.T) {
	known := map[string]string{"RunWorkerArn": FnRunWorker, "DeployWorkerArn": FnDeployWorker}
	for _, c := range []struct {
		name, asl, err string
		uses           []string
	}{
		{"direct", `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"${RunWorkerArn}","End":true}}}`, "", []string{"RunWorkerArn"}},
		{"invoke", `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"FunctionName":"${DeployWorkerArn}"},"End":true}}}`, "", []string{"DeployWorkerArn"}},
		{"unknown placeholder", `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"${OtherArn}","End":true}}}`, "unknown placeholder", nil},
		{"other service", `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::dynamodb:putItem","End":true}}}`, "task resource", nil},
		{"nested map", `{"StartAt":"M","States":{"M":{"Type":"Map","ItemProcessor":{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::sns:publish","End":true}}},"End":true}}}`, "task resource", nil},
		{"not json", `{`, "not JSON", nil},
	} {
		uses, err := checkDefinition(c.asl, known)
		if c.err == "" {
			if err != nil || !slices.Equal(uses, c.uses) {
				t.Errorf("%s: %v, %v; want %v", c.name, uses, err, c.uses)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.err)
		}
	}
}

func TestRealDefinitionsPassTheCheck(t *testing.T) {
	run, deploy := Definitions()
	known := map[string]string{"RunWorkerArn": FnRunWorker, "DeployWorkerArn": FnDeployWorker}
	for name, asl := range map[string]string{"run": run, "deploy": deploy} {
		if _, err := checkDefinition(asl, known); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestNewRejectsMissingBootstrap(t *testing.T) {
	dir := placeholderLambdas(t)
	if err := os.Remove(filepath.Join(dir, FnRunWorker, "bootstrap")); err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	_, err := New(app, "missing", Props{Stage: "missing", RepoRoot: repoRoot(t), LambdaDir: dir})
	if err == nil || !strings.Contains(err.Error(), "make lambdas") {
		t.Errorf("New without run-worker's bootstrap: %v", err)
	}
}

func TestOnlyFields(t *testing.T) {
	defs := dynamo.TableDefinitions("p-")
	in := *defs[0]
	if err := onlyFields(&in, "TableName", "BillingMode", "AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes"); err != nil {
		t.Fatal(err)
	}
	in.TableClass = "STANDARD_INFREQUENT_ACCESS"
	if err := onlyFields(&in, "TableName", "BillingMode", "AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes"); err == nil {
		t.Error("a set TableClass went unnoticed")
	}
}

// A schedule invokes the deploy worker with {"action":"resume"} every
// ResumeEvery, and only it; the worker may be invoked by it.
func TestResumeSchedule(t *testing.T) {
	_, js := synth(t)
	fnID := map[string]string{}
	for id, r := range resources(js, "AWS::Lambda::Function") {
		fnID[strings.TrimPrefix(props(r)["FunctionName"].(string), ResourcePrefix(testStage))] = id
	}
	rules := resources(js, "AWS::Events::Rule")
	for id, r := range rules {
		if props(r)["ScheduleExpression"] == nil {
			delete(rules, id) // an event pattern's rule: TestRunFailuresRule
		}
	}
	if len(rules) != 1 {
		t.Fatalf("%d scheduled rules, want 1", len(rules))
	}
	for _, r := range rules {
		p := props(r)
		if got := str(p["ScheduleExpression"]); got != "rate(5 minutes)" {
			t.Errorf("schedule %s, want rate(5 minutes)", got)
		}
		targets, _ := p["Targets"].([]any)
		if len(targets) != 1 {
			t.Fatalf("targets %v, want the deploy worker", targets)
		}
		target, _ := targets[0].(map[string]any)
		if got, want := str(target["Arn"]), "{GetAtt:"+fnID[FnDeployWorker]+".Arn}"; got != want {
			t.Errorf("target %s, want %s", got, want)
		}
		if got := str(target["Input"]); got != `{"action":"resume"}` {
			t.Errorf("input %s, want {\"action\":\"resume\"}", got)
		}
	}
	invokers := 0
	for _, r := range resources(js, "AWS::Lambda::Permission") {
		p := props(r)
		if str(p["Principal"]) == "events.amazonaws.com" && strings.Contains(str(p["SourceArn"]), "ResumeProvisioning") {
			invokers++
			if got, want := str(p["FunctionName"]), "{GetAtt:"+fnID[FnDeployWorker]+".Arn}"; got != want {
				t.Errorf("events may invoke %s, want only %s", got, want)
			}
		}
	}
	if invokers != 1 {
		t.Errorf("%d permissions for EventBridge, want 1", invokers)
	}
}

// The edge by default (F9 of the 2026-11 security review): the HTTP API's
// stage throttles every route, the workers have reserved concurrency, the
// API functions share the unreserved pool and keep their own rate-limit
// default. MiniStack stores the stage's throttle but does not throttle,
// and ignores reserved concurrency: the template is what is checked.
func TestEdge(t *testing.T) {
	_, js := synth(t)
	stages := resources(js, "AWS::ApiGatewayV2::Stage")
	if len(stages) != 1 {
		t.Fatalf("%d stages, want the $default stage only", len(stages))
	}
	for id, st := range stages {
		got, _ := json.Marshal(props(st)["DefaultRouteSettings"])
		want := fmt.Sprintf(`{"ThrottlingBurstLimit":%d,"ThrottlingRateLimit":%d}`, DefaultThrottleBurst, DefaultThrottleRate)
		if string(got) != want {
			t.Errorf("stage %s: default route settings %s, want %s", id, got, want)
		}
		if props(st)["RouteSettings"] != nil {
			t.Errorf("stage %s: route settings %v: a route's own settings would replace the stage's throttle for it", id, props(st)["RouteSettings"])
		}
	}
	want := map[string]any{FnRunWorker: float64(DefaultRunWorkerConcurrency), FnDeployWorker: float64(DefaultDeployWorkerConcurrency)}
	for _, r := range resources(js, "AWS::Lambda::Function") {
		p := props(r)
		name := strings.TrimPrefix(p["FunctionName"].(string), ResourcePrefix(testStage))
		if got := p["ReservedConcurrentExecutions"]; got != want[name] {
			t.Errorf("%s: reserved concurrency %v, want %v", name, got, want[name])
		}
		env, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		if _, ok := env[EnvRateLimit]; ok {
			t.Errorf("%s: %s set without Props.RateLimit: the functions' default applies", name, EnvRateLimit)
		}
	}
}

// Set edge properties reach the template.
func TestEdgeFromProps(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	s, err := New(app, "edge", Props{Stage: "edge", RepoRoot: repoRoot(t), LambdaDir: placeholderLambdas(t),
		ThrottleRate: 12.5, ThrottleBurst: 30, RunWorkerConcurrency: 40, DeployWorkerConcurrency: NoReservation,
		RateLimit: "0"})
	if err != nil {
		t.Fatal(err)
	}
	js := *assertions.Template_FromStack(s, nil).ToJSON()
	for _, st := range resources(js, "AWS::ApiGatewayV2::Stage") {
		if got, _ := json.Marshal(props(st)["DefaultRouteSettings"]); string(got) != `{"ThrottlingBurstLimit":30,"ThrottlingRateLimit":12.5}` {
			t.Errorf("stage throttle %s", got)
		}
	}
	for _, r := range resources(js, "AWS::Lambda::Function") {
		p := props(r)
		name := strings.TrimPrefix(p["FunctionName"].(string), ResourcePrefix("edge"))
		var want any
		if name == FnRunWorker {
			want = float64(40)
		}
		if got := p["ReservedConcurrentExecutions"]; got != want {
			t.Errorf("%s: reserved concurrency %v, want %v", name, got, want)
		}
		env, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		if name == TeardownFunctionName {
			continue // no edge settings (TestTeardown)
		}
		spec := Functions[slices.IndexFunc(Functions, func(f FunctionSpec) bool { return f.Name == name })]
		if got, ok := env[EnvRateLimit]; ok != spec.API || (ok && got != "0") {
			t.Errorf("%s: %s = %v (set %v), want 0 on API functions only", name, EnvRateLimit, got, ok)
		}
	}
}

// The rules of the edge's settings, AWS's included: Lambda refuses a
// reservation that leaves fewer than 100 unreserved executions in the
// account (MiniStack accepts any), and a reserved concurrency of 0 stops a
// function.
func TestEdgeRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Props
		err  string // "" for valid
	}{
		{"defaults", Props{}, ""},
		{"no reservation on a small account", Props{RunWorkerConcurrency: NoReservation, DeployWorkerConcurrency: NoReservation, AccountConcurrency: 10}, ""},
		{"defaults on a small account", Props{AccountConcurrency: 50}, "must keep 100 unreserved"},
		{"defaults leave exactly 100", Props{AccountConcurrency: DefaultRunWorkerConcurrency + DefaultDeployWorkerConcurrency + MinUnreserved}, ""},
		{"one more is refused", Props{AccountConcurrency: DefaultRunWorkerConcurrency + DefaultDeployWorkerConcurrency + MinUnreserved - 1}, "must keep 100 unreserved"},
		{"large reservation, default quota", Props{RunWorkerConcurrency: 895}, "reserve 905"},
		{"large reservation, raised quota", Props{RunWorkerConcurrency: 2000, AccountConcurrency: 5000}, ""},
		{"negative reservation", Props{RunWorkerConcurrency: -5}, "runWorkerConcurrency -5"},
		{"negative throttle", Props{ThrottleRate: -1}, "throttleRate"},
		{"negative burst", Props{ThrottleBurst: -1}, "throttleBurst"},
		{"rate limit off", Props{RateLimit: "0"}, ""},
		{"rate limit fraction", Props{RateLimit: "0.5"}, ""},
		{"rate limit not a number", Props{RateLimit: "fast"}, "rateLimit"},
		{"rate limit negative", Props{RateLimit: "-2"}, "rateLimit"},
	} {
		p := tc.p
		err := p.edgeDefaults()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.err)
		}
	}
}

// routesFunctions reads functions/routes.json.
func routesFunctions(t *testing.T) []FunctionEntry {
	t.Helper()
	_, fns, err := LoadRoutes(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	return fns
}

// The REST API, the clients' origin: every operation a method to its
// function; the streamed functions' routes (the run streams, the waits,
// the join) with response streaming — transfer mode STREAM, invoked
// through response-streaming-invocations, 15 minutes — and no other route
// with it; any other path to the system function.
// restMethodsOf reads the REST API's methods from the template: "METHOD
// /path" → function, and whether each streams; every method must be a
// Lambda proxy integration, streamed ones through
// response-streaming-invocations with the 15-minute timeout.
func restMethodsOf(t *testing.T, js map[string]any) (map[string]string, map[string]bool) {
	t.Helper()
	fnByID := map[string]string{}
	for id, r := range resources(js, "AWS::Lambda::Function") {
		fnByID[id] = strings.TrimPrefix(props(r)["FunctionName"].(string), ResourcePrefix(testStage))
	}
	stream := map[string]bool{}
	for _, f := range routesFunctions(t) {
		stream[f.Name] = f.Stream
	}
	// Resource id → path, from the parent chain.
	res := resources(js, "AWS::ApiGateway::Resource")
	var pathOf func(ref any) string
	pathOf = func(ref any) string {
		s := str(ref)
		if strings.HasPrefix(s, "{GetAtt:RestApi") && strings.HasSuffix(s, ".RootResourceId}") {
			return ""
		}
		id := strings.TrimSuffix(strings.TrimPrefix(s, "{Ref:"), "}")
		r, ok := res[id]
		if !ok {
			t.Fatalf("resource %s not declared", s)
		}
		return pathOf(props(r)["ParentId"]) + "/" + props(r)["PathPart"].(string)
	}
	methods := map[string]string{}
	streamed := map[string]bool{}
	for id, m := range resources(js, "AWS::ApiGateway::Method") {
		p := props(m)
		path := pathOf(p["ResourceId"])
		if path == "" {
			path = "/"
		}
		key := p["HttpMethod"].(string) + " " + path
		in, _ := p["Integration"].(map[string]any)
		if in["Type"] != "AWS_PROXY" || in["IntegrationHttpMethod"] != "POST" {
			t.Errorf("method %s (%s): integration %v", key, id, in)
		}
		uri := str(in["Uri"])
		var fn string
		for fid, name := range fnByID {
			if strings.Contains(uri, "{GetAtt:"+fid+".Arn}") {
				fn = name
			}
		}
		if fn == "" {
			t.Errorf("method %s: integration URI %s names no function", key, uri)
			continue
		}
		methods[key] = fn
		if in["ResponseTransferMode"] == "STREAM" {
			streamed[key] = true
			if !strings.HasSuffix(uri, "/response-streaming-invocations") || !strings.Contains(uri, ":lambda:path/2021-11-15/functions/") {
				t.Errorf("streamed method %s: URI %s, want the function's response-streaming-invocations", key, uri)
			}
			if in["TimeoutInMillis"] != float64(900000) {
				t.Errorf("streamed method %s: timeout %v ms, want 900000", key, in["TimeoutInMillis"])
			}
		} else if !strings.HasSuffix(uri, "/invocations") || strings.Contains(uri, "response-streaming") {
			t.Errorf("buffered method %s: URI %s", key, uri)
		}
	}
	return methods, streamed
}

func TestRestAPIStreams(t *testing.T) {
	_, js := synth(t)
	stream := map[string]bool{}
	for _, f := range routesFunctions(t) {
		stream[f.Name] = f.Stream
	}
	methods, streamed := restMethodsOf(t, js)
	used := map[string]bool{}
	for _, op := range openapiOperations(t) {
		method, path, _ := strings.Cut(op, " ")
		want, err := briefFunction(method, path)
		if err != nil {
			t.Error(err)
			continue
		}
		key := op
		if _, ok := methods[key]; !ok {
			key = "ANY " + path // a path one function serves
		}
		if methods[key] != want {
			t.Errorf("REST method %s (%s) goes to %q, want %q", op, key, methods[key], want)
		}
		if streamed[key] != stream[want] {
			t.Errorf("REST method %s: streamed %v, its function %s streams %v", op, streamed[key], want, stream[want])
		}
		used[key] = true
	}
	for key := range used {
		if key != "ANY /" { // the root: checked below
			delete(methods, key)
		}
	}
	// The preflights of the paths two functions share (edge.go).
	for key, fn := range methods {
		if method, path, _ := strings.Cut(key, " "); method == "OPTIONS" {
			if fn == FnSystem {
				t.Errorf("%s goes to the system function", key)
			}
			if _, ok := used["GET "+path]; !ok {
				if _, ok := used["POST "+path]; !ok {
					t.Errorf("%s on a path without routes", key)
				}
			}
			delete(methods, key)
		}
	}
	for _, key := range []string{"ANY /", "ANY /{proxy+}"} {
		if methods[key] != FnSystem {
			t.Errorf("%s goes to %q, want %s", key, methods[key], FnSystem)
		}
		delete(methods, key)
	}
	if len(methods) > 0 {
		t.Errorf("REST methods not in the OpenAPI document: %v", methods)
	}
	for _, want := range []string{"/threads/{thread_id}/runs/stream", "/runs/stream",
		"/threads/{thread_id}/runs/{run_id}/stream", "/threads/{thread_id}/stream",
		"/threads/{thread_id}/runs/{run_id}/join", "/threads/{thread_id}/runs/wait", "/runs/wait"} {
		if !streamed["ANY "+want] {
			t.Errorf("%s is not streamed", want)
		}
	}
	apis := resources(js, "AWS::ApiGateway::RestApi")
	if len(apis) != 1 {
		t.Fatalf("%d REST APIs", len(apis))
	}
	for _, a := range apis {
		if got, _ := json.Marshal(props(a)["EndpointConfiguration"]); string(got) != `{"Types":["REGIONAL"]}` {
			t.Errorf("REST API endpoint %s, want REGIONAL (a streamed response may idle 5 min there, 30 s on edge)", got)
		}
	}
	for id, st := range resources(js, "AWS::ApiGateway::Stage") {
		p := props(st)
		if p["StageName"] != RestAPIStage {
			t.Errorf("stage %s: %v", id, p["StageName"])
		}
		got, _ := json.Marshal(p["MethodSettings"])
		want := fmt.Sprintf(`[{"DataTraceEnabled":false,"HttpMethod":"*","ResourcePath":"/*","ThrottlingBurstLimit":%d,"ThrottlingRateLimit":%d}]`,
			DefaultThrottleBurst, DefaultThrottleRate)
		if string(got) != want {
			t.Errorf("stage %s: method settings %s, want %s", id, got, want)
		}
	}
}

// payloadBucketID is the logical ID of the payload bucket.
func payloadBucketID(t *testing.T, js map[string]any) string {
	t.Helper()
	ids := slices.Collect(maps.Keys(resources(js, "AWS::S3::Bucket")))
	if len(ids) != 1 {
		t.Fatalf("buckets %v, want the payload bucket only", ids)
	}
	return ids[0]
}

// The payload bucket (docs/aws.md, "Sizes"): encrypted, no public access,
// TLS only, and the lifecycle rule that expires the payloads of expiring
// items (the DynamoDB adapter's prefix) after their items' TTL.
func TestPayloadBucket(t *testing.T) {
	_, js := synth(t)
	b := props(resources(js, "AWS::S3::Bucket")[payloadBucketID(t, js)])
	enc, _ := b["BucketEncryption"].(map[string]any)["ServerSideEncryptionConfiguration"].([]any)
	if len(enc) != 1 || str(enc[0].(map[string]any)["ServerSideEncryptionByDefault"].(map[string]any)["SSEAlgorithm"]) != "AES256" {
		t.Errorf("bucket encryption %v, want SSE-S3", b["BucketEncryption"])
	}
	pab, _ := b["PublicAccessBlockConfiguration"].(map[string]any)
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if pab[k] != true {
			t.Errorf("public access block %s = %v, want true", k, pab[k])
		}
	}
	rules, _ := b["LifecycleConfiguration"].(map[string]any)["Rules"].([]any)
	found := false
	for _, r := range rules {
		m := r.(map[string]any)
		if m["Prefix"] == dynamo.ExpiringPrefix && m["Status"] == "Enabled" && fmt.Sprint(m["ExpirationInDays"]) == fmt.Sprint(dynamo.ExpiringPrefixDays) {
			found = true
		}
	}
	if !found {
		t.Errorf("lifecycle rules %v: none expires %s after %d days", rules, dynamo.ExpiringPrefix, dynamo.ExpiringPrefixDays)
	}
	tls := false
	for _, r := range resources(js, "AWS::S3::BucketPolicy") {
		doc, _ := props(r)["PolicyDocument"].(map[string]any)
		for _, st := range doc["Statement"].([]any) {
			m := st.(map[string]any)
			if m["Effect"] == "Deny" && strings.Contains(fmt.Sprint(m["Condition"]), "aws:SecureTransport") {
				tls = true
			}
		}
	}
	if !tls {
		t.Error("no bucket policy denies requests without TLS")
	}
	if g := (Grants{}); g.PayloadAccess() != "" {
		t.Error("a function without tables has payload access")
	}
}

// Tracing and alarms (review #14): every function but the public system
// one (and the teardown) and both state machines trace with X-Ray; the stage has alarms on the
// run worker's errors and throttles, the account's throttles, failed,
// timed-out (stuck) and throttled run executions, DynamoDB throttling of
// the threads table and the APIs' 5xx, each notifying the stage's topic.
func TestTracingAndAlarms(t *testing.T) {
	_, js := synth(t)
	for _, r := range resources(js, "AWS::Lambda::Function") {
		p := props(r)
		name := strings.TrimPrefix(p["FunctionName"].(string), ResourcePrefix(testStage))
		mode, _ := p["TracingConfig"].(map[string]any)
		// Nor the teardown, run once when the stack is deleted: it has
		// no X-Ray grant either (TestTeardown).
		if want := name != FnSystem && name != TeardownFunctionName; (mode["Mode"] == "Active") != want {
			t.Errorf("%s: tracing %v, want active %v", name, p["TracingConfig"], want)
		}
	}
	machines := 0
	for _, r := range resources(js, "AWS::StepFunctions::StateMachine") {
		machines++
		if tc, _ := props(r)["TracingConfiguration"].(map[string]any); tc["Enabled"] != true {
			t.Errorf("state machine %v: tracing %v", props(r)["StateMachineName"], tc)
		}
	}
	if machines != 3 { // run, its Express front, deploy
		t.Errorf("%d state machines", machines)
	}
	var topic string
	for id, r := range resources(js, "AWS::SNS::Topic") {
		if props(r)["TopicName"] == ResourcePrefix(testStage)+"alarms" {
			topic = id
		}
	}
	if topic == "" {
		t.Fatal("no alarm topic")
	}
	got := map[string]string{}
	for _, r := range resources(js, "AWS::CloudWatch::Alarm") {
		p := props(r)
		name := strings.TrimPrefix(p["AlarmName"].(string), ResourcePrefix(testStage))
		got[name] = p["Namespace"].(string) + " " + p["MetricName"].(string)
		if actions, _ := p["AlarmActions"].([]any); len(actions) != 1 || str(actions[0]) != "{Ref:"+topic+"}" {
			t.Errorf("alarm %s: actions %v, want the topic", name, p["AlarmActions"])
		}
		if p["Threshold"] != float64(1) || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
			t.Errorf("alarm %s: %v %v", name, p["ComparisonOperator"], p["Threshold"])
		}
	}
	want := map[string]string{
		"run-worker-errors":      "AWS/Lambda Errors",
		"run-worker-throttles":   "AWS/Lambda Throttles",
		"lambda-throttles":       "AWS/Lambda Throttles",
		"runs-failed":            "AWS/States ExecutionsFailed",
		"runs-timed-out":         "AWS/States ExecutionsTimedOut",
		"runs-throttled":         "AWS/States ExecutionThrottled",
		"runs-express-failed":    "AWS/States ExecutionsFailed",
		"runs-express-timed-out": "AWS/States ExecutionsTimedOut",
		"threads-throttled":      "AWS/DynamoDB WriteThrottleEvents",
		"http-api-5xx":           "AWS/ApiGateway 5xx",
		"rest-api-5xx":           "AWS/ApiGateway 5XXError",
		"run-failures-dlq":       "AWS/SQS ApproximateNumberOfMessagesVisible",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("alarms:\n got %v\nwant %v", got, want)
	}
}

// dependencyCycle finds cycles through Ref, Fn::GetAtt and DependsOn, and
// none in a chain.
func TestDependencyCycle(t *testing.T) {
	for _, c := range []struct {
		name string
		tmpl string
		want bool
	}{
		{"chain", `{"Resources":{"A":{"Properties":{"X":{"Ref":"B"}}},"B":{"Properties":{"Y":{"Ref":"AWS::Region"}}}}}`, false},
		{"ref", `{"Resources":{"A":{"Properties":{"X":{"Ref":"B"}}},"B":{"Properties":{"Y":{"Fn::Join":["",[{"Ref":"A"}]]}}}}}`, true},
		{"getatt", `{"Resources":{"A":{"Properties":{"X":{"Fn::GetAtt":["B","Arn"]}}},"B":{"DependsOn":["A"]}}}`, true},
		{"dependsOn", `{"Resources":{"A":{"DependsOn":"B"},"B":{"DependsOn":"C"},"C":{"DependsOn":["A"]}}}`, true},
	} {
		var js map[string]any
		if err := json.Unmarshal([]byte(c.tmpl), &js); err != nil {
			t.Fatal(err)
		}
		if got := dependencyCycle(js); (got != nil) != c.want {
			t.Errorf("%s: cycle %v, want one: %v", c.name, got, c.want)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// checkExpressMachine checks the run machine's Express front: an EXPRESS
// machine on internal/awsflow's document, its placeholders the run worker
// and the run machine; its role may invoke the run worker, start run
// executions and deliver its logs (to its own log group, at ERROR without
// execution data), nothing else.
func checkExpressMachine(t *testing.T, js map[string]any, id string, p map[string]any, runWorkerID string) {
	t.Helper()
	if p["StateMachineType"] != "EXPRESS" || str(p["DefinitionString"]) != awsflow.ExpressASL {
		t.Errorf("run-express: type %v, or its definition differs from internal/awsflow's", p["StateMachineType"])
	}
	subs, _ := p["DefinitionSubstitutions"].(map[string]any)
	if len(subs) != 2 || str(subs[awsflow.RunWorkerArn]) != "{GetAtt:"+runWorkerID+".Arn}" ||
		!strings.HasPrefix(str(subs[awsflow.RunMachineArn]), "{Ref:StateMachinerun") {
		t.Errorf("run-express: substitutions %v", subs)
	}
	logs, _ := p["LoggingConfiguration"].(map[string]any)
	dest, _ := logs["Destinations"].([]any)
	if logs["Level"] != "ERROR" || logs["IncludeExecutionData"] != false || len(dest) != 1 {
		t.Errorf("run-express: logging %v, want ERROR without execution data to one log group", logs)
	}
	if tr, _ := p["TracingConfiguration"].(map[string]any); tr["Enabled"] != true {
		t.Errorf("run-express: tracing %v", p["TracingConfiguration"])
	}
	roleID := strings.TrimSuffix(strings.TrimPrefix(str(p["RoleArn"]), "{GetAtt:"), ".Arn}")
	for _, st := range statementsOfRole(js, roleID) {
		res := strings.Join(st.resources(), ",")
		switch {
		case st.actions() == strings.Join(XRayMachineActions, ",") && res == "*":
		case slices.Equal(sorted(st.list("Action")), sorted(LogDeliveryActions)) && res == "*":
		case st.actions() == "lambda:InvokeFunction" && strings.HasPrefix(res, "{GetAtt:"+runWorkerID+".Arn}"):
		case st.actions() == "states:StartExecution" && strings.HasPrefix(res, "{Ref:StateMachinerun") && !strings.Contains(res, "express"):
		default:
			t.Errorf("run-express (%s): role statement %v", id, st)
		}
	}
	outputs, _ := js["Outputs"].(map[string]any)
	if out, _ := outputs["RunExpressStateMachineArn"].(map[string]any); !strings.HasPrefix(str(out["Value"]), "{Ref:StateMachinerunexpress") {
		t.Errorf("output RunExpressStateMachineArn = %v", out)
	}
}

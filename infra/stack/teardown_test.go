package stack

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// runtimesLogGroupID is the logical ID of the runtimes' log group.
func runtimesLogGroupID(t *testing.T, js map[string]any) string {
	t.Helper()
	for id, r := range resources(js, "AWS::Logs::LogGroup") {
		if props(r)["LogGroupName"] == "/aws/lambda/"+ResourcePrefix(testStage)+RuntimesLogGroupName {
			return id
		}
	}
	t.Fatal("no runtimes log group")
	return ""
}

// The runtimes' log group has the stack's retention (two weeks) and
// removal policy.
func TestRuntimesLogGroup(t *testing.T) {
	_, js := synth(t)
	r := resources(js, "AWS::Logs::LogGroup")[runtimesLogGroupID(t, js)]
	if got := props(r)["RetentionInDays"]; got != float64(14) {
		t.Errorf("runtimes log group retention %v, want 14 days", got)
	}
	if r["DeletionPolicy"] != "Delete" {
		t.Errorf("runtimes log group deletion policy %v, want the stack's (Delete without retain)", r["DeletionPolicy"])
	}
}

// The Teardown custom resource (docs/aws.md, "Teardown"): backed by the
// deploy-worker's bootstrap as a function of its own, whose role may list
// functions and secrets, and delete only the stage's runtime functions and
// secrets, each only when tagged with the stage's value, plus the payload
// bucket's objects (a stack that does not retain its data). Every function
// of the stack depends on it, so a stack delete removes them before the
// teardown runs; it is deleted before the bucket it empties.
func TestTeardown(t *testing.T) {
	_, js := synth(t)
	crs := resources(js, "Custom::Teardown")
	if len(crs) != 1 {
		t.Fatalf("%d Custom::Teardown resources, want 1", len(crs))
	}
	var crID string
	var cr map[string]any
	for id, r := range crs {
		crID, cr = id, r
	}
	if got := props(cr)[TeardownRetainProperty]; got != "false" {
		t.Errorf("%s = %v, want false (the test stack does not retain its data)", TeardownRetainProperty, got)
	}
	if cr["DeletionPolicy"] != "Delete" {
		t.Errorf("teardown deletion policy %v: a retained custom resource never gets its Delete", cr["DeletionPolicy"])
	}
	bucket := payloadBucketID(t, js)
	if deps, _ := cr["DependsOn"].([]any); !slices.Contains(deps, any(bucket)) {
		t.Errorf("teardown depends on %v, want the payload bucket %s (deleted after it is emptied)", deps, bucket)
	}

	fnID, fn := "", map[string]any{}
	for id, r := range resources(js, "AWS::Lambda::Function") {
		name := strings.TrimPrefix(props(r)["FunctionName"].(string), ResourcePrefix(testStage))
		if name == TeardownFunctionName {
			fnID, fn = id, props(r)
			continue
		}
		if deps, _ := r["DependsOn"].([]any); !slices.Contains(deps, any(crID)) {
			t.Errorf("function %s does not depend on the teardown: it could still make runtimes or secrets as it runs", name)
		}
	}
	if fnID == "" {
		t.Fatal("no teardown function")
	}
	if got := str(props(cr)["ServiceToken"]); got != "{GetAtt:"+fnID+".Arn}" {
		t.Errorf("teardown service token %s, want the teardown function", got)
	}
	key, _ := fn["Code"].(map[string]any)["S3Key"].(string)
	if b, err := os.ReadFile(filepath.Join(synthOut, "asset."+strings.TrimSuffix(key, ".zip"), "bootstrap")); err != nil || string(b) != FnDeployWorker {
		t.Errorf("teardown code %q (%v), want the deploy-worker's bootstrap", b, err)
	}
	env := map[string]string{}
	vars, _ := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
	for k, v := range vars {
		env[k] = str(v)
	}
	wantEnv := map[string]string{EnvTeardown: "true", EnvTablePrefix: ResourcePrefix(testStage),
		EnvSecretsPrefix: SecretsPrefix(testStage), EnvPayloadBucket: "{Ref:" + bucket + "}", EnvLogLevel: "info"}
	if !reflect.DeepEqual(env, wantEnv) {
		t.Errorf("teardown environment %v, want %v", env, wantEnv)
	}

	const (
		runtimes = "arn:{Ref:AWS::Partition}:lambda:{Ref:AWS::Region}:{Ref:AWS::AccountId}:function:stepgraph-test-rt-*"
		secrets  = "arn:{Ref:AWS::Partition}:secretsmanager:{Ref:AWS::Region}:{Ref:AWS::AccountId}:secret:stepgraph/test/*"
	)
	roleID := strings.TrimSuffix(strings.TrimPrefix(str(fn["Role"]), "{GetAtt:"), ".Arn}")
	got := map[string]string{}
	for _, st := range statementsOfRole(js, roleID) {
		res := st.resources()
		sort.Strings(res)
		cond, _ := json.Marshal(st["Condition"])
		got[st.actions()] = strings.Join(res, " ") + " if " + string(cond)
	}
	lc, _ := fn["LoggingConfig"].(map[string]any)
	logGroup := strings.TrimSuffix(strings.TrimPrefix(str(lc["LogGroup"]), "{Ref:"), "}")
	want := map[string]string{
		"logs:CreateLogStream,logs:PutLogEvents": "{GetAtt:" + logGroup + ".Arn} if null",
		"lambda:ListFunctions":                   "* if null",
		"lambda:ListTags":                        runtimes + " if null",
		"lambda:DeleteFunction":                  runtimes + ` if {"StringEquals":{"aws:ResourceTag/stepgraph:prefix":"stepgraph-test-"}}`,
		"secretsmanager:ListSecrets":             "* if null",
		"secretsmanager:DeleteSecret":            secrets + ` if {"StringEquals":{"secretsmanager:ResourceTag/stepgraph:prefix":"stepgraph/test/"}}`,
		"s3:DeleteObject":                        "{GetAtt:" + bucket + ".Arn}/* if null",
		"s3:ListBucket":                          "{GetAtt:" + bucket + ".Arn} if null",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("teardown grants\n got %v\nwant %v", got, want)
	}
}

package lambdaruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/stepgraph/stepgraph/internal/deployments"
)

const (
	testRole   = "arn:aws:iam::123456789012:role/stepgraph-test-runtime"
	testDeploy = "0b6c2a7e-51f4-4d7e-9a53-2b1f0c8e9d10"
	testName   = "stepgraph-test-rt-0b6c2a7e51f44d7e9a532b1f0c8e9d10"
	testARN    = "arn:aws:lambda:us-east-1:123456789012:function:" + testName
)

// fakeAPI is a Lambda API holding one function at most, with versions.
// Creates and updates leave the function busy for `busy` reads; fail makes
// the next call of an operation fail.
type fakeAPI struct {
	mu       sync.Mutex
	exists   bool
	cfg      types.FunctionConfiguration
	versions []types.FunctionConfiguration
	busy     int
	final    types.State // the state a published version settles in
	fail     map[string]error
	calls    []string
	tags     map[string]string
}

func (f *fakeAPI) TagResource(_ context.Context, in *lambda.TagResourceInput, _ ...func(*lambda.Options)) (*lambda.TagResourceOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("TagResource " + aws.ToString(in.Resource)); err != nil {
		return nil, err
	}
	f.tags = in.Tags
	return &lambda.TagResourceOutput{}, nil
}

func (f *fakeAPI) record(op string) error {
	f.calls = append(f.calls, op)
	if err := f.fail[op]; err != nil {
		delete(f.fail, op)
		return err
	}
	return nil
}

func (f *fakeAPI) DeleteFunction(_ context.Context, in *lambda.DeleteFunctionInput, _ ...func(*lambda.Options)) (*lambda.DeleteFunctionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("DeleteFunction " + aws.ToString(in.FunctionName)); err != nil {
		return nil, err
	}
	if !f.exists {
		return nil, &smithy.OperationError{ServiceID: "Lambda", OperationName: "DeleteFunction",
			Err: &types.ResourceNotFoundException{Message: aws.String("Function not found: " + testARN)}}
	}
	f.exists, f.versions = false, nil
	return &lambda.DeleteFunctionOutput{}, nil
}

func (f *fakeAPI) GetFunction(_ context.Context, in *lambda.GetFunctionInput, _ ...func(*lambda.Options)) (*lambda.GetFunctionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("GetFunction " + aws.ToString(in.FunctionName)); err != nil {
		return nil, err
	}
	if !f.exists {
		return nil, &smithy.OperationError{ServiceID: "Lambda", OperationName: "GetFunction",
			Err: &types.ResourceNotFoundException{Message: aws.String("Function not found: " + testARN)}}
	}
	name := aws.ToString(in.FunctionName)
	cfg := f.cfg
	if i := strings.LastIndex(name, ":"); strings.HasPrefix(name, "arn:") && strings.Count(name, ":") == 7 {
		var v int
		if _, err := fmt.Sscan(name[i+1:], &v); err != nil || v < 1 || v > len(f.versions) {
			return nil, &types.ResourceNotFoundException{Message: aws.String("no version " + name[i+1:])}
		}
		cfg = f.versions[v-1]
	}
	if f.busy > 0 {
		f.busy--
		cfg.State, cfg.LastUpdateStatus = types.StatePending, types.LastUpdateStatusInProgress
	} else if cfg.Version != nil && *cfg.Version != "$LATEST" && f.final != "" {
		cfg.State = f.final
		cfg.StateReasonCode, cfg.StateReason = types.StateReasonCodeImageAccessDenied, aws.String("Lambda does not have permission to access the ECR image")
	}
	return &lambda.GetFunctionOutput{Configuration: &cfg, Tags: f.tags}, nil
}

func (f *fakeAPI) publish() types.FunctionConfiguration {
	v := f.cfg
	v.Version = aws.String(fmt.Sprint(len(f.versions) + 1))
	v.FunctionArn = aws.String(testARN + ":" + *v.Version)
	f.versions = append(f.versions, v)
	return v
}

func (f *fakeAPI) CreateFunction(_ context.Context, in *lambda.CreateFunctionInput, _ ...func(*lambda.Options)) (*lambda.CreateFunctionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("CreateFunction"); err != nil {
		return nil, err
	}
	if f.exists {
		return nil, &types.ResourceConflictException{Message: aws.String("Function already exist: " + testName)}
	}
	if in.PackageType != types.PackageTypeImage || !in.Publish || aws.ToString(in.Role) != testRole {
		return nil, &types.InvalidParameterValueException{Message: aws.String(fmt.Sprintf("unexpected input %+v", in))}
	}
	f.exists, f.busy, f.tags = true, 2, in.Tags
	f.cfg = types.FunctionConfiguration{FunctionName: in.FunctionName, FunctionArn: aws.String(testARN), PackageType: types.PackageTypeImage,
		Role: in.Role, Environment: environment(in.Environment), Version: aws.String("$LATEST"),
		State: types.StateActive, LastUpdateStatus: types.LastUpdateStatusSuccessful, Description: in.Description,
		CodeSha256: in.Code.ImageUri}
	v := f.publish()
	return &lambda.CreateFunctionOutput{FunctionArn: aws.String(testARN), Version: v.Version, State: types.StatePending}, nil
}

func (f *fakeAPI) UpdateFunctionConfiguration(_ context.Context, in *lambda.UpdateFunctionConfigurationInput, _ ...func(*lambda.Options)) (*lambda.UpdateFunctionConfigurationOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("UpdateFunctionConfiguration"); err != nil {
		return nil, err
	}
	if f.busy > 0 {
		return nil, &types.ResourceConflictException{Message: aws.String("an update is in progress")}
	}
	if in.Environment != nil {
		f.cfg.Environment = environment(in.Environment)
	}
	f.cfg.Role = in.Role
	f.busy = 1
	return &lambda.UpdateFunctionConfigurationOutput{}, nil
}

func (f *fakeAPI) UpdateFunctionCode(_ context.Context, in *lambda.UpdateFunctionCodeInput, _ ...func(*lambda.Options)) (*lambda.UpdateFunctionCodeOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("UpdateFunctionCode"); err != nil {
		return nil, err
	}
	if f.busy > 0 {
		return nil, &types.ResourceConflictException{Message: aws.String("an update is in progress")}
	}
	if !in.Publish {
		return nil, &types.InvalidParameterValueException{Message: aws.String("want Publish")}
	}
	f.cfg.CodeSha256 = in.ImageUri
	f.busy = 1
	v := f.publish()
	return &lambda.UpdateFunctionCodeOutput{FunctionArn: v.FunctionArn, Version: v.Version}, nil
}

// environment is what Lambda answers for the environment set (nil: none).
func environment(e *types.Environment) *types.EnvironmentResponse {
	if e == nil {
		return nil
	}
	return &types.EnvironmentResponse{Variables: e.Variables}
}

func newProvisioner(api API) *Provisioner {
	return &Provisioner{Client: api, NamePrefix: "stepgraph-test-", RoleARN: testRole, Poll: time.Millisecond, ReadyWait: time.Second}
}

func wantRefused(t *testing.T, err error, fragments ...string) {
	t.Helper()
	var r *deployments.RuntimeRefusedError
	if !errors.As(err, &r) {
		t.Fatalf("error %v (%T), want a *deployments.RuntimeRefusedError", err, err)
	}
	for _, f := range fragments {
		if !strings.Contains(r.Reason, f) {
			t.Errorf("reason %q does not contain %q", r.Reason, f)
		}
	}
}

func TestECRRegistry(t *testing.T) {
	for _, tc := range []struct{ account, region, want string }{
		{"123456789012", "eu-west-1", "123456789012.dkr.ecr.eu-west-1.amazonaws.com"},
		{"123456789012", "cn-north-1", "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn"},
		{"", "eu-west-1", ""},
		{"123456789012", "", ""},
	} {
		if got := ECRRegistry(tc.account, tc.region); got != tc.want {
			t.Errorf("ECRRegistry(%q, %q) = %q, want %q", tc.account, tc.region, got, tc.want)
		}
	}
}

func TestFunctionName(t *testing.T) {
	if got := FunctionName("stepgraph-test-", testDeploy); got != testName {
		t.Fatalf("FunctionName = %q, want %q", got, testName)
	}
	// The longest stage of infra/stack still fits Lambda's 64 characters.
	if n := len(FunctionName("stepgraph-abcdefghijklmnop-", testDeploy)); n > 64 {
		t.Fatalf("a runtime of the longest stage has a name of %d characters", n)
	}
}

func TestReserved(t *testing.T) {
	p := newProvisioner(&fakeAPI{})
	for url, want := range map[string]bool{
		testARN:        true,
		testARN + ":3": true,
		"arn:aws:lambda:eu-west-1:999999999999:function:stepgraph-test-rt-x":       true,
		"arn:aws:lambda:us-east-1:123456789012:function:stepgraph-test-run-worker": false,
		"arn:aws:lambda:us-east-1:123456789012:function:my-runtime":                false,
		"https://runtime.example.com/stepgraph-test-rt-x":                          false,
	} {
		if got := p.Reserved(url); got != want {
			t.Errorf("Reserved(%s) = %v, want %v", url, got, want)
		}
	}
}

func TestEnsureRuntimeCreatesThenUpdates(t *testing.T) {
	ctx := context.Background()
	api := &fakeAPI{}
	p := newProvisioner(api)
	arn, err := p.EnsureRuntime(ctx, testDeploy, "123456789012.dkr.ecr.us-east-1.amazonaws.com/agent:1")
	if err != nil {
		t.Fatal(err)
	}
	if arn != testARN+":1" {
		t.Fatalf("runtime %q, want the first version's ARN %s:1", arn, testARN)
	}
	if got := strings.Join(api.calls, ", "); got != "GetFunction "+testName+", CreateFunction, GetFunction "+arn+", GetFunction "+arn+", GetFunction "+arn {
		t.Errorf("calls: %s (want: look up, create, wait until the version is active)", got)
	}
	// No environment: the revision's secrets travel with each call. The
	// stage's tag: what the stack's teardown deletes.
	if api.cfg.Environment != nil || aws.ToString(api.cfg.Description) == "" || api.tags[TagKey] != "stepgraph-test-" {
		t.Errorf("created %+v, tags %v", api.cfg, api.tags)
	}

	// A later revision of a function made when secrets were its
	// environment, and untagged: tagged, the environment emptied, then the
	// code, then a version.
	api.cfg.Environment = &types.EnvironmentResponse{Variables: map[string]string{"TOKEN": "old"}}
	api.tags = nil
	api.calls = nil
	arn, err = p.EnsureRuntime(ctx, testDeploy, "123456789012.dkr.ecr.us-east-1.amazonaws.com/agent:2")
	if err != nil {
		t.Fatal(err)
	}
	if arn != testARN+":2" {
		t.Fatalf("runtime %q, want %s:2", arn, testARN)
	}
	v2 := api.versions[1]
	if aws.ToString(v2.CodeSha256) != "123456789012.dkr.ecr.us-east-1.amazonaws.com/agent:2" || v2.Environment == nil || len(v2.Environment.Variables) != 0 {
		t.Errorf("version 2: image %s, environment %v", aws.ToString(v2.CodeSha256), v2.Environment.Variables)
	}
	if v1 := api.versions[0]; aws.ToString(v1.CodeSha256) != "123456789012.dkr.ecr.us-east-1.amazonaws.com/agent:1" {
		t.Errorf("version 1 changed: %s", aws.ToString(v1.CodeSha256))
	}
	if api.tags[TagKey] != "stepgraph-test-" {
		t.Errorf("tags after the update %v, want the stage's", api.tags)
	}
	want := []string{"GetFunction " + testName, "TagResource " + testARN, "GetFunction " + testName, "UpdateFunctionConfiguration",
		"GetFunction " + testName, "GetFunction " + testName, "UpdateFunctionCode", "GetFunction " + arn, "GetFunction " + arn}
	if got := strings.Join(api.calls, ", "); got != strings.Join(want, ", ") {
		t.Errorf("calls:\n got %s\nwant %s", got, strings.Join(want, ", "))
	}
}

func TestEnsureRuntimeCreatedMeanwhile(t *testing.T) {
	api := &fakeAPI{}
	// The first look-up misses; the function appears before the create.
	api.fail = map[string]error{"GetFunction " + testName: &types.ResourceNotFoundException{Message: aws.String("not found")}}
	api.exists = true
	api.cfg = types.FunctionConfiguration{FunctionArn: aws.String(testARN), PackageType: types.PackageTypeImage, Version: aws.String("$LATEST")}
	api.tags = map[string]string{TagKey: "stepgraph-test-"} // its creator tagged it
	arn, err := newProvisioner(api).EnsureRuntime(context.Background(), testDeploy, "img:1")
	if err != nil || arn != testARN+":1" {
		t.Fatalf("EnsureRuntime: %q, %v", arn, err)
	}
	if !strings.Contains(strings.Join(api.calls, ","), "CreateFunction,GetFunction "+testName+",GetFunction "+testName+",UpdateFunctionConfiguration") {
		t.Errorf("calls: %v, want an update after the create conflicted", api.calls)
	}
}

func TestEnsureRuntimeRefusals(t *testing.T) {
	ctx := context.Background()
	// No role: nothing is called, and the reason names the variable.
	api := &fakeAPI{}
	p := newProvisioner(api)
	p.RoleARN = ""
	_, err := p.EnsureRuntime(ctx, testDeploy, "img:1")
	wantRefused(t, err, "STEPGRAPH_RUNTIME_ROLE_ARN is not set")
	if len(api.calls) != 0 {
		t.Errorf("calls without a role: %v", api.calls)
	}

	// A prefix too long for a function name.
	p = newProvisioner(api)
	p.NamePrefix = strings.Repeat("p", 40)
	_, err = p.EnsureRuntime(ctx, testDeploy, "img:1")
	wantRefused(t, err, "not a valid Lambda function name", "too long")

	// Lambda refuses the image: its message is the reason.
	api = &fakeAPI{fail: map[string]error{"CreateFunction": &smithy.OperationError{ServiceID: "Lambda", OperationName: "CreateFunction",
		Err: &types.InvalidParameterValueException{Message: aws.String("Source image ghcr.io/acme/agent:1 is not valid.")}}}}
	_, err = newProvisioner(api).EnsureRuntime(ctx, testDeploy, "ghcr.io/acme/agent:1")
	wantRefused(t, err, "create function "+testName+" from image ghcr.io/acme/agent:1: InvalidParameterValueException: Source image ghcr.io/acme/agent:1 is not valid.")

	// The version never becomes active: Lambda's reason.
	api = &fakeAPI{final: types.StateFailed}
	_, err = newProvisioner(api).EnsureRuntime(ctx, testDeploy, "img:1")
	wantRefused(t, err, "function "+testARN+":1 failed: ImageAccessDenied: Lambda does not have permission")

	// Only the platform's own ECR: any other registry (another account,
	// another region, a public registry) is refused before any call.
	for _, img := range []string{"ghcr.io/acme/agent:1", "docker.io/library/python:3",
		"111122223333.dkr.ecr.eu-west-1.amazonaws.com/agent:1", "123456789012.dkr.ecr.us-east-1.amazonaws.com/agent:1",
		"123456789012.dkr.ecr.eu-west-1.amazonaws.com.evil.example/agent:1"} {
		api = &fakeAPI{}
		p = newProvisioner(api)
		p.Registry = ECRRegistry("123456789012", "eu-west-1")
		_, err = p.EnsureRuntime(ctx, testDeploy, img)
		wantRefused(t, err, "the image "+img+" is not in this platform's registry 123456789012.dkr.ecr.eu-west-1.amazonaws.com",
			"only from Amazon ECR in the platform's own account and region")
		if len(api.calls) != 0 {
			t.Errorf("calls for the foreign image %s: %v", img, api.calls)
		}
	}
	api = &fakeAPI{}
	p = newProvisioner(api)
	p.Registry = ECRRegistry("123456789012", "eu-west-1")
	if _, err = p.EnsureRuntime(ctx, testDeploy, "123456789012.dkr.ecr.eu-west-1.amazonaws.com/agent@sha256:"+strings.Repeat("a", 64)); err != nil {
		t.Errorf("an image of the platform's registry: %v", err)
	}

	// A function of that name that is not an image function is not ours.
	api = &fakeAPI{exists: true, cfg: types.FunctionConfiguration{FunctionArn: aws.String(testARN), PackageType: types.PackageTypeZip}}
	_, err = newProvisioner(api).EnsureRuntime(ctx, testDeploy, "img:1")
	wantRefused(t, err, "is not a container image function")
}

func TestEnsureRuntimePassingErrors(t *testing.T) {
	ctx := context.Background()
	throttled := &smithy.OperationError{ServiceID: "Lambda", OperationName: "CreateFunction",
		Err: &types.TooManyRequestsException{Message: aws.String("Rate exceeded")}}
	api := &fakeAPI{fail: map[string]error{"CreateFunction": throttled}}
	_, err := newProvisioner(api).EnsureRuntime(ctx, testDeploy, "img:1")
	var r *deployments.RuntimeRefusedError
	if err == nil || errors.As(err, &r) || !errors.Is(err, throttled) {
		t.Fatalf("throttled create: %v, want a passing error", err)
	}

	// Still busy when the wait ends: passing, tried again later.
	api = &fakeAPI{}
	p := newProvisioner(api)
	p.ReadyWait = 20 * time.Millisecond
	p.Poll = 50 * time.Millisecond
	_, err = p.EnsureRuntime(ctx, testDeploy, "img:1")
	if err == nil || errors.As(err, &r) || !strings.Contains(err.Error(), "is not active after") {
		t.Fatalf("a function still pending: %v, want a passing error", err)
	}
}

// DeleteRuntime removes the function with its versions, once: a function
// already gone is no error, another failure is.
func TestDeleteRuntime(t *testing.T) {
	ctx := context.Background()
	api := &fakeAPI{}
	p := newProvisioner(api)
	if _, err := p.EnsureRuntime(ctx, testDeploy, "img:1"); err != nil {
		t.Fatal(err)
	}
	api.calls = nil
	if err := p.DeleteRuntime(ctx, testDeploy); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteRuntime(ctx, testDeploy); err != nil {
		t.Errorf("deleting a deleted runtime: %v", err)
	}
	if got := strings.Join(api.calls, ", "); got != "DeleteFunction "+testName+", DeleteFunction "+testName {
		t.Errorf("calls: %s (want the unqualified name: every version)", got)
	}
	api.fail = map[string]error{"DeleteFunction " + testName: &types.ServiceException{Message: aws.String("try again")}}
	if err := p.DeleteRuntime(ctx, testDeploy); err == nil || !strings.Contains(err.Error(), "delete function "+testName) {
		t.Errorf("a failing delete: %v", err)
	}
}

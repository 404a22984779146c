// Package lambdaruntime makes the runtimes of external_docker deployments
// on AWS: for a deployment with an image_uri and no custom_url, the deploy
// worker creates (then, for later revisions, updates) a Lambda function
// from the image and serves the deployment's function nodes from it, with
// Lambda Invoke (Runtime, in invoke.go; docs/runtime-protocol.md).
//
// Provisioner implements deployments.RuntimeProvisioner. One function per
// deployment, named NamePrefix + "rt-" + the deployment id without its
// hyphens (so IAM grants can be scoped to NamePrefix + "rt-*"), with the
// execution role of STEPGRAPH_RUNTIME_ROLE_ARN and no environment: the
// revision's secrets are in no function's configuration (where
// GetFunctionConfiguration would show them, within 4 KB); each invoke call
// carries them (Runtime.Secrets, in invoke.go). Every EnsureRuntime
// publishes a version, and the runtime URL it returns is the ARN of that
// version: a revision keeps calling the code it was deployed with, a run
// started before a newer revision was deployed finishes on its own, and
// redeploying an older revision serves its version again. Deleting the
// deployment deletes the function with its versions (DeleteRuntime).
//
// Every function is tagged TagKey = NamePrefix (when it is created, or at
// its next revision if it was made untagged), and logs
// to LogGroup when one is set (the stack's runtimes log group, with the
// stack's retention: no log group is left to the runtime to create, never
// expiring). DeleteRuntimes, the stack's teardown (teardown.go), deletes
// the functions of one prefix that carry its tag, and only those.
//
// Functions invokes a function by name with the same retry policy for a
// caller with its own protocol: it is the pyapp.FunctionInvoker of a
// LangGraph app's runtime function (pyapp.LambdaClient).
package lambdaruntime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/graphdoc"
)

// API is the part of the Lambda API a Provisioner uses; *lambda.Client
// implements it.
type API interface {
	GetFunction(ctx context.Context, in *lambda.GetFunctionInput, optFns ...func(*lambda.Options)) (*lambda.GetFunctionOutput, error)
	CreateFunction(ctx context.Context, in *lambda.CreateFunctionInput, optFns ...func(*lambda.Options)) (*lambda.CreateFunctionOutput, error)
	UpdateFunctionConfiguration(ctx context.Context, in *lambda.UpdateFunctionConfigurationInput, optFns ...func(*lambda.Options)) (*lambda.UpdateFunctionConfigurationOutput, error)
	UpdateFunctionCode(ctx context.Context, in *lambda.UpdateFunctionCodeInput, optFns ...func(*lambda.Options)) (*lambda.UpdateFunctionCodeOutput, error)
	DeleteFunction(ctx context.Context, in *lambda.DeleteFunctionInput, optFns ...func(*lambda.Options)) (*lambda.DeleteFunctionOutput, error)
	TagResource(ctx context.Context, in *lambda.TagResourceInput, optFns ...func(*lambda.Options)) (*lambda.TagResourceOutput, error)
}

// EnvRoleARN names the environment variable that holds RoleARN (read by
// internal/lambdaapp); it appears in the reason a revision fails without it.
const EnvRoleARN = "STEPGRAPH_RUNTIME_ROLE_ARN"

// Defaults of a runtime function.
const (
	// DefaultMemoryMB is the functions' memory size.
	DefaultMemoryMB = 1024
	// DefaultTimeoutSeconds is Lambda's maximum: a function node's own
	// timeout (at most 900 s) is what bounds a call.
	DefaultTimeoutSeconds = 900
	// DefaultReadyWait bounds the wait for a function (version) to become
	// active after a create or an update.
	DefaultReadyWait = 3 * time.Minute
)

var _ deployments.RuntimeProvisioner = (*Provisioner)(nil)

// Provisioner creates and updates deployments' runtime functions.
type Provisioner struct {
	// Client makes the calls (a *lambda.Client). Required.
	Client API
	// NamePrefix begins every function name (the stack's resource prefix,
	// e.g. "stepgraph-prod-").
	NamePrefix string
	// RoleARN is the execution role of the functions. Empty: every
	// revision that needs a runtime fails, naming EnvRoleARN.
	RoleARN string
	// Registry, when set, is the only registry an image may come from: the
	// stack's ECR (ECRRegistry of its account and region), since Lambda
	// runs images from ECR in the function's own account and region only.
	// Any other image is refused before a call, with that reason.
	Registry string
	// LogGroup, when set, is the log group every function writes to
	// (Lambda's LoggingConfig): the stack's, so the runtimes' logs expire
	// with the stack's retention and go with the stack. Empty: Lambda's
	// default /aws/lambda/<name>, which the runtime would create.
	LogGroup string
	// MemoryMB and TimeoutSeconds of the functions (defaults above).
	MemoryMB       int32
	TimeoutSeconds int32
	// ReadyWait bounds the wait for a function to become active
	// (DefaultReadyWait); Poll is the interval of the checks (1 s).
	ReadyWait time.Duration
	Poll      time.Duration
}

// ECRRegistry is the ECR registry of account in region, e.g.
// 123456789012.dkr.ecr.eu-west-1.amazonaws.com ("" when either is
// unknown).
func ECRRegistry(account, region string) string {
	if account == "" || region == "" {
		return ""
	}
	domain := "amazonaws.com"
	if strings.HasPrefix(region, "cn-") {
		domain = "amazonaws.com.cn"
	}
	return account + ".dkr.ecr." + region + "." + domain
}

// namePattern is a Lambda function name.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// FunctionName is the name of a deployment's runtime function.
func FunctionName(prefix, deploymentID string) string {
	return prefix + "rt-" + strings.ReplaceAll(deploymentID, "-", "")
}

// Reserved implements deployments.RuntimeProvisioner: a function ARN whose
// name begins as the runtimes' names do.
func (p *Provisioner) Reserved(runtimeURL string) bool {
	if !graphdoc.IsLambdaFunctionARN(runtimeURL) {
		return false
	}
	name := strings.Split(runtimeURL, ":")[6]
	return strings.HasPrefix(name, FunctionName(p.NamePrefix, ""))
}

// DeleteRuntime implements deployments.RuntimeProvisioner: the deployment's
// function goes with all its versions (a delete of the unqualified name);
// a function already gone is no error.
func (p *Provisioner) DeleteRuntime(ctx context.Context, deploymentID string) error {
	name := FunctionName(p.NamePrefix, deploymentID)
	_, err := p.Client.DeleteFunction(ctx, &lambda.DeleteFunctionInput{FunctionName: aws.String(name)})
	var missing *types.ResourceNotFoundException
	if err == nil || errors.As(err, &missing) {
		return nil
	}
	return fmt.Errorf("delete function %s: %w", name, err)
}

// EnsureRuntime implements deployments.RuntimeProvisioner: the function of
// the deployment runs imageURI, as a new version whose ARN is returned.
func (p *Provisioner) EnsureRuntime(ctx context.Context, deploymentID, imageURI string) (string, error) {
	if p.RoleARN == "" {
		return "", refused("%s is not set: the platform has no IAM role to run the deployment's image as a Lambda function "+
			"(set it to the runtime role of the stack, or give the deployment a source_config.custom_url)", EnvRoleARN)
	}
	if p.Registry != "" && !strings.HasPrefix(imageURI, p.Registry+"/") {
		return "", refused("the image %s is not in this platform's registry %s: Lambda runs container images only from Amazon ECR "+
			"in the platform's own account and region (push the image to a repository there whose policy lets lambda.amazonaws.com pull it)",
			imageURI, p.Registry)
	}
	name := FunctionName(p.NamePrefix, deploymentID)
	if !namePattern.MatchString(name) {
		return "", refused("the runtime's function name %q is not a valid Lambda function name (1-64 of A-Z a-z 0-9 - _): "+
			"the platform's resource prefix %q is too long", name, p.NamePrefix)
	}
	got, err := p.Client.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
	var missing *types.ResourceNotFoundException
	switch {
	case errors.As(err, &missing):
		arn, version, created, err := p.create(ctx, name, deploymentID, imageURI)
		if err != nil || created {
			return p.ready(ctx, arn, version, err)
		}
		// Created meanwhile (a retried request, another worker): update it.
		if got, err = p.Client.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)}); err != nil {
			return "", p.failed("read function "+name, err)
		}
	case err != nil:
		return "", p.failed("read function "+name, err)
	}
	if err := p.tag(ctx, got); err != nil {
		return "", err
	}
	arn, version, err := p.update(ctx, name, got.Configuration, imageURI)
	return p.ready(ctx, arn, version, err)
}

// tag gives a function made before runtimes were tagged (or whose tag was
// changed) its stage's tag, so that the stack's teardown finds it.
func (p *Provisioner) tag(ctx context.Context, got *lambda.GetFunctionOutput) error {
	if got.Tags[TagKey] == p.NamePrefix || got.Configuration == nil || got.Configuration.PackageType != types.PackageTypeImage {
		return nil // tagged, or not a runtime (update refuses it)
	}
	arn := unqualified(aws.ToString(got.Configuration.FunctionArn))
	if _, err := p.Client.TagResource(ctx, &lambda.TagResourceInput{Resource: aws.String(arn),
		Tags: map[string]string{TagKey: p.NamePrefix}}); err != nil {
		return p.failed("tag function "+arn, err)
	}
	return nil
}

// create makes the function; created is false when it exists already.
func (p *Provisioner) create(ctx context.Context, name, deploymentID, imageURI string) (arn, version string, created bool, err error) {
	out, err := p.Client.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName:  aws.String(name),
		PackageType:   types.PackageTypeImage,
		Code:          &types.FunctionCode{ImageUri: aws.String(imageURI)},
		Role:          aws.String(p.RoleARN),
		Description:   aws.String(description(deploymentID)),
		MemorySize:    aws.Int32(cmp.Or(p.MemoryMB, DefaultMemoryMB)),
		Timeout:       aws.Int32(cmp.Or(p.TimeoutSeconds, DefaultTimeoutSeconds)),
		Publish:       true,
		Tags:          map[string]string{TagKey: p.NamePrefix},
		LoggingConfig: p.logging(),
	})
	var conflict *types.ResourceConflictException
	if errors.As(err, &conflict) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, p.failed("create function "+name+" from image "+imageURI, err)
	}
	return aws.ToString(out.FunctionArn), aws.ToString(out.Version), true, nil
}

// update points the function at the image, and publishes a version of it.
// The environment is emptied: a function made before secrets travelled
// with each call held them there.
func (p *Provisioner) update(ctx context.Context, name string, cfg *types.FunctionConfiguration, imageURI string) (arn, version string, err error) {
	if cfg == nil || cfg.PackageType != types.PackageTypeImage {
		return "", "", refused("function %s exists and is not a container image function: it is not the platform's runtime of this deployment", name)
	}
	if err := p.wait(ctx, name, false); err != nil {
		return "", "", err
	}
	if _, err := p.Client.UpdateFunctionConfiguration(ctx, &lambda.UpdateFunctionConfigurationInput{
		FunctionName:  aws.String(name),
		Role:          aws.String(p.RoleARN),
		MemorySize:    aws.Int32(cmp.Or(p.MemoryMB, DefaultMemoryMB)),
		Timeout:       aws.Int32(cmp.Or(p.TimeoutSeconds, DefaultTimeoutSeconds)),
		Environment:   &types.Environment{Variables: map[string]string{}},
		LoggingConfig: p.logging(),
	}); err != nil {
		return "", "", p.failed("configure function "+name, err)
	}
	if err := p.wait(ctx, name, false); err != nil {
		return "", "", err
	}
	out, err := p.Client.UpdateFunctionCode(ctx, &lambda.UpdateFunctionCodeInput{
		FunctionName: aws.String(name),
		ImageUri:     aws.String(imageURI),
		Publish:      true,
	})
	if err != nil {
		return "", "", p.failed("update function "+name+" to image "+imageURI, err)
	}
	return aws.ToString(out.FunctionArn), aws.ToString(out.Version), nil
}

// ready waits for the published version to be active and returns its ARN.
// A version that is not a number (no version was published) leaves the
// function's ARN unqualified.
func (p *Provisioner) ready(ctx context.Context, arn, version string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	arn = unqualified(arn)
	if version != "" && strings.Trim(version, "0123456789") == "" {
		arn += ":" + version
	}
	if err := p.wait(ctx, arn, true); err != nil {
		return "", err
	}
	return arn, nil
}

// wait polls the function (a name or an ARN, qualified or not) until no
// create or update of it is in progress. For the version just published
// (final), a function that failed is refused with Lambda's reason (an
// image it cannot pull, say); before an update, whatever failed earlier is
// what the update replaces.
func (p *Provisioner) wait(ctx context.Context, function string, final bool) error {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(p.ReadyWait, DefaultReadyWait))
	defer cancel()
	for {
		out, err := p.Client.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(function)})
		if err != nil {
			return p.failed("read function "+function, err)
		}
		c := out.Configuration
		if c == nil {
			return fmt.Errorf("read function %s: no configuration in the answer", function)
		}
		busy := c.State == types.StatePending || c.LastUpdateStatus == types.LastUpdateStatusInProgress
		switch {
		case busy:
		case final && c.State == types.StateFailed:
			return refused("function %s failed: %s: %s", function, c.StateReasonCode, aws.ToString(c.StateReason))
		case final && c.LastUpdateStatus == types.LastUpdateStatusFailed:
			return refused("the update of function %s failed: %s: %s", function, c.LastUpdateStatusReasonCode, aws.ToString(c.LastUpdateStatusReason))
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("function %s is not active after %v (state %s, last update %s)", function,
				cmp.Or(p.ReadyWait, DefaultReadyWait), c.State, c.LastUpdateStatus)
		case <-time.After(cmp.Or(p.Poll, time.Second)):
		}
	}
}

// refusedCodes are the Lambda errors that retrying cannot cure: the image,
// the environment or the role is refused, or the platform may not do it.
var refusedCodes = []string{
	"InvalidParameterValueException", "AccessDeniedException", "CodeStorageExceededException",
	"CodeVerificationFailedException", "InvalidCodeSignatureException", "RequestTooLargeException",
}

// failed classifies an error of the Lambda API: a refusal (the revision
// fails with Lambda's message) or a passing error.
func (p *Provisioner) failed(what string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) && slices.Contains(refusedCodes, api.ErrorCode()) {
		return refused("%s: %s: %s", what, api.ErrorCode(), api.ErrorMessage())
	}
	return fmt.Errorf("%s: %w", what, err)
}

// logging is the functions' LoggingConfig: LogGroup, when set.
func (p *Provisioner) logging() *types.LoggingConfig {
	if p.LogGroup == "" {
		return nil
	}
	return &types.LoggingConfig{LogGroup: aws.String(p.LogGroup)}
}

func refused(format string, args ...any) error {
	return &deployments.RuntimeRefusedError{Reason: fmt.Sprintf(format, args...)}
}

func description(deploymentID string) string {
	return "stepgraph: the function runtime of deployment " + deploymentID
}

// unqualified cuts a version or alias off a function ARN:
// arn:aws:lambda:<region>:<account>:function:<name>.
func unqualified(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) > 7 {
		return strings.Join(parts[:7], ":")
	}
	return arn
}

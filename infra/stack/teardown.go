package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3assets"
	"github.com/aws/jsii-runtime-go"
)

// What the stage makes at run time, outside CloudFormation, and how the
// stack finds it again to delete it (docs/aws.md, "Teardown").
const (
	// TeardownFunctionName follows the resource prefix in the name of the
	// function behind the Teardown custom resource: the deploy-worker's
	// bootstrap with EnvTeardown (internal/lambdaapp.StartTeardown).
	TeardownFunctionName = "teardown"
	// EnvTeardown makes the deploy-worker's bootstrap the teardown
	// (internal/lambdaapp.EnvTeardown).
	EnvTeardown = "STEPGRAPH_TEARDOWN"
	// TeardownRetainProperty is the custom resource's property: "true"
	// when the stack retains its data (internal/lambdaapp).
	TeardownRetainProperty = "RetainData"
	// RuntimeTagKey tags every runtime function with the resource prefix
	// and every secret with the secrets prefix of the stage that made it
	// (internal/lambdaruntime.TagKey, internal/secrets/aws.TagKey); the
	// teardown deletes only what carries its stage's values.
	RuntimeTagKey = "stepgraph:prefix"
	// RuntimesLogGroupName follows "/aws/lambda/" + the resource prefix in
	// the name of the log group every runtime function writes to.
	RuntimesLogGroupName = "runtimes"
	// EnvRuntimeLogGroup names it to the deploy-worker
	// (internal/lambdaapp.EnvRuntimeLogGroup).
	EnvRuntimeLogGroup = "STEPGRAPH_RUNTIME_LOG_GROUP"
)

// newRuntimesLogGroup is the log group of the runtime functions the
// deploy-worker makes (lambdaruntime.Provisioner.LogGroup): the stack's, so
// their logs have the stack's retention and removal policy instead of a
// never-expiring group per function that outlives the stack.
func newRuntimesLogGroup(s awscdk.Stack, p Props, prefix string, removal awscdk.RemovalPolicy) awslogs.LogGroup {
	return awslogs.NewLogGroup(s, jsii.String("Logs-runtimes"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + prefix + RuntimesLogGroupName),
		Retention:     p.LogRetention,
		RemovalPolicy: removal,
	})
}

// teardownDeps is what newTeardown needs of the rest of the stack.
type teardownDeps struct {
	prefix, secretsPrefix string
	lambdaDir             string
	arch                  awslambda.Architecture
	removal               awscdk.RemovalPolicy
	runtimesARN           *string
	secretsARN            string // every secret of the stage
	bucket                awss3.Bucket
}

// newTeardown declares the Teardown custom resource: on the stack's
// delete, its function deletes the stage's runtime functions (with their
// versions) and, unless the stack retains its data, the stage's secrets
// and the payload bucket's objects (internal/lambdaapp.Teardown). Its
// role may list functions and secrets (no resource-level permissions:
// on *) and delete only functions named like the stage's runtimes and
// secrets under the stage's prefix, each only when tagged with the
// stage's value. Every function of fns depends on it, so CloudFormation
// deletes them first: nothing makes a runtime or a secret while, or
// after, the teardown runs.
func newTeardown(s awscdk.Stack, p Props, d teardownDeps, fns map[string]awslambda.Function) awscdk.CustomResource {
	name := d.prefix + TeardownFunctionName
	logs := awslogs.NewLogGroup(s, jsii.String("Logs-"+TeardownFunctionName), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + name),
		Retention:     p.LogRetention,
		RemovalPolicy: d.removal,
	})
	role := awsiam.NewRole(s, jsii.String("Role-"+TeardownFunctionName), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("stepgraph " + p.Stage + " teardown: delete what the stage made at run time"),
	})
	logs.GrantWrite(role)
	statement := func(sid string, actions, resources []string, cond map[string]any) {
		ps := &awsiam.PolicyStatementProps{Sid: jsii.String(sid), Actions: jsii.Strings(actions...), Resources: jsii.Strings(resources...)}
		if cond != nil {
			ps.Conditions = &cond
		}
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(ps))
	}
	statement("ListFunctions", []string{"lambda:ListFunctions"}, []string{"*"}, nil)
	statement("ReadRuntimeTags", []string{"lambda:ListTags"}, []string{*d.runtimesARN}, nil)
	statement("DeleteRuntimes", []string{"lambda:DeleteFunction"}, []string{*d.runtimesARN},
		map[string]any{"StringEquals": map[string]any{"aws:ResourceTag/" + RuntimeTagKey: d.prefix}})
	env := map[string]*string{
		EnvTeardown:      jsii.String("true"),
		EnvTablePrefix:   jsii.String(d.prefix),
		EnvSecretsPrefix: jsii.String(d.secretsPrefix),
		EnvLogLevel:      jsii.String(p.LogLevel),
	}
	if !p.RetainData {
		statement("ListSecrets", []string{"secretsmanager:ListSecrets"}, []string{"*"}, nil)
		statement("DeleteSecrets", []string{"secretsmanager:DeleteSecret"}, []string{d.secretsARN},
			map[string]any{"StringEquals": map[string]any{"secretsmanager:ResourceTag/" + RuntimeTagKey: d.secretsPrefix}})
		statement("EmptyPayloads", []string{"s3:DeleteObject"}, []string{*d.bucket.ArnForObjects(jsii.String("*"))}, nil)
		statement("ListPayloads", []string{"s3:ListBucket"}, []string{*d.bucket.BucketArn()}, nil)
		env[EnvPayloadBucket] = d.bucket.BucketName()
	}
	fn := awslambda.NewFunction(s, jsii.String("Fn-"+TeardownFunctionName), &awslambda.FunctionProps{
		FunctionName: jsii.String(name),
		Description:  jsii.String("stepgraph teardown (the deploy-worker's bootstrap): the stack's Teardown custom resource"),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: d.arch,
		Handler:      jsii.String("bootstrap"),
		Code: awslambda.Code_FromAsset(jsii.String(d.lambdaDir), &awss3assets.AssetOptions{
			Exclude: jsii.Strings("*", "!bootstrap"),
		}),
		// Lambda's maximum: a stage with thousands of runtimes and secrets
		// deletes them one call each.
		Timeout:     awscdk.Duration_Minutes(jsii.Number(15)),
		MemorySize:  jsii.Number(256),
		Role:        role,
		LogGroup:    logs,
		Environment: &env,
	})
	retain := "false"
	if p.RetainData {
		retain = "true"
	}
	cr := awscdk.NewCustomResource(s, jsii.String("Teardown"), &awscdk.CustomResourceProps{
		ServiceToken:  fn.FunctionArn(),
		ResourceType:  jsii.String("Custom::Teardown"),
		Properties:    &map[string]any{TeardownRetainProperty: retain},
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	cr.Node().AddDependency(d.bucket)
	for _, f := range fns {
		f.Node().AddDependency(cr)
	}
	return cr
}

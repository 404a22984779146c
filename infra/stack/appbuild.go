package stack

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscodebuild"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3assets"
	"github.com/aws/jsii-runtime-go"
	"gopkg.in/yaml.v3"

	"github.com/stepgraph/stepgraph/internal/awsflow"
)

// The build of hosted_repo LangGraph apps (internal/codebuild): one
// CodeBuild project, <resource prefix>app-build, running `stepgraph build`
// (awsflow.AppBuildspec) on a revision's checkout that the deploy worker
// put in the payload bucket under builds/<deployment>/<revision>/, and
// writing app.zip and stepgraph_build.json beside it.
const (
	AppBuildProjectName = "app-build"
	// BuildCLIDir is the folder of Props.LambdaDir holding the stepgraph
	// CLI (linux, the stack's architecture) the builds run: `make
	// lambdas` writes it.
	BuildCLIDir = "stepgraph-build"
	// EnvBuildProject is the project's name, given to the functions
	// granted BuildsStart (internal/lambdaapp.EnvBuildProject).
	EnvBuildProject = "STEPGRAPH_BUILD_PROJECT"
	// BuildsStart: start and read the project's builds, read their logs.
	BuildsStart = "start"
)

// BuildImages are the CodeBuild images of the builds by architecture:
// Amazon Linux 2023 standard images with python3.11, the Lambda runtime
// the builds target (pip resolves wheels for Lambda's platform, not the
// build's).
var BuildImages = map[string]string{
	"arm64":  "aws/codebuild/amazonlinux2-aarch64-standard:3.0",
	"x86_64": "aws/codebuild/amazonlinux2-x86_64-standard:5.0",
}

// appBuild is the project and what the functions' grants name of it.
type appBuild struct {
	name, projectARN, logGroupARN string
}

// newAppBuild makes the project with its log group and a role that may
// only read a build's source, write its zip and manifest, read the CLI's
// asset and write the project's logs.
func newAppBuild(s awscdk.Stack, p Props, prefix string, bucket awss3.Bucket, removal awscdk.RemovalPolicy) (appBuild, error) {
	cliDir := filepath.Join(p.LambdaDir, BuildCLIDir)
	if _, err := os.Stat(filepath.Join(cliDir, "stepgraph")); err != nil {
		return appBuild{}, fmt.Errorf("the app builds' CLI: %v (run `make lambdas`)", err)
	}
	var spec struct {
		Version any `yaml:"version"`
	}
	if err := yaml.Unmarshal([]byte(awsflow.AppBuildspec), &spec); err != nil || spec.Version == nil {
		return appBuild{}, fmt.Errorf("awsflow.AppBuildspec: %w", err)
	}
	name := prefix + AppBuildProjectName
	cli := awss3assets.NewAsset(s, jsii.String("AppBuildCLI"), &awss3assets.AssetProps{
		Path: jsii.String(cliDir), Exclude: jsii.Strings("*", "!stepgraph"),
	})
	logs := awslogs.NewLogGroup(s, jsii.String("Logs-"+AppBuildProjectName), &awslogs.LogGroupProps{
		LogGroupName: jsii.String("/aws/codebuild/" + name), Retention: p.LogRetention, RemovalPolicy: removal,
	})
	var statements []awsiam.PolicyStatement
	statement := func(sid string, actions []string, resources ...*string) {
		statements = append(statements, awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String(sid), Actions: jsii.Strings(actions...), Resources: &resources,
		}))
	}
	statement("ReadSource", []string{"s3:GetObject"}, bucket.ArnForObjects(jsii.String("builds/*/source.zip")))
	statement("WriteBuild", []string{"s3:PutObject"}, bucket.ArnForObjects(jsii.String("builds/*/"+awsflow.BuildZip)),
		bucket.ArnForObjects(jsii.String("builds/*/"+awsflow.BuildManifest)))
	statement("ReadCLI", []string{"s3:GetObject"}, cli.Bucket().ArnForObjects(cli.S3ObjectKey()))
	statement("WriteLogs", []string{"logs:CreateLogStream", "logs:PutLogEvents"}, jsii.String(*logs.LogGroupArn()))
	// Inline: one resource less in a stack near CloudFormation's 500.
	role := awsiam.NewRole(s, jsii.String("Role-"+AppBuildProjectName), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("codebuild.amazonaws.com"), nil),
		Description: jsii.String("stepgraph " + p.Stage + " builds of LangGraph apps"),
		InlinePolicies: &map[string]awsiam.PolicyDocument{
			"app-build": awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &statements}),
		},
	})

	envType, image := "LINUX_CONTAINER", BuildImages["x86_64"]
	if p.Arch == "" || p.Arch == "arm64" {
		envType, image = "ARM_CONTAINER", BuildImages["arm64"]
	}
	project := awscodebuild.NewCfnProject(s, jsii.String("AppBuild"), &awscodebuild.CfnProjectProps{
		Name:        jsii.String(name),
		Description: jsii.String("stepgraph " + p.Stage + ": stepgraph build of hosted_repo LangGraph apps"),
		ServiceRole: role.RoleArn(),
		// The deploy worker gives each build its source (the checkout in
		// S3) and the buildspec; the project's own are the same buildspec
		// with no source.
		Source:    &awscodebuild.CfnProject_SourceProperty{Type: jsii.String("NO_SOURCE"), BuildSpec: jsii.String(awsflow.AppBuildspec)},
		Artifacts: &awscodebuild.CfnProject_ArtifactsProperty{Type: jsii.String("NO_ARTIFACTS")},
		Environment: &awscodebuild.CfnProject_EnvironmentProperty{
			Type: jsii.String(envType), ComputeType: jsii.String("BUILD_GENERAL1_MEDIUM"), Image: jsii.String(image),
			EnvironmentVariables: &[]any{&awscodebuild.CfnProject_EnvironmentVariableProperty{
				Name: jsii.String(awsflow.BuildEnvCLI), Value: cli.S3ObjectUrl(), Type: jsii.String("PLAINTEXT"),
			}},
		},
		LogsConfig: &awscodebuild.CfnProject_LogsConfigProperty{CloudWatchLogs: &awscodebuild.CfnProject_CloudWatchLogsConfigProperty{
			Status: jsii.String("ENABLED"), GroupName: logs.LogGroupName(),
		}},
		TimeoutInMinutes: jsii.Number(30),
	})
	return appBuild{name: name, projectARN: *project.AttrArn(), logGroupARN: *logs.LogGroupArn()}, nil
}

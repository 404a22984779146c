// Command infra is the stepgraph CDK app: `cdk synth` / `cdk deploy` run it
// (cdk.json: "go run ."). It declares one stack, "stepgraph-<stage>"; see
// package stack for what it holds.
//
// Context (cdk -c key=value):
//
//	stage     deployment name, prefixes every resource (default "dev")
//	arch      Lambda architecture: arm64 (default) or x86_64
//	logLevel  STEPGRAPH_LOG_LEVEL of the functions (default "info")
//	retain    "false" deletes tables and log groups with the stack
//	          (default: they are kept)
//	lambdaDir directory of <function>/bootstrap (default ../bin/lambdas)
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/stepgraph/stepgraph/infra/stack"
)

func main() {
	app := awscdk.NewApp(nil)
	err := build(app)
	if err == nil {
		app.Synth(nil)
	}
	jsii.Close() // stops the jsii node process, removes its temporary files
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

// build declares the stack on app as its context says.
func build(app awscdk.App) error {
	ctx := func(key, def string) string {
		if v, ok := app.Node().TryGetContext(jsii.String(key)).(string); ok && v != "" {
			return v
		}
		return def
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	lambdaDir := ctx("lambdaDir", "")
	if lambdaDir != "" && !filepath.IsAbs(lambdaDir) {
		lambdaDir = filepath.Join(root, "infra", lambdaDir)
	}
	stage := ctx("stage", "dev")
	p := stack.Props{
		StackProps: awscdk.StackProps{
			Description: jsii.String("stepgraph " + stage + ": serverless LangGraph-Platform-compatible agent platform"),
			// Account and region from the CLI's environment, when it has one.
			Env: &awscdk.Environment{
				Account: optional(os.Getenv("CDK_DEFAULT_ACCOUNT")),
				Region:  optional(os.Getenv("CDK_DEFAULT_REGION")),
			},
		},
		Stage:      stage,
		Arch:       ctx("arch", "arm64"),
		RepoRoot:   root,
		LambdaDir:  lambdaDir,
		LogLevel:   ctx("logLevel", "info"),
		RetainData: ctx("retain", "true") != "false",
	}
	_, err = stack.New(app, "stepgraph-"+stage, p)
	return err
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// repoRoot is the main module's directory: the parent of infra/, found from
// the working directory (cdk runs the app in infra/).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "internal", "api", "openapi.yaml")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no internal/api/openapi.yaml in %s or above", dir)
		}
	}
}

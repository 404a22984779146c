package codebuildlocal

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stepgraph/stepgraph/internal/awsflow"
	"github.com/stepgraph/stepgraph/internal/lambdaapp/sample"
)

// AWSCLIVenv is the project's venv of the AWS CLI (v1, pinned in
// scripts/install-test-deps.sh), relative to the module root.
const AWSCLIVenv = ".venv-awscli"

// toolsDir is where a build finds its tools first on PATH (under the
// build's own /tmp).
const toolsDir = "/tmp/codebuild/tools"

// CheckTools says whether root (the module root) has what builds need:
// the project's .venv interpreter (Python 3.11, with pip) and the AWS CLI
// of .venv-awscli; its error names the install script.
func CheckTools(root string) error {
	_, _, err := tools(root)
	return err
}

func tools(root string) (python, awscli string, err error) {
	python = filepath.Join(root, ".venv", "bin", "python")
	awscli = filepath.Join(root, AWSCLIVenv, "bin", "aws")
	for _, p := range []string{python, awscli} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("%s: %w (run scripts/install-test-deps.sh for the test dependencies)", p, err)
		}
	}
	return python, awscli, nil
}

// writeTools writes into dir what a build's PATH has first, as the
// CodeBuild image has it: python3 and python3.11 running the project's
// .venv interpreter, aws running the AWS CLI of .venv-awscli.
func writeTools(root, dir string) error {
	python, awscli, err := tools(root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, target := range map[string]string{"python3": python, "python3.11": python, "python": python, "aws": awscli} {
		script := fmt.Sprintf("#!/bin/sh\nexec %q \"$@\"\n", target)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// CLIKey is where PutCLI puts the CLI's asset in a bucket.
const CLIKey = "assets/stepgraph-cli.zip"

// PutCLI builds the stepgraph CLI for this machine (linux, CGO off), zips
// it as the stack's asset is (one executable named stepgraph: the
// buildspec's STEPGRAPH_CLI) and puts it at CLIKey in bucket on the
// emulator of cfg. root is the module root; dir a scratch directory.
func PutCLI(ctx context.Context, cfg aws.Config, root, bucket, dir string) error {
	bin := filepath.Join(dir, "stepgraph")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/stepgraph")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the stepgraph CLI: %w\n%s", err, out)
	}
	data, err := sample.ZipFile(bin, "stepgraph")
	if err != nil {
		return err
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(CLIKey), Body: bytes.NewReader(data)}); err != nil {
		return fmt.Errorf("put the CLI's asset to s3://%s/%s: %w", bucket, CLIKey, err)
	}
	return nil
}

// AppBuild is the stack's app-build project (infra/stack) as the tests
// run it: awsflow.AppBuildspec, STEPGRAPH_CLI at CLIKey in bucket (see
// PutCLI), python 3.11, and pip offline from the test wheelhouse
// (.deps/lambda-wheels/x86_64) through PIP_NO_INDEX and PIP_FIND_LINKS,
// the buildspec unchanged. root is the module root.
func AppBuild(cfg aws.Config, root, project, bucket, workDir string) Options {
	return Options{
		Project: Project{Name: project, Buildspec: awsflow.AppBuildspec,
			Env: map[string]string{awsflow.BuildEnvCLI: "s3://" + bucket + "/" + CLIKey}},
		AWS: cfg, Root: root, Runtimes: map[string]string{"python": "3.11"}, WorkDir: workDir,
		Env: map[string]string{"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": filepath.Join(root, ".deps", "lambda-wheels", "x86_64")},
	}
}

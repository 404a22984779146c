package codebuildlocal

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// CLIZip builds the stepgraph CLI for this machine (linux, CGO off) and
// zips it as the stack's asset is (one executable named stepgraph: the
// buildspec's STEPGRAPH_CLI). root is the module root.
func CLIZip(ctx context.Context, root, dir string) ([]byte, error) {
	bin := filepath.Join(dir, "stepgraph")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/stepgraph")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the stepgraph CLI: %w\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "stepgraph", Method: zip.Deflate}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err == nil {
		_, err = w.Write(data)
	}
	if err == nil {
		err = zw.Close()
	}
	return buf.Bytes(), err
}

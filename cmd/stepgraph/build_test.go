package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildWritesTheLambdaZip: stepgraph build DIR -o DIR/app.zip, twice:
// the zip has the manifest, and the second build (with the first zip in
// DIR) writes the same bytes, so a zip never packs an earlier one.
func TestBuildWritesTheLambdaZip(t *testing.T) {
	root, _ := filepath.Abs("../..")
	python := filepath.Join(root, ".venv", "bin", "python")
	wheels := filepath.Join(root, ".deps", "lambda-wheels", "x86_64")
	for _, p := range []string{python, wheels} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("no %s: run scripts/install-test-deps.sh", p)
		}
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "runtimes", "python", "tests", "apps", "basic"))); err != nil {
		t.Fatal(err)
	}
	zipPath := filepath.Join(dir, "app.zip")
	var zips [][]byte
	for range 2 {
		out, err := exec.Command(binary, "build", dir, "-o", zipPath, "-python", python, "-find-links", wheels, "-no-index").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "6 graphs for Lambda python3.11 on x86_64, handler stepgraph_runtime.lambda_handler.handler") {
			t.Fatalf("stepgraph build: %v\n%s", err, out)
		}
		b, err := os.ReadFile(zipPath)
		if err != nil {
			t.Fatal(err)
		}
		zips = append(zips, b)
	}
	if !bytes.Equal(zips[0], zips[1]) {
		t.Error("the second build differs from the first")
	}
	zr, err := zip.NewReader(bytes.NewReader(zips[0]), int64(len(zips[0])))
	if err != nil {
		t.Fatal(err)
	}
	f, err := zr.Open("stepgraph_build.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.NewDecoder(f).Decode(&m); err != nil || m["architecture"] != "x86_64" || m["runtime"] != "python3.11" {
		t.Errorf("manifest %v (%v)", m, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".stepgraph-build-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

// TestBuildRefusesBadInput: a missing app, an unknown architecture, a
// failed build: a clear error and no zip.
func TestBuildRefusesBadInput(t *testing.T) {
	root, _ := filepath.Abs("../..")
	app := filepath.Join(root, "runtimes", "python", "tests", "apps", "basic")
	zipPath := filepath.Join(t.TempDir(), "app.zip")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{t.TempDir()}, "langgraph.json: no such file"},
		{[]string{app, "-arch", "sparc"}, `arch: "sparc" is not a Lambda architecture (x86_64, arm64)`},
		{[]string{app, "-python-version", "3.8"}, `python version: "3.8" is not a Lambda Python runtime (3.11, 3.12, 3.13)`},
		{[]string{app, "extra"}, "build takes one app directory"},
	} {
		out, err := exec.Command(binary, append(append([]string{"build"}, tc.args...), "-o", zipPath)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("build %v: %v\n%s\nwant %q", tc.args, err, out, tc.want)
		}
		if _, err := os.Stat(zipPath); err == nil {
			t.Errorf("build %v wrote a zip", tc.args)
		}
	}
}

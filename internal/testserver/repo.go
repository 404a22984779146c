package testserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Module is the repository's Go module, which RepoRoot looks for.
const Module = "github.com/stepgraph/stepgraph"

// RepoRoot is the repository root: the nearest directory at or above the
// working directory whose go.mod declares Module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module "+Module+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s at or above the working directory", Module)
		}
		dir = parent
	}
}

// Build compiles ./cmd/stepgraph of the repository at root into binary,
// with further go build flags (e.g. -trimpath).
func Build(ctx context.Context, root, binary string, flags ...string) error {
	args := append(append([]string{"build"}, flags...), "-o", binary, "./cmd/stepgraph")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/stepgraph: %v\n%s", err, out)
	}
	return nil
}

// A Dep is a pinned test dependency that scripts/install-test-deps.sh
// installs into the repository (`make test-deps`).
type Dep int

const (
	// PythonSDK is the venv .venv from test/conformance/python/requirements.txt.
	PythonSDK Dep = iota
	// JSSDK is test/conformance/js/node_modules from its package-lock.json.
	JSSDK
	// Schemathesis is in .venv from test/schemathesis/requirements.txt
	// (constrained by the conformance pins).
	Schemathesis
	// UpstreamOpenAPI is .deps/langgraph-api/openapi.json, upstream's
	// document from the wheel pinned in
	// test/conformance/upstream/langgraph-api.pin.
	UpstreamOpenAPI
	// LangGraphDev is upstream's `langgraph dev` (langgraph-cli[inmem]) in
	// the venv .venv-langgraph-dev, from bench/peers/python/requirements.txt.
	LangGraphDev
)

// LangGraphDevBin is LangGraphDev's `langgraph` command, relative to the
// repository root.
const LangGraphDevBin = ".venv-langgraph-dev/bin/langgraph"

// UpstreamOpenAPIPath is where UpstreamOpenAPI lands, relative to the
// repository root.
const UpstreamOpenAPIPath = ".deps/langgraph-api/openapi.json"

// CheckDeps reports the dependencies among deps that are missing or were
// not installed from the current pin files, with how to install them; nil
// when all are in place. Each install leaves a stamp holding the sha256 of
// the files it was installed from, concatenated. A suite fails on this error
// rather than skip: a machine without the dependencies must not pass by
// accident.
func CheckDeps(root string, deps ...Dep) error {
	path := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	var problems []string
	for _, d := range deps {
		switch d {
		case PythonSDK:
			python := path(".venv/bin/python")
			if _, err := os.Stat(python); err != nil {
				problems = append(problems, fmt.Sprintf("Python venv missing: %s not found", python))
			} else if stale(path(".venv/.stepgraph-requirements.sha256"), path("test/conformance/python/requirements.txt")) {
				problems = append(problems, "Python venv .venv is not installed from the current test/conformance/python/requirements.txt")
			}
		case JSSDK:
			nm := path("test/conformance/js/node_modules")
			sdk := filepath.Join(nm, "@langchain", "langgraph-sdk", "package.json")
			if _, err := os.Stat(sdk); err != nil {
				problems = append(problems, fmt.Sprintf("npm packages missing: %s not found", sdk))
			} else if stale(filepath.Join(nm, ".stepgraph-lock.sha256"), path("test/conformance/js/package-lock.json")) {
				problems = append(problems, "test/conformance/js/node_modules is not installed from the current package-lock.json")
			}
		case Schemathesis:
			bin := path(".venv/bin/schemathesis")
			if _, err := os.Stat(bin); err != nil {
				problems = append(problems, fmt.Sprintf("schemathesis is not installed: %s not found", bin))
			} else if stale(path(".venv/.stepgraph-schemathesis.sha256"),
				path("test/conformance/python/requirements.txt"), path("test/schemathesis/requirements.txt")) {
				problems = append(problems, "schemathesis in .venv is not installed from the current test/schemathesis/requirements.txt")
			}
		case UpstreamOpenAPI:
			doc := path(UpstreamOpenAPIPath)
			if _, err := os.Stat(doc); err != nil {
				problems = append(problems, fmt.Sprintf("upstream's OpenAPI document missing: %s not found", doc))
			} else if stale(path(".deps/langgraph-api/.stepgraph-pin.sha256"), path("test/conformance/upstream/langgraph-api.pin")) {
				problems = append(problems, ".deps/langgraph-api is not installed from the current test/conformance/upstream/langgraph-api.pin")
			}
		case LangGraphDev:
			bin := path(LangGraphDevBin)
			if _, err := os.Stat(bin); err != nil {
				problems = append(problems, fmt.Sprintf("upstream's langgraph dev is not installed: %s not found", bin))
			} else if stale(path(".venv-langgraph-dev/.stepgraph-requirements.sha256"), path("bench/peers/python/requirements.txt")) {
				problems = append(problems, ".venv-langgraph-dev is not installed from the current bench/peers/python/requirements.txt")
			}
		default:
			return fmt.Errorf("testserver: unknown dependency %d", d)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "\n") +
		"\nrun `make test-deps` (scripts/install-test-deps.sh) to install the pinned test dependencies")
}

// stale reports whether stamp does not hold the sha256 of the files srcs,
// concatenated.
func stale(stamp string, srcs ...string) bool {
	want, err := os.ReadFile(stamp)
	if err != nil {
		return true
	}
	h := sha256.New()
	for _, src := range srcs {
		data, err := os.ReadFile(src)
		if err != nil {
			return true
		}
		h.Write(data)
	}
	return strings.TrimSpace(string(want)) != hex.EncodeToString(h.Sum(nil))
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

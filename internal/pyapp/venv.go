package pyapp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// VenvStamp is the file of a virtual environment Venv made, saying what it
// was made from. A virtual environment without it is the developer's own.
const VenvStamp = ".stepgraph-venv.json"

// Venv makes or reuses the virtual environment of an app (stepgraph dev's
// DIR/.venv): the runtime's pinned requirements and the app's dependencies
// as the app pins them (langgraph.json dependencies), installed together.
type Venv struct {
	// Dir is the environment's directory.
	Dir string
	// BasePython makes it (python -m venv; default python3).
	BasePython string
	// RuntimeDir holds the stepgraph_runtime package (pyruntime.Extract):
	// it reads the app's dependencies and installs them.
	RuntimeDir string
	// Requirements are the runtime's pins (pyruntime.Requirements).
	Requirements []byte
	// FindLinks and NoIndex are pip's options (a wheelhouse; no index).
	FindLinks string
	NoIndex   bool
}

// VenvOutcome says what Ensure did.
type VenvOutcome string

const (
	VenvMade    VenvOutcome = "made"    // there was none
	VenvRebuilt VenvOutcome = "rebuilt" // its inputs changed
	VenvReused  VenvOutcome = "reused"  // unchanged: pip did not run
	VenvOwn     VenvOutcome = "own"     // not stepgraph's: used as is
)

// venvStamp is what an environment was made from: when any of it changes,
// the environment is made again.
type venvStamp struct {
	BasePython   string   `json:"base_python"`
	Runtime      string   `json:"runtime_requirements_sha256"`
	Requirements []string `json:"app_requirements"`
}

// Python is the environment's interpreter.
func (v Venv) Python() string { return filepath.Join(v.Dir, "bin", "python") }

// Ensure returns the interpreter of the app's environment (config is its
// langgraph.json), making the environment when there is none or its
// inputs changed. An error names what went wrong: a dependency pip could
// not install, an invalid langgraph.json.
func (v Venv) Ensure(ctx context.Context, config string) (string, VenvOutcome, error) {
	stampPath := filepath.Join(v.Dir, VenvStamp)
	old, err := os.ReadFile(stampPath)
	hasPython := fileExists(v.Python())
	switch {
	case err == nil:
	case !errors.Is(err, fs.ErrNotExist):
		return "", "", err
	case hasPython:
		return v.Python(), VenvOwn, nil
	case fileExists(v.Dir):
		return "", "", fmt.Errorf("%s exists but is not a virtual environment: remove it (stepgraph dev makes one there) or pass -python", v.Dir)
	}
	want, err := v.stamp(ctx, config)
	if err != nil {
		return "", "", err
	}
	if hasPython && bytes.Equal(old, want) {
		return v.Python(), VenvReused, nil
	}
	outcome := VenvMade
	if old != nil {
		outcome = VenvRebuilt
	}
	if err := v.make(ctx, config); err != nil {
		// Half made, it would pass for the developer's own next time.
		_ = os.RemoveAll(v.Dir)
		return "", "", err
	}
	return v.Python(), outcome, os.WriteFile(stampPath, want, 0o644)
}

func (v Venv) base() string {
	if v.BasePython != "" {
		return v.BasePython
	}
	return "python3"
}

// stamp reads the app's requirements (with the base interpreter: only the
// standard library is needed) and says what the environment is made from.
func (v Venv) stamp(ctx context.Context, config string) ([]byte, error) {
	var answer struct {
		Requirements []string `json:"requirements"`
	}
	if err := v.runtime(ctx, v.base(), config, &answer, "--list"); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(v.Requirements)
	base, err := exec.LookPath(v.base())
	if err != nil {
		return nil, fmt.Errorf("the base interpreter: %w", err)
	}
	b, err := json.MarshalIndent(venvStamp{BasePython: base, Runtime: hex.EncodeToString(sum[:]),
		Requirements: answer.Requirements}, "", "  ")
	return append(b, '\n'), err
}

// make makes the environment and installs everything in one pip run, so
// pip resolves the app's pins and the runtime's together.
func (v Venv) make(ctx context.Context, config string) error {
	if err := os.RemoveAll(v.Dir); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, v.base(), "-m", "venv", v.Dir).CombinedOutput(); err != nil {
		return fmt.Errorf("%s -m venv %s: %v: %s", v.base(), v.Dir, err, tail(string(out), 2000))
	}
	reqs := filepath.Join(v.Dir, "stepgraph-runtime-requirements.txt")
	if err := os.WriteFile(reqs, v.Requirements, 0o644); err != nil {
		return err
	}
	args := []string{"--requirement", reqs}
	if v.NoIndex {
		args = append(args, "--no-index")
	}
	if v.FindLinks != "" {
		args = append(args, "--find-links", v.FindLinks)
	}
	return v.runtime(ctx, v.Python(), config, &struct{}{}, args...)
}

// runtime runs the runtime's env module on the app with python and decodes
// its answer; its refusal's message is the error.
func (v Venv) runtime(ctx context.Context, python, config string, answer any, args ...string) error {
	// The developer's own environment: pip's configuration (an index, a proxy) applies.
	return envCommand{Python: python, Args: append([]string{"--config", config}, args...), Dir: filepath.Dir(config),
		Env: append(os.Environ(), "PYTHONPATH="+v.RuntimeDir)}.run(ctx, answer)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

package pyapp_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/pyapp"
	pyruntime "github.com/stepgraph/stepgraph/runtimes/python"
)

// wheelhouse holds the wheels of the runtime's pins
// (scripts/install-test-deps.sh downloads them): environments are made
// offline.
func wheelhouse(t *testing.T) string {
	dir := filepath.Join(repoRoot(t), ".deps", "wheelhouse")
	if _, err := os.Stat(filepath.Join(dir, ".stepgraph-pyruntime.sha256")); err != nil {
		t.Fatalf("no %s: run scripts/install-test-deps.sh", dir)
	}
	return dir
}

// TestVenvMadeReusedAndRebuilt: an app's environment is made with the
// runtime's pins and the app's dependencies, reused while they are
// unchanged, made again when they change, and a dependency pip cannot
// install is named.
func TestVenvMadeReusedAndRebuilt(t *testing.T) {
	app := t.TempDir()
	if err := os.CopyFS(app, os.DirFS(filepath.Join(repoRoot(t), "runtimes", "python", "tests", "apps", "basic"))); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(app, "langgraph.json")
	v := pyapp.Venv{Dir: filepath.Join(app, ".venv"), RuntimeDir: filepath.Join(repoRoot(t), "runtimes", "python"),
		Requirements: pyruntime.Requirements, FindLinks: wheelhouse(t), NoIndex: true}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	py, outcome, err := v.Ensure(ctx, config)
	if err != nil || outcome != pyapp.VenvMade {
		t.Fatalf("first Ensure: %q, %v; want made", outcome, err)
	}
	if out, err := exec.Command(py, "-c", "import langgraph, langchain_core, packaging").CombinedOutput(); err != nil {
		t.Fatalf("the environment made lacks the runtime's requirements: %v\n%s", err, out)
	}
	stamp, _ := os.ReadFile(filepath.Join(v.Dir, pyapp.VenvStamp))
	for _, want := range []string{"langgraph==1.2.22", "langchain-core==1.7.2", "runtime_requirements_sha256"} {
		if !strings.Contains(string(stamp), want) {
			t.Errorf("the stamp does not say it was made from %q:\n%s", want, stamp)
		}
	}

	// Reused: pip must not run; an unusable wheelhouse would make it fail.
	v.FindLinks = t.TempDir()
	if py2, outcome, err := v.Ensure(ctx, config); err != nil || outcome != pyapp.VenvReused || py2 != py {
		t.Fatalf("second Ensure: %q, %q, %v; want %q reused", py2, outcome, err, py)
	}
	v.FindLinks = wheelhouse(t)

	pyproject := filepath.Join(app, "pyproject.toml")
	src, _ := os.ReadFile(pyproject)
	changed := strings.Replace(string(src), `"langchain-core==1.7.2"]`, `"langchain-core==1.7.2", "no-such-package-stepgraph==1.0"]`, 1)
	if err := os.WriteFile(pyproject, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = v.Ensure(ctx, config)
	if err == nil || !strings.Contains(err.Error(), "pip could not install no-such-package-stepgraph==1.0") {
		t.Fatalf("Ensure with a dependency no wheel provides: %v; want it named", err)
	}
	if _, err := os.Stat(v.Dir); !os.IsNotExist(err) {
		t.Errorf("a half-made environment is left (%v): it would pass for the developer's own", err)
	}
}

// TestVenvOfTheDeveloperIsUsedAsIs: a virtual environment stepgraph did
// not make (no stamp) is never changed.
func TestVenvOfTheDeveloperIsUsedAsIs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".venv")
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "python"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	v := pyapp.Venv{Dir: dir, BasePython: "no-such-python-stepgraph"}
	py, outcome, err := v.Ensure(context.Background(), filepath.Join(t.TempDir(), "langgraph.json"))
	if err != nil || outcome != pyapp.VenvOwn || py != filepath.Join(dir, "bin", "python") {
		t.Fatalf("Ensure: %q, %q, %v; want the developer's own interpreter", py, outcome, err)
	}
}

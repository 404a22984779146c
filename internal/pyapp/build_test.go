package pyapp_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/pyapp"
	pyruntime "github.com/stepgraph/stepgraph/runtimes/python"
)

// lambdaWheels is the Lambda wheels scripts/install-test-deps.sh downloads
// (the runtime's pins, python3.11 on x86_64): builds run offline.
func lambdaWheels(t *testing.T) string {
	w := filepath.Join(repoRoot(t), ".deps", "lambda-wheels", "x86_64")
	if _, err := os.Stat(w); err != nil {
		t.Fatalf("no %s: run scripts/install-test-deps.sh", w)
	}
	return w
}

func buildOptions(t *testing.T) pyapp.BuildOptions {
	return pyapp.BuildOptions{Dir: filepath.Dir(basicApp(t)), Python: python(t), RuntimeFiles: pyruntime.Files(),
		RuntimeRequirements: pyruntime.Requirements, FindLinks: lambdaWheels(t), NoIndex: true}
}

// basicZip is the basic app's zip, built once for the tests that need one.
var basicZip struct {
	once sync.Once
	code []byte
	m    pyapp.Manifest
	err  error
}

func builtBasicApp(t *testing.T) ([]byte, pyapp.Manifest) {
	t.Helper()
	basicZip.once.Do(func() { basicZip.code, basicZip.m, basicZip.err = build(t, buildOptions(t)) })
	if basicZip.err != nil {
		t.Fatal(basicZip.err)
	}
	return basicZip.code, basicZip.m
}

func build(t *testing.T, opts pyapp.BuildOptions) ([]byte, pyapp.Manifest, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var buf bytes.Buffer
	m, err := pyapp.Build(ctx, opts, &buf)
	return buf.Bytes(), m, err
}

// TestBuildLambdaZip: the zip holds the app, its dependencies and the
// runtime's as Lambda wheels, the runtime and the manifest; the same input
// makes the same bytes; unzipped, it serves the app with nothing else on
// the interpreter's path (as Lambda runs it from /var/task).
func TestBuildLambdaZip(t *testing.T) {
	first, m := builtBasicApp(t)
	again, _, err := build(t, buildOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Error("two builds of the same app differ")
	}
	zr, err := zip.NewReader(bytes.NewReader(first), int64(len(first)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if !f.Modified.Equal(time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)) || f.Mode().Perm()&^0o111 != 0o644 {
			t.Errorf("%s: time %s, mode %s", f.Name, f.Modified, f.Mode())
		}
		if strings.HasSuffix(f.Name, ".pyc") || strings.HasPrefix(f.Name, "bin/") || strings.Contains(f.Name, "__pycache__") {
			t.Errorf("%s is in the zip", f.Name)
		}
	}
	if !slices.IsSorted(names) {
		t.Error("the entries are not sorted")
	}
	for _, want := range []string{"langgraph.json", "src/agent/react.py", "stepgraph_runtime/lambda_handler.py",
		"stepgraph_build.json", "langgraph/pregel/main.py", "pydantic_core/__init__.py", "ormsgpack/__init__.py"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s in the zip", want)
		}
	}
	if !slices.ContainsFunc(names, func(n string) bool {
		return strings.HasPrefix(n, "pydantic_core/_pydantic_core.cpython-311-x86_64-linux-gnu") && strings.HasSuffix(n, ".so")
	}) {
		t.Error("no binary pydantic_core for cpython 3.11 on x86_64")
	}
	f, err := zr.Open("stepgraph_build.json")
	if err != nil {
		t.Fatal(err)
	}
	var inZip pyapp.Manifest
	if err := json.NewDecoder(f).Decode(&inZip); err != nil {
		t.Fatal(err)
	}
	if inZip.Handler != "stepgraph_runtime.lambda_handler.handler" || inZip.Runtime != "python3.11" || inZip.Architecture != "x86_64" ||
		inZip.Graphs["agent"] != "./src/agent/react.py:graph" || len(inZip.Graphs) != 6 || inZip.Unzipped != m.Unzipped ||
		!slices.Equal(inZip.Requirements, []string{"langgraph==1.2.22", "langchain-core==1.7.2"}) {
		t.Errorf("manifest %+v", inZip)
	}

	// unzipped, with only its directory on the path (-S: no site-packages)
	root := t.TempDir()
	for _, f := range zr.File {
		dst := filepath.Join(root, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		rc, _ := f.Open()
		var b bytes.Buffer
		_, _ = b.ReadFrom(rc)
		rc.Close()
		if err := os.WriteFile(dst, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(python(t), "-S", "-m", "stepgraph_runtime.lambda_handler", "--config", filepath.Join(root, "langgraph.json"))
	cmd.Dir = root
	cmd.Env = []string{"PYTHONPATH=" + root, "LAMBDA_TASK_ROOT=" + root, "PATH=/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader(`{"action": "run", "request": {"graph": "mapreduce", "thread_id": "t", "input": {"subjects": ["owls"]}}}`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the unzipped handler: %v: %s", err, out)
	}
	var res struct {
		Status int `json:"status"`
		Body   struct {
			Messages []pyapp.Message `json:"messages"`
		} `json:"body"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.Status != 200 || len(res.Body.Messages) == 0 {
		t.Fatalf("the unzipped handler answered %.500s (%v)", out, err)
	}
	if end := res.Body.Messages[len(res.Body.Messages)-1]; end.Status != "success" || !strings.Contains(string(end.Values), `"best":"a joke about owls"`) {
		t.Errorf("end %+v %s", end, end.Values)
	}
}

// TestBuildRefusals: another architecture without its wheels, an app over
// the size limit, an unknown architecture or runtime: clear errors.
func TestBuildRefusals(t *testing.T) {
	opts := buildOptions(t)
	opts.Arch = "arm64" // the wheelhouse has x86_64 wheels only
	if _, _, err := build(t, opts); err == nil || !strings.Contains(err.Error(), "for Lambda python3.11 on arm64 (binary wheels only)") {
		t.Errorf("arm64 from x86_64 wheels: %v", err)
	}
	opts = buildOptions(t)
	opts.MaxUnzipped = 1 << 20
	if _, _, err := build(t, opts); err == nil || !strings.Contains(err.Error(), "over Lambda's limit of 1.0 MB for a function's code (largest: ") {
		t.Errorf("over the limit: %v", err)
	}
	for _, o := range []pyapp.BuildOptions{{Arch: "sparc"}, {PythonVersion: "3.9"}} {
		base := buildOptions(t)
		base.Arch, base.PythonVersion = o.Arch, o.PythonVersion
		if _, _, err := build(t, base); err == nil || !strings.Contains(err.Error(), "is not a Lambda") {
			t.Errorf("%+v: %v", o, err)
		}
	}
	js := t.TempDir()
	if err := os.WriteFile(filepath.Join(js, "langgraph.json"), []byte(`{"graphs": {"a": "./src/graph.ts:graph"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	opts = buildOptions(t)
	opts.Dir = js
	if _, _, err := build(t, opts); err == nil || !strings.Contains(err.Error(), "JavaScript LangGraph apps are not supported") {
		t.Errorf("a JS app: %v", err)
	}
}

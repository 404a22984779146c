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

// TestBuildImageContext: -image writes a Docker build context — the zip's
// files under app/ and a Dockerfile FROM the Lambda Python base image of
// the build that runs the runtime's handler — whose handler, run from the
// context's app/ with nothing else on the path (as Lambda runs it from
// ${LAMBDA_TASK_ROOT}), says it is a LangGraph app (the function runtime
// protocol's describe) and serves its graphs (health). No image is built:
// there is no Docker engine here.
func TestBuildImageContext(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "image")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := pyapp.BuildImage(ctx, buildOptions(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	docker, err := os.ReadFile(filepath.Join(dir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"FROM --platform=linux/amd64 public.ecr.aws/lambda/python:3.11\n",
		"COPY app/ ${LAMBDA_TASK_ROOT}/\n",
		`CMD ["stepgraph_runtime.lambda_handler.handler"]` + "\n",
		"# graphs: agent, hitl, mapreduce, memory, parent, slow\n",
		"--entrypoint python3 APP -m stepgraph_runtime.server --config langgraph.json --host 0.0.0.0 --port 8080\n",
	} {
		if !strings.Contains(string(docker), line) {
			t.Errorf("the Dockerfile has no %q:\n%s", line, docker)
		}
	}
	app := filepath.Join(dir, pyapp.ImageContextApp)
	for _, want := range []string{"langgraph.json", "src/agent/hitl.py", "stepgraph_runtime/lambda_handler.py", "stepgraph_build.json", "langgraph/pregel/main.py"} {
		if _, err := os.Stat(filepath.Join(app, filepath.FromSlash(want))); err != nil {
			t.Errorf("the context has no app/%s: %v", want, err)
		}
	}
	if m.Handler != pyapp.LambdaHandler || m.Runtime != "python3.11" || len(m.Graphs) != 6 {
		t.Errorf("manifest %+v", m)
	}
	invoke := func(event string) []byte {
		t.Helper()
		cmd := exec.Command(python(t), "-S", "-m", "stepgraph_runtime.lambda_handler", "--config", "langgraph.json")
		cmd.Dir = app
		cmd.Env = []string{"PYTHONPATH=" + app, "LAMBDA_TASK_ROOT=" + app, "PATH=/usr/bin:/bin"}
		cmd.Stdin = strings.NewReader(event)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("the context's handler on %s: %v: %s", event, err, out)
		}
		return out
	}
	var described struct {
		App struct {
			Graphs map[string]string `json:"graphs"`
		} `json:"langgraph_app"`
	}
	if out := invoke(`{"action": "describe"}`); json.Unmarshal(out, &described) != nil || described.App.Graphs["hitl"] != "./src/agent/hitl.py:graph" {
		t.Errorf("describe answered %.500s", out)
	}
	var health struct {
		Status int `json:"status"`
		Body   struct {
			Graphs []string `json:"graphs"`
		} `json:"body"`
	}
	if out := invoke(`{"action": "health", "request": {}}`); json.Unmarshal(out, &health) != nil || health.Status != 200 || len(health.Body.Graphs) != 6 {
		t.Errorf("health answered %.500s", out)
	}

	// A directory that is not empty is refused before anything is built.
	if _, err := pyapp.BuildImage(ctx, buildOptions(t), dir); err == nil || !strings.Contains(err.Error(), "exists and is not empty") {
		t.Errorf("into a full directory: %v", err)
	}
}

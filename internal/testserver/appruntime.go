package testserver

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// StartAppRuntime starts stepgraph_runtime's HTTP server on the LangGraph
// app in dir (its langgraph.json) with the repository's .venv interpreter,
// as an image's entrypoint would (no token, a free port on 127.0.0.1), and
// answers the runtime's URL. Its standard error goes to stderr (nil: the
// test's log). The runtime is killed at the test's cleanup (and exits with
// its parent).
func StartAppRuntime(t TB, root, dir string, stderr io.Writer) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, ".venv", "bin", "python"), "-m", "stepgraph_runtime.server",
		"--config", "langgraph.json", "--port", "0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "runtimes", "python"), "PYTHONDONTWRITEBYTECODE=1")
	cmd.Stderr = stderr
	if stderr == nil {
		cmd.Stderr = logWriter{t}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("the app's runtime: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("the app's runtime: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		t.Fatalf("the app's runtime printed no hello line: %v", err)
	}
	var hello struct {
		Listening string `json:"listening"`
	}
	if err := json.Unmarshal(line, &hello); err != nil || hello.Listening == "" {
		t.Fatalf("the app's runtime's hello line: %s", line)
	}
	return hello.Listening
}

type logWriter struct{ t TB }

func (w logWriter) Write(b []byte) (int, error) { w.t.Logf("runtime: %s", b); return len(b), nil }

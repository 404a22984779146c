package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDevChecksTheApp: stepgraph dev says what is wrong with DIR before
// serving anything.
func TestDevChecksTheApp(t *testing.T) {
	root, _ := filepath.Abs("../..")
	offline := []string{"-no-index", "-find-links", filepath.Join(root, ".deps", "wheelhouse")}
	cases := []struct {
		name, config, want string
		args               []string
	}{
		{"missing", "", "langgraph.json: no such file: stepgraph dev serves a LangGraph app", nil},
		{"invalid", "{", "langgraph.json: is not valid JSON", nil},
		{"javascript", `{"graphs": {"a": "./src/a.ts:graph"}}`, "JavaScript LangGraph apps are not supported", nil},
		{"documents", `{"graphs": {"a": "graphs/a.yaml"}}`, "/graphs: must name the app's Python graphs", nil},
		// stepgraph owns checkpointing: refused before anything is installed.
		{"checkpointer", `{"graphs": {"a": "./a.py:graph"}, "checkpointer": {"path": "./cp.py:saver"}}`,
			"langgraph.json: /checkpointer: stepgraph stores every checkpoint", nil},
		// The virtual environment stepgraph dev makes names what pip lacks.
		{"dependency", `{"graphs": {"a": "./a.py:graph"}, "dependencies": ["no-such-package-stepgraph==1.0"]}`,
			"pip could not install no-such-package-stepgraph==1.0", offline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(dir, "langgraph.json"), []byte(tc.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, err := exec.Command(binary, append(append([]string{"dev"}, tc.args...), dir)...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("stepgraph dev: %v\n%s\nwant %q", err, out, tc.want)
			}
		})
	}
}

// TestDevServesAndReloads: stepgraph dev on a LangGraph app serves its
// graphs, and a change to its files is served at once (a new revision).
func TestDevServesAndReloads(t *testing.T) {
	root, _ := filepath.Abs("../..")
	python := filepath.Join(root, ".venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("no %s: run scripts/install-test-deps.sh", python)
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "runtimes", "python", "tests", "apps", "basic"))); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "dev", "-addr", "127.0.0.1:0", "-python", python, "-poll", "100ms", dir)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	keyc, addrc := make(chan string, 1), make(chan string, 1)
	go scan(stdout, regexp.MustCompile(`API key of this session: (\S+)`), keyc)
	go scan(stderr, regexp.MustCompile(`msg=listening addr=(\S+)`), addrc)
	var key, addr string
	for key == "" || addr == "" {
		select {
		case key = <-keyc:
		case addr = <-addrc:
		case <-time.After(2 * time.Minute):
			t.Fatal("stepgraph dev did not start")
		}
	}
	answer := func() string {
		req, _ := http.NewRequest("POST", "http://"+addr+"/runs/wait", strings.NewReader(`{"assistant_id": "mapreduce", "input": {"subjects": ["owls"]}}`))
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			return ""
		}
		return string(b)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute) // a safety net only
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("the app to be served", func() bool { return strings.Contains(answer(), "a joke about owls") })
	file := filepath.Join(dir, "src", "agent", "mapreduce.py")
	src, _ := os.ReadFile(file)
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(src), "a joke about", "a pun about")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor("the change to be served", func() bool { return strings.Contains(answer(), "a pun about owls") })
}

func scan(r io.Reader, re *regexp.Regexp, found chan<- string) {
	sc := bufio.NewScanner(r)
	sent := false
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
			found <- m[1]
			sent = true
		}
	}
}

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
	dir := basicAppCopy(t, root)
	d := startDev(t, "-python", python, "-poll", "100ms", dir)
	waitFor(t, "the app to be served", func() bool { return strings.Contains(d.answer(t), "a joke about owls") })
	file := filepath.Join(dir, "src", "agent", "mapreduce.py")
	src, _ := os.ReadFile(file)
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(src), "a joke about", "a pun about")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the change to be served", func() bool { return strings.Contains(d.answer(t), "a pun about owls") })
}

// TestDevMakesThenReusesTheVenv: without -python, stepgraph dev makes
// DIR/.venv (offline, from the wheelhouse) and serves the app with it; the
// next start reuses it.
func TestDevMakesThenReusesTheVenv(t *testing.T) {
	root, _ := filepath.Abs("../..")
	wheels := filepath.Join(root, ".deps", "wheelhouse")
	if _, err := os.Stat(filepath.Join(wheels, ".stepgraph-pyruntime.sha256")); err != nil {
		t.Fatalf("no %s: run scripts/install-test-deps.sh", wheels)
	}
	dir := basicAppCopy(t, root)
	for _, want := range []string{"made", "reused"} {
		d := startDev(t, "-no-index", "-find-links", wheels, dir)
		if got := d.venv; got != want {
			t.Fatalf("stepgraph dev: %s/.venv %s, want %s", dir, got, want)
		}
		waitFor(t, "the app to be served", func() bool { return strings.Contains(d.answer(t), "a joke about owls") })
		d.stop()
	}
}

func basicAppCopy(t *testing.T, root string) string {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "runtimes", "python", "tests", "apps", "basic"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// devServer is a running stepgraph dev.
type devServer struct {
	cmd             *exec.Cmd
	addr, key, venv string // venv: what it did with DIR/.venv
}

// startDev starts stepgraph dev (on a free port) and waits until it listens.
func startDev(t *testing.T, args ...string) *devServer {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"dev", "-addr", "127.0.0.1:0"}, args...)...)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &devServer{cmd: cmd}
	t.Cleanup(d.stop)
	keyc, addrc, venvc := make(chan string, 1), make(chan string, 1), make(chan string, 1)
	go scan(stdout, regexp.MustCompile(`API key of this session: (\S+)`), keyc)
	go scanEach(stderr, map[*regexp.Regexp]chan<- string{
		regexp.MustCompile(`msg=listening addr=(\S+)`):                               addrc,
		regexp.MustCompile(`^stepgraph dev: \S+/\.venv: (made|reused|rebuilt|own)$`): venvc,
	})
	deadline := time.After(5 * time.Minute) // a safety net: making the venv installs LangGraph
	for d.key == "" || d.addr == "" {
		select {
		case d.key = <-keyc:
		case d.addr = <-addrc:
		case d.venv = <-venvc:
		case <-deadline:
			t.Fatal("stepgraph dev did not start")
		}
	}
	select {
	case d.venv = <-venvc:
	default:
	}
	return d
}

func (d *devServer) stop() {
	if d.cmd.ProcessState == nil {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		_ = d.cmd.Wait()
	}
}

// answer runs the mapreduce graph; "" until it is served.
func (d *devServer) answer(t *testing.T) string {
	req, _ := http.NewRequest("POST", "http://"+d.addr+"/runs/wait", strings.NewReader(`{"assistant_id": "mapreduce", "input": {"subjects": ["owls"]}}`))
	req.Header.Set("X-Api-Key", d.key)
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a safety net only
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scanEach sends the first match of each pattern to its channel.
func scanEach(r io.Reader, patterns map[*regexp.Regexp]chan<- string) {
	sc := bufio.NewScanner(r)
	sent := map[*regexp.Regexp]bool{}
	for sc.Scan() {
		for re, found := range patterns {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent[re] {
				found <- m[1]
				sent[re] = true
			}
		}
	}
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

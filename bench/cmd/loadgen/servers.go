package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A serverSpec says how to start one server under test. Every server binds
// 127.0.0.1 on a free port, runs in its own process group with its own
// temporary directory, and is stopped (SIGTERM to the group, SIGKILL after a
// grace period) before the next one starts.
type serverSpec struct {
	Name  string // stepgraph-async, stepgraph-sync, python, js
	Label string // shown in the report
	Peer  bool
	// extra fields sent in every run request (stepgraph's durability)
	RunFields map[string]any
	start     func(ctx context.Context, e *env, dir string, port int) (*exec.Cmd, error)
	// needsKey: read the API key from the first start's stdout.
	needsKey bool
}

// env is what the specs need from the run: where things are.
type env struct {
	root         string // repository root
	stepgraphBin string
	logDir       string
}

// runningServer is a started server.
type runningServer struct {
	spec    *serverSpec
	cmd     *exec.Cmd
	port    int
	base    string
	key     string
	dir     string
	cmdline string
	mem     *memSampler
	exited  chan struct{}
	waitErr error
	logPath string
	startup time.Duration
}

var apiKeyRE = regexp.MustCompile(`sg_[A-Za-z0-9_-]{43}`)

func stepgraphSpec(durability string) *serverSpec {
	return &serverSpec{
		Name:      "stepgraph-" + durability,
		Label:     "stepgraph (durability " + durability + ")",
		RunFields: map[string]any{"durability": durability},
		needsKey:  true,
		start: func(ctx context.Context, e *env, dir string, port int) (*exec.Cmd, error) {
			cmd := exec.Command(e.stepgraphBin, "serve",
				"-addr", fmt.Sprintf("127.0.0.1:%d", port),
				"-data", filepath.Join(dir, "data"),
				"-rate-limit", "0",
				"-log-level", "warn")
			cmd.Dir = dir
			return cmd, nil
		},
	}
}

// peerEnv keeps the peers offline and quiet: no CLI analytics, no LangSmith
// tracing, warnings-only logs (stepgraph runs with -log-level warn too).
func peerEnv(extra ...string) []string {
	env := os.Environ()
	env = append(env,
		"LANGGRAPH_CLI_NO_ANALYTICS=1",
		"LANGSMITH_TRACING=false",
		"LANGCHAIN_TRACING_V2=false",
		"LANGSMITH_API_KEY=",
		"LANGCHAIN_API_KEY=",
		"DO_NOT_TRACK=1",
	)
	return append(env, extra...)
}

// copyPeer copies a peer's graph files into the server's own temporary
// directory: the dev servers write their state (.langgraph_api) and a
// .gitignore next to langgraph.json, which must neither touch the repository
// nor carry state from one run into the next.
func copyPeer(src, dst string, files ...string) error {
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// PythonJobs is --n-jobs-per-worker for `langgraph dev`: its help says the
// default is 10, but the dev command passes 1 (langgraph_api/cli.py), which
// would run one run at a time; 10 matches the documented default and the JS
// server's default of 10 workers.
const PythonJobs = 10

func pythonSpec() *serverSpec {
	return &serverSpec{
		Name:  "python",
		Label: "Python langgraph dev",
		Peer:  true,
		start: func(ctx context.Context, e *env, dir string, port int) (*exec.Cmd, error) {
			src := filepath.Join(e.root, "bench", "peers", "python")
			if err := copyPeer(src, dir, "langgraph.json", "graphs.py"); err != nil {
				return nil, err
			}
			bin := filepath.Join(e.root, "bench", ".venv", "bin", "langgraph")
			if _, err := os.Stat(bin); err != nil {
				return nil, fmt.Errorf("%s missing: run scripts/install-bench-deps.sh", bin)
			}
			cmd := exec.Command(bin, "dev", "--no-browser", "--no-reload",
				"--host", "127.0.0.1", "--port", fmt.Sprint(port),
				"--config", "langgraph.json",
				"--n-jobs-per-worker", fmt.Sprint(PythonJobs),
				"--server-log-level", "WARNING")
			cmd.Dir = dir
			cmd.Env = peerEnv("PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"))
			return cmd, nil
		},
	}
}

func jsSpec() *serverSpec {
	return &serverSpec{
		Name:  "js",
		Label: "JS langgraphjs dev",
		Peer:  true,
		start: func(ctx context.Context, e *env, dir string, port int) (*exec.Cmd, error) {
			src := filepath.Join(e.root, "bench", "peers", "js")
			if err := copyPeer(src, dir, "langgraph.json", "graphs.mjs", "package.json"); err != nil {
				return nil, err
			}
			nm := filepath.Join(src, "node_modules")
			bin := filepath.Join(nm, ".bin", "langgraphjs")
			if _, err := os.Stat(bin); err != nil {
				return nil, fmt.Errorf("%s missing: run scripts/install-bench-deps.sh", bin)
			}
			// graphs.mjs resolves @langchain/langgraph through this link, to
			// the same copy the server loads.
			if err := os.Symlink(nm, filepath.Join(dir, "node_modules")); err != nil {
				return nil, err
			}
			// The binary itself, not `npx langgraphjs`: npx would add an npm
			// process to the measured tree and may look at the registry.
			cmd := exec.Command(bin, "dev", "--no-browser",
				"--host", "127.0.0.1", "--port", fmt.Sprint(port),
				"--config", "langgraph.json")
			cmd.Dir = dir
			cmd.Env = peerEnv("LOG_LEVEL=warn")
			return cmd, nil
		},
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts spec and waits until GET /ok answers 200.
func startServer(ctx context.Context, e *env, spec *serverSpec, readyTimeout time.Duration) (*runningServer, error) {
	dir, err := os.MkdirTemp("", "stepgraph-bench-"+spec.Name+"-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd, err := spec.start(ctx, e, dir, port)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logPath := filepath.Join(e.logDir, spec.Name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdin = nil
	cmd.Stderr = logf
	keyc := make(chan string, 1)
	if spec.needsKey {
		cmd.Stdout = &keyWriter{w: logf, found: keyc}
	} else {
		cmd.Stdout = logf
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	s := &runningServer{spec: spec, cmd: cmd, port: port, dir: dir, logPath: logPath,
		base: fmt.Sprintf("http://127.0.0.1:%d", port), exited: make(chan struct{}),
		cmdline: displayCmdline(cmd.Args, e.root, dir, e.stepgraphBin, port)}
	s.mem = newMemSampler(cmd.Process.Pid, 50*time.Millisecond)

	go func() {
		s.waitErr = cmd.Wait()
		logf.Close()
		close(s.exited)
	}()

	fail := func(err error) (*runningServer, error) {
		s.stop()
		return nil, fmt.Errorf("%s: %w (log: %s)", spec.Name, err, logPath)
	}
	deadline := time.Now().Add(readyTimeout)
	if spec.needsKey {
		select {
		case s.key = <-keyc:
		case <-s.exited:
			return fail(fmt.Errorf("exited before printing its API key: %v", s.waitErr))
		case <-time.After(time.Until(deadline)):
			return fail(errors.New("no API key on stdout"))
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := hc.Get(s.base + "/ok")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-s.exited:
			return fail(fmt.Errorf("exited before it was ready: %v", s.waitErr))
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("not ready after %s", readyTimeout))
		}
	}
	s.startup = time.Since(began)
	pids := descendants(cmd.Process.Pid)
	spid := listeningPID(pids, port)
	if spid == 0 {
		return fail(fmt.Errorf("no process of its own listens on port %d", port))
	}
	s.mem.setServerPID(spid)
	return s, nil
}

// stop ends the server's process group: SIGTERM, then SIGKILL after 15 s.
// It returns whether the group ended within the grace period.
func (s *runningServer) stop() bool {
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	graceful := true
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		graceful = false
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.exited
	}
	// Children that outlived the leader, still in its group, go too.
	for _, pid := range groupMembers(pgid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	s.mem.close()
	os.RemoveAll(s.dir)
	return graceful
}

// groupMembers lists the processes in process group pgid.
func groupMembers(pgid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 2 && f[2] == strconv.Itoa(pgid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// keyWriter copies a server's stdout to its log and sends the first API key
// it sees.
type keyWriter struct {
	w     io.Writer
	found chan<- string
	buf   []byte
	sent  bool
}

func (k *keyWriter) Write(p []byte) (int, error) {
	if !k.sent {
		k.buf = append(k.buf, p...)
		if key := apiKeyRE.Find(k.buf); key != nil {
			k.found <- string(key)
			k.sent, k.buf = true, nil
		} else if len(k.buf) > 1<<16 {
			k.buf = k.buf[len(k.buf)-128:]
		}
	}
	return k.w.Write(p)
}

// displayCmdline is a server's command line for the report: the repository,
// temporary paths and port written as placeholders, so runs compare.
func displayCmdline(args []string, root, dir, sgBin string, port int) string {
	out := make([]string, len(args))
	for i, a := range args {
		switch {
		case a == sgBin:
			a = "stepgraph"
		case strings.HasPrefix(a, root+"/"):
			a = strings.TrimPrefix(a, root+"/")
		case strings.HasPrefix(a, dir):
			a = "$TMP" + strings.TrimPrefix(a, dir)
		}
		a = strings.ReplaceAll(a, fmt.Sprint(port), "$PORT")
		out[i] = a
	}
	return strings.Join(out, " ")
}

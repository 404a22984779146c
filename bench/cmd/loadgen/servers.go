package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/testserver"
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
	// start says how to run the server in dir on port.
	start func(ctx context.Context, e *env, dir string, port int) (testserver.Options, error)
	// needsKey: read the API key from the first start's stdout.
	needsKey bool
}

// env is what the specs need from the run: where things are.
type env struct {
	root         string // repository root
	stepgraphBin string
	logDir       string
	// modelURL: the local model endpoint's base URL ("" when no workload
	// needs it); modelChunks: the tokens of its answers.
	modelURL    string
	modelChunks int
}

// runningServer is a started server.
type runningServer struct {
	spec    *serverSpec
	srv     *testserver.Server
	port    int
	base    string
	key     string
	dir     string
	cmdline string
	mem     *memSampler
	logf    *os.File
	startup time.Duration
}

func stepgraphSpec(durability string) *serverSpec {
	return &serverSpec{
		Name:      "stepgraph-" + durability,
		Label:     "stepgraph (durability " + durability + ")",
		RunFields: map[string]any{"durability": durability},
		needsKey:  true,
		start: func(ctx context.Context, e *env, dir string, port int) (testserver.Options, error) {
			args := []string{"-rate-limit", "0", "-log-level", "warn"}
			if e.modelURL != "" {
				// The chat graph: deployed from a repository on this
				// machine, its model on 127.0.0.1 over plain http.
				allow, _, err := chatRepo(dir, e.modelURL)
				if err != nil {
					return testserver.Options{}, err
				}
				args = append(args, "-allow-local-repos", allow, "-outbound-allow-private")
			}
			return testserver.Options{Binary: e.stepgraphBin, Port: port, DataDir: filepath.Join(dir, "data"),
				Args: args, Dir: dir}, nil
		},
	}
}

// peerEnv keeps the peers offline and quiet: no CLI analytics, no LangSmith
// tracing, warnings-only logs (stepgraph runs with -log-level warn too).
func peerEnv(e *env, extra ...string) []string {
	env := os.Environ()
	env = append(env,
		"LANGGRAPH_CLI_NO_ANALYTICS=1",
		"LANGSMITH_TRACING=false",
		"LANGCHAIN_TRACING_V2=false",
		"LANGSMITH_API_KEY=",
		"LANGCHAIN_API_KEY=",
		"DO_NOT_TRACK=1",
	)
	if e.modelURL != "" {
		// The chat graph's ChatOpenAI: loadgen's local model endpoint.
		env = append(env, "BENCH_MODEL_URL="+e.modelURL, "OPENAI_API_KEY="+modelAPIKey)
	}
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
		start: func(ctx context.Context, e *env, dir string, port int) (testserver.Options, error) {
			src := filepath.Join(e.root, "bench", "peers", "python")
			if err := copyPeer(src, dir, "langgraph.json", "graphs.py"); err != nil {
				return testserver.Options{}, err
			}
			bin := filepath.Join(e.root, "bench", ".venv", "bin", "langgraph")
			if _, err := os.Stat(bin); err != nil {
				return testserver.Options{}, fmt.Errorf("%s missing: run scripts/install-bench-deps.sh", bin)
			}
			return testserver.Options{Port: port, Dir: dir,
				Command: []string{bin, "dev", "--no-browser", "--no-reload",
					"--host", "127.0.0.1", "--port", fmt.Sprint(port),
					"--config", "langgraph.json",
					"--n-jobs-per-worker", fmt.Sprint(PythonJobs),
					"--server-log-level", "WARNING"},
				Env: peerEnv(e, "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))}, nil
		},
	}
}

func jsSpec() *serverSpec {
	return &serverSpec{
		Name:  "js",
		Label: "JS langgraphjs dev",
		Peer:  true,
		start: func(ctx context.Context, e *env, dir string, port int) (testserver.Options, error) {
			src := filepath.Join(e.root, "bench", "peers", "js")
			if err := copyPeer(src, dir, "langgraph.json", "graphs.mjs", "package.json"); err != nil {
				return testserver.Options{}, err
			}
			nm := filepath.Join(src, "node_modules")
			bin := filepath.Join(nm, ".bin", "langgraphjs")
			if _, err := os.Stat(bin); err != nil {
				return testserver.Options{}, fmt.Errorf("%s missing: run scripts/install-bench-deps.sh", bin)
			}
			// graphs.mjs resolves @langchain/langgraph through this link, to
			// the same copy the server loads.
			if err := os.Symlink(nm, filepath.Join(dir, "node_modules")); err != nil {
				return testserver.Options{}, err
			}
			// The binary itself, not `npx langgraphjs`: npx would add an npm
			// process to the measured tree and may look at the registry.
			return testserver.Options{Port: port, Dir: dir,
				Command: []string{bin, "dev", "--no-browser",
					"--host", "127.0.0.1", "--port", fmt.Sprint(port),
					"--config", "langgraph.json"},
				Env: peerEnv(e, "LOG_LEVEL=warn")}, nil
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

// startServer starts spec and waits until GET /ok answers 200 (and, for
// stepgraph, until it printed its API key).
func startServer(ctx context.Context, e *env, spec *serverSpec, readyTimeout time.Duration) (*runningServer, error) {
	dir, err := os.MkdirTemp("", "stepgraph-bench-"+spec.Name+"-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	opts, err := spec.start(ctx, e, dir, port)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logPath := filepath.Join(e.logDir, spec.Name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	opts.Group, opts.Output, opts.WaitKey = true, logf, spec.needsKey
	opts.StartTimeout, opts.StopTimeout = readyTimeout, 15*time.Second
	began := time.Now()
	srv, err := testserver.Launch(opts)
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: %w", spec.Name, err)
	}
	s := &runningServer{spec: spec, srv: srv, port: port, dir: dir, logf: logf, base: srv.URL(),
		cmdline: displayCmdline(srv.CommandLine(), e.root, dir, e.stepgraphBin, port)}
	s.mem = newMemSampler(srv.PID(), 50*time.Millisecond)

	fail := func(err error) (*runningServer, error) {
		s.stop()
		return nil, fmt.Errorf("%s: %w (log: %s)", spec.Name, err, logPath)
	}
	if err := srv.Ready(ctx); err != nil {
		return fail(err)
	}
	s.key = srv.FirstKey()
	s.startup = time.Since(began)
	pids := descendants(srv.PID())
	spid := listeningPID(pids, port)
	if spid == 0 {
		return fail(fmt.Errorf("no process of its own listens on port %d", port))
	}
	s.mem.setServerPID(spid)
	return s, nil
}

// stop ends the server's process group: SIGTERM, then SIGKILL after 15 s;
// children that outlived the leader, still in its group, go too. It returns
// whether the server ended within the grace period.
func (s *runningServer) stop() bool {
	err := s.srv.Stop()
	s.logf.Close()
	s.mem.close()
	os.RemoveAll(s.dir)
	return !errors.Is(err, testserver.ErrStopTimeout)
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

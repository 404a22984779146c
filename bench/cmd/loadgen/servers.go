package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	Name  string // stepgraph-async, stepgraph-sync, python, js, aegra
	Label string // shown in the report
	Peer  bool
	// Serves lists the workloads the server has graphs for; nil: all.
	Serves []string
	// Postgres: the server needs a PostgreSQL of its own, started before
	// it (startPostgres) and stopped after it; its processes count as the
	// server's in the CPU and memory figures.
	Postgres bool
	// ReadyPath is the health route that answers 200 once the server is
	// ready (default /ok).
	ReadyPath string
	// extra fields sent in every run request (stepgraph's durability)
	RunFields map[string]any
	// start says how to run the server in dir on port (x: its PostgreSQL
	// and API keys, when the spec asks for them).
	start func(ctx context.Context, e *env, dir string, port int, x *startExtras) (testserver.Options, error)
	// StaticKeys: the server takes the API keys of two organizations
	// (users) that loadgen makes (startExtras.keys), the first for the
	// workloads, the second for the fairness figure's other organization.
	StaticKeys bool
	// needsKey: read the API key from the first start's stdout.
	needsKey bool
	// App: the server serves the LangGraph app of the app workloads
	// (react), and only those (app.go).
	App bool
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
	// graphRuns: the app's graph's timed in-process invocations (react).
	graphRuns int
}

// runningServer is a started server.
type runningServer struct {
	spec *serverSpec
	srv  *testserver.Server
	port int
	base string
	key  string
	// otherKey is a second organization's key when the server has
	// organizations (users) loadgen made at start (StaticKeys).
	otherKey string
	dir      string
	cmdline  string
	mem      *memSampler
	logf     *os.File
	startup  time.Duration
	pg       *pgServer // the server's PostgreSQL (Aegra), nil for the others
}

func stepgraphSpec(durability string) *serverSpec {
	return &serverSpec{
		Name:      "stepgraph-" + durability,
		Label:     "stepgraph (durability " + durability + ")",
		RunFields: map[string]any{"durability": durability},
		needsKey:  true,
		start: func(ctx context.Context, e *env, dir string, port int, _ *startExtras) (testserver.Options, error) {
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
		start: func(ctx context.Context, e *env, dir string, port int, _ *startExtras) (testserver.Options, error) {
			src := filepath.Join(e.root, "bench", "peers", "python")
			if err := copyPeer(src, dir, "langgraph.json", "graphs.py", "chat.py"); err != nil {
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
		start: func(ctx context.Context, e *env, dir string, port int, _ *startExtras) (testserver.Options, error) {
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

// startExtras is what a spec's start gets beyond its folder and port.
type startExtras struct {
	pg   *pgServer // Postgres specs: the server's database
	keys [2]string // StaticKeys specs: two organizations' API keys
}

// randomKey is an API key for a peer that takes loadgen's keys.
func randomKey() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "bench-" + hex.EncodeToString(b[:]), nil
}

// AegraServes: Aegra serves the three graphs of bench/peers/python/graphs.py
// (its aegra.json); the chat graph stays with `langgraph dev` (its model
// client is not in Aegra's venv), and the streaming workloads are not
// measured on it.
var AegraServes = []string{"echo", "counter", "approval"}

// aegraSpec is Aegra (PyPI aegra-api, a self-hosted Agent Protocol server)
// on a PostgreSQL of its own: the server a team would self-host instead of
// stepgraph. It runs as Aegra's own entry point does (uvicorn serving
// aegra_api.main:app, one process, the local asyncio executor: no Redis),
// with its graphs from aegra.json beside graphs.py in its folder, and its
// multi-user mode on (auth.py: two users with loadgen's keys), as a team
// serving more than one user would run it.
func aegraSpec() *serverSpec {
	return &serverSpec{
		Name:       "aegra",
		Label:      "Aegra on PostgreSQL",
		Peer:       true,
		Serves:     AegraServes,
		Postgres:   true,
		StaticKeys: true,
		ReadyPath:  "/health", // 200 once the database, checkpointer and store answer
		start: func(ctx context.Context, e *env, dir string, port int, x *startExtras) (testserver.Options, error) {
			if err := copyPeer(filepath.Join(e.root, "bench", "peers", "aegra"), dir, "aegra.json", "auth.py"); err != nil {
				return testserver.Options{}, err
			}
			if err := copyPeer(filepath.Join(e.root, "bench", "peers", "python"), dir, "graphs.py"); err != nil {
				return testserver.Options{}, err
			}
			bin := filepath.Join(e.root, "bench", ".venv-aegra", "bin", "uvicorn")
			if _, err := os.Stat(bin); err != nil {
				return testserver.Options{}, fmt.Errorf("%s missing: run scripts/install-bench-deps.sh", bin)
			}
			return testserver.Options{Port: port, Dir: dir,
				Command: []string{bin, "aegra_api.main:app",
					"--host", "127.0.0.1", "--port", fmt.Sprint(port),
					"--log-level", "warning", "--no-access-log"},
				Env: peerEnv(e,
					"DATABASE_URL="+x.pg.url(),
					"BENCH_AEGRA_KEYS=bench-org="+x.keys[0]+",fairness-other="+x.keys[1],
					"AEGRA_CONFIG="+filepath.Join(dir, "aegra.json"),
					"AUTH_TYPE=noop",
					"LOG_LEVEL=WARNING",
					"PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))}, nil
		},
	}
}

// serves says whether the server has the workload's graph: the app
// servers serve the app workloads, the others the rest.
func (spec *serverSpec) serves(workload string) bool {
	if w := workloadByName(workload); w != nil && w.app != spec.App {
		return false
	}
	if spec.Serves == nil {
		return true
	}
	for _, w := range spec.Serves {
		if w == workload {
			return true
		}
	}
	return false
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
	var pg *pgServer
	if spec.Postgres {
		if pg, err = startPostgres(ctx, filepath.Join(e.logDir, spec.Name+"-postgres.log"), readyTimeout); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%s: %w", spec.Name, err)
		}
	}
	if spec.App {
		// stepgraph dev makes the app's virtual environment before it listens.
		readyTimeout = max(readyTimeout, AppReadyTimeout)
	}
	x := &startExtras{pg: pg}
	if spec.StaticKeys {
		for i := range x.keys {
			if x.keys[i], err = randomKey(); err != nil {
				os.RemoveAll(dir)
				if pg != nil {
					pg.stop()
				}
				return nil, err
			}
		}
	}
	opts, err := spec.start(ctx, e, dir, port, x)
	if err != nil {
		os.RemoveAll(dir)
		if pg != nil {
			pg.stop()
		}
		return nil, err
	}
	logPath := filepath.Join(e.logDir, spec.Name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		if pg != nil {
			pg.stop()
		}
		return nil, err
	}
	opts.Group, opts.Output, opts.WaitKey = true, logf, spec.needsKey
	opts.ReadyPath = spec.ReadyPath
	opts.StartTimeout, opts.StopTimeout = readyTimeout, 15*time.Second
	began := time.Now()
	srv, err := testserver.Launch(opts)
	if err != nil {
		logf.Close()
		os.RemoveAll(dir)
		if pg != nil {
			pg.stop()
		}
		return nil, fmt.Errorf("%s: %w", spec.Name, err)
	}
	s := &runningServer{spec: spec, srv: srv, port: port, dir: dir, logf: logf, base: srv.URL(), pg: pg,
		cmdline: displayCmdline(srv.CommandLine(), e.root, dir, e.stepgraphBin, port)}
	var extra []int
	if pg != nil {
		extra = append(extra, pg.pid())
	}
	s.mem = newMemSampler(srv.PID(), 50*time.Millisecond, extra...)

	fail := func(err error) (*runningServer, error) {
		s.stop()
		return nil, fmt.Errorf("%s: %w (log: %s)", spec.Name, err, logPath)
	}
	if err := srv.Ready(ctx); err != nil {
		return fail(err)
	}
	s.key = srv.FirstKey()
	if spec.StaticKeys {
		s.key, s.otherKey = x.keys[0], x.keys[1]
	}
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
// children that outlived the leader, still in its group, go too; then its
// PostgreSQL, if it has one. It returns whether all ended within the grace
// period.
func (s *runningServer) stop() bool {
	err := s.srv.Stop()
	s.logf.Close()
	s.mem.close()
	os.RemoveAll(s.dir)
	graceful := !errors.Is(err, testserver.ErrStopTimeout)
	// The database after its client: the server's shutdown may still write.
	if s.pg != nil {
		if s.pg.stop() != nil {
			graceful = false
		}
	}
	return graceful
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

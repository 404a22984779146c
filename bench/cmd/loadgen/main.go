// Command loadgen is stepgraph's side-by-side benchmark (`make bench`): it
// starts each server in turn on 127.0.0.1 — stepgraph twice (durability
// async and sync), the Python in-memory Agent Server (`langgraph dev`) and
// the JS one (`langgraphjs dev`), the peers serving the same graphs from
// bench/peers — drives each with identical workloads, checks every answer,
// measures latency, throughput and peak memory, stops the server, and writes
// bench/results/<date>.{md,json,png}. Then, for the react workload (app.go),
// a LangGraph app served by `stepgraph dev` (async, sync) and `langgraph dev`,
// beside the graph's own in-process time.
//
// Workloads: stateless runs/wait on echo; thread runs/wait on counter with
// steps 20; approval interrupt then resume on a thread; and streamed runs
// (stream.go): counter and stateless echo with stream_mode values+updates,
// and a chat graph whose model is a local OpenAI-compatible endpoint
// (fakemodel.go) with messages-tuple — time to first event, to first
// token, to the end, events per second. Each at every
// concurrency (default 1, 10, 50): a warm-up, then a fixed count of timed
// iterations. Threads are created before the timed part. Then, on each
// stepgraph server, the fairness figure (fairness.go): another
// organization's echo latency alone and while one organization floods the
// workers with long counter runs.
//
//	go run ./bench/cmd/loadgen                 # the full benchmark (make bench)
//	go run ./bench/cmd/loadgen -smoke          # stepgraph only, tiny counts (make bench-smoke)
//	go run ./bench/cmd/loadgen -render F.json  # redo the report and chart from saved results
//
// It uses the standard library and an SSE parser (go-sse), needs no network beyond loopback, and
// exits non-zero when any answer was wrong or any server failed to start.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/stepgraph/stepgraph/internal/testserver"
)

// Results is everything a run measured; saved as JSON beside the report.
type Results struct {
	Date      string `json:"date"`
	Command   string `json:"command"`
	InvokedBy string `json:"invoked_by,omitempty"`
	// Note: what the person who ran it says about the run (-note), shown
	// in the report's "How it was run".
	Note             string      `json:"note,omitempty"`
	Smoke            bool        `json:"smoke,omitempty"`
	Started          time.Time   `json:"started"`
	Finished         time.Time   `json:"finished"`
	DurationSeconds  float64     `json:"duration_s"`
	Machine          Machine     `json:"machine"`
	StepgraphVersion string      `json:"stepgraph_version"`
	Iterations       map[int]int `json:"iterations"` // timed iterations per cell, by concurrency
	WarmupRounds     int         `json:"warmup_rounds"`
	Concurrency      []int       `json:"concurrency"`
	CounterSteps     int         `json:"counter_steps"`
	// The local model of stream-chat: tokens per answer, time per token.
	ModelChunks       int            `json:"model_chunks,omitempty"`
	ModelChunkDelayMs float64        `json:"model_chunk_delay_ms,omitempty"`
	Servers           []ServerResult `json:"servers"`
	// AWSCost: bench/cmd/awscost's results found beside the report.
	AWSCost *awsCost `json:"-"`
	// Growth: bench/cmd/ckptbench's results found beside the report.
	Growth *growthResults `json:"-"`
}

// ServerResult is one server's run.
type ServerResult struct {
	Name           string            `json:"name"`
	Label          string            `json:"label"`
	Peer           bool              `json:"peer"`
	Cmdline        string            `json:"cmdline"`
	Info           any               `json:"info,omitempty"`
	Versions       map[string]string `json:"versions,omitempty"`
	StartupSeconds float64           `json:"startup_s"`
	PeakServerKB   int64             `json:"peak_rss_server_kb"`
	PeakAllKB      int64             `json:"peak_rss_all_kb"`
	HWMServerKB    int64             `json:"vmhwm_server_kb"`
	HWMAllKB       int64             `json:"vmhwm_all_kb"`
	GracefulStop   bool              `json:"graceful_stop"`
	Error          string            `json:"error,omitempty"`
	Cells          []Cell            `json:"cells"`
	// Fairness: servers with organizations (stepgraph; Aegra's users).
	Fairness *Fairness `json:"fairness,omitempty"`
	// App: the server served the LangGraph app (the react workload), with
	// GraphOwn the app's graph's own time in its interpreter (app.go).
	App      bool      `json:"app,omitempty"`
	GraphOwn *GraphOwn `json:"graph_own,omitempty"`
}

func main() { os.Exit(run()) }

func run() int {
	var (
		root        = flag.String("root", ".", "repository root")
		servers     = flag.String("servers", "stepgraph-async,stepgraph-sync,python,js,aegra,stepgraph-dev-async,stepgraph-dev-sync,python-app", "servers to measure, in order (stepgraph-dev-* and python-app serve the LangGraph app: the react workload only)")
		wls         = flag.String("workloads", "echo,counter,approval,stream,stream-stateless,stream-chat,react", "workloads")
		graphRuns   = flag.Int("graph-runs", 200, "react: timed in-process invocations of the app's graph (its own time) per app server")
		counts      = flag.String("n", "1=30,10=150,50=300", "concurrency levels and the timed iterations of each cell at that level (concurrency=count,…)")
		warmRounds  = flag.Int("warmup-rounds", 2, "warm-up iterations per cell: this many per concurrent client (at least 3), not timed")
		outDir      = flag.String("out", "bench/results", "where to write <date>.md, .json and .png (empty: nowhere)")
		date        = flag.String("date", time.Now().UTC().Format("2006-01-02"), "the report's date (its file name)")
		smoke       = flag.Bool("smoke", false, "stepgraph only, tiny counts, no files: a quick check that the benchmark works")
		sgBin       = flag.String("stepgraph-bin", "", "a built stepgraph binary (default: build ./cmd/stepgraph)")
		timeout     = flag.Duration("timeout", 2*time.Minute, "per-request timeout")
		readyTO     = flag.Duration("ready-timeout", 2*time.Minute, "how long a server may take to start")
		render      = flag.String("render", "", "only write the report and chart from this results JSON")
		invokedBy   = flag.String("invoked-by", "", "how the run was started, for the report (e.g. \"make bench\")")
		note        = flag.String("note", "", "a remark on the run for the report (e.g. why counts were reduced)")
		keepLogsDir = flag.String("logs", "", "keep server logs here (default: a temporary directory, removed when all went well)")
		fairN       = flag.Int("fairness-n", 100, "fairness figure (stepgraph only, after the workloads): another organization's timed echo runs, alone and under the flood; 0: no fairness figure")
		fairFlood   = flag.Int("fairness-flood", 128, "fairness: the flooding organization's counter runs kept inflight (twice stepgraph's 64 workers)")
		fairSteps   = flag.Int("fairness-steps", 9000, "fairness: counter steps of each flood run (its recursion_limit follows, within the server's default maximum of 10,000)")
		fairBudget  = flag.Duration("fairness-budget", 3*time.Minute, "fairness: time each phase's echo runs at most this long (a server slow under the flood is timed on fewer; the report says how many)")
		chunks      = flag.Int("model-chunks", 20, "stream-chat: tokens of the local model's answer")
		chunkDelay  = flag.Duration("model-chunk-delay", 2*time.Millisecond, "stream-chat: the local model's time per token (its first token comes after one, its answer after model-chunks)")
	)
	flag.Parse()

	if *render != "" {
		b, err := os.ReadFile(*render)
		if err != nil {
			return fail(err)
		}
		var r Results
		if err := json.Unmarshal(b, &r); err != nil {
			return fail(err)
		}
		if err := writeReport(&r, filepath.Dir(*render)); err != nil {
			return fail(err)
		}
		return 0
	}

	if *smoke {
		*servers = "stepgraph-async,stepgraph-sync"
		*counts = "1=15,10=40"
		*warmRounds = 1
		*outDir = ""
		*fairN, *fairFlood = 10, 32
	}
	reqs, levels, err := parseCounts(*counts)
	if err != nil {
		return fail(err)
	}
	var specs []*serverSpec
	for _, name := range splitList(*servers) {
		switch name {
		case "stepgraph-async":
			specs = append(specs, stepgraphSpec("async"))
		case "stepgraph-sync":
			specs = append(specs, stepgraphSpec("sync"))
		case "python":
			specs = append(specs, pythonSpec())
		case "js":
			specs = append(specs, jsSpec())
		case "aegra":
			specs = append(specs, aegraSpec())
		case "stepgraph-dev-async":
			specs = append(specs, stepgraphDevSpec("async"))
		case "stepgraph-dev-sync":
			specs = append(specs, stepgraphDevSpec("sync"))
		case "python-app":
			specs = append(specs, pythonAppSpec())
		default:
			return fail(fmt.Errorf("unknown server %q (want stepgraph-async, stepgraph-sync, python, js, aegra, stepgraph-dev-async, stepgraph-dev-sync, python-app)", name))
		}
	}
	var wl []*workload
	for _, name := range splitList(*wls) {
		w := workloadByName(name)
		if w == nil {
			return fail(fmt.Errorf("unknown workload %q (want echo, counter, approval, stream, stream-stateless, stream-chat, react)", name))
		}
		wl = append(wl, w)
	}
	if *chunks < 1 || *chunkDelay < 0 {
		return fail(fmt.Errorf("-model-chunks must be at least 1 and -model-chunk-delay not negative"))
	}

	absRoot, err := filepath.Abs(*root)
	if err != nil {
		return fail(err)
	}
	if _, err := os.Stat(filepath.Join(absRoot, "go.mod")); err != nil {
		return fail(fmt.Errorf("-root %s is not the repository root: %w", absRoot, err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tmp, err := os.MkdirTemp("", "stepgraph-bench-")
	if err != nil {
		return fail(err)
	}
	logDir := *keepLogsDir
	if logDir == "" {
		logDir = filepath.Join(tmp, "logs")
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fail(err)
	}
	e := &env{root: absRoot, stepgraphBin: *sgBin, logDir: logDir, modelChunks: *chunks, graphRuns: *graphRuns}
	res := &Results{
		Date: *date, Command: commandLine(), InvokedBy: *invokedBy, Note: *note, Smoke: *smoke,
		Started: time.Now().UTC(), Machine: readMachine(), StepgraphVersion: gitDescribe(absRoot),
		Iterations: reqs, WarmupRounds: *warmRounds, Concurrency: levels, CounterSteps: CounterSteps,
	}
	for _, w := range wl {
		if w.needsModel && e.modelURL == "" {
			m, err := startFakeModel(*chunks, *chunkDelay)
			if err != nil {
				return fail(fmt.Errorf("the local model endpoint: %w", err))
			}
			defer m.close()
			e.modelURL = m.url
			res.ModelChunks, res.ModelChunkDelayMs = *chunks, float64(*chunkDelay)/float64(time.Millisecond)
		}
	}
	if l := loadavg(); l != "" {
		if f := strings.Fields(l); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil && v > 0.5 {
				fmt.Printf("note: load average %s before the start: other work on this machine will show in the figures\n", l)
			}
		}
	}
	if e.stepgraphBin == "" {
		e.stepgraphBin = filepath.Join(tmp, "stepgraph")
		fmt.Printf("building stepgraph (%s)\n", res.StepgraphVersion)
		if err := testserver.Build(ctx, absRoot, e.stepgraphBin,
			"-trimpath", "-ldflags", "-X main.version="+res.StepgraphVersion); err != nil {
			return fail(fmt.Errorf("build stepgraph: %w", err))
		}
	}

	bad := false
	for si, spec := range specs {
		if ctx.Err() != nil {
			break
		}
		var fair *fairnessOpts
		// The fairness figure needs a second organization: stepgraph's, or
		// a peer's second user (Aegra); the dev servers have none.
		if *fairN > 0 && !spec.App && (!spec.Peer || spec.StaticKeys) {
			fair = &fairnessOpts{requests: *fairN, floodRuns: *fairFlood, floodSteps: *fairSteps, saturateTimeout: *readyTO, phaseBudget: *fairBudget}
		}
		sr := measureServer(ctx, e, spec, wl, levels, reqs, *warmRounds, *timeout, *readyTO, si, fair)
		if sr.Error != "" {
			bad = true
			fmt.Printf("%s: %s\n", spec.Name, sr.Error)
		}
		for _, c := range sr.Cells {
			if c.Errors > 0 {
				bad = true
			}
		}
		// A peer's other organization left unanswered under the flood is
		// what the fairness figure measures (Aegra runs every run it is
		// given), not a failure of the benchmark; stepgraph's is a failure.
		if sr.Fairness != nil && sr.Fairness.Errors > 0 && !spec.Peer {
			bad = true
		}
		if sr.GraphOwn != nil && sr.GraphOwn.Error != "" {
			bad = true
		}
		res.Servers = append(res.Servers, sr)
	}
	res.Finished = time.Now().UTC()
	res.DurationSeconds = res.Finished.Sub(res.Started).Seconds()
	res.Machine.LoadEnd = loadavg()
	if ctx.Err() != nil {
		bad = true
		fmt.Println("interrupted")
	}

	printSummary(res)
	if *outDir != "" {
		dir := filepath.Join(absRoot, *outDir)
		if filepath.IsAbs(*outDir) {
			dir = *outDir
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fail(err)
		}
		b, _ := json.MarshalIndent(res, "", "  ")
		jsonPath := filepath.Join(dir, res.Date+".json")
		if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
			return fail(err)
		}
		if err := writeReport(res, dir); err != nil {
			return fail(err)
		}
		fmt.Printf("wrote %s, %s.md and %s.png\n", jsonPath, res.Date, res.Date)
	}
	errs, iters := 0, 0
	for _, s := range res.Servers {
		for _, c := range s.Cells {
			errs += c.Errors
			iters += c.Requests
		}
	}
	fmt.Printf("loadgen: %d servers, %d timed iterations, %d errors, %.0f s\n",
		len(res.Servers), iters, errs, res.DurationSeconds)
	// The temporary directory holds the built stepgraph and, without -logs,
	// the server logs: kept only when they explain a failure.
	if *keepLogsDir != "" || !bad {
		os.RemoveAll(tmp)
	}
	if bad {
		fmt.Printf("loadgen: FAILED (server logs in %s)\n", logDir)
		return 1
	}
	return 0
}

// measureServer starts one server, runs every workload at every
// concurrency on it, and stops it.
func measureServer(ctx context.Context, e *env, spec *serverSpec, wl []*workload, levels []int,
	reqs map[int]int, warmRounds int, timeout, readyTO time.Duration, si int, fair *fairnessOpts) ServerResult {
	sr := ServerResult{Name: spec.Name, Label: spec.Label, Peer: spec.Peer, App: spec.App, Versions: versionsOf(e, spec)}
	fmt.Printf("== %s: starting\n", spec.Name)
	s, err := startServer(ctx, e, spec, readyTO)
	if err != nil {
		sr.Error = err.Error()
		return sr
	}
	sr.Cmdline = s.cmdline
	sr.StartupSeconds = s.startup.Seconds()
	fmt.Printf("== %s: ready in %.1f s on %s\n", spec.Name, sr.StartupSeconds, s.base)
	c := newClient(s.base, s.key, spec.RunFields, timeout)
	c.modelChunks = e.modelChunks
	if info, err := c.get(ctx, "/info"); err == nil {
		sr.Info = info
	}
	if spec.App {
		if err := waitForGraph(ctx, c, AppReadyTimeout); err != nil {
			sr.Error = err.Error()
			c.tr.CloseIdleConnections()
			sr.GracefulStop = s.stop()
			return sr
		}
	}
	if !spec.Peer && !spec.App && e.modelURL != "" {
		if err := deployChat(ctx, c, "file://"+filepath.Join(s.dir, "repos", "chat"), readyTO); err != nil {
			sr.Error = err.Error()
			c.tr.CloseIdleConnections()
			sr.GracefulStop = s.stop()
			return sr
		}
	}
	for _, w := range wl {
		if !spec.serves(w.Name) {
			fmt.Printf("   %-8s not served by %s (no such graph there): skipped\n", w.Name, spec.Name)
			continue
		}
		for _, conc := range levels {
			if ctx.Err() != nil {
				break
			}
			tag := fmt.Sprintf("s%d-%s-c%d", si, w.Name, conc)
			cell := runCell(ctx, s, c, w, conc, reqs[conc], warmupCount(warmRounds, conc), tag)
			sr.Cells = append(sr.Cells, cell)
			fmt.Printf("   %-8s c=%-3d n=%-5d p50 %8.2f ms  p95 %8.2f  p99 %8.2f  %9.1f/s  rss %6.1f MiB  cpu %.2f ms/op  other-cpu %s  errors %d\n",
				w.Name, conc, cell.Requests, cell.P50ms, cell.P95ms, cell.P99ms, cell.Throughput,
				float64(cell.PeakServerKB)/1024, cell.ServerCPUmsPerOp, pct(cell.OtherCPUPercent), cell.Errors)
			if st := cell.Stream; st != nil {
				fmt.Printf("      stream: first event p50 %.2f ms p99 %.2f  first token p50 %.2f ms p99 %.2f  %.1f events/stream  %.0f events/s per stream (p50)\n",
					st.FirstEventP50ms, st.FirstEventP99ms, st.FirstTokenP50ms, st.FirstTokenP99ms, st.EventsPerStream, st.EventsPerSecStreamP50)
			}
			for _, m := range cell.ErrorSample {
				fmt.Printf("      error: %s\n", m)
			}
		}
	}
	if spec.App && ctx.Err() == nil && e.graphRuns > 0 {
		g := measureGraphOwn(ctx, e, appPython(e, s), filepath.Join(s.dir, "app"), e.graphRuns)
		sr.GraphOwn = g
		fmt.Printf("   graph's own time (in-process, %d runs): p50 %.2f ms  cpu %.2f ms/run  %s\n", g.Runs, g.P50ms, g.CPUmsPerRun, g.Error)
	}
	if fair != nil && ctx.Err() == nil {
		f := measureFairness(ctx, e, s, *fair, timeout)
		sr.Fairness = f
		fmt.Printf("   fairness: other org's echo p50 %.2f ms p99 %.2f alone; p50 %.2f p99 %.2f under a flood of %d counter runs (%d running, %d pending, %d ended meanwhile)  errors %d\n",
			f.Alone.P50ms, f.Alone.P99ms, f.UnderFlood.P50ms, f.UnderFlood.P99ms, f.FloodRuns, f.FloodRunning, f.FloodPending, f.FloodEnded, f.Errors)
		for _, m := range f.ErrorSample {
			fmt.Printf("      error: %s\n", m)
		}
	}
	sr.HWMAllKB, sr.HWMServerKB = s.mem.hwm()
	sr.PeakAllKB, sr.PeakServerKB = s.mem.close()
	c.tr.CloseIdleConnections()
	sr.GracefulStop = s.stop()
	fmt.Printf("== %s: stopped (peak RSS server %.1f MiB, all processes %.1f MiB)\n",
		spec.Name, float64(sr.PeakServerKB)/1024, float64(sr.PeakAllKB)/1024)
	return sr
}

func (c *client) get(ctx context.Context, path string) (any, error) {
	req, err := newGet(ctx, c.base+path)
	if err != nil {
		return nil, err
	}
	if c.key != "" {
		req.Header.Set("X-Api-Key", c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
	var v any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// versionsOf reads the installed versions of a server's packages (offline).
func versionsOf(e *env, spec *serverSpec) map[string]string {
	v := map[string]string{}
	switch {
	case !spec.Peer:
		v["stepgraph"] = gitDescribe(e.root)
		if spec.App {
			v["app"] = AppDir
		}
		v["go"] = goVersion()
	case spec.Name == "python" || spec.Name == "python-app":
		py := filepath.Join(e.root, "bench", ".venv", "bin", "python")
		out, err := exec.Command(py, "-c", `import importlib.metadata as m, json, platform
names = ["langgraph-cli", "langgraph-api", "langgraph-runtime-inmem", "langgraph", "langgraph-checkpoint", "langgraph-sdk", "langchain-core", "langchain-openai", "openai", "uvicorn", "starlette"]
d = {n: m.version(n) for n in names}
d["python"] = platform.python_version()
print(json.dumps(d))`).Output()
		if err == nil {
			_ = json.Unmarshal(out, &v)
		}
	case spec.Name == "js":
		nm := filepath.Join(e.root, "bench", "peers", "js", "node_modules")
		for _, p := range []string{"@langchain/langgraph-cli", "@langchain/langgraph-api", "@langchain/langgraph",
			"@langchain/langgraph-checkpoint", "@langchain/core", "@langchain/langgraph-sdk", "@langchain/openai", "openai", "hono"} {
			b, err := os.ReadFile(filepath.Join(nm, p, "package.json"))
			if err != nil {
				continue
			}
			var pj struct{ Version string }
			if json.Unmarshal(b, &pj) == nil {
				v[p] = pj.Version
			}
		}
		if out, err := exec.Command("node", "--version").Output(); err == nil {
			v["node"] = strings.TrimSpace(string(out))
		}
	case spec.Name == "aegra":
		py := filepath.Join(e.root, "bench", ".venv-aegra", "bin", "python")
		out, err := exec.Command(py, "-c", `import importlib.metadata as m, json, platform
names = ["aegra-api", "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres", "langchain-core", "psycopg", "asyncpg", "SQLAlchemy", "fastapi", "uvicorn"]
d = {n: m.version(n) for n in names}
d["python"] = platform.python_version()
print(json.dumps(d))`).Output()
		if err == nil {
			_ = json.Unmarshal(out, &v)
		}
		if out, err := exec.Command(pgBin("postgres"), "--version").Output(); err == nil {
			v["postgresql"] = strings.TrimPrefix(strings.TrimSpace(string(out)), "postgres (PostgreSQL) ")
		}
	}
	return v
}

func gitDescribe(root string) string {
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "dev"
	}
	return strings.TrimSpace(string(out))
}

func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// commandLine is how this run was started, with go run's temporary binary
// name replaced by the package path.
func commandLine() string {
	args := []string{"go run ./bench/cmd/loadgen"}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " \"'") {
			a = strconv.Quote(a)
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}

func printSummary(r *Results) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\tworkload\tc\tn\terrors\tp50 ms\tp95 ms\tp99 ms\tthroughput/s\tpeak RSS MiB\t")
	for _, s := range r.Servers {
		for _, c := range s.Cells {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.1f\t%.1f\t\n", s.Name, c.Workload, c.Concurrency,
				c.Requests, c.Errors, c.P50ms, c.P95ms, c.P99ms, c.Throughput, float64(c.PeakServerKB)/1024)
		}
	}
	tw.Flush()
	for _, s := range r.Servers {
		if f := s.Fairness; f != nil {
			fmt.Printf("fairness %s: other organization's echo p99 %.2f ms alone, %.2f ms under a flood of %d runs (%d running, %d pending), %d errors\n",
				s.Name, f.Alone.P99ms, f.UnderFlood.P99ms, f.FloodRuns, f.FloodRunning, f.FloodPending, f.Errors)
		}
	}
}

// parseCounts reads "1=30,10=150": concurrency levels, each with its count
// of timed iterations.
func parseCounts(s string) (map[int]int, []int, error) {
	out := map[int]int{}
	var levels []int
	for _, kv := range splitList(s) {
		k, v, ok := strings.Cut(kv, "=")
		c, err1 := strconv.Atoi(k)
		n, err2 := strconv.Atoi(v)
		if !ok || err1 != nil || err2 != nil || c <= 0 || n <= 0 {
			return nil, nil, fmt.Errorf("-n: %q is not concurrency=count", kv)
		}
		if _, dup := out[c]; !dup {
			levels = append(levels, c)
		}
		out[c] = n
	}
	if len(levels) == 0 {
		return nil, nil, fmt.Errorf("-n: no concurrency level")
	}
	sort.Ints(levels)
	return out, levels, nil
}

// warmupCount is the warm-up of a cell: rounds iterations per client, at
// least 3.
func warmupCount(rounds, conc int) int {
	return max(3, rounds*conc)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	return 2
}

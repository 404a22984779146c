// Command awscost measures what one run costs on stepgraph's AWS path
// (`make bench-aws-cost`), for the workloads of bench/cmd/loadgen: stateless
// runs/wait on echo; a thread, then runs/wait on counter with steps 20; a
// thread, then approval's interrupt and resume.
//
// It runs them on MiniStack (started here on 127.0.0.1, stopped at the end)
// through the stack of the end-to-end tests (internal/lambdaapp/sample):
// the DynamoDB tables, the run state machine (Standard) and the run-worker
// as a real Lambda the state machine invokes, with the API handler in this
// process as API Gateway would invoke it. It counts, per iteration:
//
//   - API Gateway requests, and the Lambda invocation each is (the function
//     is the one the route goes to, lambdaapp.Functions);
//   - Lambda compute: each invocation's measured duration, rounded up to the
//     millisecond, times the memory infra/stack gives that function (a
//     runs/wait is billed while it waits);
//   - Step Functions state transitions, from each run execution's history;
//   - DynamoDB read and write request units of every call, from the items'
//     sizes (internal/meter), and Secrets Manager and other AWS API calls,
//     recorded by an aws-sdk-go-v2 middleware in the API and in the
//     run-worker (bench/cmd/awscost/runworker: the run-worker with the
//     meter);
//   - the bytes the functions log.
//
// It prices them at AWS's on-demand prices (prices.go) and writes
// bench/results/<date>-aws-cost.md and .json.
//
//	go run ./bench/cmd/awscost              # 20 iterations per workload (make bench-aws-cost)
//	go run ./bench/cmd/awscost -smoke       # 1 iteration each, no files
//	go run ./bench/cmd/awscost -render F.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stepgraph/stepgraph/internal/lambdaapp/sample"
)

// Results is everything a run measured; saved as JSON beside the report.
type Results struct {
	Date             string    `json:"date"`
	Command          string    `json:"command"`
	InvokedBy        string    `json:"invoked_by,omitempty"`
	Smoke            bool      `json:"smoke,omitempty"`
	Started          time.Time `json:"started"`
	Finished         time.Time `json:"finished"`
	DurationSeconds  float64   `json:"duration_s"`
	Machine          Machine   `json:"machine"`
	StepgraphVersion string    `json:"stepgraph_version"`
	MiniStackVersion string    `json:"ministack_version"`
	// ExpressRuns: the stack had the run machine's Express front (the CDK
	// stack's default); false: every run a Standard execution.
	ExpressRuns bool             `json:"express_runs"`
	Iterations  int              `json:"iterations"`
	Warmup      int              `json:"warmup"`
	Stack       StackSpec        `json:"stack"`
	Prices      Prices           `json:"prices"`
	Workloads   []WorkloadResult `json:"workloads"`
	// ColdStart: the run-worker's measured INIT (process start to ready),
	// per cold start, not per run (the emulator starts a process for every
	// invocation; AWS reuses warm ones).
	WorkerInitMs float64 `json:"worker_init_ms"`
}

// Machine is where it ran.
type Machine struct {
	Cores      int    `json:"cores"`
	MemTotalKB int64  `json:"mem_total_kb"`
	Kernel     string `json:"kernel"`
	GoVersion  string `json:"go"`
	LoadStart  string `json:"load_start"`
}

// WorkloadResult is one workload: its mean usage per iteration and cost.
type WorkloadResult struct {
	Workload
	Iterations int   `json:"iterations"`
	Usage      Usage `json:"usage_per_iteration"`
	Cost       Cost  `json:"cost"`
	// Express: what the run executions would cost per iteration as Express
	// workflows (for comparison; the design uses Standard).
	Express float64 `json:"sfn_express_alternative"`
	// LangSmith per 1,000 iterations.
	LangSmithPer1000 float64 `json:"langsmith_per_1000"`
	Stats            Stats   `json:"stats"`
	// Samples are the iterations as measured.
	Samples []*Iteration `json:"samples,omitempty"`
}

// Stats are timings and counts behind the means, for the design notes.
type Stats struct {
	// Wait: the runs/wait requests (ms): mean and max.
	WaitMeanMs float64 `json:"wait_mean_ms"`
	WaitMaxMs  float64 `json:"wait_max_ms"`
	// WaitGetItems: DynamoDB GetItem calls per runs/wait request (the
	// waiter's polls of the run, the API key, the thread, ...).
	WaitGetItems float64 `json:"wait_getitems"`
	// WorkerMs: mean billed duration of a run-worker invocation.
	WorkerMeanMs float64 `json:"worker_mean_ms"`
	// ExecutionMs: mean execution duration per run.
	ExecutionMeanMs float64 `json:"execution_mean_ms"`
	// RunDoneMs: from a runs/wait's start to the end of its run's last
	// run-worker invocation (the run is then finished in DynamoDB); the
	// rest of the wait is the waiter noticing it.
	RunDoneMeanMs float64   `json:"run_done_mean_ms"`
	RunDoneMs     []float64 `json:"run_done_ms"`
	// Waits: runs/wait requests per iteration.
	Waits float64 `json:"waits_per_iteration"`
}

func main() { os.Exit(run(os.Args[1:], os.Stdout)) }

func run(args []string, stdout io.Writer) int {
	fs := flag.NewFlagSet("awscost", flag.ContinueOnError)
	var (
		root      = fs.String("root", "", "repository root (default: the go.mod above the working directory)")
		n         = fs.Int("n", 20, "measured iterations per workload")
		warmup    = fs.Int("warmup", 2, "iterations per workload before the measured ones (not counted)")
		wls       = fs.String("workloads", "echo,counter,approval,counter-exit,chat-50k,conversation-20,state-1mb", "workloads (counter-exit, chat-50k, conversation-20 and state-1mb are variants for the design notes)")
		outDir    = fs.String("out", "bench/results", "where to write <date>-aws-cost.md and .json (relative to the root)")
		date      = fs.String("date", time.Now().UTC().Format("2006-01-02"), "the report's date (its file name)")
		smoke     = fs.Bool("smoke", false, "1 iteration per workload, no warm-up, no files: a quick check that the measurement works")
		render    = fs.String("render", "", "only write the report from this results JSON")
		invokedBy = fs.String("invoked-by", "", "how the run was started, for the report (e.g. \"make bench-aws-cost\")")
		express   = fs.Bool("express", true, "deploy the run machine's Express front, as the CDK stack does by default; false: Standard only (-c expressRuns=false)")
	)
	fs.SetOutput(stdout)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stdout, "awscost: "+format+"\n", a...) }
	fail := func(err error) int {
		fmt.Fprintf(stdout, "awscost: %v\n", err)
		return 1
	}
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
		*n, *warmup, *outDir = 1, 0, ""
	}
	if *n < 1 {
		return fail(fmt.Errorf("-n must be at least 1"))
	}
	var wl []*Workload
	for _, name := range strings.Split(*wls, ",") {
		w := workloadByName(strings.TrimSpace(name))
		if w == nil {
			return fail(fmt.Errorf("unknown workload %q (want echo, counter, approval, counter-exit)", name))
		}
		wl = append(wl, w)
	}
	if *root == "" {
		r, err := sample.ModuleRoot()
		if err != nil {
			return fail(err)
		}
		*root = r
	}
	spec, err := readStackSpec(*root)
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	res := &Results{Date: *date, Command: commandLine(args), InvokedBy: *invokedBy, Smoke: *smoke,
		Machine: readMachine(), StepgraphVersion: gitDescribe(*root),
		MiniStackVersion: ministackVersion(*root), ExpressRuns: *express, Iterations: *n, Warmup: *warmup, Stack: spec, Prices: prices}
	if err := measure(ctx, *root, res, wl, logf); err != nil {
		return fail(err)
	}
	if *smoke || *outDir == "" {
		logf("smoke run done: no files written")
		return 0
	}
	dir := *outDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(*root, dir)
	}
	if err := writeReport(res, dir); err != nil {
		return fail(err)
	}
	logf("wrote %s", filepath.Join(dir, res.Date+"-aws-cost.md"))
	return 0
}

// measure sets up the stack, runs the workloads and fills res (whose
// Iterations, Warmup and Stack say how). It stops what it started.
func measure(ctx context.Context, root string, res *Results, wl []*Workload, logf func(string, ...any)) error {
	res.Started = time.Now().UTC()
	b, err := setup(ctx, root, res.ExpressRuns, logf)
	if err != nil {
		return err
	}
	defer b.close()

	var inits []float64
	for _, w := range wl {
		logf("%s: %d warm-up + %d measured iterations", w.Name, res.Warmup, res.Iterations)
		wr := WorkloadResult{Workload: *w, Iterations: res.Iterations}
		var usages []Usage
		for i := 0; i < res.Warmup+res.Iterations; i++ {
			it, err := b.iterate(ctx, w, fmt.Sprintf("%s-%d", w.Name, i))
			if err != nil {
				return fmt.Errorf("%s iteration %d: %w", w.Name, i+1, err)
			}
			for _, inv := range it.Invocations {
				if inv.InitMicros > 0 {
					inits = append(inits, float64(inv.InitMicros)/1000)
				}
			}
			if i < res.Warmup {
				continue
			}
			it.Usage = usageOf(it, res.Stack.MemoryMB)
			it.Dollars = costOf(it.Usage, res.Prices).Total
			for _, r := range it.Requests {
				it.RequestMs = append(it.RequestMs, float64(r.Micros)/1000)
			}
			for _, inv := range it.Invocations {
				it.WorkerMs = append(it.WorkerMs, float64(inv.Micros)/1000)
			}
			if it.Usage.Unmodelled > 0 {
				return fmt.Errorf("%s: a DynamoDB operation the meter does not price: %+v", w.Name, it.Calls)
			}
			usages = append(usages, it.Usage)
			wr.Samples = append(wr.Samples, it)
		}
		wr.Usage = mean(usages)
		wr.Cost = costOf(wr.Usage, res.Prices)
		wr.Express = expressCost(wr.Usage, res.Prices)
		wr.LangSmithPer1000 = float64(w.AgentRuns) * res.Prices.LangSmithPerRun * 1000
		wr.Stats = statsOf(wr.Samples)
		res.Workloads = append(res.Workloads, wr)
		logf("%s: $%.4f per 1,000 (LangSmith Deployment $%.2f); %s transitions, %s WRU + %s index WRU, %s RRU, %.3f Lambda GB-s per iteration",
			w.Name, wr.Cost.Per1000, wr.LangSmithPer1000, num(wr.Usage.Transitions), num(wr.Usage.WRU()), num(wr.Usage.IndexWRU()), num(wr.Usage.RRU()), gbs(wr.Usage))
	}
	res.WorkerInitMs = meanOf(inits)
	res.Finished = time.Now().UTC()
	res.DurationSeconds = res.Finished.Sub(res.Started).Seconds()
	return nil
}

func gbs(u Usage) float64 {
	t := 0.0
	for _, f := range u.Lambda {
		t += f.GBSeconds
	}
	return t
}

func statsOf(samples []*Iteration) Stats {
	var s Stats
	var waits, gets, workers, execs, done []float64
	for _, it := range samples {
		for _, r := range it.Requests {
			if r.RunID != "" {
				ms := float64(r.Micros) / 1000
				waits = append(waits, ms)
				s.WaitMaxMs = max(s.WaitMaxMs, ms)
				gets = append(gets, float64(r.GetItems))
				var end int64
				for _, inv := range it.Invocations {
					if inv.RunID == r.RunID {
						end = max(end, inv.EndUnixMicros)
					}
				}
				if end > 0 {
					done = append(done, float64(end-r.StartUnixMicros)/1000)
				}
			}
		}
		for _, inv := range it.Invocations {
			workers = append(workers, float64(inv.Micros)/1000)
		}
		for _, e := range it.Executions {
			execs = append(execs, e.DurationMs)
		}
	}
	s.WaitMeanMs, s.WaitGetItems, s.WorkerMeanMs, s.ExecutionMeanMs = meanOf(waits), meanOf(gets), meanOf(workers), meanOf(execs)
	s.RunDoneMeanMs, s.RunDoneMs = meanOf(done), done
	if len(samples) > 0 {
		s.Waits = float64(len(waits)) / float64(len(samples))
	}
	return s
}

func meanOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}

func commandLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if strings.ContainsAny(a, " \t\"'") {
			q[i] = strconv.Quote(a)
		}
	}
	return strings.TrimSpace("go run ./bench/cmd/awscost " + strings.Join(q, " "))
}

func readMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(rest)
				if len(f) > 0 {
					m.MemTotalKB, _ = strconv.ParseInt(f[0], 10, 64)
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadStart = strings.Join(f[:3], " ")
		}
	}
	return m
}

func gitDescribe(root string) string {
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

var ministackPin = regexp.MustCompile(`(?m)^MINISTACK_VERSION=(\S+)`)

func ministackVersion(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "scripts", "install-ministack.sh"))
	if err != nil {
		return "unknown"
	}
	if m := ministackPin.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return "unknown"
}

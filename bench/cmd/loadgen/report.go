package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Targets from issue 6, for stepgraph on the project's 2-core machines.
const (
	targetEchoP50ms          = 5.0
	targetEchoRatio          = 20.0
	targetEchoConcurrency    = 10
	targetCounterRatio       = 10.0
	targetEchoP50Concurrency = 1
)

// writeReport writes <date>.md and <date>.png into dir.
func writeReport(r *Results, dir string) error {
	png, err := renderChart(r)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, r.Date+".png"), png, 0o644); err != nil {
		return err
	}
	r.AWSCost = readAWSCost(dir, r.Date)
	r.Growth = readGrowth(dir, r.Date)
	return os.WriteFile(filepath.Join(dir, r.Date+".md"), []byte(markdown(r)), 0o644)
}

func (r *Results) cell(server, workload string, conc int) *Cell {
	for i := range r.Servers {
		if r.Servers[i].Name != server {
			continue
		}
		for j := range r.Servers[i].Cells {
			c := &r.Servers[i].Cells[j]
			if c.Workload == workload && c.Concurrency == conc {
				return c
			}
		}
	}
	return nil
}

func (r *Results) stepgraphs() []*ServerResult { return r.filter(false) }
func (r *Results) peers() []*ServerResult      { return r.filter(true) }

func (r *Results) filter(peer bool) []*ServerResult {
	var out []*ServerResult
	for i := range r.Servers {
		if r.Servers[i].Peer == peer {
			out = append(out, &r.Servers[i])
		}
	}
	return out
}

// bestPeer is the peer with the highest error-free throughput in a cell.
func (r *Results) bestPeer(workload string, conc int) (string, *Cell) {
	var name string
	var best *Cell
	for _, p := range r.peers() {
		c := r.cell(p.Name, workload, conc)
		if c == nil || c.Errors > 0 {
			continue
		}
		if best == nil || c.Throughput > best.Throughput {
			name, best = p.Name, c
		}
	}
	return name, best
}

func mib(kb int64) string {
	if kb <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(kb)/1024)
}

func metWord(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

func markdown(r *Results) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	p("# Benchmark %s: stepgraph and the LangGraph Agent Servers\n\n", r.Date)
	p("Latency, throughput, server CPU time per run and peak memory of stepgraph (durability `async` and `sync`) next to the ")
	p("servers that speak the same API (those of this run: %s): Aegra (`aegra-api`, self-hosted, on a PostgreSQL of its own), ", peerNames(r))
	p("the Python in-memory Agent Server (`langgraph dev`) and the JS one (`langgraphjs dev`), serving the same ")
	p("three graphs (`echo`, `counter`, `approval`; the peers' copies are in [`bench/peers/`](../peers/)), ")
	p("driven one after the other by the same load generator ([`bench/cmd/loadgen`](../cmd/loadgen/)) on one machine. ")
	p("Every answer was checked against the graph's exact output.\n\n")

	// --- How ---------------------------------------------------------------
	p("## How it was run\n\n")
	cmd := "`" + r.Command + "`"
	if r.InvokedBy != "" {
		cmd = "`" + r.InvokedBy + "`, which ran " + cmd
	}
	p("- Command: %s (after `scripts/install-bench-deps.sh` installed the pinned peers).\n", cmd)
	if r.Note != "" {
		p("- **Note on this run:** %s\n", r.Note)
	}
	p("- Started %s, took %.1f min (servers start, warm up, run and stop in turn).\n",
		r.Started.Format("2006-01-02 15:04 UTC"), r.DurationSeconds/60)
	m := r.Machine
	p("- Machine: %s, %d cores, %.1f GiB memory (from /proc), Linux %s, %s. Load average at start %s, at end %s.\n",
		orDash(m.CPUModel), m.Cores, float64(m.MemTotalKB)/1024/1024, orDash(m.Kernel), m.GoVersion,
		orDash(m.LoadStart), orDash(m.LoadEnd))
	maxOther, where, sumOther, nOther := 0.0, "", 0.0, 0
	for _, s := range r.Servers {
		for _, c := range s.Cells {
			if c.OtherCPUPercent < 0 {
				continue
			}
			sumOther += c.OtherCPUPercent
			nOther++
			if c.OtherCPUPercent > maxOther {
				maxOther, where = c.OtherCPUPercent, fmt.Sprintf("%s %s c=%d", s.Name, c.Workload, c.Concurrency)
			}
		}
	}
	if nOther > 0 {
		p("- Other processes on the machine (neither the server under test nor the load generator) used %.0f%% of its CPU on average during the timed parts of at least 1 s, at most %.0f%% (%s): ", sumOther/float64(nOther), maxOther, where)
		if sumOther/float64(nOther) < 5 && maxOther < 20 {
			p("the machine was otherwise quiet (column \"other CPU\" below).\n")
		} else {
			p("the machine was not idle, and the figures carry that noise (column \"other CPU\" below).\n")
		}
	}
	p("- The load generator runs on the same %d cores as the server it drives, for every server alike.\n", m.Cores)
	p("- Per server: a fresh start on 127.0.0.1 (own temporary directory and data), ready when `GET /ok` answers 200 (Aegra: `GET /health`, which checks its database), stopped (SIGTERM to its process group) before the next one starts.\n")
	p("- Per workload and concurrency c: threads created first (not timed), max(3, %d×c) warm-up iterations, then a fixed count of timed iterations ", r.WarmupRounds)
	p("(%s) issued by c goroutines over keep-alive connections; the same counts for every server. ", countsText(r.Iterations))
	p("Latency is per iteration; throughput is iterations per second of wall time; errors are non-200 answers, transport errors and wrong outputs (all must be 0).\n")
	p("- Workloads: **echo** stateless `POST /runs/wait`; **counter** `POST /threads/{id}/runs/wait` with `steps` %d (%d super-steps, each checkpointed), one fresh thread per iteration; ", r.CounterSteps, r.CounterSteps)
	p("**approval** on a fresh thread, `runs/wait` with input (answers the interrupt) then `runs/wait` with `command.resume` (answers the final values): one iteration is both calls; ")
	p("**stream**, **stream-stateless**, **stream-chat**: streamed runs (see [Streaming](#streaming-issue-13)); ")
	p("**react**: a LangGraph app's ReAct agent served by `stepgraph dev` and `langgraph dev` (see [A LangGraph app](#a-langgraph-app-the-react-agent-issues-16-and-19)).\n")
	p("- Peak RSS: the resident set of the process listening on the server's port plus its children, sampled every 50 ms over the server's whole life, and the kernel's VmHWM; ")
	p("\"all processes\" adds launchers (the JS CLI runs the server as a child of a watcher process). ")
	p("For Aegra both figures add every PostgreSQL process (postmaster, backends, background workers): the sum of their resident sets, which counts a shared-buffer page once per process that touched it, so it overstates PostgreSQL's own use somewhat.\n")
	p("- Server CPU time per iteration: user+system time of all the server's processes (Aegra: with PostgreSQL's) over the timed part, divided by its iterations.\n")
	p("- Aegra: PostgreSQL 15 from Debian, `initdb` into a temporary folder per start, listening on 127.0.0.1 only (no Unix socket), password authentication, default settings (fsync on), stopped (fast shutdown) after Aegra and its folder removed, also when a start fails.\n")
	p("- Logs: every server at warning level (stepgraph `-log-level warn`, Python `--server-log-level WARNING`, JS `LOG_LEVEL=warn`, Aegra `LOG_LEVEL=WARNING` and uvicorn `--log-level warning --no-access-log`); peers with analytics and tracing off.\n\n")

	// --- Versions --------------------------------------------------------------
	p("## Servers and versions\n\n")
	p("Command lines as run from each server's own temporary directory `$TMP` (the peers' `langgraph.json` and graph file are copied there), on a free port `$PORT`; `stepgraph` is built from this tree with `go build -trimpath`.\n\n")
	p("| server | versions | command line | ready after | stopped by SIGTERM |\n|---|---|---|---|---|\n")
	for _, s := range r.Servers {
		stopped := "yes"
		if !s.GracefulStop {
			stopped = "no (SIGKILL after 15 s)"
		}
		if s.Error != "" {
			stopped = "–"
		}
		p("| %s | %s | `%s` | %.1f s | %s |\n", s.Label, versionText(s.Versions), orDash(s.Cmdline), s.StartupSeconds, stopped)
	}
	p("\n")
	for _, s := range r.Servers {
		if s.Error != "" {
			p("- **%s did not run:** %s\n", s.Label, s.Error)
		}
	}

	// --- Targets ---------------------------------------------------------------
	issue6 := r.hasWorkload("echo") || r.hasWorkload("counter") || r.hasWorkload("approval")
	if issue6 {
		p("## Targets (issue 6)\n\n")
		p("| target | measured | result |\n|---|---|---|\n")
	} else {
		p("## Targets (issue 6)\n\nNot measured in this run (no `echo`, `counter` or `approval` workload); the streaming targets are under [Streaming](#streaming-issue-13).\n\n")
	}
	for _, sg := range r.stepgraphs() {
		if c := r.cell(sg.Name, "echo", targetEchoP50Concurrency); c != nil {
			ok := c.Errors == 0 && c.P50ms <= targetEchoP50ms
			p("| %s: echo p50 ≤ %.0f ms at c=%d | %.2f ms | %s |\n", sg.Name, targetEchoP50ms, targetEchoP50Concurrency, c.P50ms, metWord(ok))
		}
	}
	for _, sg := range r.stepgraphs() {
		c := r.cell(sg.Name, "echo", targetEchoConcurrency)
		peer, pc := r.bestPeer("echo", targetEchoConcurrency)
		if c == nil || pc == nil {
			continue
		}
		ratio := c.Throughput / pc.Throughput
		p("| %s: echo throughput ≥ %.0f× best peer at c=%d | %.0f/s vs %s %.1f/s = %.1f× | %s |\n", sg.Name, targetEchoRatio,
			targetEchoConcurrency, c.Throughput, peer, pc.Throughput, ratio, metWord(c.Errors == 0 && ratio >= targetEchoRatio))
	}
	for _, sg := range r.stepgraphs() {
		var parts []string
		allOK, any := true, false
		for _, conc := range r.Concurrency {
			c := r.cell(sg.Name, "counter", conc)
			peer, pc := r.bestPeer("counter", conc)
			if c == nil || pc == nil {
				continue
			}
			any = true
			ratio := c.Throughput / pc.Throughput
			allOK = allOK && c.Errors == 0 && ratio >= targetCounterRatio
			parts = append(parts, fmt.Sprintf("c=%d: %.0f/s vs %s %.1f/s = %.1f×", conc, c.Throughput, peer, pc.Throughput, ratio))
		}
		if any {
			p("| %s: counter/%d throughput ≥ %.0f× best peer (every c) | %s | %s |\n", sg.Name, r.CounterSteps, targetCounterRatio,
				strings.Join(parts, "; "), metWord(allOK))
		}
	}
	minPeer, minPeerName := int64(0), ""
	for _, pr := range r.peers() {
		if !pr.App && pr.Error == "" && pr.PeakServerKB > 0 && (minPeer == 0 || pr.PeakServerKB < minPeer) {
			minPeer, minPeerName = pr.PeakServerKB, pr.Name
		}
	}
	for _, sg := range r.stepgraphs() {
		if minPeer == 0 || sg.Error != "" || !issue6 || sg.App {
			continue
		}
		p("| %s: peak RSS below every peer's | %s MiB vs lowest peer (%s) %s MiB | %s |\n", sg.Name, mib(sg.PeakServerKB),
			minPeerName, mib(minPeer), metWord(sg.PeakServerKB < minPeer))
	}
	if issue6 {
		p("%s\n", awsCostTargetRow(r.AWSCost))
	}

	// --- Results ----------------------------------------------------------------
	p("## Results\n\n")
	p("Latency in ms per iteration; throughput in iterations per second; peak RSS of the server process (MiB) during that cell; server CPU time per iteration (ms, all its processes; /proc counts in 10 ms ticks); ")
	p("other CPU: share of the machine's CPU used by unrelated processes during the timed part (– when it lasted under 1 s).\n\n")
	for _, w := range workloads {
		if !r.hasWorkload(w.Name) || w.stream != nil { // streams: streamingSection
			continue
		}
		p("### %s\n\n", w.Title)
		p("| c | server | n | errors | p50 | p95 | p99 | max | throughput/s | peak RSS MiB | server CPU ms/iter | other CPU |\n")
		p("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, conc := range r.Concurrency {
			for _, s := range r.Servers {
				c := r.cell(s.Name, w.Name, conc)
				if c == nil {
					continue
				}
				p("| %d | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", conc, s.Name, c.Requests, c.Errors,
					f2(c.P50ms), f2(c.P95ms), f2(c.P99ms), f2(c.MaxMs), f1(c.Throughput), mib(c.PeakServerKB), f2(c.ServerCPUmsPerOp), pct(c.OtherCPUPercent))
			}
		}
		p("\n")
	}

	// --- Ratios -----------------------------------------------------------------
	if len(r.peers()) > 0 && len(r.stepgraphs()) > 0 {
		p("## Ratios stepgraph / peer\n\n")
		p("Throughput ratio: stepgraph's throughput divided by the peer's (above 1: stepgraph does more). ")
		p("p50 ratio: stepgraph's p50 latency divided by the peer's (below 1: stepgraph answers sooner). ")
		p("CPU ratio: stepgraph's server CPU time per iteration divided by the peer's (below 1: stepgraph spends less); where a peer is CPU-bound, the throughput ratio can be no better than its inverse.\n\n")
		p("| workload | c | stepgraph |")
		for _, pr := range r.peers() {
			p(" throughput ÷ %s | p50 ÷ %s | CPU ÷ %s |", pr.Name, pr.Name, pr.Name)
		}
		p("\n|---|--:|---|")
		for range r.peers() {
			p("--:|--:|--:|")
		}
		p("\n")
		for _, w := range workloads {
			for _, conc := range r.Concurrency {
				for _, sg := range r.stepgraphs() {
					c := r.cell(sg.Name, w.Name, conc)
					if c == nil {
						continue
					}
					p("| %s | %d | %s |", w.Name, conc, strings.TrimPrefix(sg.Name, "stepgraph-"))
					for _, pr := range r.peers() {
						pc := r.cell(pr.Name, w.Name, conc)
						if pc == nil || pc.Throughput == 0 || pc.P50ms == 0 {
							p(" – | – | – |")
							continue
						}
						cpu := "–"
						if pc.ServerCPUmsPerOp > 0 && c.ServerCPUmsPerOp > 0 {
							cpu = fmt.Sprintf("%.2f", c.ServerCPUmsPerOp/pc.ServerCPUmsPerOp)
						}
						p(" %s× | %s | %s |", ratioText(c.Throughput/pc.Throughput), fmt.Sprintf("%.3f", c.P50ms/pc.P50ms), cpu)
					}
					p("\n")
				}
			}
		}
		p("\n")
	}

	p("%s", targets19Section(r))
	p("%s", appSection(r))
	p("%s", streamingSection(r))
	p("%s", fairnessSection(r))
	p("%s", growthSection(r))

	// --- Memory ------------------------------------------------------------------
	p("## Peak memory per server\n\n")
	p("Over each server's whole life, so for the servers with a fairness figure (stepgraph, Aegra) including its flood of long runs; the per-cell peaks of the workloads alone are in the tables above. Aegra's figures add its PostgreSQL's processes.\n\n")
	p("| server | peak RSS, server process (sampled) | VmHWM, server process | peak RSS, all processes of the start |\n|---|--:|--:|--:|\n")
	for _, s := range r.Servers {
		p("| %s | %s MiB | %s MiB | %s MiB |\n", s.Name, mib(s.PeakServerKB), mib(s.HWMServerKB), mib(s.PeakAllKB))
	}
	p("\n")

	// --- Cost --------------------------------------------------------------------
	p("%s", awsCostSection(r.AWSCost))

	// --- Chart ----------------------------------------------------------------------
	p("## Chart\n\n")
	p("![latency and throughput per server and concurrency](%s.png)\n\n", r.Date)
	p("Per workload: p50 latency (bar) with p99 (black tick), and throughput, for each server at each concurrency; both axes logarithmic.\n\n")

	// --- Notes -------------------------------------------------------------------------
	p("## Notes\n\n")
	p("- Both development servers poll their run queues, which sets a floor under every `runs/wait`: the Python in-memory runtime's `Runs.next` sleeps 0.5 s before it looks for pending runs ")
	p("(`langgraph_runtime_inmem/ops.py`), and the JS server's queue workers sleep `1000 * Math.random()` ms between polls (`@langchain/langgraph-api/dist/queue.mjs`, marked `TODO: this is very suboptimal`). ")
	p("Their latency is therefore about 1 s (Python) and 0.5 s (JS) per run whatever the graph does, while their CPU time per iteration is a few to a few tens of ms; ")
	p("their throughput grows with concurrency (they are waiting, not busy), so stepgraph's throughput ratio is largest at c=1 and shrinks as c grows. This is how both servers ship (`langgraph dev`, `langgraphjs dev`), so it is what a user picking them gets.\n")
	p("- The Python server's `langgraph dev` passes `--n-jobs-per-worker 1` unless told otherwise (its help text says 10); it ran with `--n-jobs-per-worker %d`, ", PythonJobs)
	p("the documented default and the JS server's default of 10 workers, so it is not held to one run at a time. stepgraph runs 16 run workers.\n")
	p("- `echo` runs are stateless: stepgraph keeps no checkpoint for them whatever the durability, so its two `echo` rows measure the same thing twice, and their difference shows how much the figures move from one minute to the next on this machine.\n")
	p("- stepgraph's durability `async` stores checkpoints behind the run in batches (one transaction for all that piled up), flushed before the answer; `sync` stores each before the next step. Concurrent transactions of the SQLite store share one commit (group commit), so `sync` pays one fsync per batch of concurrent steps, not per step.\n")
	p("- The peers' throughput moves between runs (the Python server's counter/20 at c=50 ranged from 34/s to 61/s over three runs of this day), and with it the ratios; the profiling history of stepgraph's own figures is in [bench/README.md](../README.md#profiling-counter20).\n")
	p("- The Python server ran with `--no-reload` (no file watcher process); the JS CLI has no such switch, so its watcher is counted only in \"all processes\".\n")
	p("- The JS server answers an interrupted `runs/wait` with `__interrupt__` alone, where stepgraph and the Python server also return the values so far (`request`); the check accepts both.\n")
	p("- Aegra ran as its own entry point runs it (uvicorn serving `aegra_api.main:app`, one process) with the local asyncio executor: runs execute in the server process, no Redis (Aegra's Redis broker is for several instances; it logs that without it runs have no crash recovery). ")
	p("Its checkpoints go to PostgreSQL through `langgraph-checkpoint-postgres`; runs carried no `durability` and none was configured, so LangGraph's default applied (`async`: each step's checkpoint written in the background while the next step runs), the durability stepgraph's `async` rows use. It served `echo`, `counter` and `approval` only (its `aegra.json`); the streaming workloads were not run on it. ")
	p("It ran in its multi-user mode (`auth.py`: two users with keys loadgen made, checked on every request, as stepgraph checks its keys), which the fairness figure needs.\n")
	p("- The JS peer uses `@langchain/langgraph` 1.3.7, the newest release whose `@langchain/langgraph-checkpoint` range meets `@langchain/langgraph-api` 2.0.0's peer range (`~1.0.0`).\n")
	var errs []string
	for _, s := range r.Servers {
		for _, c := range s.Cells {
			for _, e := range c.ErrorSample {
				errs = append(errs, fmt.Sprintf("%s %s c=%d: %s", s.Name, c.Workload, c.Concurrency, e))
			}
		}
		if s.Fairness != nil {
			for _, e := range s.Fairness.ErrorSample {
				errs = append(errs, fmt.Sprintf("%s fairness: %s", s.Name, e))
			}
		}
	}
	if len(errs) > 0 {
		p("\n### Errors\n\n")
		for _, e := range errs {
			p("- `%s`\n", strings.ReplaceAll(e, "`", "'"))
		}
	}
	return b.String()
}

func (r *Results) hasWorkload(name string) bool {
	for _, s := range r.Servers {
		for _, c := range s.Cells {
			if c.Workload == name {
				return true
			}
		}
	}
	return false
}

func countsText(m map[int]int) string {
	levels := make([]int, 0, len(m))
	for c := range m {
		levels = append(levels, c)
	}
	sort.Ints(levels)
	parts := make([]string, 0, len(levels))
	for _, c := range levels {
		parts = append(parts, fmt.Sprintf("%d at c=%d", m[c], c))
	}
	return strings.Join(parts, ", ")
}

func versionText(v map[string]string) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", k, v[k]))
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}

func ratioText(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

func f1(x float64) string { return fmt.Sprintf("%.1f", x) }
func f2(x float64) string { return fmt.Sprintf("%.2f", x) }

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func pct(x float64) string {
	if x < 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", x)
}

// fairnessSection is the report's fairness figure ("" when not measured).
func fairnessSection(r *Results) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	for _, s := range r.Servers {
		f := s.Fairness
		if f == nil {
			continue
		}
		if b.Len() == 0 {
			p("## Fairness\n\n")
			p("Another organization's stateless `echo` (`POST /runs/wait`, one at a time, %d timed after 3 not timed), ", f.Requests)
			p("first alone, then while one organization keeps %d `counter` runs of %d steps inflight on as many threads, ", f.FloodRuns, f.FloodSteps)
			p("each resubmitted as soon as it ends: more runs than stepgraph's 64 workers, each lasting far longer than the measurement. ")
			p("stepgraph runs at most `-max-running-per-org` (default 16) runs of one organization at once and serves the organizations in turn, ")
			p("so the flood holds 16 workers and its other runs wait, pending (the counts below were read when the measurement under flood began); ")
			p("what remains of the other organization's latency is the flood's CPU load on the machine. See [docs/reliability.md](../../docs/reliability.md#fairness). ")
			p("Aegra's organizations are its users (two, from its `auth.py`): it scopes their threads and runs, and runs every run it is given at once (no per-user cap), so the flood's runs all run.\n\n")
			p("| server | alone p50 | alone p99 | under flood p50 | under flood p99 | timed alone / under flood | flood running / pending | flood runs ended meanwhile | errors |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		}
		old := f.TimedAlone == 0 && f.TimedUnderFlood == 0 // saved before the counts were
		lat := func(ms float64, timed int) string {
			if timed == 0 && !old {
				return "– (none timed)"
			}
			return f2(ms) + " ms"
		}
		p("| %s | %s | %s | %s | %s | %s / %s | %d / %d | %d | %d |\n", s.Name, lat(f.Alone.P50ms, f.TimedAlone), lat(f.Alone.P99ms, f.TimedAlone),
			lat(f.UnderFlood.P50ms, f.TimedUnderFlood), lat(f.UnderFlood.P99ms, f.TimedUnderFlood), timedText(f, f.TimedAlone), timedText(f, f.TimedUnderFlood),
			f.FloodRunning, f.FloodPending, f.FloodEnded, f.Errors)
	}
	if b.Len() > 0 {
		for _, s := range r.Servers {
			if f := s.Fairness; f != nil && f.Errors > 0 {
				p("\n%s: %d of the other organization's echo runs failed (warm-up included; samples under [Errors](#errors)); a failed run's time to failure is in the figures (the client gives up after the request timeout), so they understate its latency.\n", s.Name, f.Errors)
			}
		}
		var none []string
		for _, s := range r.Servers {
			if s.Peer && s.Fairness == nil && s.Error == "" {
				none = append(none, s.Name)
			}
		}
		if len(none) > 0 {
			p("\nNot measured on %s: the development servers as run here have no organizations or users (no auth: every request is the same anonymous user), so there is no other organization to time.\n", strings.Join(none, ", "))
		}
		p("\n")
	}
	return b.String()
}

// timedText is a fairness phase's count of timed runs (results saved
// before the counts were recorded, both 0, show the count asked for).
func timedText(f *Fairness, n int) string {
	if f.TimedAlone == 0 && f.TimedUnderFlood == 0 {
		return fmt.Sprint(f.Requests)
	}
	return fmt.Sprint(n)
}

// peerNames lists the peers of a run, for the report's first paragraph.
func peerNames(r *Results) string {
	var names []string
	for _, s := range r.peers() {
		names = append(names, "`"+s.Name+"`")
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stepgraph/stepgraph/internal/awsflow"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
)

// TargetPer1000 is issue 6's target: cost per 1,000 simple runs (stateless
// echo) on AWS.
const TargetPer1000 = 0.20

// SimpleWorkload is the workload the target is about.
const SimpleWorkload = "echo"

// writeReport writes <date>-aws-cost.md and .json into dir.
func writeReport(r *Results, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, r.Date+"-aws-cost.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, r.Date+"-aws-cost.md"), []byte(markdown(r)), 0o644)
}

func (r *Results) workload(name string) *WorkloadResult {
	for i := range r.Workloads {
		if r.Workloads[i].Name == name {
			return &r.Workloads[i]
		}
	}
	return nil
}

// TargetMet reports the target's outcome: the simple workload's cost per
// 1,000 and whether it is within TargetPer1000 (ok false: not measured).
func (r *Results) TargetMet() (per1000 float64, met, ok bool) {
	w := r.workload(SimpleWorkload)
	if w == nil {
		return 0, false, false
	}
	return w.Cost.Per1000, w.Cost.Per1000 <= TargetPer1000, true
}

func usd(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v >= 1:
		return fmt.Sprintf("$%.2f", v)
	case v >= 0.01:
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.6f", v)
}

func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v-math.Round(v)) < 1e-9:
		return fmt.Sprintf("%.0f", math.Round(v))
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.4f", v)
}

func markdown(r *Results) string {
	var sb strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }
	pr := r.Prices
	main := r.mainWorkloads()

	p("# AWS cost per run, measured: %s\n\n", r.Date)
	p("What one run of each benchmark workload consumes on stepgraph's AWS path — API Gateway, the Lambda functions, the run state machine (Step Functions Standard), DynamoDB, Secrets Manager, CloudWatch Logs — counted on MiniStack, ")
	p("priced at AWS's public on-demand prices for us-east-1, next to LangSmith Deployment's published $0.005 per Agent Run (issue 6). ")
	p("The workloads are those of the side-by-side benchmark ([`%s.md`](%s.md), [`bench/cmd/loadgen`](../cmd/loadgen/)); the measurement is [`bench/cmd/awscost`](../cmd/awscost/).\n\n", r.Date, r.Date)

	// --- Result ------------------------------------------------------------
	p("## Result\n\n")
	p("Dollars per 1,000 iterations of each workload (an iteration is what loadgen times: for counter and approval it includes creating the thread). ")
	p("LangSmith Deployment bills $0.005 per Agent Run, and a resume after an interrupt is an Agent Run of its own, so approval is 2 Agent Runs; its deployment uptime is billed on top and not included here.\n\n")
	p("| workload | AWS per 1,000 iterations | Agent Runs per iteration | AWS per 1,000 Agent Runs | LangSmith Deployment per 1,000 iterations | LangSmith ÷ AWS |\n")
	p("|---|--:|--:|--:|--:|--:|\n")
	for _, w := range main {
		p("| %s | **%s** | %d | %s | %s | %.0f× |\n", w.Name, usd(w.Cost.Per1000), w.AgentRuns, usd(w.Cost.Per1000/float64(w.AgentRuns)),
			usd(w.LangSmithPer1000), w.LangSmithPer1000/w.Cost.Per1000)
	}
	p("\n")
	if per, met, ok := r.TargetMet(); ok {
		word := "**not met**"
		if met {
			word = "**met**"
		}
		p("| target (issue 6) | measured | result |\n|---|---|---|\n")
		p("| cost per 1,000 simple runs on AWS ≤ $%.2f | %s per 1,000 stateless `echo` runs/wait (%.0f%% of the target; %.0f× below LangSmith Deployment's $5.00) | %s |\n\n",
			TargetPer1000, usd(per), 100*per/TargetPer1000, 5/per, word)
	}
	if w := r.workload(SimpleWorkload); w != nil {
		top := append([]CostLine(nil), w.Cost.Lines...)
		sort.SliceStable(top, func(i, j int) bool { return top[i].Dollars > top[j].Dollars })
		var parts []string
		for _, l := range top[:min(3, len(top))] {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", l.Item, 100*l.Dollars/w.Cost.Total))
		}
		p("Where an echo run's money goes: %s.\n\n", strings.Join(parts, ", "))
	}

	// --- How -----------------------------------------------------------------
	p("## How it was measured\n\n")
	cmd := r.Command
	if r.InvokedBy != "" {
		cmd = fmt.Sprintf("`%s`, which ran `%s`", r.InvokedBy, r.Command)
	} else {
		cmd = "`" + cmd + "`"
	}
	p("- Command: %s. Started %s, took %.0f s.\n", cmd, r.Started.Format("2006-01-02 15:04 MST"), r.DurationSeconds)
	p("- Machine: %d cores, %.1f GiB memory, Linux %s, %s; load average at start %s. stepgraph %s; MiniStack %s (pinned in `scripts/install-ministack.sh`), started on 127.0.0.1 for the run and stopped after it.\n",
		r.Machine.Cores, float64(r.Machine.MemTotalKB)/(1<<20), r.Machine.Kernel, r.Machine.GoVersion, r.Machine.LoadStart, r.StepgraphVersion, r.MiniStackVersion)
	if r.ExpressRuns {
		p("- **Run machines: the Express front and the Standard run machine** (the CDK stack's default): runs that can start now start on the Express machine, which ends them when one step (budget %d s) finishes them and otherwise hands them to the Standard execution named after the run; runs with `after_seconds` start on Standard.\n", awsflow.ExpressStepBudget)
	} else {
		p("- **Run machine: Standard only** (the CDK stack with `-c expressRuns=false`): every run is one Standard execution.\n")
	}
	p("- The stack of the end-to-end tests (`internal/lambdaapp/sample`): the DynamoDB tables, the run state machine (`internal/awsflow`, Standard) and the run-worker as a real Lambda that the state machine invokes; the API handler (`lambdaapp.Open` + `NewHTTPHandler`, role api) runs in this process and is called with API Gateway HTTP API events, as API Gateway would invoke the function the route goes to (`lambdaapp.Functions`: `POST /runs/wait` → stateless-run-wait, `POST /threads/{id}/runs/wait` → thread-run-wait, `POST /threads` → threads).\n")
	p("- Per workload: %d warm-up iteration(s), then %d measured ones, one at a time; every answer is checked as loadgen checks it, and every execution must end SUCCEEDED. Figures are means per iteration.\n", r.Warmup, r.Iterations)
	p("- **API Gateway**: one request per API call; HTTP APIs meter 512 KB increments (request + response here are a few hundred bytes: 1 each).\n")
	p("- **Lambda**: one invocation per API request, and one run-worker invocation per Lambda task in the execution's history (cross-checked against the worker's own records). Billed duration = the handler's measured wall time on this machine, minus the meter's own time (below), rounded up to 1 ms; GB-s = that × the memory `infra/stack/functions.go` gives the function (%s), %s prices. A runs/wait is billed for the whole time it waits. Cold starts are not in the per-run figures (see Caveats).\n",
		memList(r.Stack.MemoryMB), r.Stack.Arch)
	p("- **Step Functions**: from `GetExecutionHistory` of each run's execution: every `*StateEntered` event is a state transition, and a task retried within a state adds one per extra attempt (AWS bills retries as transitions). An Express execution (MiniStack keeps their histories; AWS does not) is billed a request and its duration, rounded up to 100 ms, at 64 MB.\n")
	p("- **DynamoDB**: an aws-sdk-go-v2 middleware on the API's and the run-worker's AWS configuration (`bench/cmd/awscost/internal/meter`; the run-worker is [`bench/cmd/awscost/runworker`](../cmd/awscost/runworker/), functions/run-worker's wiring and handler plus the meter) records every call and computes its request units from item sizes by AWS's on-demand rules: ")
	p("1 RRU per started 4 KB for a strongly consistent GetItem (½ eventually consistent), a Query page by the summed size of the items it evaluated; 1 WRU per started KB of the larger of the item before and after a Put/Update, of the deleted item for a Delete, at least 1 (also for a failed condition); transactions ×2 (ConditionCheck included); ")
	p("plus the global secondary index writes of the deployed tables (`dynamo.DeployedOptions`: no queue or lease index; `org` and `status` keys only, `due` ALL): an item entering or leaving an index costs 1 WRU per KB of its index entry (the whole item for ALL, its keys for KEYS_ONLY), one whose index keys change 2, one that stays with other attributes changed 1 for ALL and nothing for KEYS_ONLY). Item sizes come from the items themselves: the meter reads every written item before and after the write with a client of its own (not counted, and its time is taken out of the durations). ")
	p("MiniStack does return `ReturnConsumedCapacity`, but size- and index-blind (1 unit per item written, ×2 in a transaction; its writes count 1 per index whether the index changes or not), so it is shown only for comparison.\n")
	p("- **Secrets Manager and other AWS calls**: the same middleware records every call of every client (Step Functions `StartExecution` is not billed for Standard workflows).\n")
	p("- **CloudWatch Logs**: the bytes the functions write to their log at `STEPGRAPH_LOG_LEVEL=info` (the stack's default), counted; the Lambda platform's own START/END/REPORT lines are not.\n\n")

	p("### Prices (us-east-1, on-demand, first tier, no free tier)\n\n")
	p("Checked on %s. The official pages are listed; what each figure was checked against (stored copies of pages found with the project's search tool; where AWS's own page was not among them, the figures were confirmed in third-party summaries that quote it) is in the last column.\n\n", pr.CheckedOn)
	p("| service | price | page | checked against |\n|---|---|---|---|\n")
	for _, row := range []struct{ key, price string }{
		{"Lambda", fmt.Sprintf("arm64: $%.10f per GB-s, $0.20 per 1M requests", pr.LambdaPerGBSecond)},
		{"Step Functions", "Standard: $0.025 per 1,000 state transitions; Express: $1.00 per 1M requests, $0.06 per GB-hour"},
		{"DynamoDB", "on-demand: $0.625 per 1M WRU, $0.125 per 1M RRU"},
		{"Secrets Manager", "$0.05 per 10,000 API calls"},
		{"API Gateway", "HTTP API: $1.00 per 1M requests"},
		{"CloudWatch Logs", "$0.50 per GB ingested"},
		{"LangSmith", "LangSmith Deployment: $0.005 per Agent Run"},
	} {
		p("| %s | %s | %s | %s |\n", row.key, row.price, pr.Sources[row.key], pr.Confirmed[row.key])
	}
	p("\nUnit rules: %s. INIT billing: %s.\n\n", pr.Sources["DynamoDB units"], pr.Sources["Lambda INIT billing"])

	// --- Usage ---------------------------------------------------------------
	all := r.Workloads
	p("## What one iteration consumes\n\n")
	p("Means over %d iterations.%s\n\n", r.Iterations, variantNote(all))
	p("| | %s |\n|---|%s\n", names(all), strings.Repeat("--:|", len(all)))
	row := func(label string, f func(u *Usage) string) {
		p("| %s |", label)
		for i := range all {
			p(" %s |", f(&all[i].Usage))
		}
		p("\n")
	}
	row("API Gateway requests", func(u *Usage) string { return num(u.APIRequests) })
	for _, fn := range lambdaNames(all) {
		mem := r.Stack.MemoryMB[fn]
		row(fmt.Sprintf("Lambda %s (%d MB): invocations", fn, mem), func(u *Usage) string {
			if f := u.Lambda[fn]; f != nil {
				return num(f.Invocations)
			}
			return "–"
		})
		row(fmt.Sprintf("Lambda %s: billed ms / GB-s", fn), func(u *Usage) string {
			if f := u.Lambda[fn]; f != nil {
				return fmt.Sprintf("%.0f / %.4f", f.BilledMs, f.GBSeconds)
			}
			return "–"
		})
	}
	row("Step Functions Express executions / billed s", func(u *Usage) string {
		return fmt.Sprintf("%s / %.1f", num(u.ExpressExecutions), u.ExpressBilledS)
	})
	row("Step Functions Standard executions", func(u *Usage) string { return num(u.Executions) })
	row("Step Functions state transitions (of which retries)", func(u *Usage) string {
		return fmt.Sprintf("%s (%s)", num(u.Transitions), num(u.Retries))
	})
	row("DynamoDB calls", func(u *Usage) string { return num(u.DynamoCalls()) })
	row("DynamoDB WRU, tables", func(u *Usage) string { return num(u.WRU()) })
	row("DynamoDB WRU, indexes", func(u *Usage) string { return num(u.IndexWRU()) })
	row("DynamoDB RRU", func(u *Usage) string { return num(u.RRU()) })
	row("DynamoDB units MiniStack reported (size-blind)", func(u *Usage) string { return num(u.Reported()) })
	row("Secrets Manager calls", func(u *Usage) string { return num(u.SecretsCalls) })
	row("S3 requests, payload store (PUT+LIST / GET)", func(u *Usage) string { return num(u.S3Writes) + " / " + num(u.S3Reads) })
	row("other AWS calls (not billed)", func(u *Usage) string { return otherCalls(u) })
	row("log bytes", func(u *Usage) string { return num(u.LogBytes) })
	p("\n")

	// --- Cost ------------------------------------------------------------------
	p("## Cost per 1,000 iterations, line by line\n\n")
	p("| | %s |\n|---|%s\n", names(all), strings.Repeat("--:|", len(all)))
	items := costItems(all)
	for _, item := range items {
		p("| %s |", item)
		for _, w := range all {
			d, found := 0.0, false
			for _, l := range w.Cost.Lines {
				if l.Item == item {
					d, found = l.Dollars, true
				}
			}
			if !found {
				p(" – |")
				continue
			}
			p(" %s |", usd(d*1000))
		}
		p("\n")
	}
	p("| **total** |")
	for _, w := range all {
		p(" **%s** |", usd(w.Cost.Per1000))
	}
	p("\n| spread over the iterations (min – max) |")
	for _, w := range all {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range w.Samples {
			lo, hi = math.Min(lo, s.Dollars*1000), math.Max(hi, s.Dollars*1000)
		}
		if len(w.Samples) == 0 {
			p(" – |")
			continue
		}
		p(" %s – %s |", usd(lo), usd(hi))
	}
	p("\n\n")

	// --- DynamoDB detail ---------------------------------------------------------
	p("## DynamoDB, call by call\n\n")
	p("Per iteration, by function, operation and what the call touched (table:kind, the kind being the item's sort key up to its first `#`: THREAD, RUN, RUNID, CP checkpoint, TRES temporary result, KEY API key; assistants are keyed by id). \"largest\" is the largest item seen, in bytes.\n\n")
	for _, w := range all {
		p("**%s**\n\n| function | operation | touched | calls | RRU | WRU | index WRU | largest |\n|---|---|---|--:|--:|--:|--:|--:|\n", w.Name)
		keys := make([]string, 0, len(w.Usage.Dynamo))
		for k := range w.Usage.Dynamo {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			o := w.Usage.Dynamo[k]
			f := strings.SplitN(k, " ", 3)
			for len(f) < 3 {
				f = append(f, "")
			}
			target := f[2]
			if strings.HasPrefix(target, "assistants:") {
				target = "assistants:<id>"
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %d |\n", f[0], f[1], target, num(o.Calls), num(o.RRU), num(o.WRU), num(o.IndexWRU), o.MaxItemBytes)
		}
		p("\n")
	}

	// --- Timings ------------------------------------------------------------------
	p("## Timings on this machine\n\n")
	p("Durations are MiniStack's, on 2 shared cores: its DynamoDB answers over loopback in about a millisecond, and it starts a new run-worker process for every invocation (AWS reuses warm ones), so run-worker time per call and the time until a run is finished differ from AWS's. ")
	p("The waiter reads the run every %d ms (`lambdaapp.APIPollInterval` × 25), so a runs/wait is billed in steps of that interval. ", pollMs())
	p("The machine was shared with other work (load average %s at the start): a slow iteration shows as a longer wait or run-worker time (the max column, and the spread in the cost table).\n\n", r.Machine.LoadStart)
	p("| workload | runs/wait billed, mean (max) | run finished after | GetItems per runs/wait | run-worker billed per invocation | execution | meter time removed per iteration |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, w := range all {
		s := w.Stats
		p("| %s | %.0f ms (%.0f) | %.0f ms | %.1f | %.1f ms | %.0f ms | %.1f ms |\n", w.Name, s.WaitMeanMs, s.WaitMaxMs, s.RunDoneMeanMs, s.WaitGetItems, s.WorkerMeanMs, s.ExecutionMeanMs, w.Usage.OverheadMs)
	}
	p("\nrun-worker wiring at a cold start (from `main` to ready: configuration, clients, `lambdaapp.Open`): %.1f ms; the process start and the Lambda platform's part of INIT are not in it. ", r.WorkerInitMs)
	p("INIT is billed once per new execution environment, not per run: even a 100 ms INIT at 1024 MB is %s per 1,000 cold starts.\n\n", usd(0.1*pr.LambdaPerGBSecond*1000))

	// --- Design --------------------------------------------------------------------
	p("## Lower-cost design options the numbers point to\n\n")
	p("Not changed here; figures per 1,000 iterations.\n\n")
	if minTransitions(all) == 0 {
		p("**1. Step Functions.** No run here was a Standard execution: each ended in its Express step, for a request and its duration (the Step Functions lines of the cost tables). ")
		p("A run that Express does not finish in one step (a wait, a park, more than the step's budget, a failed step) is handed to a Standard execution of at least 3 transitions, %s per 1,000 such runs; runs with `after_seconds` start there. ", usd(3*pr.SFNPerTransition*1000))
		p("`-express=false` measures the same workloads with Standard only (docs/aws.md, \"Express or Standard\").\n\n")
	} else {
		p("**1. Step Functions Standard.** A run that is a Standard execution makes at least %s transitions (Step → Next → Done), %s per 1,000 runs, whatever the run does. ",
			num(minTransitions(all)), usd(minTransitions(all)*pr.SFNPerTransition*1000))
		p("The same executions as Express workflows ($1.00 per 1M requests plus $0.06 per GB-hour at 64 MB, 100 ms steps; with the executions' durations on MiniStack, longer than AWS's) would cost:\n\n")
		p("| workload | Standard transitions | as Express | total with Express |\n|---|--:|--:|--:|\n")
		for _, w := range all {
			std := w.Usage.Transitions * pr.SFNPerTransition
			p("| %s | %s | %s | %s (−%.0f%%) |\n", w.Name, usd(std*1000), usd(w.Express*1000), usd((w.Cost.Total-std+w.Express)*1000), 100*(std-w.Express)/w.Cost.Total)
		}
		p("\nExpress is not a drop-in change: it allows 5 minutes per execution (runs wait in `Wait` states for `after_seconds` and queued runs), runs at-least-once, and does not support `DescribeExecution`, which the waiter uses to notice a lost execution. ")
		p("The stack therefore puts an Express front before the Standard machine (`internal/awsflow`, express.asl.json; docs/aws.md, \"Express or Standard\"): runs that start now and finish in one step stay in Express, the rest are handed to Standard. ")
		p("This report measured it %s.\n\n", map[bool]string{true: "on (the Standard transitions above are those of handed-over and delayed runs)", false: "off (`-express=false`): every run above is a Standard execution"}[r.ExpressRuns])
	}

	p("**2. The waiter's poll interval sets the API function's bill.** ")
	p("A runs/wait holds its 512 MB function until the waiter's next read after the run finished; with reads every %d ms the runs here were finished after %s on average but billed %s. ",
		pollMs(), msList(all, func(s Stats) float64 { return s.RunDoneMeanMs }), msList(all, func(s Stats) float64 { return s.WaitMeanMs }))
	p("A read of the run is 1 RRU (%s per 1,000); 100 ms of a 512 MB function is 0.05 GB-s (%s per 1,000). Modelled on the measured finishing times (ticks from the request's start, one read at the start and one per tick):\n\n",
		usd(pr.DynamoPerRRU*1000), usd(0.05*pr.LambdaPerGBSecond*1000))
	p("| poll interval | %s |\n|---|%s\n", names(main), strings.Repeat("--:|", len(main)))
	for _, iv := range []float64{0.1, 0.25, 0.5, 1.0} {
		p("| %.0f ms |", iv*1000)
		for _, w := range main {
			base := pollCost(w, 0.5, r)
			c := pollCost(w, iv, r)
			p(" %s (%s) |", usd(c*1000), signedUSD((c-base)*1000))
		}
		p("\n")
	}
	p("\n(waiter reads + waiting function time per 1,000 iterations, and the change from today's interval.) On AWS, where a run that is not emulated finishes sooner, the 500 ms step is a larger share of every wait, and it is also the floor of a runs/wait's latency. The saving is real but small next to item 1.\n\n")

	if c, e := r.workload("counter"), r.workload("counter-exit"); c != nil {
		cp := c.Usage.Dynamo["run-worker TransactWriteItems threads:CP+threads:THREAD"]
		cpRead := c.Usage.Dynamo["run-worker GetItem threads:CP"]
		thRead := c.Usage.Dynamo["run-worker GetItem threads:THREAD"]
		if cp != nil {
			perStep := (cp.WRU + cp.IndexWRU) * pr.DynamoPerWRU
			reads := 0.0
			if cpRead != nil {
				reads += cpRead.RRU
			}
			if thRead != nil {
				reads += thRead.RRU
			}
			p("**3. Checkpoints are counter's DynamoDB bill.** Each of counter's %s checkpoints is a transaction writing the checkpoint and the thread item (%s WRU with the transaction's ×2) plus %s index WRU (the thread item is in the `org` index, which projects ALL attributes, so every change to it is written there too), and the worker reads the thread and looks for the checkpoint before each write (%s RRU per iteration in all): %s per 1,000 counter runs, %.0f%% of its total. ",
				num(cp.Calls), num(cp.WRU/cp.Calls), num(cp.IndexWRU/cp.Calls), num(reads), usd((perStep+reads*pr.DynamoPerRRU)*1000), 100*(perStep+reads*pr.DynamoPerRRU)/c.Cost.Total)
			p("An `org` index that projects only attributes a checkpoint does not change (SearchThreads reading the rest from the table) would save up to %s index WRU per counter run (%s per 1,000). ", num(cp.IndexWRU), usd(cp.IndexWRU*pr.DynamoPerWRU*1000))
			p("The DynamoDB adapter writes one transaction per checkpoint even when it is handed several at once (`PutCheckpoints` loops over `PutCheckpoint`, and async durability's write-behind hands it batches): each one re-reads the thread, looks for the checkpoint, and bumps the thread item (2 of the 4 WRU and the index WRU). ")
			p("Writing a batch as one transaction — its checkpoints plus one thread update — would cost about 2 WRU per checkpoint instead of %s WRU + %s RRU; at counter's %s checkpoints that is roughly %s per 1,000 runs less (an estimate from the units above, not a measurement). ",
				num((cp.WRU+cp.IndexWRU)/cp.Calls), num(reads/cp.Calls), num(cp.Calls),
				usd(cp.Calls*((cp.WRU+cp.IndexWRU)/cp.Calls-2)*pr.DynamoPerWRU*1000+reads*pr.DynamoPerRRU*1000))
			if e != nil {
				if math.Abs(e.Usage.WRU()-c.Usage.WRU()) < 1 && math.Abs(e.Usage.IndexWRU()-c.Usage.IndexWRU()) < 1 {
					p("A client's `\"durability\": \"exit\"` does not help today: it defers the same writes to the run's end (measured, the counter-exit variant: %s WRU + %s index WRU + %s RRU per run, as counter's %s + %s + %s).",
						num(e.Usage.WRU()), num(e.Usage.IndexWRU()), num(e.Usage.RRU()), num(c.Usage.WRU()), num(c.Usage.IndexWRU()), num(c.Usage.RRU()))
				} else {
					p("A client that asks for `\"durability\": \"exit\"` (checkpoints written when the run ends) pays %s per 1,000 instead of %s (measured: the counter-exit variant, %s WRU + %s index WRU + %s RRU per run against %s + %s + %s).",
						usd(e.Cost.Per1000), usd(c.Cost.Per1000), num(e.Usage.WRU()), num(e.Usage.IndexWRU()), num(e.Usage.RRU()), num(c.Usage.WRU()), num(c.Usage.IndexWRU()), num(c.Usage.RRU()))
				}
			}
			p("\n\n")
		}
	}
	if w := r.workload(SimpleWorkload); w != nil {
		compute := 0.0
		for _, l := range w.Cost.Lines {
			if strings.HasPrefix(l.Item, "Lambda compute") {
				compute += l.Dollars
			}
		}
		p("**4. Lambda time is a small share, so emulator timings hardly move the result.** Lambda compute is %.0f%% of an echo run's cost; if every Lambda duration on AWS were 5× what was measured here, echo would cost %s per 1,000 (target $%.2f). ",
			100*compute/w.Cost.Total, usd((w.Cost.Total+4*compute)*1000), TargetPer1000)
		p("Giving the wait functions 128 MB instead of 512 MB (they wait; they do not compute) would save three quarters of their share.\n\n")
	}

	// --- Caveats ----------------------------------------------------------------------
	p("## Caveats\n\n")
	p("- Durations are this machine's on MiniStack, not AWS's (see Timings). The counts (requests, invocations, transitions, request units, calls) do not depend on the emulator's speed: the same state machine runs and the same SDK calls are made. Retries AWS can add — throttling, a transaction conflict between concurrent writers, a step the state machine retries — did not occur here (no retry in any history) and would add to them.\n")
	replays, iterations := 0, 0
	for _, w := range r.Workloads {
		for _, s := range w.Samples {
			replays += s.Replays
			iterations++
		}
	}
	p("- MiniStack sometimes hands a Lambda process the event it has just answered once more, before it stops the process (its Runtime API serves the same event to every request for the next one); the metered run-worker recognises the repeated request ID, and such re-deliveries (%d in %d measured iterations here) are dropped with their calls: AWS does not make them.\n", replays, iterations)
	p("- One iteration at a time: concurrent runs on one thread (enqueue, reject) and webhooks (Secrets Manager reads of the signing key) are not exercised; every workload here makes 0 Secrets Manager calls per run.\n")
	p("- Cold starts are left out of the per-run figures: on AWS INIT is billed (all runtimes since 1 Aug 2025) once per new execution environment; Timings has the run-worker's own wiring time (the process start and the platform's part of INIT are not measured here).\n")
	p("- Whether AWS also bills the execution's start as a transition is not stated on the pricing page; if it does, add $0.025 per 1,000 executions (per 1,000 runs).\n")
	p("- Index writes are priced by the rules above with the index entry as the index projects it (the whole item for ALL, the keys for KEYS_ONLY); a transaction's index writes are counted once, not ×2.\n")
	p("- Not per run, so not included: DynamoDB storage ($0.25 per GB-month), Secrets Manager's $0.40 per secret-month, CloudWatch Logs storage, the Lambda platform's log lines (about 0.3 KB per invocation, ≈ $0.00015 per 1,000 invocations), data transfer out, free tiers, savings plans.\n")
	p("- LangSmith Deployment's figure is its published per-run price only; its uptime charge comes on top, so the ratio understates the gap for a deployment that idles.\n")
	return sb.String()
}

func pollMs() int64 { return (lambdaapp.APIPollInterval * 25).Milliseconds() }

func (r *Results) mainWorkloads() []WorkloadResult {
	var out []WorkloadResult
	for _, w := range r.Workloads {
		if !w.Variant {
			out = append(out, w)
		}
	}
	return out
}

func variantNote(ws []WorkloadResult) string {
	var notes []string
	for _, w := range ws {
		if w.Variant {
			notes = append(notes, fmt.Sprintf(" %s is a variant for the design notes: %s.", w.Name, w.Title))
		}
	}
	return strings.Join(notes, "")
}

func names(ws []WorkloadResult) string {
	var n []string
	for _, w := range ws {
		n = append(n, w.Name)
	}
	return strings.Join(n, " | ")
}

func memList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		if k == "thread-run-wait" || k == "stateless-run-wait" || k == "threads" || k == "run-worker" {
			parts = append(parts, fmt.Sprintf("%s %d MB", k, m[k]))
		}
	}
	return strings.Join(parts, ", ")
}

func lambdaNames(ws []WorkloadResult) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range ws {
		for name := range w.Usage.Lambda {
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

func otherCalls(u *Usage) string {
	keys := make([]string, 0, len(u.Calls))
	for k := range u.Calls {
		if !strings.Contains(k, "Secrets Manager") && !(strings.Contains(k, " S3 ") && !strings.Contains(k, "DeleteObject")) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		f := strings.Fields(k)
		parts = append(parts, fmt.Sprintf("%s %s", num(u.Calls[k]), strings.Join(f[1:], " ")))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

// costItems lists the cost lines of every workload: Lambda first (its
// compute lines by function), then the rest in costOf's order.
func costItems(ws []WorkloadResult) []string {
	seen := map[string]bool{}
	var compute, rest []string
	for _, w := range ws {
		for _, l := range w.Cost.Lines {
			if seen[l.Item] {
				continue
			}
			seen[l.Item] = true
			if strings.HasPrefix(l.Item, "Lambda compute") {
				compute = append(compute, l.Item)
			} else if l.Item != "Lambda requests" {
				rest = append(rest, l.Item)
			}
		}
	}
	sort.Strings(compute)
	return append(append([]string{"Lambda requests"}, compute...), rest...)
}

func signedUSD(v float64) string {
	switch {
	case v > 0:
		return "+" + usd(v)
	case v < 0:
		return "−" + usd(-v)
	}
	return "±$0"
}

func minTransitions(ws []WorkloadResult) float64 {
	m := math.Inf(1)
	for _, w := range ws {
		if w.Usage.Executions > 0 {
			m = math.Min(m, w.Usage.Transitions/w.Usage.Executions)
		}
	}
	if math.IsInf(m, 1) {
		return 0
	}
	return m
}

func msList(ws []WorkloadResult, f func(Stats) float64) string {
	var parts []string
	for _, w := range ws {
		if w.Variant {
			continue
		}
		parts = append(parts, fmt.Sprintf("%.0f ms (%s)", f(w.Stats), w.Name))
	}
	return strings.Join(parts, ", ")
}

// pollCost models the waiter of w's runs/wait requests polling every
// interval seconds: a read at the start and one per tick until the tick
// after the run finished; the function waits until that tick. Dollars per
// iteration.
func pollCost(w WorkloadResult, interval float64, r *Results) float64 {
	if len(w.Stats.RunDoneMs) == 0 {
		return 0
	}
	mem := 512
	for name, f := range w.Usage.Lambda {
		if strings.HasSuffix(name, "run-wait") {
			mem = f.MemoryMB
		}
	}
	total := 0.0
	for _, done := range w.Stats.RunDoneMs {
		ticks := math.Max(1, math.Ceil(done/1000/interval))
		total += (1+ticks)*r.Prices.DynamoPerRRU + ticks*interval*float64(mem)/1024*r.Prices.LambdaPerGBSecond
	}
	return total / float64(len(w.Stats.RunDoneMs)) * w.Stats.Waits
}

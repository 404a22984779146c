package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/lambdaapp/sample"
)

func TestStackSpecCoversEveryFunction(t *testing.T) {
	root, err := sample.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := readStackSpec(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range lambdaapp.Functions {
		if spec.MemoryMB[f.Name] < 128 {
			t.Errorf("infra/stack gives %s %d MB", f.Name, spec.MemoryMB[f.Name])
		}
	}
	if spec.Arch != "arm64" {
		t.Errorf("arch %q", spec.Arch)
	}
}

// The smoke mode: one iteration of every workload through the whole
// measurement (MiniStack, the stack, the metered API and run-worker), with
// the counts checked, and the report rendered from the results and from
// their JSON.
func TestSmoke(t *testing.T) {
	root, err := sample.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := readStackSpec(root)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	logf := func(format string, a ...any) { fmt.Fprintf(&log, format+"\n", a...) }
	res := &Results{Date: "2000-01-01", Command: "test", Smoke: true, Iterations: 1, Stack: spec, Prices: prices}
	if err := measure(t.Context(), root, res, workloads, logf); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("\n%s", log.String())

	// Runs per iteration, and API requests (a thread first where loadgen
	// makes one).
	want := map[string]struct{ runs, requests float64 }{
		"echo": {1, 1}, "counter": {1, 2}, "approval": {2, 3}, "counter-exit": {1, 2},
		"chat-50k": {1, 2}, "conversation-20": {20, 21}, "state-1mb": {1, 2},
	}
	// API Gateway units (512 KB each): one per request, but state-1mb's
	// runs/wait (500 KB in, 1 MB out) is 3.
	units := map[string]float64{"state-1mb": 4}
	for _, w := range res.Workloads {
		u, exp := w.Usage, want[w.Name]
		wantUnits := exp.requests
		if n, ok := units[w.Name]; ok {
			wantUnits = n
		}
		if u.Executions != exp.runs || u.APIRequests != exp.requests || u.APIUnits != wantUnits {
			t.Errorf("%s: %v executions, %v requests (%v units); want %v, %v (%v units)", w.Name, u.Executions, u.APIRequests, u.APIUnits, exp.runs, exp.requests, wantUnits)
		}
		if w.Name == "state-1mb" && (u.S3Writes == 0 || u.S3Reads == 0) {
			t.Errorf("state-1mb: %v S3 writes, %v reads: the 1 MB state goes through the payload store", u.S3Writes, u.S3Reads)
		}
		// Step, Next, Done at least, per execution.
		if u.Transitions < 3*exp.runs {
			t.Errorf("%s: %v state transitions for %v runs", w.Name, u.Transitions, exp.runs)
		}
		worker := u.Lambda["run-worker"]
		if worker == nil || worker.Invocations < exp.runs || worker.GBSeconds <= 0 || worker.MemoryMB != spec.MemoryMB["run-worker"] {
			t.Errorf("%s: run-worker %+v", w.Name, worker)
		}
		api := 0.0
		for name, f := range u.Lambda {
			if name != "run-worker" {
				api += f.Invocations
				if f.GBSeconds <= 0 {
					t.Errorf("%s: %s billed nothing", w.Name, name)
				}
			}
		}
		if api != exp.requests {
			t.Errorf("%s: %v API function invocations, want %v", w.Name, api, exp.requests)
		}
		// Every run writes its run and thread items in transactions, and
		// the waiter reads the run.
		if u.WRU() < 4*exp.runs || u.RRU() < 2*exp.runs || u.IndexWRU() <= 0 {
			t.Errorf("%s: %v WRU, %v index WRU, %v RRU", w.Name, u.WRU(), u.IndexWRU(), u.RRU())
		}
		if u.Unmodelled != 0 {
			t.Errorf("%s: %v unmodelled DynamoDB calls", w.Name, u.Unmodelled)
		}
		if u.Calls["api SFN StartExecution"] != exp.runs {
			t.Errorf("%s: calls %v", w.Name, u.Calls)
		}
		// The cost adds up, and is in the range where a wrong unit shows.
		sum := 0.0
		for _, l := range w.Cost.Lines {
			sum += l.Dollars
		}
		if math.Abs(sum-w.Cost.Total) > 1e-12 || w.Cost.Per1000 < 0.01 || w.Cost.Per1000 > 5*exp.runs {
			t.Errorf("%s: cost %+v", w.Name, w.Cost)
		}
	}
	if w := res.workload("counter"); w != nil {
		// Every step's checkpoint is written, in batches (fewer
		// transactions than checkpoints, each with the thread's item).
		var calls, items float64
		for op, u := range w.Usage.Dynamo {
			if strings.HasPrefix(op, "run-worker TransactWriteItems ") && strings.Contains(op, "threads:CP") {
				calls, items = calls+u.Calls, items+u.Items
			}
		}
		if items < CounterSteps || calls == 0 || calls >= CounterSteps {
			t.Errorf("counter: %d steps, checkpoints written in %v transactions of %v items", CounterSteps, calls, items)
		}
	}

	md := markdown(res)
	for _, s := range []string{"| cost per 1,000 simple runs on AWS ≤ $0.20 |", "| echo | **$", "## Lower-cost design options"} {
		if !strings.Contains(md, s) {
			t.Errorf("the report lacks %q", s)
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got := markdown(&back); got != md {
		t.Errorf("the report rendered from the JSON (-render) differs from the report of the run")
	}
}

// With the Express front (the stack's default, -express): an echo run ends
// in its Express execution, priced by request and duration, with no
// Standard execution and no transition; the report says which machines it
// measured.
func TestSmokeExpress(t *testing.T) {
	root, err := sample.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := readStackSpec(root)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	logf := func(format string, a ...any) { fmt.Fprintf(&log, format+"\n", a...) }
	res := &Results{Date: "2000-01-01", Command: "test", Smoke: true, ExpressRuns: true, Iterations: 1, Stack: spec, Prices: prices}
	if err := measure(t.Context(), root, res, []*Workload{workloadByName("echo")}, logf); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	u := res.Workloads[0].Usage
	if u.ExpressExecutions != 1 || u.ExpressBilledS < 0.1 || u.Executions != 0 || u.Transitions != 0 {
		t.Errorf("echo: %v Express executions (%v s), %v Standard (%v transitions); want one Express, no Standard",
			u.ExpressExecutions, u.ExpressBilledS, u.Executions, u.Transitions)
	}
	if worker := u.Lambda["run-worker"]; worker == nil || worker.Invocations != 1 {
		t.Errorf("run-worker %+v, want the Express step's one invocation", worker)
	}
	priced := map[string]bool{}
	for _, l := range res.Workloads[0].Cost.Lines {
		priced[l.Item] = l.Dollars > 0
	}
	if !priced["Step Functions Express: requests"] || !priced["Step Functions Express: duration (64 MB)"] || priced["Step Functions Standard: state transitions"] {
		t.Errorf("cost lines %+v", res.Workloads[0].Cost.Lines)
	}
	if md := markdown(res); !strings.Contains(md, "Run machines: the Express front and the Standard run machine") {
		t.Errorf("the report does not say it measured the Express front")
	}
}

package sfn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/awsflow"
	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/dispatch/sfn"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/webhooks"
)

// The Express front on the emulator (docs/aws.md, "Express or Standard"):
// the real machines of internal/awsflow, their tasks invoking the real run
// worker handler through a proxy Lambda, on a store shared with the
// service that creates the runs.

const org = "org-express"

// expressRig is a service whose dispatcher starts runs on the Express
// front, and what a test looks at.
type expressRig struct {
	svc                *runs.Service
	worker             *lambdaapp.App
	client             *awssfn.Client
	runARN, expressARN string
	d                  *sfn.Dispatcher

	handler http.Handler // the run worker as the proxy Lambdas serve it

	mu    sync.Mutex
	tasks []lambdaapp.RunTask // every task the worker was given
}

// twin is a second Express machine of the same document, handing over to
// the same run machine, whose tasks go to the same run worker through a
// Lambda of their own: the emulator runs one invocation of a function at a
// time, where AWS runs two executions' invocations side by side.
func (rig *expressRig) twin(t *testing.T, ep awstest.Endpoint) string {
	t.Helper()
	fn := awstest.LambdaProxy(t, ep, "run-worker-twin", workerTimeout, rig.handler)
	def, err := awsflow.ExpressDefinition(fn, rig.runARN)
	if err != nil {
		t.Fatal(err)
	}
	return stateMachineOf(t, rig.client, types.StateMachineTypeExpress, "run-express-twin", def)
}

// intercept stands between the machines and the run worker: it may do
// what it likes with the task, or call handle.
type intercept func(ctx context.Context, task lambdaapp.RunTask, handle func(context.Context, lambdaapp.RunTask) (lambdaapp.RunTaskResult, error)) (lambdaapp.RunTaskResult, error)

func newExpressRig(t *testing.T, ep awstest.Endpoint, client *awssfn.Client, graphs *graph.Registry, in intercept) *expressRig {
	t.Helper()
	l := openStores(t)
	log := slog.New(slog.DiscardHandler)
	rig := &expressRig{client: client}
	rig.worker = &lambdaapp.App{Log: log, Webhooks: &webhooks.Sender{Log: log},
		Runs: &runs.Service{Store: l.db, Graphs: graphs,
			LeaseDuration: lambdaapp.LeaseDuration, PollInterval: lambdaapp.WorkerPollInterval}}
	handle := func(ctx context.Context, task lambdaapp.RunTask) (lambdaapp.RunTaskResult, error) {
		rig.mu.Lock()
		rig.tasks = append(rig.tasks, task)
		rig.mu.Unlock()
		if in != nil {
			return in(ctx, task, rig.worker.HandleRunTask)
		}
		return rig.worker.HandleRunTask(ctx, task)
	}
	rig.handler = worker(handle)
	fn := awstest.LambdaProxy(t, ep, "run-worker", workerTimeout, rig.handler)
	runDef, err := awsflow.RunDefinition(fn)
	if err != nil {
		t.Fatal(err)
	}
	rig.runARN = stateMachine(t, client, "run", runDef)
	expressDef, err := awsflow.ExpressDefinition(fn, rig.runARN)
	if err != nil {
		t.Fatal(err)
	}
	rig.expressARN = stateMachineOf(t, client, types.StateMachineTypeExpress, "run-express", expressDef)
	if rig.d, err = sfn.NewDispatcher(client, rig.runARN); err != nil {
		t.Fatal(err)
	}
	if err := rig.d.UseExpress(rig.expressARN); err != nil {
		t.Fatal(err)
	}
	rig.svc = &runs.Service{Store: l.db, Graphs: graphs, Dispatcher: rig.d, PollInterval: 20 * time.Millisecond}
	return rig
}

// create creates a run on a new thread.
func (rig *expressRig) create(t *testing.T, body string) (thread string, r runs.Run) {
	t.Helper()
	var req runs.RunRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	thread = uuid.NewString()
	r, err := rig.svc.CreateRun(context.Background(), org, thread, req)
	if err != nil {
		t.Fatalf("CreateRun %s: %v", body, err)
	}
	return thread, r
}

// result waits for the run's end (generously) and returns its body.
func (rig *expressRig) result(t *testing.T, thread, runID string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	raw, err := rig.svc.Join(ctx, org, thread, runID)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("run %s answered %s: %v", runID, raw, err)
	}
	return body
}

// executions waits until machine's executions have all ended and returns
// them by name.
func (rig *expressRig) executions(t *testing.T, machine string) map[string]types.ExecutionStatus {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out, err := rig.client.ListExecutions(context.Background(), &awssfn.ListExecutionsInput{StateMachineArn: aws.String(machine)})
		if err != nil {
			t.Fatal(err)
		}
		got, running := map[string]types.ExecutionStatus{}, false
		for _, e := range out.Executions {
			got[aws.ToString(e.Name)] = e.Status
			running = running || e.Status == types.ExecutionStatusRunning
		}
		if !running {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("executions of %s still running: %v", machine, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stepTasks are the step tasks the worker was given, in order.
func (rig *expressRig) stepTasks() []lambdaapp.RunTask {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	var out []lambdaapp.RunTask
	for _, task := range rig.tasks {
		if task.Action == lambdaapp.ActionStep {
			out = append(out, task)
		}
	}
	return out
}

// linear checks that the thread's checkpoints are one execution's, each
// stored once (every one the child of the one before, steps counting down
// by one to the input's -1), and returns how many there are.
func (rig *expressRig) linear(t *testing.T, thread string) int {
	t.Helper()
	history, err := rig.svc.History(context.Background(), org, thread, runs.HistoryQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	step := func(st runs.ThreadState) string { return fmt.Sprint(st.Metadata["step"]) }
	for i := 0; i+1 < len(history); i++ {
		st, next := history[i], history[i+1]
		if st.ParentCheckpointID == nil || next.CheckpointID == nil || *st.ParentCheckpointID != *next.CheckpointID {
			t.Fatalf("checkpoint %d (step %s) is not the child of the one before it (step %s): two histories", i, step(st), step(next))
		}
		if step(st) == step(next) {
			t.Fatalf("step %s stored twice", step(st))
		}
	}
	if len(history) == 0 || step(history[len(history)-1]) != "-1" {
		t.Fatalf("history %v does not start at the input", history)
	}
	return len(history)
}

// An echo run that can start now is done in its Express execution: one
// budgeted step, no Standard execution at all.
func TestExpressRunEndsInExpress(t *testing.T) {
	ep := awstest.Start(t)
	rig := newExpressRig(t, ep, awssfn.NewFromConfig(ep.Config), graph.NewRegistry(), nil)
	thread, r := rig.create(t, `{"assistant_id":"echo","if_not_exists":"create","input":{"messages":[{"role":"user","content":"hi"}]}}`)
	out := rig.result(t, thread, r.RunID)
	if msgs, _ := out["messages"].([]any); len(msgs) != 2 {
		t.Fatalf("result %v", out)
	}
	if got := rig.executions(t, rig.expressARN); len(got) != 1 || got[r.RunID] != types.ExecutionStatusSucceeded {
		t.Errorf("Express executions %v, want the run's, succeeded", got)
	}
	if got := rig.executions(t, rig.runARN); len(got) != 0 {
		t.Errorf("Standard executions %v, want none", got)
	}
	steps := rig.stepTasks()
	if len(steps) != 1 || steps[0].BudgetSeconds != awsflow.ExpressStepBudget || steps[0].ExecutionInput.RunID != r.RunID {
		t.Errorf("steps %+v, want one Express step with its budget", steps)
	}
	rig.linear(t, thread)
}

// A run with after_seconds is a Standard execution from the start.
func TestLaterRunStartsOnStandard(t *testing.T) {
	ep := awstest.Start(t)
	rig := newExpressRig(t, ep, awssfn.NewFromConfig(ep.Config), graph.NewRegistry(), nil)
	thread, r := rig.create(t, `{"assistant_id":"counter","if_not_exists":"create","after_seconds":1,"input":{"steps":2}}`)
	if out := rig.result(t, thread, r.RunID); out["count"] != float64(2) {
		t.Fatalf("result %v", out)
	}
	if got := rig.executions(t, rig.runARN); len(got) != 1 || got[r.RunID] != types.ExecutionStatusSucceeded {
		t.Errorf("Standard executions %v, want the run's, succeeded", got)
	}
	if got := rig.executions(t, rig.expressARN); len(got) != 0 {
		t.Errorf("Express executions %v, want none", got)
	}
}

// A worker that fails in the Express step — here after storing a
// super-step, as a crash would — hands the run over to its Standard
// execution, which carries it on from the last checkpoint to the end:
// every checkpoint stored once.
func TestFailedExpressStepIsHandedOver(t *testing.T) {
	ep := awstest.Start(t)
	var rig *expressRig
	var crashed atomic.Bool
	rig = newExpressRig(t, ep, awssfn.NewFromConfig(ep.Config), graph.NewRegistry(),
		func(ctx context.Context, task lambdaapp.RunTask, handle func(context.Context, lambdaapp.RunTask) (lambdaapp.RunTaskResult, error)) (lambdaapp.RunTaskResult, error) {
			if task.Action != lambdaapp.ActionStep || task.BudgetSeconds == 0 || crashed.Swap(true) {
				return handle(ctx, task)
			}
			// The Express step stores one super-step, then crashes.
			if _, err := rig.worker.Runs.StepRunWithin(ctx, task.RunID, 0, time.Nanosecond, nil); err != nil {
				return lambdaapp.RunTaskResult{}, err
			}
			return lambdaapp.RunTaskResult{}, fmt.Errorf("crashed after storing a super-step")
		})
	thread, r := rig.create(t, `{"assistant_id":"counter","if_not_exists":"create","durability":"sync","input":{"steps":3}}`)
	if out := rig.result(t, thread, r.RunID); out["count"] != float64(3) || out["steps"] != float64(3) {
		t.Fatalf("result %v, want count 3 of steps 3", out)
	}
	if got := rig.executions(t, rig.expressARN); got[r.RunID] != types.ExecutionStatusSucceeded {
		t.Errorf("Express executions %v, want the run's handed over (succeeded)", got)
	}
	if got := rig.executions(t, rig.runARN); len(got) != 1 || got[r.RunID] != types.ExecutionStatusSucceeded {
		t.Errorf("Standard executions %v, want the run's, succeeded", got)
	}
	if n := rig.linear(t, thread); n != 5 { // the input, __start__, three times inc
		t.Errorf("%d checkpoints, want 5", n)
	}
	steps := rig.stepTasks()
	if len(steps) < 2 || steps[0].BudgetSeconds == 0 || steps[len(steps)-1].BudgetSeconds != 0 {
		t.Errorf("steps %+v: want the Express one, then the Standard ones", steps)
	}
}

// Express executions are at-least-once: two copies of one run's execution
// that overlap for certain (the first one's second node holds until the
// second copy has claimed the run) leave one result and one linear
// history. The second copy takes the run over as its one owner (attempt
// 2); the attempt fence refuses the first copy's later writes.
func TestDuplicateExpressExecutionsRunOnce(t *testing.T) {
	ep := awstest.Start(t)
	graphs := graph.NewRegistry()
	var rig *expressRig
	var thread atomic.Value // the run's thread, once created
	var calls atomic.Int32
	entered := make(chan struct{})
	g := graph.NewBuilder("overlap").
		AddChannel("count", graph.Channel{Reducer: graph.Add, Default: 0}).
		AddNode("first", func(context.Context, map[string]any, *graph.Runtime) (*graph.Command, error) {
			return graph.Update(map[string]any{"count": 1}), nil
		}).
		AddNode("second", func(ctx context.Context, _ map[string]any, _ *graph.Runtime) (*graph.Command, error) {
			if calls.Add(1) == 1 {
				close(entered)
				if err := claimedAgain(ctx, rig, &thread); err != nil {
					return nil, err
				}
			}
			return graph.Update(map[string]any{"count": 1}), nil
		}).
		AddEdge(graph.Start, "first").
		AddEdge("first", "second").
		AddEdge("second", graph.End).
		MustCompile()
	if err := graphs.Register(g); err != nil {
		t.Fatal(err)
	}
	rig = newExpressRig(t, ep, awssfn.NewFromConfig(ep.Config), graphs, nil)
	twin := rig.twin(t, ep)
	th, r := rig.create(t, `{"assistant_id":"overlap","if_not_exists":"create","durability":"sync","input":{}}`)
	thread.Store(th)
	select {
	case <-entered:
	case <-time.After(3 * time.Minute):
		t.Fatal("the first copy never reached its second node")
	}
	// The duplicate: the same document and input, on the twin machine
	// (see twin).
	input, _ := json.Marshal(sfn.Input{RunID: r.RunID})
	if _, err := rig.client.StartExecution(context.Background(), &awssfn.StartExecutionInput{
		StateMachineArn: aws.String(twin), Name: aws.String(r.RunID), Input: aws.String(string(input)),
	}); err != nil {
		t.Fatal(err)
	}
	if out := rig.result(t, th, r.RunID); out["count"] != float64(2) {
		t.Errorf("result %v, want count 2: each node's update once", out)
	}
	rig.executions(t, rig.expressARN)
	rig.executions(t, twin)
	rig.executions(t, rig.runARN)
	if n := rig.linear(t, th); n != 4 { // the input, __start__, first, second
		t.Errorf("%d checkpoints, want 4", n)
	}
	if calls.Load() != 2 {
		t.Errorf("the second node ran %d times, want twice (once in each copy: they overlapped)", calls.Load())
	}
	stored, err := rig.svc.Store.Run(context.Background(), org, th, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != store.RunSuccess || stored.Attempt < 2 {
		t.Errorf("run %s at attempt %d, want success under the second copy's claim", stored.Status, stored.Attempt)
	}
}

// claimedAgain waits until the one run of the thread (once known) has been
// claimed again (attempt 2 or more), or fails after a generous deadline.
func claimedAgain(ctx context.Context, rig *expressRig, thread *atomic.Value) error {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if th, ok := thread.Load().(string); ok {
			list, err := rig.svc.Store.ListRuns(ctx, org, th, "", 10, 0)
			if err == nil && len(list) == 1 && list[0].Attempt >= 2 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("the run was never claimed again")
}

// A run queued behind another run of its thread starts on Standard: its
// Express step could only park it and hand it over (store.Run.Behind).
func TestQueuedRunStartsOnStandard(t *testing.T) {
	ep := awstest.Start(t)
	release := make(chan struct{})
	var held atomic.Bool
	rig := newExpressRig(t, ep, awssfn.NewFromConfig(ep.Config), graph.NewRegistry(),
		func(ctx context.Context, task lambdaapp.RunTask, handle func(context.Context, lambdaapp.RunTask) (lambdaapp.RunTaskResult, error)) (lambdaapp.RunTaskResult, error) {
			if task.Action == lambdaapp.ActionStep && !held.Swap(true) {
				<-release // the first run stays pending until the second is queued
			}
			return handle(ctx, task)
		})
	input := `"input":{"messages":[{"role":"user","content":"hi"}]}`
	thread, first := rig.create(t, `{"assistant_id":"echo","if_not_exists":"create",`+input+`}`)
	var req runs.RunRequest
	if err := json.Unmarshal([]byte(`{"assistant_id":"echo","multitask_strategy":"enqueue",`+input+`}`), &req); err != nil {
		t.Fatal(err)
	}
	second, err := rig.svc.CreateRun(context.Background(), org, thread, req)
	close(release)
	if err != nil {
		t.Fatalf("CreateRun of the queued run: %v", err)
	}
	for _, id := range []string{first.RunID, second.RunID} {
		if msgs, _ := rig.result(t, thread, id)["messages"].([]any); len(msgs) == 0 {
			t.Fatalf("run %s ended without messages", id)
		}
	}
	if got := rig.executions(t, rig.expressARN); len(got) != 1 || got[first.RunID] != types.ExecutionStatusSucceeded {
		t.Errorf("Express executions %v, want the first run's only, succeeded", got)
	}
	if got := rig.executions(t, rig.runARN); len(got) != 1 || got[second.RunID] != types.ExecutionStatusSucceeded {
		t.Errorf("Standard executions %v, want the queued run's only, succeeded", got)
	}
}

// A run whose Express step fails and whose hand-over keeps failing (here:
// the Standard machine does not exist) is abandoned, not left inflight:
// it ends with ExecutionLost and the Express execution fails. On AWS the
// abandon is an asynchronous invocation (the emulator runs it
// synchronously, TestExpressMachineShape holds the shape); the hand-over's
// retries are cut to one here, to keep the test short.
func TestHandOverThatKeepsFailingAbandonsTheRun(t *testing.T) {
	ep := awstest.Start(t)
	client := awssfn.NewFromConfig(ep.Config)
	rig := newExpressRig(t, ep, client, graph.NewRegistry(),
		func(ctx context.Context, task lambdaapp.RunTask, handle func(context.Context, lambdaapp.RunTask) (lambdaapp.RunTaskResult, error)) (lambdaapp.RunTaskResult, error) {
			if task.Action == lambdaapp.ActionStep {
				return lambdaapp.RunTaskResult{}, fmt.Errorf("crashed")
			}
			return handle(ctx, task)
		})
	fn := awstest.LambdaProxy(t, ep, "run-worker-nowhere", workerTimeout, rig.handler)
	missing := rig.runARN + "-missing"
	def, err := awsflow.ExpressDefinition(fn, missing)
	if err != nil {
		t.Fatal(err)
	}
	express := stateMachineOf(t, client, types.StateMachineTypeExpress, "run-express-nowhere", oneHandOverAttempt(t, def))
	d, err := sfn.NewDispatcher(client, missing)
	if err == nil {
		err = d.UseExpress(express)
	}
	if err != nil {
		t.Fatal(err)
	}
	svc := &runs.Service{Store: rig.svc.Store, Graphs: rig.svc.Graphs, Dispatcher: d, PollInterval: 20 * time.Millisecond}
	var req runs.RunRequest
	_ = json.Unmarshal([]byte(`{"assistant_id":"echo","if_not_exists":"create","input":{"messages":[]}}`), &req)
	thread := uuid.NewString()
	r, err := svc.CreateRun(context.Background(), org, thread, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := rig.executions(t, express); got[r.RunID] != types.ExecutionStatusFailed {
		t.Errorf("Express executions %v, want the run's failed", got)
	}
	stored, err := svc.Store.Run(context.Background(), org, thread, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != store.RunError || !strings.Contains(string(stored.Result), runs.KindExecutionLost) {
		t.Errorf("run %s with %s, want error ExecutionLost", stored.Status, stored.Result)
	}
	rig.mu.Lock()
	defer rig.mu.Unlock()
	if n := len(rig.tasks); n < 2 || rig.tasks[n-1].Action != lambdaapp.ActionAbandon || rig.tasks[n-1].RunID != r.RunID {
		t.Errorf("tasks %+v: want the step, then the run's abandon", rig.tasks)
	}
}

// oneHandOverAttempt is the Express definition def with its hand-over
// tried once and not retried: only the timing changes.
func oneHandOverAttempt(t *testing.T, def string) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(def), &doc); err != nil {
		t.Fatal(err)
	}
	hand := doc["States"].(map[string]any)["HandOver"].(map[string]any)
	for _, r := range hand["Retry"].([]any) {
		r.(map[string]any)["MaxAttempts"] = 0
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

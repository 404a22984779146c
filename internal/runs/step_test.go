package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// recorder is a Dispatcher that only records: the test drives StepRun
// itself, as a Step Functions execution would.
type recorder struct {
	mu   sync.Mutex
	runs []string
	fail error
	lost bool
}

func (d *recorder) Dispatch(_ context.Context, r store.Run) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs = append(d.runs, r.ID)
	return d.fail
}

func (d *recorder) Lost(context.Context, store.Run) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lost, nil
}

func newStepService(t *testing.T) (*Service, *recorder) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	d := &recorder{}
	// The smallest budget: every StepRun yields after one super-step.
	return &Service{Store: db, Graphs: graph.NewRegistry(), Dispatcher: d, PollInterval: 2 * time.Millisecond,
		StepBudget: time.Nanosecond}, d
}

func request(t *testing.T, body string) RunRequest {
	t.Helper()
	var req RunRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	return req
}

// drive calls StepRun like the run state machine: again at once on
// continue, until done or told to wait.
func drive(t *testing.T, s *Service, runID string) (steps, waits int) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		res, err := s.StepRun(context.Background(), runID, 0, nil)
		if err != nil {
			t.Fatalf("StepRun: %v", err)
		}
		if res.RunID != runID {
			t.Fatalf("StepRun answered for run %q, want %q", res.RunID, runID)
		}
		switch res.Status {
		case StepDone:
			return steps + 1, waits
		case StepContinue:
			steps++
		case StepWait:
			if res.WaitSeconds < 1 {
				t.Fatalf("wait of %d s", res.WaitSeconds)
			}
			return steps, waits + 1
		default:
			t.Fatalf("StepRun status %q", res.Status)
		}
	}
	t.Fatal("the run never finished")
	return
}

func waitBody(t *testing.T, s *Service, org, thread, run string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := s.Wait(ctx, org, thread, run)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("Wait answered %s: %v", raw, err)
	}
	return body
}

func TestStepRunResumesAcrossSteps(t *testing.T) {
	for _, durability := range []string{"sync", "async", "exit"} {
		t.Run(durability, func(t *testing.T) {
			s, d := newStepService(t)
			thread := "6a2f41a3-c54c-fce8-32d2-0324e1c32e22"
			r, err := s.CreateRun(context.Background(), "org", thread, request(t,
				`{"assistant_id":"counter","input":{"steps":6},"if_not_exists":"create","durability":"`+durability+`"}`))
			if err != nil {
				t.Fatal(err)
			}
			if len(d.runs) != 1 || d.runs[0] != r.RunID {
				t.Fatalf("dispatched %v, want [%s]", d.runs, r.RunID)
			}
			steps, _ := drive(t, s, r.RunID)
			// __start__ and six times inc, one per StepRun, then the one that ends it.
			if steps != 8 {
				t.Errorf("the run took %d steps; each should have yielded after one super-step", steps)
			}
			body := waitBody(t, s, "org", thread, r.RunID)
			if body["count"] != float64(6) || body["steps"] != float64(6) {
				t.Errorf("result %v, want count 6 steps 6", body)
			}
			hist, err := s.Store.ListCheckpoints(context.Background(), "org", thread, "", 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(hist) < 7 { // input + one per super-step
				t.Errorf("%d checkpoints after 6 steps of counter", len(hist))
			}
		})
	}
}

func TestStepRunWaitsItsTurn(t *testing.T) {
	s, _ := newStepService(t)
	ctx := context.Background()
	thread := "0b8f5bd0-1f9e-4d07-9d5d-4a6e3c9b0c11"
	first, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"counter","input":{"steps":3},"if_not_exists":"create"}`))
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hi"}]},"multitask_strategy":"enqueue"}`))
	if err != nil {
		t.Fatal(err)
	}
	waited := 0
	for _, want := range []int{1, 2, 4, 8, 16, 30, 30} {
		res, err := s.StepRun(ctx, second.RunID, waited, nil)
		if err != nil || res.Status != StepWait || res.WaitSeconds != want {
			t.Fatalf("second run before the first, after waiting %d s = %+v, %v; want wait %d s", waited, res, err, want)
		}
		waited = res.WaitSeconds
	}
	drive(t, s, first.RunID)
	if _, waits := drive(t, s, second.RunID); waits != 0 {
		t.Fatalf("second run still waits after the first finished")
	}
	later, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"echo","input":{"messages":[]},"after_seconds":30}`))
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := s.StepRun(ctx, later.RunID, 0, nil); res.Status != StepWait || res.WaitSeconds < 29 || res.WaitSeconds > 30 {
		t.Fatalf("run with after_seconds 30 = %+v, want wait 30 s", res)
	}
	if res, _ := s.StepRun(ctx, "no-such-run", 0, nil); res.Status != StepDone {
		t.Fatalf("unknown run = %+v, want done", res)
	}
}

// A stateless run finished by another process (a worker Lambda) still
// answers its waiter after its thread was deleted.
func TestStatelessRunAnswersAcrossProcesses(t *testing.T) {
	worker, _ := newStepService(t)
	api := &Service{Store: worker.Store, Graphs: worker.Graphs, Dispatcher: &recorder{}, PollInterval: 2 * time.Millisecond}
	r, err := api.CreateRun(context.Background(), "org", "", request(t, `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hi"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	drive(t, worker, r.RunID)
	body := waitBody(t, api, "org", r.ThreadID, r.RunID)
	msgs, _ := body["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("stateless result %v, want two messages", body)
	}
}

func TestLostExecutionEndsTheRun(t *testing.T) {
	defer func(old time.Duration) { lostSilence = old }(lostSilence)
	lostSilence = 5 * time.Millisecond
	s, d := newStepService(t)
	ctx := context.Background()
	thread := "5c1e0d52-8a55-4a63-b7c4-6f3f0a6b1d01"

	// Claimed by its execution, which then vanished.
	r, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"counter","input":{"steps":3},"if_not_exists":"create"}`))
	if err != nil {
		t.Fatal(err)
	}
	now := s.now()
	if _, ok, err := s.Store.ClaimRunByID(ctx, r.RunID, executionOwner(r.RunID), now, now.Add(time.Hour), 0); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	d.lost = true
	body := waitBody(t, s, "org", thread, r.RunID)
	e, _ := body["__error__"].(map[string]any)
	if e["error"] != KindExecutionLost {
		t.Fatalf("result of a lost run %v, want __error__ %s", body, KindExecutionLost)
	}
	got, err := s.Store.Run(ctx, "org", thread, r.RunID)
	if err != nil || got.Status != store.RunError {
		t.Fatalf("lost run status %q (%v), want error", got.Status, err)
	}

	// A dispatch that fails leaves no run holding the thread.
	d.fail = errors.New("states: throttled")
	if _, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"echo","input":{"messages":[]}}`)); err == nil {
		t.Fatal("CreateRun with a failing dispatcher succeeded")
	}
	list, err := s.Store.ListRuns(ctx, "org", thread, store.RunPending, 10, 0)
	if err != nil || len(list) != 0 {
		t.Fatalf("pending runs after a failed dispatch: %d (%v)", len(list), err)
	}
	d.fail, d.lost = nil, false
	if _, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"echo","input":{"messages":[]},"multitask_strategy":"reject"}`)); err != nil {
		t.Fatalf("the thread is still busy after a failed dispatch: %v", err)
	}
}

// A waiter asks whether a run's execution was lost only once the run has
// been silent for lostSilence, and then at most once per lostSilence.
func TestLostIsAskedOnlyAfterASilence(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	run := store.Run{UpdatedAt: t0}
	for _, tc := range []struct {
		name  string
		asked time.Time // the waiter's last question (zero: none yet)
		now   time.Time
		want  bool
	}{
		{"a run that just changed", time.Time{}, t0.Add(time.Second), false},
		{"a step's length of silence", time.Time{}, t0.Add(lostSilence - time.Second), false},
		{"silent long enough, first question", time.Time{}, t0.Add(lostSilence), true},
		{"asked a moment ago", t0.Add(lostSilence), t0.Add(lostSilence + time.Minute), false},
		{"asked a silence ago", t0.Add(lostSilence), t0.Add(2 * lostSilence), true},
	} {
		w := lostWatch{asked: tc.asked}
		if got := w.due(run, tc.now); got != tc.want {
			t.Errorf("%s: due = %v, want %v", tc.name, got, tc.want)
		}
		if tc.want && !w.asked.Equal(tc.now) {
			t.Errorf("%s: the question was not noted", tc.name)
		}
	}
}

// A run over its organization's cap waits, pending, in its execution's
// loop until a run of the organization ends; another organization's run
// is not held up; ending a lost run does not wait for a slot.
func TestStepRunWaitsForAFreeSlot(t *testing.T) {
	s, _ := newStepService(t)
	s.MaxRunningPerOrg = 1
	ctx := context.Background()
	create := func(org, body string) Run {
		t.Helper()
		r, err := s.CreateRun(ctx, org, "", request(t, body))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	long := create("org", `{"assistant_id":"counter","input":{"steps":3}}`)
	if res, err := s.StepRun(ctx, long.RunID, 0, nil); err != nil || res.Status != StepContinue {
		t.Fatalf("first run of the organization = %+v, %v; want continue", res, err)
	}
	echo := `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hi"}]}}`
	over := create("org", echo)
	res, err := s.StepRun(ctx, over.RunID, 0, nil)
	if err != nil || res.Status != StepWait || res.WaitSeconds != 1 {
		t.Fatalf("run over the cap = %+v, %v; want wait 1 s", res, err)
	}
	if got, _ := s.Store.Run(ctx, "org", over.ThreadID, over.RunID); got.Status != store.RunPending {
		t.Fatalf("run over the cap: status %q, want pending", got.Status)
	}
	other := create("other-org", echo)
	if _, waits := drive(t, s, other.RunID); waits != 0 {
		t.Fatal("another organization's run waited for the first organization's slot")
	}
	drive(t, s, long.RunID)
	if _, waits := drive(t, s, over.RunID); waits != 0 {
		t.Fatal("the run still waits after its organization's run ended")
	}
	if body := waitBody(t, s, "org", over.ThreadID, over.RunID); len(body["messages"].([]any)) != 2 {
		t.Fatalf("result %v", body)
	}

	// A lost execution's run ends with ExecutionLost though the slot is taken.
	long = create("org", `{"assistant_id":"counter","input":{"steps":3}}`)
	if res, _ := s.StepRun(ctx, long.RunID, 0, nil); res.Status != StepContinue {
		t.Fatalf("run = %+v, want continue", res)
	}
	lost := create("org", echo)
	if err := s.AbandonRun(ctx, lost.RunID, "gone"); err != nil {
		t.Fatal(err)
	}
	body := waitBody(t, s, "org", lost.ThreadID, lost.RunID)
	if e, _ := body["__error__"].(map[string]any); e["error"] != KindExecutionLost {
		t.Fatalf("abandoned run over the cap: %v, want __error__ %s", body, KindExecutionLost)
	}
}

// A step retried while its first invocation still executes (Step Functions
// retries a Lambda task on an error of the invoke, not of the function)
// claims the run again under the execution's owner: the first invocation
// must stop then, not go on beside the retry and store the same step twice.
func TestRetriedStepStopsTheInvocationItTookOver(t *testing.T) {
	s, _ := newStepService(t)
	s.StepBudget = time.Hour
	firstIn, retryIn, releaseRetry := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	g := graph.NewBuilder("slowinc").
		AddChannel("count", graph.Channel{Reducer: graph.Add, Default: 0}).
		AddNode("inc", func(ctx context.Context, _ map[string]any, _ *graph.Runtime) (*graph.Command, error) {
			switch calls.Add(1) {
			case 1: // the first invocation: stays until it is stopped
				close(firstIn)
				<-ctx.Done()
				return nil, ctx.Err()
			case 2: // the retry
				close(retryIn)
				<-releaseRetry
			}
			return graph.Update(map[string]any{"count": 1}), nil
		}).
		AddEdge(graph.Start, "inc").
		AddEdge("inc", graph.End).
		MustCompile()
	if err := s.Graphs.Register(g); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a guard, not a timing assertion
	defer cancel()
	thread := "0b6f3c1e-7f0e-4a47-9d6e-4c1f1d2a9e11"
	r, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"slowinc","input":{},"if_not_exists":"create"}`))
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan StepResult, 1)
	go func() {
		res, _ := s.StepRun(ctx, r.RunID, 0, nil)
		first <- res
	}()
	<-firstIn
	retry := make(chan StepResult, 1)
	go func() {
		res, _ := s.StepRun(ctx, r.RunID, 0, nil)
		retry <- res
	}()
	<-retryIn
	select { // while the retry executes, the first invocation stops
	case res := <-first:
		if res.Status == StepDone {
			t.Errorf("the taken-over invocation answered done")
		}
	case <-ctx.Done():
		t.Fatal("the taken-over invocation went on beside the retry")
	}
	close(releaseRetry)
	if res := <-retry; res.Status != StepDone {
		t.Fatalf("the retry answered %+v, want done", res)
	}
	if body := waitBody(t, s, "org", thread, r.RunID); body["count"] != float64(1) {
		t.Errorf("result %v, want count 1", body)
	}
}

// A step retried while its first invocation still executes, before that
// invocation's heartbeat looks (the window is up to a poll interval): the
// first invocation's next checkpoint is refused by the store (fenced by the
// run's attempt), so the step is not stored twice, and the invocation stops
// as superseded, not as a store failure of the run.
func TestSupersededAttemptCannotStoreAStep(t *testing.T) {
	s, _ := newStepService(t)
	s.StepBudget = time.Hour
	// No heartbeat looks during the test: only the fence can stop the first
	// invocation.
	s.PollInterval, s.LeaseDuration = time.Hour, time.Hour
	firstIn, releaseFirst := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	g := graph.NewBuilder("staleinc").
		AddChannel("count", graph.Channel{Reducer: graph.Add, Default: 0}).
		AddNode("inc", func(ctx context.Context, _ map[string]any, _ *graph.Runtime) (*graph.Command, error) {
			if calls.Add(1) == 1 { // the first invocation: finishes its step after the retry's
				close(firstIn)
				<-releaseFirst
			}
			return graph.Update(map[string]any{"count": 1}), nil
		}).
		AddEdge(graph.Start, "inc").
		AddEdge("inc", graph.End).
		MustCompile()
	if err := s.Graphs.Register(g); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	thread := "5d0c2b7a-1e8f-4c3a-9b6d-2f4e6a8c0b13"
	r, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"staleinc","input":{},"if_not_exists":"create","durability":"sync"}`))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	first := make(chan StepResult, 1)
	go func() {
		res, _ := s.StepRun(ctx, r.RunID, 0, log)
		first <- res
	}()
	<-firstIn
	// The retry claims the run again under the execution's owner and
	// finishes it while the first invocation is inside its step.
	if res, err := s.StepRun(ctx, r.RunID, 0, log); err != nil || res.Status != StepDone {
		t.Fatalf("the retry answered %+v, %v; want done", res, err)
	}
	close(releaseFirst)
	if res := <-first; res.Status == StepDone {
		t.Errorf("the superseded invocation answered done")
	}
	if body := waitBody(t, s, "org", thread, r.RunID); body["count"] != float64(1) {
		t.Errorf("result %v, want count 1", body)
	}
	hist, err := s.Store.ListCheckpoints(ctx, "org", thread, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	children := map[string]int{}
	for _, cp := range hist {
		if children[cp.ParentID]++; cp.ParentID != "" && children[cp.ParentID] > 1 {
			t.Errorf("checkpoint %s has a sibling: a step stored twice (history of %d checkpoints)", cp.ParentID, len(hist))
		}
	}
	if latest, err := s.Store.LatestCheckpoint(ctx, "org", thread); err != nil {
		t.Fatal(err)
	} else if c, err := decodeCheckpoint(latest); err != nil || fmt.Sprint(c.Values["count"]) != "1" {
		t.Errorf("latest checkpoint values %v (%v), want count 1", c, err)
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("a superseded attempt logged an error:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "run superseded") {
		t.Errorf("the superseded attempt did not say so:\n%s", logs.String())
	}
}

// Review #16: a super-step whose step is retried (its Lambda timed out:
// here the first invocation is still blocked in its slow task when the
// retry takes the run over) does not run its completed tasks again: each
// was stored as it completed, and the retry resumes from that checkpoint.
func TestRetriedStepSkipsTheTasksThatCompleted(t *testing.T) {
	s, _ := newStepService(t)
	s.StepBudget = time.Hour
	var fastCalls, slowCalls atomic.Int32
	fast := func(name string) graph.NodeFunc {
		return func(context.Context, map[string]any, *graph.Runtime) (*graph.Command, error) {
			fastCalls.Add(1)
			return graph.Update(map[string]any{"log": name}), nil
		}
	}
	g := graph.NewBuilder("fanout").
		AddChannel("log", graph.Channel{Reducer: graph.Append}).
		AddNode("fast1", fast("fast1")).AddNode("fast2", fast("fast2")).
		AddNode("slow", func(ctx context.Context, _ map[string]any, _ *graph.Runtime) (*graph.Command, error) {
			if slowCalls.Add(1) == 1 { // the first invocation: past its time limit
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return graph.Update(map[string]any{"log": "slow"}), nil
		}).
		AddEdge(graph.Start, "fast1").AddEdge(graph.Start, "fast2").AddEdge(graph.Start, "slow").
		MustCompile()
	if err := s.Graphs.Register(g); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a guard, not a timing assertion
	defer cancel()
	thread := "3e0c9a51-2b8d-4f7e-a6c1-9d0e8f7a6b5c"
	r, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"fanout","input":{},"if_not_exists":"create"}`))
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan StepResult, 1)
	go func() {
		res, _ := s.StepRun(ctx, r.RunID, 0, nil)
		first <- res
	}()
	// Both fast tasks are recorded on the stored checkpoint while slow runs.
	for {
		latest, err := s.Store.LatestCheckpoint(ctx, "org", thread)
		if err == nil {
			var cp graph.Checkpoint
			if json.Unmarshal(latest.Data, &cp) == nil && slices.Equal(cp.Next, []string{"slow"}) {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the completed tasks were never stored while the step ran")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if res, err := s.StepRun(ctx, r.RunID, 0, nil); err != nil || res.Status != StepDone {
		t.Fatalf("the retried step = %+v, %v; want done", res, err)
	}
	if res := <-first; res.Status == StepDone {
		t.Errorf("the timed-out invocation answered done")
	}
	if n := fastCalls.Load(); n != 2 {
		t.Fatalf("the fast tasks ran %d times in all, want once each (2)", n)
	}
	body := waitBody(t, s, "org", thread, r.RunID)
	if got := fmt.Sprint(body["log"]); got != "[fast1 fast2 slow]" {
		t.Fatalf("result log %s, want every task's write once", got)
	}
}

// finishGate holds each FinishRun of one run until the test releases it,
// and records what the store answered.
type finishGate struct {
	Store
	runID   string
	in      chan int        // the number of a FinishRun that arrived (1, 2, …)
	release []chan struct{} // closed to let FinishRun number i+1 go on
	out     chan error      // what the store answered, in order
	calls   atomic.Int32
}

func (g *finishGate) FinishRun(ctx context.Context, f store.FinishedRun) error {
	if f.RunID != g.runID {
		return g.Store.FinishRun(ctx, f)
	}
	i := int(g.calls.Add(1))
	g.in <- i
	<-g.release[i-1]
	err := g.Store.FinishRun(ctx, f)
	g.out <- err
	return err
}

// A step retried after its first invocation stored the run's last
// checkpoint but before it finished the run (every attempt of an execution
// has the same lease owner): the first invocation's finish is refused by
// the store (fenced by the run's attempt), changes nothing, and the
// invocation stops as superseded, quietly; the retry finishes the run.
func TestSupersededAttemptCannotFinishTheRun(t *testing.T) {
	s, _ := newStepService(t)
	s.StepBudget = time.Hour
	// No heartbeat looks during the test: only the fence can stop the first
	// invocation.
	s.PollInterval, s.LeaseDuration = time.Hour, time.Hour
	g := graph.NewBuilder("stalefinish").
		AddChannel("count", graph.Channel{Reducer: graph.Add, Default: 0}).
		AddNode("inc", func(ctx context.Context, _ map[string]any, _ *graph.Runtime) (*graph.Command, error) {
			return graph.Update(map[string]any{"count": 1}), nil
		}).
		AddEdge(graph.Start, "inc").
		AddEdge("inc", graph.End).
		MustCompile()
	if err := s.Graphs.Register(g); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	thread := "0b7e4c1d-6a2f-4e8b-9c3d-5f1a2b3c4d5e"
	r, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"stalefinish","input":{},"if_not_exists":"create","durability":"sync"}`))
	if err != nil {
		t.Fatal(err)
	}
	gate := &finishGate{Store: s.Store, runID: r.RunID, in: make(chan int, 2), out: make(chan error, 2),
		release: []chan struct{}{make(chan struct{}), make(chan struct{})}}
	s.Store = gate
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	first := make(chan StepResult, 1)
	go func() {
		res, _ := s.StepRun(ctx, r.RunID, 0, log)
		first <- res
	}()
	if i := <-gate.in; i != 1 {
		t.Fatalf("FinishRun %d arrived first", i)
	}
	// The first invocation has stored its last checkpoint and is about to
	// finish: its step is retried, and the retry claims the run again.
	retry := make(chan StepResult, 1)
	go func() {
		res, _ := s.StepRun(ctx, r.RunID, 0, log)
		retry <- res
	}()
	if i := <-gate.in; i != 2 {
		t.Fatalf("FinishRun %d arrived second", i)
	}
	close(gate.release[0]) // the superseded attempt finishes first
	if err := <-gate.out; !errors.Is(err, store.ErrSuperseded) {
		t.Errorf("the superseded attempt's FinishRun: %v, want ErrSuperseded", err)
	}
	if res := <-first; res.Status == StepDone {
		t.Errorf("the superseded invocation answered done")
	}
	run, err := s.Store.Run(ctx, "org", thread, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != store.RunRunning || run.Attempt != 2 || run.Result != nil {
		t.Errorf("after the superseded finish the run is %s at attempt %d with result %s; want running at attempt 2, no result",
			run.Status, run.Attempt, run.Result)
	}
	close(gate.release[1])
	if err := <-gate.out; err != nil {
		t.Errorf("the current attempt's FinishRun: %v", err)
	}
	if res := <-retry; res.Status != StepDone {
		t.Fatalf("the retry answered %+v, want done", res)
	}
	if body := waitBody(t, s, "org", thread, r.RunID); body["count"] != float64(1) {
		t.Errorf("result %v, want count 1", body)
	}
	out := logs.String()
	if strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("an attempt logged an error:\n%s", out)
	}
	if !strings.Contains(out, "run superseded") {
		t.Errorf("the superseded attempt did not say so:\n%s", out)
	}
}

// releaseGate holds the first RenewLease of one run until released and
// records what the store answered.
type releaseGate struct {
	Store
	runID   string
	in      chan struct{}
	release chan struct{}
	out     chan error
	calls   atomic.Int32
}

func (g *releaseGate) RenewLease(ctx context.Context, runID, owner string, attempt int, until time.Time) (store.Run, error) {
	if runID != g.runID || g.calls.Add(1) != 1 {
		return g.Store.RenewLease(ctx, runID, owner, attempt, until)
	}
	close(g.in)
	<-g.release
	r, err := g.Store.RenewLease(ctx, runID, owner, attempt, until)
	g.out <- err
	return r, err
}

// A step that yields gives up its lease for the next step; when its
// execution retried it meanwhile (the same owner), the retry holds the run:
// the stale attempt's release is refused (fenced by the attempt) and the
// retry keeps its lease.
func TestSupersededAttemptKeepsTheRetrysLease(t *testing.T) {
	s, _ := newStepService(t) // every step yields after a super-step
	s.PollInterval, s.LeaseDuration = time.Hour, time.Hour
	// hold stops the first node the retry executes (armed once the first
	// step gives up its lease) until the test lets it go.
	bIn, releaseB := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	hold := func() {
		if armed.CompareAndSwap(true, false) {
			close(bIn)
			<-releaseB
		}
	}
	g := graph.NewBuilder("stalerelease").
		AddChannel("count", graph.Channel{Reducer: graph.Add, Default: 0}).
		AddNode("a", func(ctx context.Context, _ map[string]any, _ *graph.Runtime) (*graph.Command, error) {
			hold()
			return graph.Update(map[string]any{"count": 1}), nil
		}).
		AddNode("b", func(ctx context.Context, _ map[string]any, _ *graph.Runtime) (*graph.Command, error) {
			hold()
			return graph.Update(map[string]any{"count": 1}), nil
		}).
		AddEdge(graph.Start, "a").
		AddEdge("a", "b").
		AddEdge("b", graph.End).
		MustCompile()
	if err := s.Graphs.Register(g); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	thread := "7c1e9a2b-3d4f-4a5b-8c6d-9e0f1a2b3c4d"
	r, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"stalerelease","input":{},"if_not_exists":"create","durability":"sync"}`))
	if err != nil {
		t.Fatal(err)
	}
	gate := &releaseGate{Store: s.Store, runID: r.RunID, in: make(chan struct{}), release: make(chan struct{}), out: make(chan error, 1)}
	s.Store = gate
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	first := make(chan StepResult, 1)
	go func() {
		res, _ := s.StepRun(ctx, r.RunID, 0, log)
		first <- res
	}()
	<-gate.in // the first step stored a checkpoint and gives up its lease…
	armed.Store(true)
	retry := make(chan StepResult, 1)
	go func() { // …while its retry claims the run and executes a node
		res, _ := s.StepRun(ctx, r.RunID, 0, log)
		retry <- res
	}()
	<-bIn
	close(gate.release)
	if err := <-gate.out; !errors.Is(err, store.ErrSuperseded) {
		t.Errorf("the superseded attempt's release: %v, want ErrSuperseded", err)
	}
	<-first
	run, err := s.Store.Run(ctx, "org", thread, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != store.RunRunning || run.Attempt != 2 || !run.LeaseUntil.After(time.Now()) {
		t.Errorf("the retry's run: %s at attempt %d, lease until %v; want running at attempt 2 with its lease", run.Status, run.Attempt, run.LeaseUntil)
	}
	close(releaseB)
	for res := <-retry; res.Status != StepDone; {
		var err error
		if res, err = s.StepRun(ctx, r.RunID, 0, log); err != nil {
			t.Fatal(err)
		}
	}
	if body := waitBody(t, s, "org", thread, r.RunID); body["count"] != float64(2) {
		t.Errorf("result %v, want count 2", body)
	}
	if out := logs.String(); strings.Contains(out, `"level":"ERROR"`) || strings.Contains(out, `"level":"WARN"`) {
		t.Errorf("an attempt logged a warning or an error:\n%s", out)
	}
}

// The Express front's step gives its own budget (budget_seconds): it
// bounds that step whatever the service's, and 0 leaves the service's.
func TestStepRunWithinItsDriversBudget(t *testing.T) {
	s, _ := newStepService(t)
	s.StepBudget = time.Hour
	thread := "7b3f41a3-c54c-4ce8-82d2-0324e1c32e22"
	r, err := s.CreateRun(context.Background(), "org", thread, request(t,
		`{"assistant_id":"counter","input":{"steps":3},"if_not_exists":"create"}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.StepRunWithin(context.Background(), r.RunID, 0, time.Nanosecond, nil)
	if err != nil || res.Status != StepContinue {
		t.Fatalf("a step within a nanosecond: %+v, %v; want continue after one super-step", res, err)
	}
	res, err = s.StepRunWithin(context.Background(), r.RunID, 0, 0, nil)
	if err != nil || res.Status != StepDone {
		t.Fatalf("a step within the service's hour: %+v, %v; want done", res, err)
	}
	if body := waitBody(t, s, "org", thread, r.RunID); body["count"] != float64(3) {
		t.Errorf("result %v, want count 3", body)
	}
}

// The invocation executing a step ends mid-node (the Lambda's deadline, or
// its caller going away) before the run's own time is up: the run is not
// settled with what the engine had so far — not success with part of its
// state, not a timeout — but left for the next step, which executes the
// node again and finishes the run whole.
func TestStepEndedByItsInvocationIsNotSettled(t *testing.T) {
	for _, end := range []struct {
		name string
		stop func(context.CancelFunc)
	}{
		{"cancelled", func(cancel context.CancelFunc) { cancel() }},
		{"deadline", nil},
	} {
		t.Run(end.name, func(t *testing.T) {
			s, _ := newStepService(t)
			s.StepBudget = time.Hour
			entered := make(chan struct{})
			var calls atomic.Int32
			g := graph.NewBuilder("twoinc").
				AddChannel("count", graph.Channel{Reducer: graph.Add, Default: 0}).
				AddNode("a", func(context.Context, map[string]any, *graph.Runtime) (*graph.Command, error) {
					return graph.Update(map[string]any{"count": 1}), nil
				}).
				AddNode("b", func(ctx context.Context, _ map[string]any, _ *graph.Runtime) (*graph.Command, error) {
					if calls.Add(1) == 1 { // the first invocation: held until it ends
						close(entered)
						<-ctx.Done()
						return nil, ctx.Err()
					}
					return graph.Update(map[string]any{"count": 1}), nil
				}).
				AddEdge(graph.Start, "a").
				AddEdge("a", "b").
				AddEdge("b", graph.End).
				MustCompile()
			if err := s.Graphs.Register(g); err != nil {
				t.Fatal(err)
			}
			thread := "3c2d1e0f-9a8b-4c7d-8e6f-5a4b3c2d1e0f"
			r, err := s.CreateRun(context.Background(), "org", thread, request(t, `{"assistant_id":"twoinc","input":{},"if_not_exists":"create"}`))
			if err != nil {
				t.Fatal(err)
			}
			var invocation context.Context
			var cancel context.CancelFunc
			if end.stop == nil {
				// A deadline shorter than the run's hour; the node holds
				// until it passes, however long the machine takes to get there.
				invocation, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
			} else {
				invocation, cancel = context.WithCancel(context.Background())
				go func() {
					<-entered
					end.stop(cancel)
				}()
			}
			defer cancel()
			if res, _ := s.StepRun(invocation, r.RunID, 0, nil); res.Status == StepDone {
				t.Fatalf("the step whose invocation ended answered done")
			}
			got, err := s.Store.Run(context.Background(), "org", thread, r.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if terminal(got.Status) {
				t.Fatalf("the run was settled %s (%s) by an invocation that ended mid-node", got.Status, got.Result)
			}
			// The lease is given up: the next step claims the run at once.
			drive(t, s, r.RunID)
			if body := waitBody(t, s, "org", thread, r.RunID); body["count"] != float64(2) {
				t.Errorf("result %v, want count 2 (both nodes, once each)", body)
			}
		})
	}
}

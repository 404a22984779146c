package dispatchtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Factory returns a runs.Service on an empty store with the built-in graphs
// whose runs the dispatcher under test executes: Service.Dispatcher, or
// none for the in-process workers, which the factory starts. It stops what
// it started at t's cleanup.
type Factory func(t *testing.T) *runs.Service

// org is the organization of every run of the suite.
const org = "org-dispatchtest"

// waitFor bounds every wait for a run: generous, since it only decides
// when a test that is failing anyway gives up.
const waitFor = 3 * time.Minute

// Run checks the dispatcher of the Services that newService makes; each
// subtest calls it once.
func Run(t *testing.T, newService Factory) {
	t.Helper()
	fresh := func(t *testing.T) *runs.Service {
		t.Helper()
		svc := newService(t)
		if svc == nil {
			t.Fatal("the factory returned no Service")
		}
		return svc
	}
	t.Run("RunFinishesWithItsOutput", func(t *testing.T) { testOutput(t, fresh(t)) })
	t.Run("QueuedRunRunsInItsTurn", func(t *testing.T) { testQueued(t, fresh(t)) })
	t.Run("DispatchedTwiceRunsOnce", func(t *testing.T) { testTwice(t, fresh(t)) })
	t.Run("NotLostWhileOnItsWay", func(t *testing.T) { testNotLost(t, fresh(t)) })
	t.Run("FinishedRunKeepsItsResult", func(t *testing.T) { testFinished(t, fresh(t)) })
}

// dispatcher is the Dispatcher in effect for svc.
func dispatcher(svc *runs.Service) runs.Dispatcher {
	if svc.Dispatcher != nil {
		return svc.Dispatcher
	}
	return svc.InProcess()
}

// A created run of a built-in graph is executed to its end, with its
// output.
func testOutput(t *testing.T, svc *runs.Service) {
	echoThread := uuid.NewString()
	echo := createRun(t, svc, echoThread, `{"assistant_id": "echo", "if_not_exists": "create",
		"input": {"messages": [{"role": "user", "content": "hello"}]}}`)
	counterThread := uuid.NewString()
	counter := createRun(t, svc, counterThread, `{"assistant_id": "counter", "if_not_exists": "create", "input": {"steps": 3}}`)

	wantStatus(t, finished(t, svc, echoThread, echo.RunID), store.RunSuccess)
	out := result(t, svc, echoThread, echo.RunID)
	msgs, _ := out["messages"].([]any)
	if len(msgs) != 2 || fmt.Sprint(msgs[1].(map[string]any)["content"]) != "echo: hello" {
		t.Errorf("echo's result %v, want the message and its echo", out)
	}
	wantStatus(t, finished(t, svc, counterThread, counter.RunID), store.RunSuccess)
	if out := result(t, svc, counterThread, counter.RunID); out["count"] != float64(3) || out["steps"] != float64(3) {
		t.Errorf("counter's result %v, want count 3 of steps 3", out)
	}
}

// A run queued behind another on its thread runs once the first one is
// done, from the state the first one left.
func testQueued(t *testing.T, svc *runs.Service) {
	thread := uuid.NewString()
	first := createRun(t, svc, thread, `{"assistant_id": "counter", "if_not_exists": "create", "input": {"steps": 2}}`)
	second := createRun(t, svc, thread, `{"assistant_id": "counter", "multitask_strategy": "enqueue", "input": {"steps": 4}}`)
	wantStatus(t, finished(t, svc, thread, first.RunID), store.RunSuccess)
	wantStatus(t, finished(t, svc, thread, second.RunID), store.RunSuccess)
	if out := result(t, svc, thread, first.RunID); out["count"] != float64(2) {
		t.Errorf("the first run's result %v, want count 2", out)
	}
	if out := result(t, svc, thread, second.RunID); out["count"] != float64(4) {
		t.Errorf("the second run's result %v, want count 4: it goes on from the first one's 2", out)
	}
}

// Dispatching a run again — while it is on its way, after it finished — is
// harmless: it is executed once, one linear sequence of checkpoints, one
// result.
func testTwice(t *testing.T, svc *runs.Service) {
	ctx := context.Background()
	d := dispatcher(svc)
	thread := uuid.NewString()
	r := createRun(t, svc, thread, `{"assistant_id": "counter", "if_not_exists": "create", "durability": "sync", "input": {"steps": 3}}`)
	stored := storedRun(t, svc, thread, r.RunID)
	for range 2 {
		if err := d.Dispatch(ctx, stored); err != nil {
			t.Fatalf("Dispatch again: %v", err)
		}
	}
	wantStatus(t, finished(t, svc, thread, r.RunID), store.RunSuccess)
	if out := result(t, svc, thread, r.RunID); out["count"] != float64(3) {
		t.Errorf("result %v, want count 3", out)
	}
	history := linearHistory(t, svc, thread)
	if len(history) != 5 { // the input, __start__, three times inc
		t.Errorf("%d checkpoints, want 5 of one execution", len(history))
	}

	if err := d.Dispatch(ctx, storedRun(t, svc, thread, r.RunID)); err != nil {
		t.Fatalf("Dispatch of the finished run: %v", err)
	}
	list, err := svc.ListRuns(ctx, org, thread, "", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Status != store.RunSuccess {
		t.Errorf("runs of the thread %v, want the one run, success", list)
	}
	if out := result(t, svc, thread, r.RunID); out["count"] != float64(3) {
		t.Errorf("result after a dispatch of the finished run %v, want count 3", out)
	}
	if after := linearHistory(t, svc, thread); len(after) != len(history) {
		t.Errorf("%d checkpoints after a dispatch of the finished run, want %d", len(after), len(history))
	}
}

// A run dispatched but not due yet (after_seconds) is not lost; cancelled,
// it ends.
func testNotLost(t *testing.T, svc *runs.Service) {
	ctx := context.Background()
	thread := uuid.NewString()
	r := createRun(t, svc, thread, `{"assistant_id": "counter", "if_not_exists": "create", "after_seconds": 3600, "input": {"steps": 1}}`)
	stored := storedRun(t, svc, thread, r.RunID)
	if stored.Status != store.RunPending {
		t.Fatalf("a run due in an hour is %s, want pending", stored.Status)
	}
	lost, err := dispatcher(svc).Lost(ctx, stored)
	if err != nil || lost {
		t.Errorf("Lost of a run on its way: %v, %v; want false", lost, err)
	}
	if _, err := svc.CancelRun(ctx, org, thread, r.RunID, store.CancelInterrupt); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, finished(t, svc, thread, r.RunID), store.RunInterrupted)
}

// Lost of a run that finished normally may say either (an execution that
// has ended counts as lost, the waiter re-reading the run first; one still
// winding down does not), but it is no error, and acting on it — the waiter
// abandons a run that is lost — leaves the run's result as it is. The case
// abandons the run whatever Lost said, so that it does not depend on when
// the answer changes.
func testFinished(t *testing.T, svc *runs.Service) {
	ctx := context.Background()
	thread := uuid.NewString()
	r := createRun(t, svc, thread, `{"assistant_id": "echo", "if_not_exists": "create",
		"input": {"messages": [{"role": "user", "content": "hello"}]}}`)
	wantStatus(t, finished(t, svc, thread, r.RunID), store.RunSuccess)
	want := result(t, svc, thread, r.RunID)
	lost, err := dispatcher(svc).Lost(ctx, storedRun(t, svc, thread, r.RunID))
	if err != nil {
		t.Fatalf("Lost of a finished run: %v", err)
	}
	t.Logf("Lost of a finished run: %v", lost)
	if err := svc.AbandonRun(ctx, r.RunID, "the run's execution ended without finishing it"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, finished(t, svc, thread, r.RunID), store.RunSuccess)
	if got := result(t, svc, thread, r.RunID); !jsonEqual(got, want) {
		t.Errorf("result after the run was abandoned: %v, want %v", got, want)
	}
}

func createRun(t *testing.T, svc *runs.Service, threadID, body string) runs.Run {
	t.Helper()
	var req runs.RunRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	r, err := svc.CreateRun(context.Background(), org, threadID, req)
	if err != nil {
		t.Fatalf("CreateRun %s: %v", body, err)
	}
	return r
}

func storedRun(t *testing.T, svc *runs.Service, threadID, runID string) store.Run {
	t.Helper()
	r, err := svc.Store.Run(context.Background(), org, threadID, runID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var terminal = []string{store.RunSuccess, store.RunError, store.RunTimeout, store.RunInterrupted}

// finished waits for the run to be terminal.
func finished(t *testing.T, svc *runs.Service, threadID, runID string) runs.Run {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		r, err := svc.GetRun(context.Background(), org, threadID, runID)
		if err == nil && slices.Contains(terminal, r.Status) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s not finished after %s: %+v, %v", runID, waitFor, r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantStatus(t *testing.T, r runs.Run, status string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("run %s is %s, want %s", r.RunID, r.Status, status)
	}
}

// result is a finished run's runs/wait body.
func result(t *testing.T, svc *runs.Service, threadID, runID string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	raw, err := svc.Join(ctx, org, threadID, runID)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("run %s answered %s: %v", runID, raw, err)
	}
	return body
}

// linearHistory returns the thread's checkpoints, newest first, checking
// that they are one execution's: each the parent's child, their steps
// counting down by one to the input's -1.
func linearHistory(t *testing.T, svc *runs.Service, threadID string) []runs.ThreadState {
	t.Helper()
	history, err := svc.History(context.Background(), org, threadID, runs.HistoryQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(history) == 0 {
		t.Fatal("the thread has no checkpoints")
	}
	step := func(st runs.ThreadState) int {
		var n int
		if _, err := fmt.Sscan(fmt.Sprint(st.Metadata["step"]), &n); err != nil {
			t.Fatalf("checkpoint %v has step %v", st.Checkpoint, st.Metadata["step"])
		}
		return n
	}
	for i, st := range history {
		if i+1 < len(history) {
			next := history[i+1]
			if st.ParentCheckpointID == nil || next.CheckpointID == nil || *st.ParentCheckpointID != *next.CheckpointID || step(st) != step(next)+1 {
				t.Fatalf("checkpoint %d (step %v) does not follow the one before it (%v, step %v): not one execution",
					i, step(st), next.Checkpoint, step(next))
			}
		}
	}
	if last := history[len(history)-1]; step(last) != -1 || last.ParentCheckpointID != nil {
		t.Errorf("the first checkpoint is step %v with parent %v, want the input's (-1, none)", step(last), last.ParentCheckpointID)
	}
	return history
}

func jsonEqual(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

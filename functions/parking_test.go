package functions_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/dispatch/sfn"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Review #12 on the emulator, with the real run machine and run-worker
// Lambda: a run queued behind a running run of its thread parks its
// execution (the Park task hands its token to the worker Lambda, which
// stores it with the run) instead of looping through Wait and Step; the
// end of the run ahead, in a run worker, wakes it with SendTaskSuccess, and
// it runs. Its execution entered Park once and no Wait state.
// parkingThread is a thread of a new organization on the shared stack, with
// the API function that creates its runs and the run machine's client.
type parkingThread struct {
	app    *lambdaapp.App
	orgID  string
	thread string
	sfn    *awssfn.Client
	runs   *sfn.Dispatcher
}

func newParkingThread(t *testing.T, log *slog.Logger) *parkingThread {
	t.Helper()
	s := sharedStack(t)
	app, err := s.Open(lambdaapp.RoleAPI, log)
	if err != nil {
		t.Fatal(err)
	}
	org, _, err := app.Keys.EnsureOrganization(context.Background(), "parking-"+uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	sc := awssfn.NewFromConfig(s.AWS)
	d, err := sfn.NewDispatcher(sc, s.API.RunStateMachineARN)
	if err != nil {
		t.Fatal(err)
	}
	return &parkingThread{app: app, orgID: org.ID, thread: uuid.NewString(), sfn: sc, runs: d}
}

// create creates a run of the thread from a request body.
func (p *parkingThread) create(t *testing.T, body string) runs.Run {
	t.Helper()
	var req runs.RunRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	r, err := p.app.Runs.CreateRun(context.Background(), p.orgID, p.thread, req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestQueuedRunParksUntilTheRunAheadEnds(t *testing.T) {
	log := testLog(t)
	p := newParkingThread(t, log)
	worker, err := sharedStack(t).Open(lambdaapp.RoleRunWorker, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The run ahead: due in an hour, then claimed by a worker of the test
	// for hours, so it is running and its own execution cannot take it.
	ahead := p.create(t, `{"assistant_id":"echo","input":{"messages":[]},"after_seconds":3600,"if_not_exists":"create"}`)
	now := time.Now()
	if _, ok, err := p.app.Store.ClaimRunByID(ctx, ahead.RunID, "test-worker", now.Add(2*time.Hour), now.Add(4*time.Hour), 0); err != nil || !ok {
		t.Fatalf("claim the run ahead: %v %v", ok, err)
	}
	queued := p.create(t, `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"next"}]},"multitask_strategy":"enqueue"}`)

	// Parked: its token stored with the run by the worker Lambda.
	parking := store.RunParking(p.app.Store)
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		parked, err := parking.ParkedRuns(ctx, p.orgID, ahead.ThreadID)
		if err != nil {
			t.Fatal(err)
		}
		if len(parked) == 1 && parked[0].Run.ID == queued.RunID && parked[0].Token != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queued run never parked (parked: %v); its execution: %s", parked, history(t, p.sfn, p.runs.ExecutionARN(queued.RunID)))
		}
	}
	if out, err := p.sfn.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(p.runs.ExecutionARN(queued.RunID))}); err != nil ||
		out.Status != types.ExecutionStatusRunning {
		t.Fatalf("the parked run's execution: %v %v", out, err)
	}
	// The run ahead ends in a run worker (abandoned here, as an ended
	// execution's report does): it wakes the parked run.
	if _, err := worker.HandleRunTask(ctx, lambdaapp.RunTask{Action: lambdaapp.ActionAbandon, RunID: ahead.RunID,
		Error: json.RawMessage(`"stopped by the test"`)}); err != nil {
		t.Fatal(err)
	}
	arn := aws.String(p.runs.ExecutionARN(queued.RunID))
	var out *awssfn.DescribeExecutionOutput
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if out, err = p.sfn.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: arn}); err != nil {
			t.Fatal(err)
		}
		if out.Status != types.ExecutionStatusRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the woken run's execution still runs")
		}
	}
	if out.Status != types.ExecutionStatusSucceeded {
		t.Fatalf("the woken run's execution: %s %s %s", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
	}
	got, err := p.app.Store.Run(ctx, p.orgID, ahead.ThreadID, queued.RunID)
	if err != nil || got.Status != store.RunSuccess || !strings.Contains(string(got.Result), "echo: next") {
		t.Fatalf("the woken run: %s %s (%v)", got.Status, got.Result, err)
	}
	hist, err := p.sfn.GetExecutionHistory(ctx, &awssfn.GetExecutionHistoryInput{ExecutionArn: arn, MaxResults: 1000})
	if err != nil {
		t.Fatal(err)
	}
	entered := map[string]int{}
	for _, e := range hist.Events {
		if e.StateEnteredEventDetails != nil {
			entered[aws.ToString(e.StateEnteredEventDetails.Name)]++
		}
	}
	if entered["Park"] != 1 || entered["Wait"] != 0 || entered["Unparked"] != 0 || entered["Step"] != 2 {
		t.Fatalf("states entered %v: want Step, Park, Step (no polling)", entered)
	}
}

// history renders an execution's events, for a failure message.
func history(t *testing.T, sc *awssfn.Client, arn string) string {
	t.Helper()
	h, err := sc.GetExecutionHistory(context.Background(), &awssfn.GetExecutionHistoryInput{ExecutionArn: aws.String(arn), MaxResults: 1000})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range h.Events {
		b.WriteString("\n  " + string(e.Type))
		if d := e.StateEnteredEventDetails; d != nil {
			b.WriteString(" " + aws.ToString(d.Name) + " " + aws.ToString(d.Input))
		}
		if d := e.TaskFailedEventDetails; d != nil {
			b.WriteString(" " + aws.ToString(d.Error) + " " + aws.ToString(d.Cause))
		}
		if d := e.ExecutionFailedEventDetails; d != nil {
			b.WriteString(" " + aws.ToString(d.Error) + " " + aws.ToString(d.Cause))
		}
	}
	return b.String()
}

// Runs ended by an API request rather than by a run worker (a pending
// run's cancel, the thread's deletion) wake their parked executions on the
// real run machine: each steps at once, finds its run ended or gone, and
// ends, instead of waiting for its park's timeout (15 minutes).
func TestRunsEndedByARequestWakeTheParkedRuns(t *testing.T) {
	p := newParkingThread(t, testLog(t))
	ctx := context.Background()
	// The run ahead runs for hours under a worker of the test: nothing
	// ends it, so only the requests below can wake the runs behind it.
	ahead := p.create(t, `{"assistant_id":"echo","input":{"messages":[]},"after_seconds":3600,"if_not_exists":"create"}`)
	now := time.Now()
	if _, ok, err := p.app.Store.ClaimRunByID(ctx, ahead.RunID, "test-worker", now.Add(2*time.Hour), now.Add(4*time.Hour), 0); err != nil || !ok {
		t.Fatalf("claim the run ahead: %v %v", ok, err)
	}
	cancelled := p.create(t, `{"assistant_id":"echo","input":{"messages":[]},"multitask_strategy":"enqueue"}`)
	deleted := p.create(t, `{"assistant_id":"echo","input":{"messages":[]},"multitask_strategy":"enqueue"}`)
	parking := store.RunParking(p.app.Store)
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		parked, err := parking.ParkedRuns(ctx, p.orgID, p.thread)
		if err != nil {
			t.Fatal(err)
		}
		if len(parked) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queued runs never parked (parked: %v)", parked)
		}
	}
	ended := func(runID string) {
		t.Helper()
		arn := aws.String(p.runs.ExecutionARN(runID))
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			out, err := p.sfn.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: arn})
			if err != nil {
				t.Fatal(err)
			}
			if out.Status == types.ExecutionStatusSucceeded {
				return
			}
			if out.Status != types.ExecutionStatusRunning || time.Now().After(deadline) {
				t.Fatalf("the execution of run %s: %s, want it woken and succeeded; its history: %s", runID, out.Status, history(t, p.sfn, *arn))
			}
		}
	}

	if _, err := p.app.Runs.CancelRun(ctx, p.orgID, p.thread, cancelled.RunID, ""); err != nil {
		t.Fatal(err)
	}
	ended(cancelled.RunID)
	if err := p.app.Runs.DeleteThread(ctx, p.orgID, p.thread); err != nil {
		t.Fatal(err)
	}
	ended(deleted.RunID)
}

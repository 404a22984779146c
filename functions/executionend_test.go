package functions_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/dispatch/sfn"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store"
)

// statusChange is the event EventBridge sends for a run execution that
// ended (the stack's rule: FAILED, TIMED_OUT, ABORTED), as AWS documents
// "Step Functions Execution Status Change", built from the execution as the
// emulator describes it. The emulator emits no such event itself: what is
// tested here is the run-worker Lambda receiving it (invoked over the
// emulator's Lambda API), not the rule's delivery.
func statusChange(t *testing.T, out *awssfn.DescribeExecutionOutput) []byte {
	t.Helper()
	ev := map[string]any{
		"version": "0", "id": uuid.NewString(), "detail-type": lambdaapp.ExecutionStatusChangeType,
		"source": "aws.states", "account": "000000000000", "time": time.Now().UTC().Format(time.RFC3339),
		"region": "us-east-1", "resources": []string{aws.ToString(out.ExecutionArn)},
		"detail": map[string]any{
			"executionArn": aws.ToString(out.ExecutionArn), "stateMachineArn": aws.ToString(out.StateMachineArn),
			"name": aws.ToString(out.Name), "status": string(out.Status),
			"startDate": out.StartDate.UnixMilli(), "stopDate": time.Now().UnixMilli(),
			"input": aws.ToString(out.Input), "output": nil, "error": out.Error, "cause": out.Cause,
		},
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Review #4 and #11: an execution that ends without settling its run (an
// operator's StopExecution here; a failed Abandon or the run timeout on
// AWS) is reported to the run worker, which ends the run so its thread
// moves on, with no waiter polling DescribeExecution. A running run ends
// with ExecutionLost, a pending one (waiting in its execution) is
// interrupted; a report of a run already settled changes nothing.
func TestEndedExecutionsEndTheirRuns(t *testing.T) {
	s := sharedStack(t)
	log := testLog(t)
	app, err := s.Open(lambdaapp.RoleAPI, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	org, _, err := app.Keys.EnsureOrganization(ctx, "ended-"+uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	sc := awssfn.NewFromConfig(s.AWS)
	lc := lambda.NewFromConfig(s.AWS)
	d, err := sfn.NewDispatcher(sc, s.API.RunStateMachineARN)
	if err != nil {
		t.Fatal(err)
	}
	// create starts a run due in an hour: its execution waits in a Wait state.
	create := func(t *testing.T) runs.Run {
		t.Helper()
		var req runs.RunRequest
		if err := json.Unmarshal([]byte(`{"assistant_id":"echo","input":{"messages":[]},"after_seconds":3600,"if_not_exists":"create"}`), &req); err != nil {
			t.Fatal(err)
		}
		r, err := app.Runs.CreateRun(ctx, org.ID, uuid.NewString(), req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// abort stops the run's execution and returns it as described after.
	abort := func(t *testing.T, runID string) *awssfn.DescribeExecutionOutput {
		t.Helper()
		arn := aws.String(d.ExecutionARN(runID))
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			_, err := sc.StopExecution(ctx, &awssfn.StopExecutionInput{ExecutionArn: arn, Error: aws.String("Operator"), Cause: aws.String("stopped by the test")})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stop the execution: %v", err)
			}
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			out, err := sc.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: arn})
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != types.ExecutionStatusRunning {
				if out.Status != types.ExecutionStatusAborted {
					t.Fatalf("execution %s, want ABORTED", out.Status)
				}
				return out
			}
			if time.Now().After(deadline) {
				t.Fatal("the stopped execution still runs")
			}
		}
	}
	// report invokes the run-worker Lambda on the emulator with the event.
	report := func(t *testing.T, event []byte) lambdaapp.RunTaskResult {
		t.Helper()
		out, err := lc.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(s.Prefix + "run-worker"), Payload: event})
		if err != nil {
			t.Fatal(err)
		}
		if out.FunctionError != nil {
			t.Fatalf("the run worker failed: %s %s", aws.ToString(out.FunctionError), out.Payload)
		}
		var res lambdaapp.RunTaskResult
		if err := json.Unmarshal(out.Payload, &res); err != nil {
			t.Fatalf("answer %s: %v", out.Payload, err)
		}
		return res
	}
	stored := func(t *testing.T, r runs.Run) (store.Run, store.Thread) {
		t.Helper()
		got, err := app.Store.Run(ctx, org.ID, r.ThreadID, r.RunID)
		if err != nil {
			t.Fatal(err)
		}
		th, err := app.Store.Thread(ctx, org.ID, r.ThreadID)
		if err != nil {
			t.Fatal(err)
		}
		return got, th
	}

	t.Run("running", func(t *testing.T) {
		r := create(t)
		// A step claimed it, then its execution ended without settling it.
		now := time.Now()
		if _, ok, err := app.Store.ClaimRunByID(ctx, r.RunID, "execution:"+r.RunID, now.Add(2*time.Hour), now.Add(3*time.Hour), 0); err != nil || !ok {
			t.Fatal(err)
		}
		if got, _ := stored(t, r); got.Status != store.RunRunning {
			t.Fatalf("claimed run is %s", got.Status)
		}
		event := statusChange(t, abort(t, r.RunID))
		if res := report(t, event); res.Status != lambdaapp.StatusAbandoned || res.RunID != r.RunID {
			t.Fatalf("answer %+v, want the run abandoned", res)
		}
		got, th := stored(t, r)
		if got.Status != store.RunError || !strings.Contains(string(got.Result), runs.KindExecutionLost) ||
			!strings.Contains(string(got.Result), "ended aborted") {
			t.Fatalf("run %s %s, want error ExecutionLost saying the execution was aborted", got.Status, got.Result)
		}
		if th.Status == store.ThreadBusy {
			t.Fatal("the thread stays busy")
		}
		// Reported again (EventBridge delivers at least once): unchanged.
		if res := report(t, event); res.Status != lambdaapp.StatusAbandoned {
			t.Fatalf("second report: %+v", res)
		}
		if again, _ := stored(t, r); again.Status != got.Status || !again.UpdatedAt.Equal(got.UpdatedAt) {
			t.Fatalf("a second report changed the settled run: %s at %v", again.Status, again.UpdatedAt)
		}
	})

	t.Run("pending", func(t *testing.T) {
		r := create(t)
		if res := report(t, statusChange(t, abort(t, r.RunID))); res.Status != lambdaapp.StatusAbandoned {
			t.Fatalf("answer %+v", res)
		}
		got, th := stored(t, r)
		if got.Status != store.RunInterrupted || th.Status == store.ThreadBusy {
			t.Fatalf("run %s, thread %s: want interrupted and the thread free", got.Status, th.Status)
		}
	})

	t.Run("succeeded is ignored", func(t *testing.T) {
		r := create(t)
		out := abort(t, r.RunID)
		out.Status = types.ExecutionStatusSucceeded // a status the rule does not send: ignored all the same
		if res := report(t, statusChange(t, out)); res.Status != lambdaapp.StatusIgnored {
			t.Fatalf("answer %+v, want ignored", res)
		}
		if got, _ := stored(t, r); got.Status != store.RunPending {
			t.Fatalf("run %s, want it left pending", got.Status)
		}
	})
}

package sfn

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/store"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// emulatorMachine creates a Standard state machine with definition def on
// the emulator and returns its ARN.
func emulatorMachine(t *testing.T, c *awssfn.Client, name, def string) string {
	t.Helper()
	return awstest.StateMachine(t, c, &awssfn.CreateStateMachineInput{
		Name: aws.String(awstest.Prefix(t) + name), Definition: aws.String(def),
		RoleArn: aws.String("arn:aws:iam::000000000000:role/test"), Type: types.StateMachineTypeStandard,
	})
}

func waitStatus(t *testing.T, c *awssfn.Client, arn string, want types.ExecutionStatus) *awssfn.DescribeExecutionOutput {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := c.DescribeExecution(context.Background(), &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
		if err == nil && out.Status == want {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s: %v, %v; want %s", arn, out, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDispatcherOnEmulator(t *testing.T) {
	ep := awstest.Start(t)
	c := awssfn.NewFromConfig(ep.Config)
	ctx := context.Background()
	// A task on an activity nobody polls keeps the execution RUNNING.
	act, err := c.CreateActivity(ctx, &awssfn.CreateActivityInput{Name: aws.String(awstest.Prefix(t) + "hold")})
	if err != nil {
		t.Fatal(err)
	}
	holdARN := emulatorMachine(t, c, "hold", `{"StartAt":"Hold","States":{"Hold":{"Type":"Task","Resource":"`+
		aws.ToString(act.ActivityArn)+`","End":true}}}`)
	quickARN := emulatorMachine(t, c, "quick", `{"StartAt":"Done","States":{"Done":{"Type":"Succeed"}}}`)

	d, err := NewDispatcher(c, holdARN)
	if err != nil {
		t.Fatal(err)
	}
	run := store.Run{ID: uuid.Must(uuid.NewV7()).String(), CreatedAt: time.Now()}
	if lost, err := d.Lost(ctx, run); err != nil || lost {
		t.Fatalf("before Dispatch, a fresh run: lost %v, %v; want not lost", lost, err)
	}
	for range 2 { // idempotent
		if err := d.Dispatch(ctx, run); err != nil {
			t.Fatalf("Dispatch: %v", err)
		}
	}
	list, err := c.ListExecutions(ctx, &awssfn.ListExecutionsInput{StateMachineArn: aws.String(holdARN)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Executions) != 1 || aws.ToString(list.Executions[0].Name) != run.ID ||
		aws.ToString(list.Executions[0].ExecutionArn) != d.ExecutionARN(run.ID) {
		t.Fatalf("executions %+v: want one named %s at %s", list.Executions, run.ID, d.ExecutionARN(run.ID))
	}
	desc := waitStatus(t, c, d.ExecutionARN(run.ID), types.ExecutionStatusRunning)
	if got := aws.ToString(desc.Input); got != `{"run_id":"`+run.ID+`","wait_seconds":0}` {
		t.Errorf("input %s", got)
	}
	if lost, err := d.Lost(ctx, run); err != nil || lost {
		t.Fatalf("running: lost %v, %v; want not lost", lost, err)
	}
	if _, err := c.StopExecution(ctx, &awssfn.StopExecutionInput{ExecutionArn: aws.String(d.ExecutionARN(run.ID))}); err != nil {
		t.Fatal(err)
	}
	if lost, err := d.Lost(ctx, run); err != nil || !lost {
		t.Fatalf("aborted: lost %v, %v; want lost", lost, err)
	}

	// Finished executions are lost too (the waiter re-reads the run).
	dq, _ := NewDispatcher(c, quickARN)
	done := store.Run{ID: uuid.Must(uuid.NewV7()).String(), CreatedAt: time.Now()}
	if err := dq.Dispatch(ctx, done); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, dq.ExecutionARN(done.ID), types.ExecutionStatusSucceeded)
	if lost, err := dq.Lost(ctx, done); err != nil || !lost {
		t.Fatalf("succeeded: lost %v, %v; want lost", lost, err)
	}

	// A run that never got an execution is lost once past the grace period.
	never := store.Run{ID: uuid.Must(uuid.NewV7()).String(), CreatedAt: time.Now().Add(-time.Minute)}
	if lost, err := dq.Lost(ctx, never); err != nil || !lost {
		t.Fatalf("never started, old: lost %v, %v; want lost", lost, err)
	}

	// A missing state machine is an error of Dispatch.
	gone, _ := NewDispatcher(c, quickARN+"-missing")
	if err := gone.Dispatch(ctx, store.Run{ID: uuid.NewString()}); err == nil {
		t.Fatal("Dispatch on a missing state machine succeeded")
	}
}

func TestProvisionerOnEmulator(t *testing.T) {
	ep := awstest.Start(t)
	c := awssfn.NewFromConfig(ep.Config)
	ctx := context.Background()
	arn := emulatorMachine(t, c, "prov", `{"StartAt":"Done","States":{"Done":{"Type":"Succeed"}}}`)
	p, err := NewProvisioner(c, arn, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p.StartProvision("org-1", "dep-1", "rev-1")
	p.StartProvision("org-1", "dep-1", "rev-1")
	p.StartDelete("org-1", "dep-1")
	list, err := c.ListExecutions(ctx, &awssfn.ListExecutionsInput{StateMachineArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Executions) != 3 {
		t.Fatalf("%d executions, want 3 (one per request)", len(list.Executions))
	}
	got := map[string]int{}
	for _, e := range list.Executions {
		out := waitStatus(t, c, aws.ToString(e.ExecutionArn), types.ExecutionStatusSucceeded)
		var task Task
		if err := json.Unmarshal([]byte(aws.ToString(out.Input)), &task); err != nil {
			t.Fatal(err)
		}
		got[task.Action+" "+task.OrgID+" "+task.DeploymentID+" "+task.RevisionID]++
		if task.Action == ActionDelete && !strings.HasPrefix(aws.ToString(e.Name), "delete-dep-1-") {
			t.Errorf("delete execution named %s", aws.ToString(e.Name))
		}
	}
	if got["provision org-1 dep-1 rev-1"] != 2 || got["delete org-1 dep-1 "] != 1 {
		t.Fatalf("executions %v", got)
	}
}

// With SkipRunning (the deploy worker's resume), work whose execution is
// running is not started again; other work, and work whose execution
// ended, is.
func TestProvisionerSkipRunningOnEmulator(t *testing.T) {
	ep := awstest.Start(t)
	c := awssfn.NewFromConfig(ep.Config)
	ctx := context.Background()
	act, err := c.CreateActivity(ctx, &awssfn.CreateActivityInput{Name: aws.String(awstest.Prefix(t) + "hold")})
	if err != nil {
		t.Fatal(err)
	}
	arn := emulatorMachine(t, c, "resume", `{"StartAt":"Hold","States":{"Hold":{"Type":"Task","Resource":"`+
		aws.ToString(act.ActivityArn)+`","End":true}}}`)
	p, err := NewProvisioner(c, arn, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p.SkipRunning = true
	rev1, rev2 := uuid.NewString(), uuid.NewString()
	running := func() map[string]int {
		t.Helper()
		list, err := c.ListExecutions(ctx, &awssfn.ListExecutionsInput{StateMachineArn: aws.String(arn), StatusFilter: types.ExecutionStatusRunning})
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, e := range list.Executions {
			name := aws.ToString(e.Name)
			n[name[:strings.LastIndexByte(name, '-')]]++
		}
		return n
	}
	p.StartProvision("org-1", "dep-1", rev1)
	p.StartProvision("org-1", "dep-1", rev1)
	p.StartProvision("org-1", "dep-1", rev2)
	p.StartDelete("org-1", "dep-1")
	p.StartDelete("org-1", "dep-1")
	want := map[string]int{"rev-" + rev1: 1, "rev-" + rev2: 1, "delete-dep-1": 1}
	if got := running(); !maps.Equal(got, want) {
		t.Fatalf("running executions %v, want %v", got, want)
	}
	// Once the execution of rev1 ends, resuming rev1 starts it again.
	list, err := c.ListExecutions(ctx, &awssfn.ListExecutionsInput{StateMachineArn: aws.String(arn), StatusFilter: types.ExecutionStatusRunning})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Executions {
		if strings.HasPrefix(aws.ToString(e.Name), "rev-"+rev1+"-") {
			if _, err := c.StopExecution(ctx, &awssfn.StopExecutionInput{ExecutionArn: e.ExecutionArn}); err != nil {
				// Refused only if it ended between the list and the stop
				// (the emulator has been seen ending it): ended is what
				// this step needs.
				d, derr := c.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: e.ExecutionArn})
				if derr != nil || d.Status == types.ExecutionStatusRunning {
					t.Fatalf("stop the execution of rev1: %v (describe: %v)", err, derr)
				}
			}
		}
	}
	p.StartProvision("org-1", "dep-1", rev1)
	if got := running(); !maps.Equal(got, want) {
		t.Fatalf("after rev1's execution stopped and a resume: running %v, want %v", got, want)
	}
}

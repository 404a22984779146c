package functions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/awsflow"
	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/dispatch/sfn"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
)

// The run machine's Express front with the real run-worker Lambda: an API
// function configured with it (STEPGRAPH_RUN_EXPRESS_STATE_MACHINE_ARN, as
// the stack sets it) starts runs there; a stateless echo ends in its
// Express execution; a worker that dies in the Express step (no retries
// there) is handed over to the Standard execution, which resumes the run
// from its last checkpoint.
func TestExpressFrontOnTheRealWorker(t *testing.T) {
	s := sharedStack(t)
	log := testLog(t)
	ctx := context.Background()
	sc := awssfn.NewFromConfig(s.AWS)
	def, err := awsflow.ExpressDefinition(s.RunWorkerARN, s.API.RunStateMachineARN)
	if err != nil {
		t.Fatal(err)
	}
	expressARN := awstest.StateMachine(t, sc, &awssfn.CreateStateMachineInput{
		Name: aws.String(s.Prefix + "run-express"), Definition: aws.String(def),
		RoleArn: aws.String("arn:aws:iam::000000000000:role/express-test"), Type: types.StateMachineTypeExpress,
	})
	cfg := s.API
	cfg.RunExpressStateMachineARN = expressARN
	app, err := lambdaapp.Open(cfg, s.AWS, log)
	if err != nil {
		t.Fatal(err)
	}
	org, _, err := app.Keys.EnsureOrganization(ctx, "express-"+uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	key, err := app.Keys.Create(ctx, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	h := lambdaapp.NewHTTPHandler(app.Handler)
	h.Budget = 55 * time.Second
	c := &apiClient{t: t, h: h, key: key}
	d, err := sfn.NewDispatcher(sc, s.API.RunStateMachineARN)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.UseExpress(expressARN); err != nil {
		t.Fatal(err)
	}
	// ended waits for an execution to end and returns its status, or
	// "missing" when there is none.
	ended := func(t *testing.T, arn string) string {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			out, err := sc.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
			var missing *types.ExecutionDoesNotExist
			switch {
			case errors.As(err, &missing):
				return "missing"
			case err != nil:
				t.Fatal(err)
			case out.Status != types.ExecutionStatusRunning:
				return string(out.Status)
			case time.Now().After(deadline):
				t.Fatalf("execution %s still running", arn)
			}
		}
	}

	t.Run("echo ends in Express", func(t *testing.T) {
		rid, body := c.wait("/runs/wait", map[string]any{"assistant_id": "echo",
			"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}})
		var out map[string]any
		if err := json.Unmarshal([]byte(body), &out); err != nil || len(out["messages"].([]any)) != 2 {
			t.Fatalf("echo answered %s", body)
		}
		if got := ended(t, d.ExpressExecutionARN(rid)); got != "SUCCEEDED" {
			t.Errorf("the Express execution: %s", got)
		}
		if got := ended(t, d.ExecutionARN(rid)); got != "missing" {
			t.Errorf("the Standard execution: %s, want none", got)
		}
	})

	t.Run("a worker that dies in the Express step is handed over", func(t *testing.T) {
		tid := uuid.NewString()
		// The run-worker process exits after storing the thread's 3rd
		// checkpoint (the input, __start__, the first inc) in the Express
		// step.
		if err := os.WriteFile(filepath.Join(faultDir, tid+".exit-after"), []byte("3"), 0o600); err != nil {
			t.Fatal(err)
		}
		rid, body := c.wait("/threads/"+tid+"/runs/wait", map[string]any{"assistant_id": "counter",
			"input": map[string]any{"steps": 4}, "if_not_exists": "create", "durability": "sync"})
		if _, err := os.Stat(filepath.Join(faultDir, tid+".exited")); err != nil {
			t.Fatalf("the worker did not die: %v", err)
		}
		if body != `{"count":4,"steps":4}` {
			t.Fatalf("the run answered %s", body)
		}
		if got := ended(t, d.ExpressExecutionARN(rid)); got != "SUCCEEDED" {
			t.Errorf("the Express execution: %s, want handed over", got)
		}
		if got := ended(t, d.ExecutionARN(rid)); got != "SUCCEEDED" {
			t.Errorf("the Standard execution: %s, want the one that finished the run", got)
		}
		var states []map[string]any
		if err := json.Unmarshal([]byte(c.do("POST", "/threads/"+tid+"/history", map[string]any{"limit": 100}).body), &states); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, st := range states {
			id := fmt.Sprint(st["checkpoint"].(map[string]any)["checkpoint_id"])
			if seen[id] {
				t.Fatalf("checkpoint %s twice in the history", id)
			}
			seen[id] = true
		}
		if len(states) != 6 { // the input, __start__, four times inc
			t.Errorf("%d checkpoints, want 6", len(states))
		}
	})
}

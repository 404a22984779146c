package lambdaapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
)

func testAWS() aws.Config {
	return aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:9")}
}

func TestAbandonReason(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, "the run's execution failed after its retries"},
		{`null`, "the run's execution failed after its retries"},
		{`"worker gone"`, "the run's execution failed after its retries: worker gone"},
		{`{"Error":"Runtime.ExitError","Cause":"{\"errorType\":\"Runtime.ExitError\",\"errorMessage\":\"exit status 2\"}"}`,
			"the run's execution failed after its retries: Runtime.ExitError: exit status 2"},
		{`{"Error":"States.Timeout","Cause":""}`, "the run's execution failed after its retries: States.Timeout"},
		{`{"Error":"States.TaskFailed","Cause":"plain cause"}`, "the run's execution failed after its retries: States.TaskFailed: plain cause"},
	} {
		if got := abandonReason(json.RawMessage(tc.in)); got != tc.want {
			t.Errorf("abandonReason(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := `"` + strings.Repeat("x", 2000) + `"`
	if got := abandonReason(json.RawMessage(long)); len(got) > maxReason+10 {
		t.Errorf("reason not bounded: %d bytes", len(got))
	}
}

// Invalid events fail before any AWS call (the endpoint here answers nothing).
func TestWorkersRejectInvalidTasks(t *testing.T) {
	a, err := Open(Config{Role: RoleRunWorker, TablePrefix: "p-", SecretsPrefix: "p/"}, testAWS(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var invalid *InvalidTaskError
	ctx := context.Background()
	if _, err := a.HandleRunTask(ctx, RunTask{Action: "step"}); !errors.As(err, &invalid) {
		t.Errorf("step without run_id: %v", err)
	}
	if _, err := a.HandleRunTask(ctx, RunTask{Action: "dance", RunID: "r"}); !errors.As(err, &invalid) {
		t.Errorf("unknown action: %v", err)
	}
	if _, err := a.HandleRunTask(ctx, RunTask{DetailType: "Object Created", Detail: json.RawMessage(`{}`)}); !errors.As(err, &invalid) {
		t.Errorf("another event of EventBridge: %v", err)
	}
	if _, err := a.HandleRunTask(ctx, RunTask{DetailType: ExecutionStatusChangeType, Detail: json.RawMessage(`{"status":"FAILED","input":"{}"}`)}); !errors.As(err, &invalid) {
		t.Errorf("an execution status change naming no run: %v", err)
	}
	if _, err := a.HandleRunTask(ctx, RunTask{DetailType: ExecutionStatusChangeType, Detail: json.RawMessage(`[1]`)}); !errors.As(err, &invalid) {
		t.Errorf("an unreadable detail: %v", err)
	}
	if _, err := a.HandleDeployTask(ctx, DeployTask{Action: "provision", OrgID: "o"}); !errors.As(err, &invalid) {
		t.Errorf("provision without deployment: %v", err)
	}
	if _, err := a.HandleDeployTask(ctx, DeployTask{Action: "provision", OrgID: "o", DeploymentID: "d"}); !errors.As(err, &invalid) {
		t.Errorf("provision without revision: %v", err)
	}
	if _, err := a.HandleDeployTask(ctx, DeployTask{Action: "build", OrgID: "o", DeploymentID: "d"}); !errors.As(err, &invalid) {
		t.Errorf("unknown action: %v", err)
	}
}

func TestFunctionsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Functions {
		if seen[f.Name] {
			t.Errorf("function %s listed twice", f.Name)
		}
		seen[f.Name] = true
		switch f.Role {
		case "api":
			if len(f.Routes) == 0 {
				t.Errorf("API function %s has no route", f.Name)
			}
		case "run-worker", "deploy-worker", "cron-fire":
			if len(f.Routes) != 0 {
				t.Errorf("worker %s has routes", f.Name)
			}
		default:
			t.Errorf("function %s: role %q", f.Name, f.Role)
		}
	}
}

// A run task's log lines name the API request that queued the run (the
// request_id of the execution's input, which the state machine hands to
// every task) and the Lambda invocation, next to the run id: one search
// for the request id finds the API function's line and the worker's.
func TestRunTaskLogsCarryTheRequestID(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	a, err := Open(Config{Role: RoleRunWorker, TablePrefix: "p-", SecretsPrefix: "p/"}, testAWS(), log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a guard: the store answers nothing
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "lambda-7"})
	var task RunTask
	if err := json.Unmarshal([]byte(`{"action":"abandon","run_id":"run-1","error":"gone",
		"execution_input":{"run_id":"run-1","request_id":"req-42","wait_seconds":0}}`), &task); err != nil {
		t.Fatal(err)
	}
	if _, err := a.HandleRunTask(ctx, task); err == nil {
		t.Fatal("abandon with no store answered without error")
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] != "abandoning the run" {
			continue
		}
		found = true
		if rec["run_id"] != "run-1" || rec["request_id"] != "req-42" || rec["lambda_request_id"] != "lambda-7" {
			t.Errorf("log line %v: want run_id run-1, request_id req-42, lambda_request_id lambda-7", rec)
		}
	}
	if !found {
		t.Fatalf("no abandon line in %s", buf.String())
	}
}

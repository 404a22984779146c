package lambdaapp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

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

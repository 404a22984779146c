package awsflow_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	stypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/stepgraph/stepgraph/internal/awsflow"
	"github.com/stepgraph/stepgraph/internal/awstest"
	dispatchsfn "github.com/stepgraph/stepgraph/internal/dispatch/sfn"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// stubWorker is a Python Lambda standing in for run-worker: it logs every
// event to STUB_DIR/<run_id>.log and answers step events from the plan in
// STUB_DIR/<run_id>.plan (one answer per call, the last one repeating);
// "fail" raises.
const stubWorker = `import json, os

def handler(event, context):
    d = os.environ["STUB_DIR"]
    rid = event.get("run_id", "none")
    with open(os.path.join(d, rid + ".log"), "a") as f:
        f.write(json.dumps(event) + "\n")
    if event.get("action") == "abandon":
        return {"run_id": rid, "abandoned": True}
    if event.get("action") == "park":
        with open(os.path.join(d, rid + ".token"), "w") as f:
            f.write(event["task_token"])
        return {"run_id": rid, "parked": True}
    if event.get("action") != "step":
        raise Exception("unexpected action")
    with open(os.path.join(d, rid + ".log")) as f:
        n = sum(1 for line in f if '"step"' in line)
    with open(os.path.join(d, rid + ".plan")) as f:
        plan = json.load(f)
    answer = plan[min(n - 1, len(plan) - 1)]
    if answer == "fail":
        raise Exception("stub step failed")
    out = {"run_id": rid, "status": answer, "wait_seconds": 1 if answer == "wait" else 0}
    if answer == "park":
        out["org_id"], out["thread_id"] = "org-" + rid, "thread-" + rid
    return out
`

// stubDeployWorker echoes its event, so the test sees what the machine passed.
// stubDeployWorker logs its events; revision "building" is pending for
// its first call (a build runs), as the deploy worker answers it.
const stubDeployWorker = `import json, os

def handler(event, context):
    log = os.path.join(os.environ["STUB_DIR"], event.get("revision_id", "") + "-deploy.log")
    first = not os.path.exists(log)
    with open(log, "a") as f:
        f.write(json.dumps(event) + "\n")
    ids = {k: event[k] for k in ("action", "org_id", "deployment_id", "revision_id")}
    if event.get("revision_id") == "building" and first:
        return dict(ids, status="BUILDING", wait_seconds=1)
    return dict(ids, status="DEPLOYED")
`

func pyZip(t *testing.T, src string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("handler.py")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(src)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type flow struct {
	sfn    *sfn.Client
	dir    string
	runSM  string
	provSM string
	// shortPark is the run machine with its Park task timing out after 2 s.
	shortPark string
}

func setup(t *testing.T) flow {
	t.Helper()
	ep := awstest.Start(t)
	ctx := context.Background()
	prefix := awstest.Prefix(t)
	dir := t.TempDir()
	lc := lambda.NewFromConfig(ep.Config)
	arns := map[string]string{}
	for name, src := range map[string]string{"run-worker": stubWorker, "deploy-worker": stubDeployWorker} {
		out, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{
			FunctionName: aws.String(prefix + name),
			Runtime:      ltypes.RuntimePython312,
			Handler:      aws.String("handler.handler"),
			Role:         aws.String("arn:aws:iam::000000000000:role/stub"),
			Code:         &ltypes.FunctionCode{ZipFile: pyZip(t, src)},
			Timeout:      aws.Int32(10),
			Environment:  &ltypes.Environment{Variables: map[string]string{"STUB_DIR": dir}},
		})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		arns[name] = aws.ToString(out.FunctionArn)
	}
	sc := sfn.NewFromConfig(ep.Config)
	mk := func(name, def string) string {
		return awstest.StateMachine(t, sc, &sfn.CreateStateMachineInput{
			Name: aws.String(prefix + name), Definition: aws.String(def),
			RoleArn: aws.String("arn:aws:iam::000000000000:role/stub"), Type: stypes.StateMachineTypeStandard,
		})
	}
	runDef, err := awsflow.RunDefinition(arns["run-worker"])
	if err != nil {
		t.Fatal(err)
	}
	provDef, err := awsflow.ProvisionDefinition(arns["deploy-worker"])
	if err != nil {
		t.Fatal(err)
	}
	short := strings.Replace(runDef, `"TimeoutSeconds": 900`, `"TimeoutSeconds": 2`, 1)
	if short == runDef {
		t.Fatal("the run machine's Park has no TimeoutSeconds of 900")
	}
	return flow{sfn: sc, dir: dir, runSM: mk("run", runDef), provSM: mk("provision", provDef), shortPark: mk("run-short-park", short)}
}

// finish waits for the execution to end and returns its description.
func (f flow) finish(t *testing.T, arn string) *sfn.DescribeExecutionOutput {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := f.sfn.DescribeExecution(context.Background(), &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != stypes.ExecutionStatusRunning {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s still running", arn)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (f flow) startRun(t *testing.T, runID string, plan ...string) string {
	t.Helper()
	return f.startOn(t, f.runSM, runID, plan...)
}

func (f flow) startOn(t *testing.T, machine, runID string, plan ...string) string {
	t.Helper()
	b, _ := json.Marshal(plan)
	if err := os.WriteFile(filepath.Join(f.dir, runID+".plan"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := f.sfn.StartExecution(context.Background(), &sfn.StartExecutionInput{
		StateMachineArn: aws.String(machine), Name: aws.String(runID),
		Input: aws.String(`{"run_id":"` + runID + `","wait_seconds":0}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.ExecutionArn)
}

// events returns the events the stub worker received for runID.
func (f flow) events(t *testing.T, name string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func actions(evs []map[string]any) string {
	var s []string
	for _, ev := range evs {
		s = append(s, ev["action"].(string))
	}
	return strings.Join(s, ",")
}

func TestMachinesOnEmulator(t *testing.T) {
	f := setup(t)

	t.Run("loop", func(t *testing.T) {
		// continue → Step, wait → Wait → Step, done → Succeed.
		out := f.finish(t, f.startRun(t, "run-loop", "continue", "wait", "continue", "done"))
		if out.Status != stypes.ExecutionStatusSucceeded {
			t.Fatalf("status %s (%s: %s)", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
		}
		evs := f.events(t, "run-loop.log")
		if got := actions(evs); got != "step,step,step,step" {
			t.Fatalf("worker calls %s, want four steps", got)
		}
		for _, ev := range evs {
			if ev["run_id"] != "run-loop" {
				t.Errorf("step event %v lacks the run id", ev)
			}
		}
	})

	t.Run("retry", func(t *testing.T) {
		// A failed step is retried, and the run carries on.
		out := f.finish(t, f.startRun(t, "run-retry", "fail", "done"))
		if out.Status != stypes.ExecutionStatusSucceeded {
			t.Fatalf("status %s (%s: %s)", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
		}
		if got := actions(f.events(t, "run-retry.log")); got != "step,step" {
			t.Fatalf("worker calls %s, want step,step", got)
		}
	})

	t.Run("abandon", func(t *testing.T) {
		// A step that keeps failing: bounded retries, then abandon, then fail.
		out := f.finish(t, f.startRun(t, "run-abandon", "fail"))
		if out.Status != stypes.ExecutionStatusFailed || aws.ToString(out.Error) != "StepGraph.RunAbandoned" {
			t.Fatalf("status %s error %s, want FAILED StepGraph.RunAbandoned", out.Status, aws.ToString(out.Error))
		}
		evs := f.events(t, "run-abandon.log")
		steps := strings.Count(actions(evs), "step")
		if steps < 2 || steps > 10 {
			t.Errorf("%d step attempts, want a few bounded retries", steps)
		}
		last := evs[len(evs)-1]
		if last["action"] != "abandon" || last["run_id"] != "run-abandon" {
			t.Fatalf("last call %v, want the abandon of the run", last)
		}
		e, _ := last["error"].(map[string]any)
		if e == nil || !strings.Contains(e["Cause"].(string), "stub step failed") {
			t.Errorf("abandon error %v does not carry the cause", last["error"])
		}
	})

	t.Run("park", func(t *testing.T) {
		// park → Park (the worker gets the token) → woken → Step → done.
		arn := f.startRun(t, "run-park", "park", "done")
		token := f.token(t, "run-park")
		if err := dispatchsfn.NewWaker(f.sfn).Wake(context.Background(), token); err != nil {
			t.Fatal(err)
		}
		out := f.finish(t, arn)
		if out.Status != stypes.ExecutionStatusSucceeded {
			t.Fatalf("status %s (%s: %s)", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
		}
		evs := f.events(t, "run-park.log")
		if got := actions(evs); got != "step,park,step" {
			t.Fatalf("worker calls %s, want step,park,step", got)
		}
		if evs[1]["org_id"] != "org-run-park" || evs[1]["thread_id"] != "thread-run-park" || evs[1]["task_token"] != token {
			t.Errorf("park event %v: want the run's org, thread and the task token", evs[1])
		}
		// The task is over: waking it again is no error.
		if err := dispatchsfn.NewWaker(f.sfn).Wake(context.Background(), token); err != nil {
			t.Errorf("a second wake-up: %v", err)
		}
	})

	t.Run("lost wake-up", func(t *testing.T) {
		// Nobody wakes the parked run: its task times out and it steps
		// again (here after 2 s, 15 min as deployed).
		out := f.finish(t, f.startOn(t, f.shortPark, "run-unwoken", "park", "done"))
		if out.Status != stypes.ExecutionStatusSucceeded {
			t.Fatalf("status %s (%s: %s)", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
		}
		if got := actions(f.events(t, "run-unwoken.log")); got != "step,park,step" {
			t.Fatalf("worker calls %s, want step,park,step", got)
		}
	})

	t.Run("provision", func(t *testing.T) {
		in := `{"action":"provision","org_id":"o","deployment_id":"d","revision_id":"r"}`
		st, err := f.sfn.StartExecution(context.Background(), &sfn.StartExecutionInput{
			StateMachineArn: aws.String(f.provSM), Name: aws.String("r-1"), Input: aws.String(in)})
		if err != nil {
			t.Fatal(err)
		}
		out := f.finish(t, aws.ToString(st.ExecutionArn))
		if out.Status != stypes.ExecutionStatusSucceeded {
			t.Fatalf("status %s (%s)", out.Status, aws.ToString(out.Cause))
		}
		evs := f.events(t, "r-deploy.log")
		var want map[string]any
		_ = json.Unmarshal([]byte(in), &want)
		if len(evs) != 1 || !reflectEqual(evs[0], want) {
			t.Fatalf("deploy-worker got %v, want %v", evs, want)
		}
	})

	t.Run("provision waits for a build", func(t *testing.T) {
		// The worker answers wait_seconds while the app's build runs: the
		// execution waits, then provisions the same revision again.
		in := `{"action":"provision","org_id":"o","deployment_id":"d","revision_id":"building"}`
		st, err := f.sfn.StartExecution(context.Background(), &sfn.StartExecutionInput{
			StateMachineArn: aws.String(f.provSM), Name: aws.String("building-1"), Input: aws.String(in)})
		if err != nil {
			t.Fatal(err)
		}
		out := f.finish(t, aws.ToString(st.ExecutionArn))
		if out.Status != stypes.ExecutionStatusSucceeded || !strings.Contains(aws.ToString(out.Output), `"DEPLOYED"`) {
			t.Fatalf("status %s (%s), output %s", out.Status, aws.ToString(out.Cause), aws.ToString(out.Output))
		}
		evs := f.events(t, "building-deploy.log")
		if len(evs) != 2 {
			t.Fatalf("deploy-worker got %v, want two calls", evs)
		}
		for _, ev := range evs {
			if ev["action"] != "provision" || ev["org_id"] != "o" || ev["deployment_id"] != "d" || ev["revision_id"] != "building" {
				t.Errorf("deploy-worker event %v, want the same revision's provision", ev)
			}
		}
	})
}

// token waits for the park task's token the stub worker wrote.
func (f flow) token(t *testing.T, runID string) string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(f.dir, runID+".token")); err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never parked", runID)
		}
	}
}

func reflectEqual(a, b map[string]any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

package functions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/dispatch/sfn"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
)

// apiClient calls the API function's handler in this process with API
// Gateway v2 events; runs it starts execute on the emulator: the run state
// machine invoking the run-worker Lambda.
type apiClient struct {
	t   *testing.T
	h   *lambdaapp.HTTPHandler
	key string
}

type answer struct {
	status  int
	headers map[string]string
	body    string
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(a.body), &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%q", err, a.body)
	}
	return m
}

func (c *apiClient) do(method, path string, body any) answer {
	c.t.Helper()
	p, q, _ := strings.Cut(path, "?")
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: p, RawQueryString: q,
		Headers: map[string]string{"x-api-key": c.key, "accept": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{Stage: "$default", DomainName: "api.example",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: p, SourceIP: "192.0.2.1"}},
	}
	if body != nil {
		b, _ := json.Marshal(body)
		ev.Body = string(b)
		ev.Headers["content-type"] = "application/json"
	}
	// As a Lambda with a 60 s timeout would.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.h.Handle(ctx, ev)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return answer{resp.StatusCode, resp.Headers, resp.Body}
}

// wait posts a runs/wait and returns the run id and the body.
func (c *apiClient) wait(path string, body any) (string, string) {
	c.t.Helper()
	a := c.do("POST", path, body)
	if a.status != 200 {
		c.t.Fatalf("POST %s: %d %s", path, a.status, a.body)
	}
	loc := a.headers["Content-Location"]
	return loc[strings.LastIndex(loc, "/")+1:], strings.TrimSpace(a.body)
}

// The whole AWS shape on the emulator: the API in this process, every run
// through a Standard Step Functions execution whose steps run in the real
// run-worker Lambda (built from functions/run-worker).
func TestEndToEnd(t *testing.T) {
	s := sharedStack(t)
	log := testLog(t)
	app, err := s.Open(lambdaapp.RoleAPI, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	org, _, err := app.Keys.EnsureOrganization(ctx, "e2e-"+uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	key, err := app.Keys.Create(ctx, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	h := lambdaapp.NewHTTPHandler(app.Handler)
	// Room for a slow machine: the flow is under test here, not the budget
	// (internal/lambdaapp tests that).
	h.Budget = 55 * time.Second
	c := &apiClient{t: t, h: h, key: key}
	sc := awssfn.NewFromConfig(s.AWS)
	d, err := sfn.NewDispatcher(sc, s.API.RunStateMachineARN)
	if err != nil {
		t.Fatal(err)
	}
	execution := func(t *testing.T, runID string) *awssfn.DescribeExecutionOutput {
		t.Helper()
		out, err := sc.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(d.ExecutionARN(runID))})
		if err != nil {
			t.Fatalf("the run's execution: %v", err)
		}
		return out
	}
	// settled waits for the execution to end (it may still be in its last
	// transition when the API answered).
	settled := func(t *testing.T, runID string) *awssfn.DescribeExecutionOutput {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			out := execution(t, runID)
			if out.Status != types.ExecutionStatusRunning || time.Now().After(deadline) {
				return out
			}
		}
	}

	t.Run("no plain-http loopback provider", func(t *testing.T) {
		t.Parallel()
		c := &apiClient{t: t, h: c.h, key: c.key}
		a := c.do("POST", "/v2/auth/providers", map[string]any{"provider_id": "local", "name": "Local",
			"client_id": "id", "client_secret": "s", "auth_url": "http://127.0.0.1:9000/authorize", "token_url": "https://idp.example/token"})
		if a.status != 422 || !strings.Contains(a.body, "auth_url") {
			t.Fatalf("http loopback auth_url on AWS: %d %s, want 422 naming auth_url", a.status, a.body)
		}
	})

	t.Run("counter", func(t *testing.T) {
		t.Parallel()
		c := &apiClient{t: t, h: c.h, key: c.key}
		tid := uuid.NewString()
		rid, body := c.wait("/threads/"+tid+"/runs/wait",
			map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 20}, "if_not_exists": "create"})
		if body != `{"count":20,"steps":20}` {
			t.Fatalf("counter answered %s", body)
		}
		if out := settled(t, rid); out.Status != types.ExecutionStatusSucceeded {
			t.Fatalf("execution %s", out.Status)
		}
	})

	t.Run("stateless echo", func(t *testing.T) {
		t.Parallel()
		c := &apiClient{t: t, h: c.h, key: c.key}
		_, body := c.wait("/runs/wait", map[string]any{"assistant_id": "echo",
			"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}})
		if want := `{"messages":[{"content":"hi","role":"user"},{"content":"echo: hi","role":"assistant"}]}`; body != want {
			t.Fatalf("echo answered %s, want %s", body, want)
		}
	})

	// Sizes (docs/aws.md, "Sizes"): a thread whose state passes 1 MB, and a
	// stateless result of almost 5 MB, on the run-worker Lambda with the
	// payload store (DynamoDB keeps pointers; the bucket is S3 on the
	// emulator). Before the payload store, the first never finished on
	// AWS (its run item over 400 KB) and the second answered {}.
	t.Run("state past 1 MB", func(t *testing.T) {
		t.Parallel()
		c := &apiClient{t: t, h: c.h, key: c.key}
		tid := uuid.NewString()
		big := strings.Repeat("0123456789abcdef", 600_000/16) // 600 KB: the state holds it twice
		rid, body := c.wait("/threads/"+tid+"/runs/wait", map[string]any{"assistant_id": "echo", "if_not_exists": "create",
			"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": big}}}})
		want := `{"messages":[{"content":"` + big + `","role":"user"},{"content":"echo: ` + big + `","role":"assistant"}]}`
		if body != want {
			t.Fatalf("the run answered %d bytes, want %d (its state whole)", len(body), len(want))
		}
		if out := settled(t, rid); out.Status != types.ExecutionStatusSucceeded {
			t.Fatalf("execution %s", out.Status)
		}
		state := c.do("GET", "/threads/"+tid+"/state", nil)
		if state.status != 200 || !strings.Contains(state.body, `"echo: `+big+`"`) {
			t.Fatalf("GET state: %d, %d bytes (the 1.2 MB values are not whole)", state.status, len(state.body))
		}
		// The state grows: a second turn adds 600 KB more (1.8 MB).
		more := strings.Repeat("fedcba9876543210", 300_000/16)
		rid2, body2 := c.wait("/threads/"+tid+"/runs/wait", map[string]any{"assistant_id": "echo",
			"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": more}}}})
		if !strings.HasSuffix(body2, `{"content":"echo: `+more+`","role":"assistant"}]}`) || !strings.Contains(body2, `"echo: `+big+`"`) || len(body2) < 1_800_000 {
			t.Fatalf("the second turn answered %d bytes, want the whole 1.8 MB state", len(body2))
		}
		if out := settled(t, rid2); out.Status != types.ExecutionStatusSucceeded {
			t.Fatalf("execution of the second turn %s", out.Status)
		}
		// Its whole history at once is over what a Lambda can answer: a
		// 413 that says how to page, not a gateway 5xx.
		history := c.do("POST", "/threads/"+tid+"/history", map[string]any{"limit": 10})
		if history.status != 413 || !strings.Contains(history.body, "before") {
			t.Fatalf("history of %d bytes at once: %d %.300s, want 413 saying how to page", len(history.body), history.status, history.body)
		}
		// Page by page it reads back whole, newest first.
		var cps []map[string]any
		for before := ""; len(cps) < 20; {
			req := map[string]any{"limit": 1}
			if before != "" {
				req["before"] = map[string]any{"configurable": map[string]any{"checkpoint_id": before}}
			}
			page := c.do("POST", "/threads/"+tid+"/history", req)
			var got []map[string]any
			if err := json.Unmarshal([]byte(page.body), &got); err != nil || page.status != 200 {
				t.Fatalf("history page: %d %.200s (%v)", page.status, page.body, err)
			}
			if len(got) == 0 {
				break
			}
			cps = append(cps, got[0])
			before = fmt.Sprint(got[0]["checkpoint"].(map[string]any)["checkpoint_id"])
		}
		if len(cps) < 4 {
			t.Fatalf("history: %d checkpoints, want those of two turns", len(cps))
		}
		if v := fmt.Sprint(cps[0]["values"]); !strings.Contains(v, "echo: "+more) || !strings.Contains(v, "echo: "+big) {
			t.Fatalf("the latest checkpoint of the history does not hold the whole 1.8 MB state")
		}
		if v := fmt.Sprint(cps[len(cps)-1]["values"]); strings.Contains(v, more) {
			t.Fatalf("the oldest checkpoint holds the second turn's message")
		}
		runs := c.do("GET", "/threads/"+tid+"/runs", nil)
		if runs.status != 200 || strings.Count(runs.body, `"status":"success"`) != 2 {
			t.Fatalf("runs: %d %.300s", runs.status, runs.body)
		}
	})

	t.Run("stateless result of 5 MB", func(t *testing.T) {
		t.Parallel()
		c := &apiClient{t: t, h: c.h, key: c.key}
		big := strings.Repeat("fedcba9876543210", 2_500_000/16) // the result holds it twice: 5,000,084 bytes
		_, body := c.wait("/runs/wait", map[string]any{"assistant_id": "echo",
			"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": big}}}})
		want := `{"messages":[{"content":"` + big + `","role":"user"},{"content":"echo: ` + big + `","role":"assistant"}]}`
		if body != want || len(body) < 5_000_000 {
			t.Fatalf("the stateless run answered %d bytes (%.100s), want %d", len(body), body, len(want))
		}
	})

	t.Run("enqueued", func(t *testing.T) {
		t.Parallel()
		c := &apiClient{t: t, h: c.h, key: c.key}
		tid := uuid.NewString()
		first := c.do("POST", "/threads/"+tid+"/runs", map[string]any{"assistant_id": "counter",
			"input": map[string]any{"steps": 20}, "if_not_exists": "create", "durability": "sync"})
		if first.status != 200 {
			t.Fatalf("create the first run: %d %s", first.status, first.body)
		}
		firstID := first.json(t)["run_id"].(string)
		// Queued behind the first: it starts from where the first ended.
		_, body := c.wait("/threads/"+tid+"/runs/wait", map[string]any{"assistant_id": "counter",
			"input": map[string]any{"steps": 25}, "multitask_strategy": "enqueue"})
		if body != `{"count":25,"steps":25}` {
			t.Fatalf("the queued run answered %s", body)
		}
		joined := c.do("GET", "/threads/"+tid+"/runs/"+firstID+"/join", nil)
		if strings.TrimSpace(joined.body) != `{"count":20,"steps":20}` {
			t.Fatalf("the first run answered %s: it did not run first", joined.body)
		}
		list := c.do("GET", "/threads/"+tid+"/runs", nil)
		if n := strings.Count(list.body, `"status":"success"`); n != 2 {
			t.Fatalf("runs: %s", list.body)
		}
	})

	t.Run("interrupt and resume", func(t *testing.T) {
		t.Parallel()
		c := &apiClient{t: t, h: c.h, key: c.key}
		tid := uuid.NewString()
		_, body := c.wait("/threads/"+tid+"/runs/wait", map[string]any{"assistant_id": "approval",
			"input": map[string]any{"request": "deploy"}, "if_not_exists": "create"})
		var got map[string]any
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		ints, _ := got["__interrupt__"].([]any)
		if got["request"] != "deploy" || len(ints) != 1 || fmt.Sprint(ints[0].(map[string]any)["value"]) != "map[question:approve deploy?]" {
			t.Fatalf("interrupt: %s", body)
		}
		if th := c.do("GET", "/threads/"+tid, nil).json(t); th["status"] != "interrupted" {
			t.Fatalf("thread at the interrupt: %v", th["status"])
		}
		_, body = c.wait("/threads/"+tid+"/runs/wait", map[string]any{"assistant_id": "approval",
			"command": map[string]any{"resume": "yes"}})
		if body != `{"answer":"yes","request":"deploy"}` {
			t.Fatalf("resumed: %s", body)
		}
		if th := c.do("GET", "/threads/"+tid, nil).json(t); th["status"] != "idle" {
			t.Fatalf("thread after resume: %v", th["status"])
		}
	})

	t.Run("aborted execution", func(t *testing.T) {
		t.Parallel()
		c := &apiClient{t: t, h: c.h, key: c.key}
		tid := uuid.NewString()
		created := c.do("POST", "/threads/"+tid+"/runs", map[string]any{"assistant_id": "counter",
			"input": map[string]any{"steps": 3}, "after_seconds": 5, "if_not_exists": "create"})
		if created.status != 200 {
			t.Fatalf("create: %d %s", created.status, created.body)
		}
		rid := created.json(t)["run_id"].(string)
		if _, err := sc.StopExecution(ctx, &awssfn.StopExecutionInput{ExecutionArn: aws.String(d.ExecutionARN(rid))}); err != nil {
			t.Fatalf("stop the execution: %v", err)
		}
		// Not due for 5 s, so no step started it. Step Functions reports
		// the aborted execution to the run worker (the stack's run-failures
		// rule; the emulator emits no such event, so the test sends it as
		// EventBridge would, to the run-worker Lambda), which ends the
		// run: pending, so interrupted, and the thread is free. Its waiter
		// no longer polls DescribeExecution (only after 10 minutes of
		// silence).
		var out *awssfn.DescribeExecutionOutput
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			out = execution(t, rid)
			if out.Status != types.ExecutionStatusRunning || time.Now().After(deadline) {
				break
			}
		}
		if out.Status != types.ExecutionStatusAborted {
			t.Fatalf("stopped execution: %s", out.Status)
		}
		inv, err := lambda.NewFromConfig(s.AWS).Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(s.Prefix + "run-worker"),
			Payload: statusChange(t, out)})
		if err != nil || inv.FunctionError != nil {
			t.Fatalf("the run worker on the report: %v %s", err, inv.Payload)
		}
		joined := c.do("GET", "/threads/"+tid+"/runs/"+rid+"/join", nil)
		if joined.status != 200 || strings.Contains(joined.body, "WaitTimeout") {
			t.Fatalf("join answered %d %q, want the ended run", joined.status, joined.body)
		}
		run := c.do("GET", "/threads/"+tid+"/runs/"+rid, nil).json(t)
		if run["status"] != "interrupted" {
			t.Fatalf("run status %v, want interrupted (it was pending)", run["status"])
		}
		if th := c.do("GET", "/threads/"+tid, nil).json(t); th["status"] == "busy" {
			t.Fatalf("thread status %v", th["status"])
		}
	})

	t.Run("worker crash", func(t *testing.T) {
		t.Parallel()
		c := &apiClient{t: t, h: c.h, key: c.key}
		tid := uuid.NewString()
		// The run-worker process exits abruptly after storing the thread's
		// 5th checkpoint; the state machine retries the step, which resumes
		// from that checkpoint.
		if err := os.WriteFile(filepath.Join(faultDir, tid+".exit-after"), []byte("5"), 0o600); err != nil {
			t.Fatal(err)
		}
		rid, body := c.wait("/threads/"+tid+"/runs/wait", map[string]any{"assistant_id": "counter",
			"input": map[string]any{"steps": 12}, "if_not_exists": "create", "durability": "sync"})
		if _, err := os.Stat(filepath.Join(faultDir, tid+".exited")); err != nil {
			t.Fatalf("the worker did not crash: %v", err)
		}
		if body != `{"count":12,"steps":12}` {
			t.Fatalf("after the crash the run answered %s", body)
		}
		if out := settled(t, rid); out.Status != types.ExecutionStatusSucceeded {
			t.Fatalf("execution %s", out.Status)
		}
		hist, err := sc.GetExecutionHistory(ctx, &awssfn.GetExecutionHistoryInput{ExecutionArn: aws.String(d.ExecutionARN(rid))})
		if err != nil {
			t.Fatal(err)
		}
		failed := 0
		for _, e := range hist.Events {
			if e.Type == types.HistoryEventTypeTaskFailed {
				failed++
			}
		}
		if failed != 1 {
			t.Fatalf("%d failed tasks in the execution, want the one crash", failed)
		}
		// Every step is in the thread's history exactly once.
		h := c.do("POST", "/threads/"+tid+"/history", map[string]any{"limit": 100})
		var states []map[string]any
		if err := json.Unmarshal([]byte(h.body), &states); err != nil {
			t.Fatalf("history: %v %s", err, h.body)
		}
		seen := map[string]bool{}
		for _, st := range states {
			id := fmt.Sprint(st["checkpoint"].(map[string]any)["checkpoint_id"])
			if seen[id] {
				t.Fatalf("checkpoint %s twice in the history", id)
			}
			seen[id] = true
		}
	})
}

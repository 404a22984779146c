package pyapp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/pyapp"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// processInvoker is a Lambda function made of the runtime's handler, each
// invocation in a new process (`python -m stepgraph_runtime.lambda_handler`):
// nothing survives from one call to the next, as on Lambda.
type processInvoker struct {
	python, runtimeDir, config string
	calls                      atomic.Int32
}

func (p *processInvoker) InvokeFunction(ctx context.Context, function string, payload []byte) ([]byte, error) {
	p.calls.Add(1)
	cmd := exec.CommandContext(ctx, p.python, "-m", "stepgraph_runtime.lambda_handler", "--config", p.config)
	cmd.Env = []string{"PYTHONPATH=" + p.runtimeDir, "PATH=/usr/bin:/bin"}
	cmd.Stdin = bytes.NewReader(payload)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("function %s failed: %v: %s", function, err, stderr.Bytes())
	}
	return out, nil
}

// perProcessDeadline bounds a run whose every call starts Python and
// imports LangGraph anew (several seconds each on a loaded machine).
const perProcessDeadline = 15 * time.Minute

func lambdaRuntime(t *testing.T) (*pyapp.LambdaClient, *processInvoker) {
	inv := &processInvoker{python: python(t), runtimeDir: filepath.Join(repoRoot(t), "runtimes", "python"), config: basicApp(t)}
	return &pyapp.LambdaClient{Function: "arn:aws:lambda:us-east-1:000000000000:function:app", Invoker: inv}, inv
}

// scenario is what both transports run: an agent with tool calls, an
// interrupt and its resume, a map-reduce with Send, then update_state on it.
type scenario struct {
	name  string
	steps []string // run bodies, in order, on one thread
	// update, when set, is applied after the steps, then the thread runs once more
	update *runs.StateUpdate
}

var scenarios = []scenario{
	{name: "agent", steps: []string{`{"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "weather in Paris?"}]}}`}},
	{name: "hitl", steps: []string{`{"assistant_id": "hitl", "input": {"topic": "cats"}}`, `{"assistant_id": "hitl", "command": {"resume": "yes"}}`}},
	{name: "mapreduce", steps: []string{`{"assistant_id": "mapreduce", "input": {"subjects": ["owls", "cats", "bees"]}}`},
		update: &runs.StateUpdate{Values: json.RawMessage(`{"jokes": ["a pun"]}`), AsNode: ptr("joke")}},
}

// play runs a scenario on e and answers what must not depend on the
// transport: every run's answer, the thread's state and its history, with
// the ids and times of one execution left out.
// playBoth plays every scenario on want and on got, requires the same
// transcripts (labelled wantName and gotName when they differ) and returns
// how many runs the scenarios made.
func playBoth(t *testing.T, want, got *env, wantName, gotName string) (runsMade int) {
	t.Helper()
	for _, sc := range scenarios {
		runsMade += len(sc.steps)
		if sc.update != nil {
			runsMade++
		}
		w, g := want.play(t, sc), got.play(t, sc)
		if !reflect.DeepEqual(w, g) {
			t.Errorf("%s differs:\n%s  %v\n%s  %v", sc.name, wantName, w, gotName, g)
		}
	}
	return runsMade
}

func (e *env) play(t *testing.T, sc scenario) []any {
	t.Helper()
	th := e.thread(t)
	var seen []any
	for _, body := range sc.steps {
		seen = append(seen, e.wait(t, th, body))
	}
	if sc.update != nil {
		if _, err := e.runs.UpdateState(context.Background(), "org", th, *sc.update); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, e.wait(t, th, `{"assistant_id": "`+sc.name+`"}`))
	}
	st, err := e.runs.ThreadState(context.Background(), "org", th)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := e.runs.History(context.Background(), "org", th, runs.HistoryQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	seen = append(seen, shape(st))
	for _, h := range hist {
		seen = append(seen, shape(h))
	}
	return withoutIDs(seen)
}

func shape(st runs.ThreadState) map[string]any {
	var tasks []any
	for _, tk := range st.Tasks {
		tasks = append(tasks, map[string]any{"name": tk.Name, "interrupts": tk.Interrupts})
	}
	return map[string]any{"values": st.Values, "next": st.Next, "tasks": tasks, "interrupts": len(st.Interrupts),
		"step": st.Metadata["step"], "source": st.Metadata["source"]}
}

// withoutIDs is v as JSON data without the keys that name one execution
// (message, run, thread, checkpoint and interrupt ids, times).
func withoutIDs(v any) []any {
	b, _ := json.Marshal(v)
	var out []any
	_ = json.Unmarshal(b, &out)
	var strip func(any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k := range x {
				switch k {
				case "id", "run_id", "thread_id", "checkpoint_id", "created_at", "tool_call_id":
					delete(x, k)
				default:
					x[k] = strip(x[k])
				}
			}
		case []any:
			for i := range x {
				x[i] = strip(x[i])
			}
		}
		return v
	}
	return strip(out).([]any)
}

// TestLambdaTransportAnswersAsHTTP: the same app, the same runs, over the
// HTTP runtime and over the Lambda handler (a new process per invocation):
// the same descriptions, answers, states and histories.
func TestLambdaTransportAnswersAsHTTP(t *testing.T) {
	p := startRuntime(t, basicApp(t))
	lc, inv := lambdaRuntime(t)
	ctx := context.Background()
	for _, xray := range []any{false, true} {
		overHTTP, err := p.Describe(ctx, "", xray)
		if err != nil {
			t.Fatal(err)
		}
		overLambda, err := lc.Describe(ctx, "", xray)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(overHTTP, overLambda) {
			t.Errorf("describe (xray %v) differs:\nHTTP   %v\nLambda %v", xray, overHTTP, overLambda)
		}
	}
	if graphs, err := lc.Health(ctx); err != nil || len(graphs) != 6 {
		t.Errorf("health over Lambda: %v %v", graphs, err)
	}
	httpEnv := newEnvWith(t, filepath.Join(t.TempDir(), "db"), p, nil)
	lambdaEnv := newEnvWith(t, filepath.Join(t.TempDir(), "db"), lc, nil)
	lambdaEnv.deadline = perProcessDeadline
	for _, sc := range scenarios {
		want, got := httpEnv.play(t, sc), lambdaEnv.play(t, sc)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s differs:\nHTTP   %v\nLambda %v", sc.name, want, got)
		}
	}
	// a refused request is the runtime's 400 over either transport
	_, err := lc.State(ctx, pyapp.StateRequest{Graph: "nope", ThreadID: "t"})
	var reqErr *pyapp.RequestError
	if !asRequestError(err, &reqErr) || reqErr.Detail != "graph: no graph 'nope' in langgraph.json (it has agent, hitl, mapreduce, memory, parent, slow)" {
		t.Errorf("state of an unknown graph over Lambda: %v", err)
	}
	t.Logf("%d invocations", inv.calls.Load())
}

// TestRunsContinueAcrossInvocations: with the smallest budget every call
// yields after one superstep and the next invocation continues from the
// stored checkpoint; the answers, states and histories are those of runs
// made in one call each.
func TestRunsContinueAcrossInvocations(t *testing.T) {
	p := startRuntime(t, basicApp(t))
	lc, inv := lambdaRuntime(t)
	once := newEnvWith(t, filepath.Join(t.TempDir(), "db"), p, nil)
	stepwise := newEnvWith(t, filepath.Join(t.TempDir(), "db"), lc, &pyapp.YieldBudget{Bytes: 1})
	stepwise.deadline = perProcessDeadline
	runsMade := playBoth(t, once, stepwise, "one call", "stepwise")
	if n := int(inv.calls.Load()); n < 2*runsMade {
		t.Errorf("%d invocations for %d runs: the runs did not yield", n, runsMade)
	}
}

func asRequestError(err error, target **pyapp.RequestError) bool { return errors.As(err, target) }

// recordingInvoker answers every call with an app of one graph and keeps
// the payloads.
type recordingInvoker struct{ payloads []map[string]any }

func (r *recordingInvoker) InvokeFunction(_ context.Context, _ string, payload []byte) ([]byte, error) {
	var p map[string]any
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, err
	}
	r.payloads = append(r.payloads, p)
	return []byte(`{"status": 200, "body": {"graphs": ["agent"]}}`), nil
}

// A client with the deployment's secrets sends them with every call, as
// the event's "secrets" (the handler's os.environ for that call:
// runtimes/python test_secrets_are_the_environment_of_one_call); one
// without sends no such key.
func TestLambdaClientSendsSecretsPerCall(t *testing.T) {
	inv := &recordingInvoker{}
	with := &pyapp.LambdaClient{Function: "app", Invoker: inv, Secrets: map[string]string{"OPENAI_API_KEY": "sk-1"}}
	without := &pyapp.LambdaClient{Function: "app", Invoker: inv}
	for _, c := range []*pyapp.LambdaClient{with, without} {
		if ids, err := c.Health(context.Background()); err != nil || !reflect.DeepEqual(ids, []string{"agent"}) {
			t.Fatalf("Health: %v, %v", ids, err)
		}
	}
	if got, _ := json.Marshal(inv.payloads[0]["secrets"]); string(got) != `{"OPENAI_API_KEY":"sk-1"}` {
		t.Errorf("secrets sent %s, want the deployment's", got)
	}
	if _, ok := inv.payloads[1]["secrets"]; ok {
		t.Errorf("a client without secrets sent %v", inv.payloads[1])
	}
}

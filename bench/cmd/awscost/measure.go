package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/stepgraph/stepgraph/bench/cmd/awscost/internal/chatgraph"
	"github.com/stepgraph/stepgraph/bench/cmd/awscost/internal/meter"
	"github.com/stepgraph/stepgraph/internal/dispatch/sfn"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/lambdaapp/sample"
)

// apiFn is the name the in-process API's meter records its calls under;
// each request is attributed to its function by route (lambdaapp.Functions).
const apiFn = "api"

// bench is the stack on the emulator and the metered API in this process.
type bench struct {
	root    string
	work    string
	emu     *sample.Emulator
	stack   *sample.Stack
	app     *lambdaapp.App
	handler *lambdaapp.HTTPHandler
	meter   *meter.Recorder
	apiLogs *meter.CountingWriter
	key     string
	routes  *http.ServeMux
	sfn     *awssfn.Client // not metered: the measurement's own reads
	disp    *sfn.Dispatcher
	records string
	offset  int64

	mu       sync.Mutex
	apiCalls []meter.Call
}

// setup builds the metered run-worker (and the deploy-worker the stack
// needs), starts MiniStack on a free 127.0.0.1 port, deploys the tables,
// workers and state machines as the end-to-end tests do, and wires the API
// in this process with a meter.
func setup(ctx context.Context, root string, express bool, logf func(string, ...any)) (_ *bench, err error) {
	b := &bench{root: root}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if b.work, err = os.MkdirTemp("", "stepgraph-awscost-"); err != nil {
		return nil, err
	}
	bin := filepath.Join(b.work, "bin")
	logf("building the metered run-worker and the deploy-worker (linux/%s)", runtime.GOARCH)
	if err := buildWorkers(ctx, root, bin); err != nil {
		return nil, err
	}
	logf("starting MiniStack on 127.0.0.1")
	if b.emu, err = sample.StartMiniStack(root); err != nil {
		return nil, err
	}
	b.records = filepath.Join(b.work, "records.jsonl")
	prefix := "awscost-" + randomHex(4) + "-"
	logf("deploying the stack (prefix %s) on %s", prefix, b.emu.URL)
	b.stack, err = sample.Deploy(ctx, b.emu.Config, sample.Options{
		Prefix: prefix, Bootstraps: bin, WorkerTimeout: 60,
		WorkerEnv:   map[string]string{meter.EnvRecords: b.records},
		ExpressRuns: express,
	})
	if err != nil {
		return nil, fmt.Errorf("deploy the stack on MiniStack: %w", err)
	}
	cfg := b.emu.Config.Copy()
	b.meter = meter.New(apiFn, cfg, b.stack.API.TablePrefix, b.addAPICall)
	b.meter.Attach(&cfg)
	b.apiLogs = &meter.CountingWriter{W: io.Discard}
	if b.app, err = lambdaapp.Open(b.stack.API, cfg, lambdaapp.NewLogger(b.apiLogs, b.stack.API.LogLevel).With("function", apiFn)); err != nil {
		return nil, err
	}
	// The chat workloads' three-node graph (the metered run-worker
	// registers it too).
	if err := b.app.Runs.Graphs.Register(chatgraph.New()); err != nil {
		return nil, err
	}
	b.meter.SetPhase("setup")
	org, _, err := b.app.Keys.EnsureOrganization(ctx, "awscost")
	if err != nil {
		return nil, err
	}
	if b.key, err = b.app.Keys.Create(ctx, org.ID); err != nil {
		return nil, err
	}
	b.meter.SetPhase(meter.PhaseInvoke)
	b.handler = lambdaapp.NewHTTPHandler(b.app.Handler)
	b.sfn = awssfn.NewFromConfig(b.emu.Config)
	if b.disp, err = sfn.NewDispatcher(b.sfn, b.stack.API.RunStateMachineARN); err != nil {
		return nil, err
	}
	if express {
		if err := b.disp.UseExpress(b.stack.API.RunExpressStateMachineARN); err != nil {
			return nil, err
		}
	}
	if b.routes, err = routeMux(); err != nil {
		return nil, err
	}
	return b, nil
}

// close stops MiniStack (and the Lambda processes it started) and removes
// the work directory.
func (b *bench) close() {
	if b.emu != nil {
		b.emu.Stop()
		b.emu = nil
	}
	if b.work != "" {
		os.RemoveAll(b.work)
		b.work = ""
	}
}

func (b *bench) addAPICall(c meter.Call) {
	b.mu.Lock()
	b.apiCalls = append(b.apiCalls, c)
	b.mu.Unlock()
}

func (b *bench) apiCallCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.apiCalls)
}

func (b *bench) apiCallsSince(i int) ([]meter.Call, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]meter.Call(nil), b.apiCalls[i:]...), len(b.apiCalls)
}

// buildWorkers compiles bench/cmd/awscost/runworker as run-worker and
// functions/deploy-worker, as `make lambdas` does but for this machine (the
// emulator runs them as local processes).
func buildWorkers(ctx context.Context, root, bin string) error {
	out := filepath.Join(bin, ".build")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w",
		"-o", out+string(filepath.Separator), "./bench/cmd/awscost/runworker", "./functions/deploy-worker")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the workers: %w\n%s", err, b)
	}
	for from, to := range map[string]string{"runworker": "run-worker", "deploy-worker": "deploy-worker"} {
		if err := os.MkdirAll(filepath.Join(bin, to), 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(out, from), filepath.Join(bin, to, "bootstrap")); err != nil {
			return err
		}
	}
	return os.RemoveAll(out)
}

// routeMux maps a request to the function serving its route, as API
// Gateway does with the routes of lambdaapp.Functions.
func routeMux() (mux *http.ServeMux, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the routes of lambdaapp.Functions: %v", p)
		}
	}()
	mux = http.NewServeMux()
	for _, f := range lambdaapp.Functions {
		for _, r := range f.Routes {
			mux.Handle(r, http.NotFoundHandler())
		}
	}
	return mux, nil
}

func (b *bench) functionOf(method, path string) string {
	req, _ := http.NewRequest(method, path, nil)
	_, pattern := b.routes.Handler(req)
	for _, f := range lambdaapp.Functions {
		for _, r := range f.Routes {
			if r == pattern {
				return f.Name
			}
		}
	}
	return ""
}

// Request is one API request of an iteration: one API Gateway request and
// one invocation of the function its route goes to.
type Request struct {
	Fn     string `json:"fn"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Status int    `json:"status"`
	// Wall is the handler's duration; Overhead the meter's part; Micros the
	// difference, the billed duration.
	WallMicros     int64 `json:"wall_us"`
	OverheadMicros int64 `json:"overhead_us"`
	Micros         int64 `json:"us"`
	ReqBytes       int   `json:"request_bytes"`
	RespBytes      int   `json:"response_bytes"`
	LogBytes       int64 `json:"log_bytes"`
	// StartUnixMicros: when the request was handed to the function.
	StartUnixMicros int64 `json:"start_unix_us"`
	// GetItems: the DynamoDB GetItem calls the request made.
	GetItems int `json:"getitems"`
	// RunID of a runs/wait (from Content-Location).
	RunID string `json:"run_id,omitempty"`
	body  string
}

// call sends one request to the API handler as API Gateway would.
func (b *bench) call(ctx context.Context, method, path string, body any) (Request, error) {
	r := Request{Fn: b.functionOf(method, path), Method: method, Path: path}
	if r.Fn == "" {
		return r, fmt.Errorf("%s %s: no function serves this route", method, path)
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: path,
		Headers: map[string]string{"x-api-key": b.key, "accept": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{Stage: "$default", DomainName: "api.example",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, SourceIP: "192.0.2.1"}},
	}
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return r, err
		}
		ev.Body = string(raw)
		ev.Headers["content-type"] = "application/json"
	}
	r.ReqBytes = len(ev.Body)
	// As an API function of the stack: 29 s timeout (infra/stack).
	ctx, cancel := context.WithTimeout(ctx, 29*time.Second)
	defer cancel()
	mark := b.apiCallCount()
	t0, o0, l0 := time.Now(), b.meter.Overhead(), b.apiLogs.N()
	r.StartUnixMicros = t0.UnixMicro()
	resp, err := b.handler.Handle(ctx, ev)
	wall, overhead := time.Since(t0), b.meter.Overhead()-o0
	calls, _ := b.apiCallsSince(mark)
	for _, c := range calls {
		if c.Op == "GetItem" {
			r.GetItems++
		}
	}
	r.WallMicros, r.OverheadMicros = wall.Microseconds(), overhead.Microseconds()
	r.Micros = max(0, (wall - overhead).Microseconds())
	r.LogBytes = b.apiLogs.N() - l0
	if err != nil {
		return r, fmt.Errorf("%s %s: %w", method, path, err)
	}
	r.Status, r.RespBytes, r.body = resp.StatusCode, len(resp.Body), resp.Body
	if loc := resp.Headers["Content-Location"]; strings.Contains(path, "/runs/wait") && loc != "" {
		r.RunID = loc[strings.LastIndex(loc, "/")+1:]
	}
	if r.Status != http.StatusOK {
		return r, fmt.Errorf("%s %s: status %d: %s", method, path, r.Status, clip(resp.Body))
	}
	return r, nil
}

// Execution is what one run's Step Functions execution did, from its
// history.
type Execution struct {
	RunID  string `json:"run_id"`
	Status string `json:"status"`
	// Express: an execution of the run machine's Express front, billed by
	// request and duration, not by transition.
	Express bool `json:"express,omitempty"`
	// StatesEntered counts the *StateEntered events; Retries the task
	// attempts beyond the first of each state entry (TaskScheduled events
	// minus Task states entered). Transitions, the billed count, is their
	// sum.
	StatesEntered int            `json:"states_entered"`
	Retries       int            `json:"retries"`
	Transitions   int            `json:"transitions"`
	LambdaTasks   int            `json:"lambda_tasks"` // TaskScheduled on a Lambda: one invocation each
	States        map[string]int `json:"states"`       // entries per state name
	DurationMs    float64        `json:"duration_ms"`  // ExecutionStarted to its end
}

// executions waits for the run's executions to end and reads their
// histories: with the Express front, its Express execution, then the
// Standard one it handed the run to, if any (the emulator describes
// Express executions, AWS does not); without, the Standard one.
func (b *bench) executions(ctx context.Context, runID string) ([]Execution, error) {
	var out []Execution
	if arn := b.disp.ExpressExecutionARN(runID); arn != "" {
		e, err := b.execution(ctx, runID, arn)
		var missing *sfntypes.ExecutionDoesNotExist
		switch {
		case errors.As(err, &missing): // a Standard run (after_seconds)
		case err != nil:
			return nil, err
		default:
			e.Express = true
			out = append(out, e)
			_, err := b.sfn.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(b.disp.ExecutionARN(runID))})
			if errors.As(err, &missing) {
				return out, nil // done in Express
			}
		}
	}
	e, err := b.execution(ctx, runID, b.disp.ExecutionARN(runID))
	if err != nil {
		return nil, err
	}
	return append(out, e), nil
}

// execution waits for the execution executionARN of a run to end and
// reads its history.
func (b *bench) execution(ctx context.Context, runID, executionARN string) (Execution, error) {
	e := Execution{RunID: runID, States: map[string]int{}}
	arn := aws.String(executionARN)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := b.sfn.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: arn})
		if err != nil {
			return e, fmt.Errorf("the execution of run %s: %w", runID, err)
		}
		if out.Status != sfntypes.ExecutionStatusRunning {
			e.Status = string(out.Status)
			break
		}
		if time.Now().After(deadline) {
			return e, fmt.Errorf("the execution of run %s is still running after 2 minutes", runID)
		}
		select {
		case <-ctx.Done():
			return e, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	var first, last time.Time
	taskEntered, scheduled := 0, 0
	p := awssfn.NewGetExecutionHistoryPaginator(b.sfn, &awssfn.GetExecutionHistoryInput{ExecutionArn: arn})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return e, fmt.Errorf("the history of run %s: %w", runID, err)
		}
		for _, ev := range page.Events {
			if ts := aws.ToTime(ev.Timestamp); !ts.IsZero() {
				if first.IsZero() {
					first = ts
				}
				last = ts
			}
			t := string(ev.Type)
			switch {
			case strings.HasSuffix(t, "StateEntered"):
				e.StatesEntered++
				if t == string(sfntypes.HistoryEventTypeTaskStateEntered) {
					taskEntered++
				}
				if d := ev.StateEnteredEventDetails; d != nil {
					e.States[aws.ToString(d.Name)]++
				}
			case ev.Type == sfntypes.HistoryEventTypeTaskScheduled:
				scheduled++
				if d := ev.TaskScheduledEventDetails; d != nil && aws.ToString(d.ResourceType) == "lambda" {
					e.LambdaTasks++
				}
			case ev.Type == sfntypes.HistoryEventTypeLambdaFunctionScheduled:
				scheduled++
				e.LambdaTasks++
			}
		}
	}
	e.Retries = max(0, scheduled-taskEntered)
	e.Transitions = e.StatesEntered + e.Retries
	if !first.IsZero() {
		e.DurationMs = float64(last.Sub(first).Microseconds()) / 1000
	}
	return e, nil
}

// workerRecords reads the workers' records written since the last read,
// waiting (briefly) until want invocations are there. Replayed events
// (meter.PhaseReplay) are dropped, and counted.
func (b *bench) workerRecords(ctx context.Context, want int) (meter.Records, int, error) {
	var all meter.Records
	replays := 0
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, off, err := meter.ReadRecords(b.records, b.offset)
		if err != nil {
			return all, replays, err
		}
		b.offset = off
		all.Calls = append(all.Calls, rec.Calls...)
		for _, inv := range rec.Invocations {
			if inv.Replay {
				replays++
				continue
			}
			all.Invocations = append(all.Invocations, inv)
		}
		if len(all.Invocations) >= want || time.Now().After(deadline) {
			return all, replays, nil
		}
		select {
		case <-ctx.Done():
			return all, replays, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Iteration is everything one iteration of a workload consumed.
type Iteration struct {
	Requests    []Request          `json:"-"`
	Executions  []Execution        `json:"-"`
	Invocations []meter.Invocation `json:"-"`
	// Replays: events MiniStack handed the run-worker again after it had
	// answered them (dropped, with their calls: see meter.PhaseReplay).
	Replays int `json:"emulator_replays,omitempty"`
	// Calls and Usage are summed up in the workload's mean usage; only
	// the iteration's cost is kept in the results file.
	Calls   []meter.Call `json:"-"`
	Usage   Usage        `json:"-"`
	Dollars float64      `json:"dollars"`
	// Billed durations (ms): each API request's, each run-worker
	// invocation's.
	RequestMs []float64 `json:"request_ms"`
	WorkerMs  []float64 `json:"worker_ms"`
}

// iterate runs one iteration of w and collects what it consumed.
func (b *bench) iterate(ctx context.Context, w *Workload, tag string) (*Iteration, error) {
	mark := b.apiCallCount()
	// Anything a worker wrote before this iteration is not ours.
	if _, _, err := b.workerRecords(ctx, 0); err != nil {
		return nil, err
	}
	it := &Iteration{}
	do := func(method, path string, body any) (Request, error) {
		r, err := b.call(ctx, method, path, body)
		it.Requests = append(it.Requests, r)
		return r, err
	}
	if err := w.Do(do, tag); err != nil {
		return it, err
	}
	lambdaTasks := 0
	for _, r := range it.Requests {
		if r.RunID == "" {
			continue
		}
		es, err := b.executions(ctx, r.RunID)
		if err != nil {
			return it, err
		}
		for _, e := range es {
			if e.Status != string(sfntypes.ExecutionStatusSucceeded) {
				return it, fmt.Errorf("run %s: execution %s", r.RunID, e.Status)
			}
			lambdaTasks += e.LambdaTasks
			it.Executions = append(it.Executions, e)
		}
	}
	rec, replays, err := b.workerRecords(ctx, lambdaTasks)
	if err != nil {
		return it, err
	}
	it.Replays = replays
	if len(rec.Invocations) != lambdaTasks {
		b, _ := json.Marshal(rec.Invocations)
		return it, fmt.Errorf("%d run-worker invocations recorded, %d Lambda tasks in the executions' histories: %s", len(rec.Invocations), lambdaTasks, b)
	}
	api, _ := b.apiCallsSince(mark)
	it.Invocations = rec.Invocations
	it.Calls = append(api, rec.Calls...)
	return it, nil
}

func randomHex(n int) string {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		panic(err)
	}
	return hex.EncodeToString(buf)
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

var errWrong = errors.New("wrong answer")

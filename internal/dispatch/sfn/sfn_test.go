package sfn

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/reqid"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store"
)

// The ports sfn implements.
var (
	_ runs.Dispatcher         = (*Dispatcher)(nil)
	_ deployments.Provisioner = (*Provisioner)(nil)
)

const testMachine = "arn:aws:states:eu-west-1:123456789012:stateMachine:runs"

// fakeAPI records calls and answers from its fields.
type fakeAPI struct {
	mu        sync.Mutex
	starts    []*awssfn.StartExecutionInput
	describes []string
	startErr  error
	status    types.ExecutionStatus
	descErr   error
}

func (f *fakeAPI) StartExecution(_ context.Context, in *awssfn.StartExecutionInput, _ ...func(*awssfn.Options)) (*awssfn.StartExecutionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, in)
	if f.startErr != nil {
		return nil, f.startErr
	}
	return &awssfn.StartExecutionOutput{ExecutionArn: aws.String("arn:x")}, nil
}

func (f *fakeAPI) ListExecutions(context.Context, *awssfn.ListExecutionsInput, ...func(*awssfn.Options)) (*awssfn.ListExecutionsOutput, error) {
	return &awssfn.ListExecutionsOutput{}, nil
}

func (f *fakeAPI) DescribeExecution(_ context.Context, in *awssfn.DescribeExecutionInput, _ ...func(*awssfn.Options)) (*awssfn.DescribeExecutionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.describes = append(f.describes, aws.ToString(in.ExecutionArn))
	if f.descErr != nil {
		return nil, f.descErr
	}
	return &awssfn.DescribeExecutionOutput{Status: f.status}, nil
}

func TestParseMachine(t *testing.T) {
	m, err := parseMachine(testMachine)
	if err != nil {
		t.Fatal(err)
	}
	if want := "arn:aws:states:eu-west-1:123456789012:execution:runs:"; m.execPrefix != want {
		t.Errorf("exec prefix %q, want %q", m.execPrefix, want)
	}
	for _, bad := range []string{"", "runs", "arn:aws:states:eu-west-1:123456789012:activity:runs",
		"arn:aws:lambda:eu-west-1:123456789012:stateMachine:runs", testMachine + ":1", "arn:aws:states:::stateMachine:runs"} {
		if _, err := parseMachine(bad); err == nil {
			t.Errorf("parseMachine(%q) accepted", bad)
		}
	}
	if _, err := NewDispatcher(&fakeAPI{}, "nope"); err == nil {
		t.Error("NewDispatcher accepted a bad ARN")
	}
	if _, err := NewProvisioner(&fakeAPI{}, "nope", nil); err == nil {
		t.Error("NewProvisioner accepted a bad ARN")
	}
}

func TestDispatch(t *testing.T) {
	api := &fakeAPI{}
	d, err := NewDispatcher(api, testMachine)
	if err != nil {
		t.Fatal(err)
	}
	run := store.Run{ID: "0190b3e0-0000-7000-8000-000000000001"}
	if err := d.Dispatch(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	in := api.starts[0]
	if aws.ToString(in.StateMachineArn) != testMachine || aws.ToString(in.Name) != run.ID ||
		aws.ToString(in.Input) != `{"run_id":"`+run.ID+`","wait_seconds":0}` {
		t.Errorf("StartExecution(%s, %s, %s)", aws.ToString(in.StateMachineArn), aws.ToString(in.Name), aws.ToString(in.Input))
	}

	// The id of the request that queued the run goes with it (reqid).
	if err := d.Dispatch(reqid.With(context.Background(), "req-42"), run); err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(api.starts[1].Input); got != `{"run_id":"`+run.ID+`","request_id":"req-42","wait_seconds":0}` {
		t.Errorf("StartExecution input with a request id: %s", got)
	}

	// The run's organization goes with it: the run worker's tenant
	// session is that organization's.
	owned := store.Run{ID: run.ID, OrgID: "0b0e0f3c-8d6a-4a53-9e1f-1c2d3e4f5a6b"}
	if err := d.Dispatch(context.Background(), owned); err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(api.starts[2].Input); got != `{"run_id":"`+run.ID+`","org_id":"`+owned.OrgID+`","wait_seconds":0}` {
		t.Errorf("StartExecution input of a run with its organization: %s", got)
	}

	api.startErr = &types.ExecutionAlreadyExists{Message: aws.String("exists")}
	if err := d.Dispatch(context.Background(), run); err != nil {
		t.Errorf("an existing execution is success, got %v", err)
	}
	api.startErr = &types.StateMachineDoesNotExist{Message: aws.String("gone")}
	if err := d.Dispatch(context.Background(), run); err == nil || !strings.Contains(err.Error(), run.ID) {
		t.Errorf("a failed start must fail naming the run, got %v", err)
	}
}

const testExpress = "arn:aws:states:eu-west-1:123456789012:stateMachine:runs-express"

// With an Express front, a run that can start now starts there (named
// after the run, the same input); one with after_seconds, or behind
// another run of its thread, on Standard.
func TestDispatchExpress(t *testing.T) {
	api := &fakeAPI{}
	d, _ := NewDispatcher(api, testMachine)
	if err := d.UseExpress("nope"); err == nil {
		t.Fatal("UseExpress accepted a bad ARN")
	}
	if err := d.UseExpress(testExpress); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	startsNow := store.Run{ID: "r-now", CreatedAt: now, NotBefore: now}
	later := store.Run{ID: "r-later", CreatedAt: now, NotBefore: now.Add(time.Second)}
	behind := store.Run{ID: "r-behind", CreatedAt: now, NotBefore: now, Behind: true}
	for _, r := range []store.Run{startsNow, later, behind} {
		if err := d.Dispatch(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if got := aws.ToString(api.starts[0].StateMachineArn); got != testExpress || aws.ToString(api.starts[0].Name) != "r-now" ||
		aws.ToString(api.starts[0].Input) != `{"run_id":"r-now","wait_seconds":0}` {
		t.Errorf("a run that can start now started on %s as %s with %s, want Express", got,
			aws.ToString(api.starts[0].Name), aws.ToString(api.starts[0].Input))
	}
	if got := aws.ToString(api.starts[1].StateMachineArn); got != testMachine {
		t.Errorf("a run with after_seconds started on %s, want Standard", got)
	}
	if got := aws.ToString(api.starts[2].StateMachineArn); got != testMachine {
		t.Errorf("a run behind another run of its thread started on %s, want Standard", got)
	}
	if got, want := d.ExpressExecutionARN("r1"), "arn:aws:states:eu-west-1:123456789012:execution:runs-express:r1"; got != want {
		t.Errorf("ExpressExecutionARN %s, want %s", got, want)
	}
}

// The lost check asks about the Standard execution only, and a missing one
// is not lost while the run's Express execution may still carry it.
func TestLostExpress(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	api := &fakeAPI{descErr: &types.ExecutionDoesNotExist{Message: aws.String("no")}}
	d, _ := NewDispatcher(api, testMachine)
	if err := d.UseExpress(testExpress); err != nil {
		t.Fatal(err)
	}
	d.Now = func() time.Time { return now }
	express := func(age time.Duration) store.Run {
		return store.Run{ID: "r1", CreatedAt: now.Add(-age), NotBefore: now.Add(-age)}
	}
	for _, age := range []time.Duration{time.Minute, 5 * time.Minute, ExpressGrace} {
		if lost, err := d.Lost(context.Background(), express(age)); err != nil || lost {
			t.Errorf("an Express run %v old without a Standard execution: lost %v, %v; want not lost", age, lost, err)
		}
	}
	if lost, err := d.Lost(context.Background(), express(ExpressGrace+time.Second)); err != nil || !lost {
		t.Errorf("an Express run past its grace without a Standard execution: lost %v, %v; want lost", lost, err)
	}
	standard := store.Run{ID: "r1", CreatedAt: now.Add(-time.Minute), NotBefore: now.Add(-time.Minute + time.Second)}
	if lost, err := d.Lost(context.Background(), standard); err != nil || !lost {
		t.Errorf("a Standard run a minute old without its execution: lost %v, %v; want lost", lost, err)
	}
	for _, arn := range api.describes {
		if arn != d.ExecutionARN("r1") {
			t.Errorf("described %s, want the Standard execution only", arn)
		}
	}
	api.descErr, api.status = nil, types.ExecutionStatusRunning
	if lost, err := d.Lost(context.Background(), express(time.Hour)); err != nil || lost {
		t.Errorf("an Express run handed over to a running execution: lost %v, %v", lost, err)
	}
}

func TestLost(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	api := &fakeAPI{}
	d, _ := NewDispatcher(api, testMachine)
	d.Now = func() time.Time { return now }
	fresh := store.Run{ID: "r1", CreatedAt: now.Add(-5 * time.Second)}
	old := store.Run{ID: "r1", CreatedAt: now.Add(-time.Minute)}

	for _, tc := range []struct {
		status types.ExecutionStatus
		lost   bool
	}{
		{types.ExecutionStatusRunning, false},
		{types.ExecutionStatusPendingRedrive, false},
		{types.ExecutionStatusSucceeded, true},
		{types.ExecutionStatusFailed, true},
		{types.ExecutionStatusTimedOut, true},
		{types.ExecutionStatusAborted, true},
	} {
		api.status = tc.status
		lost, err := d.Lost(context.Background(), old)
		if err != nil || lost != tc.lost {
			t.Errorf("%s: lost %v, %v; want %v", tc.status, lost, err, tc.lost)
		}
	}
	if want := "arn:aws:states:eu-west-1:123456789012:execution:runs:r1"; api.describes[0] != want {
		t.Errorf("described %s, want %s", api.describes[0], want)
	}

	api.descErr = &types.ExecutionDoesNotExist{Message: aws.String("no")}
	if lost, err := d.Lost(context.Background(), fresh); err != nil || lost {
		t.Errorf("a missing execution of a fresh run: lost %v, %v; want not lost", lost, err)
	}
	if lost, err := d.Lost(context.Background(), old); err != nil || !lost {
		t.Errorf("a missing execution of an old run: lost %v, %v; want lost", lost, err)
	}
	d.Grace = 2 * time.Minute
	if lost, _ := d.Lost(context.Background(), old); lost {
		t.Error("Grace is not honoured")
	}

	api.descErr = errors.New("throttled")
	if lost, err := d.Lost(context.Background(), old); err == nil || lost {
		t.Errorf("other errors: lost %v, %v; want the error", lost, err)
	}
}

func TestProvisioner(t *testing.T) {
	api := &fakeAPI{}
	p, err := NewProvisioner(api, testMachine, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p.StartProvision("org", "dep", "rev-1")
	p.StartProvision("org", "dep", "rev-1") // a redeploy: a second execution
	p.StartDelete("org", strings.Repeat("d", 100))
	if len(api.starts) != 3 {
		t.Fatalf("%d executions started, want 3", len(api.starts))
	}
	if got := aws.ToString(api.starts[0].Input); got != `{"action":"provision","org_id":"org","deployment_id":"dep","revision_id":"rev-1"}` {
		t.Errorf("provision input %s", got)
	}
	if got := aws.ToString(api.starts[2].Input); !strings.HasPrefix(got, `{"action":"delete","org_id":"org","deployment_id":"ddd`) || strings.Contains(got, "revision_id") {
		t.Errorf("delete input %s", got)
	}
	n0, n1, n2 := aws.ToString(api.starts[0].Name), aws.ToString(api.starts[1].Name), aws.ToString(api.starts[2].Name)
	if n0 == n1 || !strings.HasPrefix(n0, "rev-rev-1-") || !strings.HasPrefix(n2, "delete-ddd") {
		t.Errorf("execution names %q %q %q: want unique, prefixed names", n0, n1, n2)
	}
	for _, n := range []string{n0, n1, n2} {
		if len(n) > maxNameLen {
			t.Errorf("name %q longer than %d", n, maxNameLen)
		}
	}
	if got := executionName("rev-", "a b/c"); !strings.HasPrefix(got, "rev-a_b_c-") {
		t.Errorf("executionName kept invalid characters: %q", got)
	}

	api.startErr = errors.New("denied")
	p.StartProvision("org", "dep", "rev-2") // logged, never panics
}

package sfn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/stepgraph/stepgraph/internal/reqid"
	"github.com/stepgraph/stepgraph/internal/store"
)

// API is the part of the Step Functions client this package uses
// (*sfn.Client implements it).
type API interface {
	StartExecution(ctx context.Context, in *awssfn.StartExecutionInput, optFns ...func(*awssfn.Options)) (*awssfn.StartExecutionOutput, error)
	DescribeExecution(ctx context.Context, in *awssfn.DescribeExecutionInput, optFns ...func(*awssfn.Options)) (*awssfn.DescribeExecutionOutput, error)
	ListExecutions(ctx context.Context, in *awssfn.ListExecutionsInput, optFns ...func(*awssfn.Options)) (*awssfn.ListExecutionsOutput, error)
}

// Defaults.
const (
	// DefaultGrace is how old a run must be before a missing execution
	// counts as lost.
	DefaultGrace = 30 * time.Second
	// DefaultTimeout bounds a StartExecution of the Provisioner.
	DefaultTimeout = 10 * time.Second
	// ExpressGrace is how old a run started on the Express machine must be
	// before a missing Standard execution counts as lost: an Express
	// execution carries it for at most 5 minutes, then it is done, handed
	// over (the Standard execution exists) or abandoned (the run settled).
	ExpressGrace = 10 * time.Minute
)

// maxNameLen is Step Functions' limit on an execution name.
const maxNameLen = 80

// machine is a parsed state machine ARN.
type machine struct {
	arn string
	// execPrefix is the ARN of its executions without the name:
	// arn:aws:states:<region>:<account>:execution:<machine>:
	execPrefix string
}

// parseMachine checks a state machine ARN:
// arn:<partition>:states:<region>:<account>:stateMachine:<name>.
func parseMachine(arn string) (machine, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 7 || parts[0] != "arn" || parts[2] != "states" || parts[5] != "stateMachine" ||
		parts[1] == "" || parts[3] == "" || parts[4] == "" || parts[6] == "" {
		return machine{}, fmt.Errorf("%q is not a state machine ARN (arn:aws:states:<region>:<account>:stateMachine:<name>)", arn)
	}
	parts[5] = "execution"
	return machine{arn: arn, execPrefix: strings.Join(parts, ":") + ":"}, nil
}

// Dispatcher is a runs.Dispatcher on the run state machine, with its
// Express front when UseExpress was called.
type Dispatcher struct {
	client  API
	sm      machine
	express *machine
	// Grace is how long after its creation a run may have no execution
	// yet; DefaultGrace when zero.
	Grace time.Duration
	// Now is time.Now when nil.
	Now func() time.Time
}

// NewDispatcher returns a Dispatcher starting executions of the state
// machine stateMachineARN through client.
func NewDispatcher(client API, stateMachineARN string) (*Dispatcher, error) {
	sm, err := parseMachine(stateMachineARN)
	if err != nil {
		return nil, err
	}
	return &Dispatcher{client: client, sm: sm}, nil
}

// UseExpress makes Dispatch start runs that can start now on the Express
// machine expressARN (internal/awsflow, express.asl.json), which hands them
// over to the Standard machine when they need more than one short step.
func (d *Dispatcher) UseExpress(expressARN string) error {
	m, err := parseMachine(expressARN)
	if err != nil {
		return err
	}
	d.express = &m
	return nil
}

// ExecutionARN is the ARN of the Standard execution that carries (or would
// carry) run runID.
func (d *Dispatcher) ExecutionARN(runID string) string { return d.sm.execPrefix + runID }

// ExpressExecutionARN is the ARN of the Express execution Dispatch starts
// for run runID, "" without an Express machine.
func (d *Dispatcher) ExpressExecutionARN(runID string) string {
	if d.express == nil {
		return ""
	}
	return d.express.execPrefix + runID
}

// Express reports whether Dispatch starts run on the Express machine: one
// that can start now, with no after_seconds and nothing ahead of it on its
// thread (store.Run.Behind, which AddRun sets). A run behind another would
// only park in its Express step and be handed over, for the price of one
// Express execution and invocation. A run read back from the store never
// says it is behind: the lost check (graceFor) then allows it the longer
// Express grace, which is the safe side.
func (d *Dispatcher) Express(run store.Run) bool {
	return d.express != nil && !run.NotBefore.After(run.CreatedAt) && !run.Behind
}

// Input is the input of a run's execution.
type Input struct {
	RunID string `json:"run_id"`
	// OrgID is the run's organization: the run worker executes the run's
	// tenant work in a session of that organization (lambdaapp, tenant
	// sessions; an input without it, from before, runs on the worker's
	// own role).
	OrgID string `json:"org_id,omitempty"`
	// RequestID is the id of the request that queued the run (reqid), so
	// the run worker's log lines name it; "" when none. The state machine
	// hands the whole input to each step (execution_input).
	RequestID string `json:"request_id,omitempty"`
	// WaitSeconds starts at 0: the state machine hands the last wait to
	// each step (runs.Service.StepRun's waited).
	WaitSeconds int `json:"wait_seconds"`
}

// Dispatch implements runs.Dispatcher: it starts the run's execution, named
// after the run id; an execution of that name existing already is success.
func (d *Dispatcher) Dispatch(ctx context.Context, run store.Run) error {
	// An input with another request id than a first start's (a
	// redispatch) is ExecutionAlreadyExists, which is success below.
	input, _ := json.Marshal(Input{RunID: run.ID, OrgID: run.OrgID, RequestID: reqid.From(ctx)})
	sm := d.sm
	if d.Express(run) {
		// Express is at-least-once and its names are not idempotent: a
		// duplicate execution claims the run as the same owner, and the
		// run's attempt fence stops the one it took over.
		sm = *d.express
	}
	_, err := d.client.StartExecution(ctx, &awssfn.StartExecutionInput{
		StateMachineArn: aws.String(sm.arn),
		Name:            aws.String(run.ID),
		Input:           aws.String(string(input)),
	})
	var exists *types.ExecutionAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("start the execution of run %s: %w", run.ID, err)
	}
	return nil
}

// Lost implements runs.Dispatcher (see the package documentation). It asks
// about the Standard execution only: Express executions cannot be described.
func (d *Dispatcher) Lost(ctx context.Context, run store.Run) (bool, error) {
	out, err := d.client.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(d.ExecutionARN(run.ID))})
	var missing *types.ExecutionDoesNotExist
	switch {
	case errors.As(err, &missing):
		return d.now().Sub(run.CreatedAt) > d.graceFor(run), nil
	case err != nil:
		return false, fmt.Errorf("describe the execution of run %s: %w", run.ID, err)
	}
	switch out.Status {
	case types.ExecutionStatusSucceeded, types.ExecutionStatusFailed, types.ExecutionStatusTimedOut, types.ExecutionStatusAborted:
		return true, nil
	}
	return false, nil // RUNNING, PENDING_REDRIVE, or a status this client does not know
}

// graceFor is how long run may have no Standard execution: until its
// Express execution surely ended, when it had one.
func (d *Dispatcher) graceFor(run store.Run) time.Duration {
	grace := d.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	if d.Express(run) {
		grace = max(grace, ExpressGrace)
	}
	return grace
}

func (d *Dispatcher) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Provisioner is a deployments.Provisioner on the provisioning state machine.
type Provisioner struct {
	client API
	sm     machine
	log    *slog.Logger
	// Timeout bounds each StartExecution; DefaultTimeout when zero.
	Timeout time.Duration
	// SkipRunning makes StartProvision and StartDelete start nothing while
	// an execution of the same work is running: what the deploy worker's
	// periodic resume uses, so that it restarts only dropped work.
	SkipRunning bool
}

// NewProvisioner returns a Provisioner starting executions of the state
// machine stateMachineARN through client; log (slog.Default when nil)
// receives the failures to start one.
func NewProvisioner(client API, stateMachineARN string, log *slog.Logger) (*Provisioner, error) {
	sm, err := parseMachine(stateMachineARN)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Provisioner{client: client, sm: sm, log: log}, nil
}

// Task is the input of a provisioning execution: the deploy-worker event.
type Task struct {
	Action       string `json:"action"` // ActionProvision or ActionDelete
	OrgID        string `json:"org_id"`
	DeploymentID string `json:"deployment_id"`
	RevisionID   string `json:"revision_id,omitempty"`
}

// Actions of a Task. ActionResume is not sent by the state machine but by
// the stack's schedule, straight to the deploy worker.
const (
	ActionProvision = "provision"
	ActionDelete    = "delete"
	ActionResume    = "resume"
)

// StartProvision implements deployments.Provisioner.
func (p *Provisioner) StartProvision(orgID, deploymentID, revisionID string) {
	p.start(Task{Action: ActionProvision, OrgID: orgID, DeploymentID: deploymentID, RevisionID: revisionID},
		executionName("rev-", revisionID))
}

// StartDelete implements deployments.Provisioner.
func (p *Provisioner) StartDelete(orgID, deploymentID string) {
	p.start(Task{Action: ActionDelete, OrgID: orgID, DeploymentID: deploymentID},
		executionName("delete-", deploymentID))
}

// Running reports whether an execution named as name's work (all of name
// but its random suffix) is running.
func (p *Provisioner) Running(ctx context.Context, name string) (bool, error) {
	work := name[:strings.LastIndexByte(name, '-')+1]
	in := &awssfn.ListExecutionsInput{StateMachineArn: aws.String(p.sm.arn), StatusFilter: types.ExecutionStatusRunning}
	for {
		out, err := p.client.ListExecutions(ctx, in)
		if err != nil {
			return false, err
		}
		for _, e := range out.Executions {
			if strings.HasPrefix(aws.ToString(e.Name), work) {
				return true, nil
			}
		}
		if out.NextToken == nil {
			return false, nil
		}
		in.NextToken = out.NextToken
	}
}

// Start starts the execution of task under name and returns its ARN. It is
// what StartProvision and StartDelete do, with the error.
func (p *Provisioner) Start(ctx context.Context, task Task, name string) (string, error) {
	input, _ := json.Marshal(task)
	out, err := p.client.StartExecution(ctx, &awssfn.StartExecutionInput{
		StateMachineArn: aws.String(p.sm.arn),
		Name:            aws.String(name),
		Input:           aws.String(string(input)),
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ExecutionArn), nil
}

func (p *Provisioner) start(task Task, name string) {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if p.SkipRunning {
		running, err := p.Running(ctx, name)
		if err != nil {
			p.log.Error("look for a running provisioning execution; starting none", "action", task.Action,
				"deployment_id", task.DeploymentID, "revision_id", task.RevisionID, "error", err.Error())
			return
		}
		if running {
			return
		}
	}
	if _, err := p.Start(ctx, task, name); err != nil {
		p.log.Error("start a provisioning execution; the work stays unsettled until resumed",
			"action", task.Action, "deployment_id", task.DeploymentID, "revision_id", task.RevisionID,
			"execution", name, "error", err.Error())
	}
}

// executionName is prefix + id + "-" + a random suffix, within Step
// Functions' limits (80 characters of letters, digits, '-' and '_').
func executionName(prefix, id string) string {
	var b strings.Builder
	for _, r := range id {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	suffix := randomHex(6)
	keep := maxNameLen - len(prefix) - 1 - len(suffix)
	clean := b.String()
	if len(clean) > keep {
		clean = clean[:keep]
	}
	return prefix + clean + "-" + suffix
}

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf) // never fails (crypto/rand)
	return hex.EncodeToString(buf)
}

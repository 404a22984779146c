package lambdaapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/stepgraph/stepgraph/internal/awsflow"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/dispatch/sfn"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Actions of a RunTask.
const (
	ActionStep    = "step"
	ActionAbandon = "abandon"
	// ActionPark stores the token of a queued run's parked execution
	// (runs.Service.ParkRun); the run state machine's Park task sends it.
	ActionPark = "park"
)

// RunTask is the run-worker's event, sent by the run state machine.
type RunTask struct {
	Action string `json:"action"`
	RunID  string `json:"run_id"`
	// Waited is how long the execution waited before this step (the last
	// answer's wait_seconds): a run waiting for its turn waits longer each time.
	Waited int `json:"waited"`
	// BudgetSeconds bounds a step's super-steps when set (the Express
	// front's step, awsflow.ExpressStepBudget); otherwise half the
	// Lambda's remaining time.
	BudgetSeconds int `json:"budget_seconds,omitempty"`
	// Error is what made the execution give up on the run (abandon): the
	// Catch output {"Error": ..., "Cause": ...}, or a plain string.
	Error json.RawMessage `json:"error,omitempty"`
	// ExecutionInput is the execution's input (the state machine hands it
	// to every task): its request_id names the API request that queued
	// the run, logged on every line of the task.
	ExecutionInput sfn.Input `json:"execution_input"`
	// TaskToken, OrgID and ThreadID are a park's: the token of the
	// execution's waiting task and the run's thread (a step's answer).
	TaskToken string `json:"task_token,omitempty"`
	OrgID     string `json:"org_id,omitempty"`
	ThreadID  string `json:"thread_id,omitempty"`

	// DetailType and Detail are set when the event is not a task of the
	// state machine but EventBridge's report that a run execution ended
	// ("Step Functions Execution Status Change", ExecutionStatusChange):
	// the stack's rule sends the failed, timed-out and aborted ones here.
	DetailType string          `json:"detail-type,omitempty"`
	Detail     json.RawMessage `json:"detail,omitempty"`
}

// ExecutionStatusChangeType is the detail-type of EventBridge's events
// about Step Functions executions.
const ExecutionStatusChangeType = awsflow.ExecutionStatusChange

// ExecutionStatusChange is the detail of such an event (the fields used).
type ExecutionStatusChange struct {
	ExecutionArn    string `json:"executionArn"`
	StateMachineArn string `json:"stateMachineArn"`
	Name            string `json:"name"`
	Status          string `json:"status"`
	// Input is the execution's input, a JSON document in a string
	// (sfn.Input); Error and Cause say why it failed (they may be null).
	Input string  `json:"input"`
	Error *string `json:"error"`
	Cause *string `json:"cause"`
}

// EndedStatuses are the execution statuses whose report ends the run
// (awsflow.RunEndedStatuses): an execution that ended so without settling
// its run leaves it inflight, its thread busy, and nothing else would ever
// settle a background run.
var EndedStatuses = awsflow.RunEndedStatuses

// RunTaskResult is the run-worker's answer: a runs.StepResult for a step
// (status continue, wait or done), status "abandoned" for an abandon.
type RunTaskResult struct {
	RunID       string `json:"run_id"`
	Status      string `json:"status"`
	WaitSeconds int    `json:"wait_seconds"`
	// OrgID and ThreadID are set with status park (runs.StepResult).
	OrgID    string `json:"org_id,omitempty"`
	ThreadID string `json:"thread_id,omitempty"`
}

// StatusAbandoned is the Status of an abandon's answer; StatusIgnored of an
// execution status change that does not end a run (SUCCEEDED, RUNNING).
const (
	StatusAbandoned = "abandoned"
	StatusIgnored   = "ignored"
	StatusParked    = "parked"
)

// InvalidTaskError is a worker event that cannot be handled; it is the
// errorType Step Functions sees.
type InvalidTaskError struct{ Reason string }

func (e *InvalidTaskError) Error() string { return "invalid task: " + e.Reason }

// HandleRunTask is the run-worker's Lambda handler. A step executes
// super-steps of the run until its budget (half the Lambda's remaining
// time) and stores them; an abandon ends the run with an ExecutionLost
// error. Webhooks of runs that finished are delivered before it returns,
// since a Lambda is frozen once it answered.
func (a *App) HandleRunTask(ctx context.Context, task RunTask) (RunTaskResult, error) {
	if task.DetailType != "" {
		return a.handleExecutionEnded(ctx, task)
	}
	if task.RunID == "" {
		return RunTaskResult{}, &InvalidTaskError{Reason: "run_id is missing"}
	}
	log := a.Log.With("run_id", task.RunID, "action", task.Action, "request_id", task.ExecutionInput.RequestID)
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		log = log.With("lambda_request_id", lc.AwsRequestID)
	}
	defer a.flushWebhooks(ctx)
	ctx = WithTenant(ctx, a.taskOrg(ctx, task))
	switch task.Action {
	case ActionStep:
		res, err := a.Runs.StepRunWithin(ctx, task.RunID, task.Waited, time.Duration(task.BudgetSeconds)*time.Second, log)
		if err != nil {
			return RunTaskResult{}, err
		}
		return RunTaskResult{RunID: res.RunID, Status: res.Status, WaitSeconds: res.WaitSeconds, OrgID: res.OrgID, ThreadID: res.ThreadID}, nil
	case ActionPark:
		if task.TaskToken == "" || task.OrgID == "" || task.ThreadID == "" {
			return RunTaskResult{}, &InvalidTaskError{Reason: "a park needs task_token, org_id and thread_id"}
		}
		if err := a.Runs.ParkRun(ctx, task.OrgID, task.ThreadID, task.RunID, task.TaskToken, log); err != nil {
			return RunTaskResult{}, err
		}
		return RunTaskResult{RunID: task.RunID, Status: StatusParked}, nil
	case ActionAbandon:
		reason := abandonReason(task.Error)
		log.Warn("abandoning the run", "reason", reason)
		if err := a.Runs.AbandonRun(ctx, task.RunID, reason); err != nil {
			return RunTaskResult{}, err
		}
		return RunTaskResult{RunID: task.RunID, Status: StatusAbandoned}, nil
	}
	return RunTaskResult{}, &InvalidTaskError{Reason: fmt.Sprintf("action %q is not step, park or abandon", task.Action)}
}

// handleExecutionEnded abandons the run of a run execution that failed,
// timed out or was aborted (review #4 and #11: the failure is pushed, not
// found by waiters polling DescribeExecution). The execution is named after
// its run (sfn.Dispatcher), and its input names it too. A run already
// settled (the execution's own Abandon state did it, or the run finished
// before an operator stopped the execution) is left alone: AbandonRun
// touches only inflight runs. Any other status is ignored. An error is
// returned when the run could not be settled: EventBridge's invocation is
// asynchronous, so Lambda retries it and then hands it to the DLQ.
func (a *App) handleExecutionEnded(ctx context.Context, task RunTask) (RunTaskResult, error) {
	if task.DetailType != ExecutionStatusChangeType {
		return RunTaskResult{}, &InvalidTaskError{Reason: fmt.Sprintf("detail-type %q is not %q", task.DetailType, ExecutionStatusChangeType)}
	}
	var d ExecutionStatusChange
	if err := json.Unmarshal(task.Detail, &d); err != nil {
		return RunTaskResult{}, &InvalidTaskError{Reason: "detail: " + err.Error()}
	}
	var in sfn.Input
	_ = json.Unmarshal([]byte(d.Input), &in) // an input that says nothing: the name alone
	runID := in.RunID
	if runID == "" {
		runID = d.Name
	}
	if runID == "" {
		return RunTaskResult{}, &InvalidTaskError{Reason: "the execution names no run"}
	}
	log := a.Log.With("run_id", runID, "action", "execution-"+strings.ToLower(d.Status), "request_id", in.RequestID,
		"execution", d.ExecutionArn)
	if !slices.Contains(EndedStatuses, d.Status) {
		log.Info("execution status change ignored", "status", d.Status)
		return RunTaskResult{RunID: runID, Status: StatusIgnored}, nil
	}
	reason := "the run's execution ended " + strings.ToLower(strings.ReplaceAll(d.Status, "_", " "))
	if d.Error != nil || d.Cause != nil {
		catch, _ := json.Marshal(map[string]string{"Error": deref(d.Error), "Cause": deref(d.Cause)})
		if why := strings.TrimPrefix(abandonReason(catch), abandonLead); why != "" {
			reason += why
		}
	}
	if len(reason) > maxReason {
		reason = reason[:maxReason] + "…"
	}
	log.Warn("abandoning the run of an ended execution", "reason", reason)
	defer a.flushWebhooks(ctx)
	ctx = WithTenant(ctx, a.taskOrg(ctx, RunTask{RunID: runID, ExecutionInput: in}))
	if err := a.Runs.AbandonRun(ctx, runID, reason); err != nil {
		return RunTaskResult{}, err
	}
	return RunTaskResult{RunID: runID, Status: StatusAbandoned}, nil
}

// taskOrg is the organization of a task's run: a park names it, the
// execution's input carries it; for an execution started before inputs
// did, the run's marker says it (read on the worker's own role: a run
// marker is stage-wide). "" when the run is gone: nothing of it is left to
// reach.
func (a *App) taskOrg(ctx context.Context, task RunTask) string {
	switch {
	case task.Action == ActionPark:
		return task.OrgID
	case task.ExecutionInput.OrgID != "" || a.Config.TenantRoleARN == "":
		return task.ExecutionInput.OrgID
	}
	org, err := a.Store.RunOrganization(ctx, task.RunID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		a.Log.Warn("the run's organization could not be read: the task runs on the worker's own role", "run_id", task.RunID, "error", err.Error())
	}
	return org
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// flushWebhooks waits for webhook deliveries in flight, within ctx.
func (a *App) flushWebhooks(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		a.Webhooks.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		a.Log.Warn("the Lambda ends before webhook deliveries finished")
	}
}

// maxReason bounds the message an abandoned run carries.
const maxReason = 600

// abandonReason is the ExecutionLost message of an abandoned run: the
// failure of its last step, as Step Functions reported it.
const abandonLead = "the run's execution failed after its retries"

func abandonReason(raw json.RawMessage) string {
	const lead = abandonLead
	var text string
	var s string
	var catch struct{ Error, Cause string }
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case json.Unmarshal(raw, &s) == nil:
		text = s
	case json.Unmarshal(raw, &catch) == nil:
		// A Lambda's failure: Cause is its error document.
		var lambdaErr struct{ ErrorType, ErrorMessage string }
		if json.Unmarshal([]byte(catch.Cause), &lambdaErr) == nil && lambdaErr.ErrorMessage != "" {
			catch.Cause = lambdaErr.ErrorMessage
		}
		text = strings.TrimSpace(catch.Error + ": " + catch.Cause)
		text = strings.TrimSuffix(text, ":")
	}
	if text == "" {
		return lead
	}
	msg := lead + ": " + text
	if len(msg) > maxReason {
		msg = msg[:maxReason] + "…"
	}
	return msg
}

// DeployTask is the deploy-worker's event, sent by the provisioning state
// machine (sfn.Task).
type DeployTask = sfn.Task

// DeployTaskResult is the deploy-worker's answer.
type DeployTaskResult struct {
	Action       string `json:"action"`
	OrgID        string `json:"org_id,omitempty"`
	DeploymentID string `json:"deployment_id,omitempty"`
	RevisionID   string `json:"revision_id,omitempty"`
	// Status is the revision's status after a provision (DEPLOYED, a
	// *_FAILED status, SKIPPED, or "gone" when it no longer exists), or
	// "deleted" after a delete (the deployment's status when it was not
	// being deleted and so was left alone).
	Status string `json:"status"`
	// WaitSeconds, when set, says the revision waits for work done
	// elsewhere (its app's build, deployments.PendingError): the state
	// machine provisions it again after that long, with this answer as
	// its event (it names the same action and ids).
	WaitSeconds int `json:"wait_seconds,omitempty"`
}

// ResumeIdle is how long provisioning work must have been untouched before
// the periodic resume starts it again (deployments.Service.ResumeIdle).
const ResumeIdle = 2 * time.Minute

// HandleDeployTask is the deploy-worker's Lambda handler: it carries a
// revision through its lifecycle (deployments.Service.Provision) or ends a
// deletion (FinishDelete). A revision that fails (BUILD_FAILED, ...) is a
// successful task; an error means the work could not be done now, and the
// state machine retries it. The "resume" action, sent by a schedule of the
// stack rather than the state machine, starts provisioning executions for
// work that has none (its start was lost): unsettled revisions and
// deletions untouched for ResumeIdle with no running execution.
func (a *App) HandleDeployTask(ctx context.Context, task DeployTask) (DeployTaskResult, error) {
	if task.Action == sfn.ActionResume {
		if err := a.Deployments.ResumeIdle(ctx, ResumeIdle); err != nil {
			return DeployTaskResult{Action: task.Action}, err
		}
		return DeployTaskResult{Action: task.Action, Status: "resumed"}, nil
	}
	if task.OrgID == "" || task.DeploymentID == "" {
		return DeployTaskResult{}, &InvalidTaskError{Reason: "org_id and deployment_id are required"}
	}
	res := DeployTaskResult{Action: task.Action, OrgID: task.OrgID, DeploymentID: task.DeploymentID, RevisionID: task.RevisionID}
	switch task.Action {
	case sfn.ActionProvision:
		if task.RevisionID == "" {
			return res, &InvalidTaskError{Reason: "revision_id is required to provision"}
		}
		err := a.Deployments.Provision(ctx, task.OrgID, task.DeploymentID, task.RevisionID)
		var pending *deployments.PendingError
		if errors.As(err, &pending) {
			res.WaitSeconds = max(1, int(math.Ceil(pending.After.Seconds())))
		} else if err != nil {
			return res, err
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		rev, err := a.Deployments.Revision(rctx, task.OrgID, task.DeploymentID, task.RevisionID)
		switch {
		case fail.KindOf(err) == fail.KindNotFound:
			res.Status = "gone"
		case err != nil:
			return res, err
		default:
			res.Status = rev.Status
		}
		return res, nil
	case sfn.ActionDelete:
		if err := a.Deployments.FinishDelete(ctx, task.OrgID, task.DeploymentID); err != nil {
			return res, err
		}
		d, err := a.Deployments.Get(ctx, task.OrgID, task.DeploymentID)
		switch {
		case fail.KindOf(err) == fail.KindNotFound:
			res.Status = "deleted"
		case err != nil:
			return res, err
		default:
			res.Status = d.Status // not being deleted: left alone
		}
		return res, nil
	}
	return res, &InvalidTaskError{Reason: fmt.Sprintf("action %q is not provision, delete or resume", task.Action)}
}

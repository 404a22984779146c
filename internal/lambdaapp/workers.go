package lambdaapp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/stepgraph/stepgraph/internal/dispatch/sfn"
	"github.com/stepgraph/stepgraph/internal/fail"
)

// Actions of a RunTask.
const (
	ActionStep    = "step"
	ActionAbandon = "abandon"
)

// RunTask is the run-worker's event, sent by the run state machine.
type RunTask struct {
	Action string `json:"action"`
	RunID  string `json:"run_id"`
	// Waited is how long the execution waited before this step (the last
	// answer's wait_seconds): a run waiting for its turn waits longer each time.
	Waited int `json:"waited"`
	// Error is what made the execution give up on the run (abandon): the
	// Catch output {"Error": ..., "Cause": ...}, or a plain string.
	Error json.RawMessage `json:"error,omitempty"`
	// ExecutionInput is the execution's input (the state machine hands it
	// to every task): its request_id names the API request that queued
	// the run, logged on every line of the task.
	ExecutionInput sfn.Input `json:"execution_input"`
}

// RunTaskResult is the run-worker's answer: a runs.StepResult for a step
// (status continue, wait or done), status "abandoned" for an abandon.
type RunTaskResult struct {
	RunID       string `json:"run_id"`
	Status      string `json:"status"`
	WaitSeconds int    `json:"wait_seconds"`
}

// StatusAbandoned is the Status of an abandon's answer.
const StatusAbandoned = "abandoned"

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
	if task.RunID == "" {
		return RunTaskResult{}, &InvalidTaskError{Reason: "run_id is missing"}
	}
	log := a.Log.With("run_id", task.RunID, "action", task.Action, "request_id", task.ExecutionInput.RequestID)
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		log = log.With("lambda_request_id", lc.AwsRequestID)
	}
	defer a.flushWebhooks(ctx)
	switch task.Action {
	case ActionStep:
		res, err := a.Runs.StepRun(ctx, task.RunID, task.Waited, log)
		if err != nil {
			return RunTaskResult{}, err
		}
		return RunTaskResult{RunID: res.RunID, Status: res.Status, WaitSeconds: res.WaitSeconds}, nil
	case ActionAbandon:
		reason := abandonReason(task.Error)
		log.Warn("abandoning the run", "reason", reason)
		if err := a.Runs.AbandonRun(ctx, task.RunID, reason); err != nil {
			return RunTaskResult{}, err
		}
		return RunTaskResult{RunID: task.RunID, Status: StatusAbandoned}, nil
	}
	return RunTaskResult{}, &InvalidTaskError{Reason: fmt.Sprintf("action %q is not step or abandon", task.Action)}
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
func abandonReason(raw json.RawMessage) string {
	const lead = "the run's execution failed after its retries"
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
	DeploymentID string `json:"deployment_id,omitempty"`
	RevisionID   string `json:"revision_id,omitempty"`
	// Status is the revision's status after a provision (DEPLOYED, a
	// *_FAILED status, SKIPPED, or "gone" when it no longer exists), or
	// "deleted" after a delete (the deployment's status when it was not
	// being deleted and so was left alone).
	Status string `json:"status"`
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
	res := DeployTaskResult{Action: task.Action, DeploymentID: task.DeploymentID, RevisionID: task.RevisionID}
	switch task.Action {
	case sfn.ActionProvision:
		if task.RevisionID == "" {
			return res, &InvalidTaskError{Reason: "revision_id is required to provision"}
		}
		if err := a.Deployments.Provision(ctx, task.OrgID, task.DeploymentID, task.RevisionID); err != nil {
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

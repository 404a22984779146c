// Package sfn runs runs and deployment lifecycles on AWS Step Functions.
//
// # Dispatcher (runs.Dispatcher)
//
// Dispatch starts one execution of the run state machine (internal/awsflow,
// run.asl.json) per run: the execution is named after the run id and its
// input is {"run_id": "<id>", "wait_seconds": 0}. Starting it twice is harmless: Step Functions
// refuses a second execution of the same name with ExecutionAlreadyExists,
// which Dispatch takes as success, so a retried CreateRun or a retried
// StartExecution call never executes a run twice. Execution names are kept
// for 90 days by Step Functions; run ids (UUIDv7) are never reused.
//
// With an Express front (UseExpress; internal/awsflow, express.asl.json), a
// run that can start now (no after_seconds) is started instead as an
// execution of the Express machine, named after the run with the same
// input: it steps the run once and, unless that finished it, starts the
// Standard execution named after the run. Express StartExecution is
// asynchronous like Standard's; Express executions are at-least-once and
// their names not idempotent, so a retried Dispatch or a duplicate
// execution may step the run twice at once: both claim it as the run's one
// owner, and the run's attempt fence (store.ErrSuperseded on checkpoints,
// FinishRun and the lease) stops the attempt that was taken over.
//
// Lost tells waiters whether the run's execution can still finish the run.
// It derives the execution ARN from the state machine ARN and the run id
// (arn:aws:states:<region>:<account>:execution:<machine>:<run id>) and asks
// DescribeExecution:
//
//   - RUNNING (or PENDING_REDRIVE): not lost;
//   - SUCCEEDED, FAILED, TIMED_OUT, ABORTED: lost — the execution ended
//     while the waiter still saw the run unfinished (a stopped execution,
//     or one that failed after its retries; a run that finished just
//     before is left alone by runs.Service.AbandonRun, which re-reads it);
//   - ExecutionDoesNotExist: lost only once the run is older than Grace
//     (30 s by default), since the execution is started right after the run
//     is stored; for a run started on the Express machine, only once it is
//     older than ExpressGrace (10 minutes): its Express execution, which
//     cannot be described, carries it for up to 5 minutes before handing it
//     over, and an Express run that ends in its first step never has a
//     Standard execution at all.
//
// Any other error is returned: the waiter keeps waiting and asks again.
//
// # Provisioner (deployments.Provisioner)
//
// StartProvision and StartDelete start an execution of the provisioning
// state machine (internal/awsflow, provision.asl.json) whose input is the
// deploy-worker event: {"action":"provision","org_id","deployment_id",
// "revision_id"} or {"action":"delete","org_id","deployment_id"}. Each
// request gets its own execution name ("rev-<revision id>-<random>",
// "delete-<deployment id>-<random>"), because a revision can be provisioned
// more than once (a redeploy) and names of finished executions cannot be
// reused. The deployments rules (Service.Provision, Service.FinishDelete)
// are safe to repeat and to run side by side, so a duplicate execution is
// harmless. The port has no error result: a failure to start the execution
// is logged (after the SDK's own retries), and the revision stays
// unsettled until the deploy worker's scheduled resume (every 5 minutes in
// the stack; deployments.Service.ResumeIdle with a Provisioner whose
// SkipRunning is set) starts its work again. SkipRunning lists the running
// executions first and starts none for work that has one, so the resume
// never doubles work in progress.
//
// Both call StartExecution synchronously — in a Lambda nothing may run after
// the answer is returned — within Timeout (10 s by default).
package sfn

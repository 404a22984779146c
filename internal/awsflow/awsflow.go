// Package awsflow holds the Step Functions state machines of the AWS
// deployment, as Amazon States Language documents embedded in the binary:
//
//   - run.asl.json, the run state machine: one execution per run, named
//     after the run id, with input {"run_id": "...", "wait_seconds": 0}
//     (internal/dispatch/sfn starts it). Its Step task invokes the run-worker
//     Lambda with {"action":"step","run_id":...,"waited":<wait_seconds>}; the
//     worker executes super-steps of the run (runs.Service.StepRun) and
//     answers {"run_id","status","wait_seconds"}. A Choice loops on status:
//     continue → Step again, wait → a Wait state of wait_seconds
//     (after_seconds, or a growing wait while its organization has no
//     free slot) then Step, park → Park (the run is queued behind another
//     run of its thread), done → Succeed. Park is a
//     lambda:invoke.waitForTaskToken task: the worker stores the task token
//     with the run ({"action":"park","run_id","org_id","thread_id",
//     "task_token"}), and the worker that ends the run ahead wakes it with
//     SendTaskSuccess; a wake-up that never comes ends the task after 15
//     minutes (TimeoutSeconds), and any failure of it, after a pause, leads
//     back to Step (review #12: no polling while queued). Step is retried
//     with backoff on Lambda service errors, throttling and crashes (a
//     retried step resumes from the run's last checkpoint, skipping the
//     tasks of the super-step that completed); a step that ran into the
//     Lambda's timeout (Sandbox.Timedout) is retried once only (review
//     #16). Once the retries are spent, Catch hands the error to an Abandon
//     task ({"action":"abandon","run_id":..., "error":{"Error":...,
//     "Cause":...}}), which ends the run with an ExecutionLost error, and
//     the execution fails. An execution that ends without its run being
//     done (failed, timed out, aborted) is also reported by EventBridge to
//     the run worker, which ends the run (ExecutionStatusChange).
//   - express.asl.json, the Express front of the run machine (docs/aws.md,
//     "Express or Standard"): internal/dispatch/sfn starts it, with the
//     same input, for a run that can start now. Its Step invokes the run
//     worker once with "budget_seconds" (the worker stops at a checkpoint
//     past it) under a TimeoutSeconds well inside Express's 5 minutes, and
//     has no retries: done → Succeed; any other answer (continue, wait,
//     park) or any failure of the step → HandOver, which starts the
//     Standard execution of the run machine named after the run with the
//     same input (states:startExecution; ExecutionAlreadyExists counts as
//     handed over: a duplicate Express execution, at-least-once), so
//     retries, waits, parking and long runs stay on Standard. A hand-over
//     that keeps failing after its retries queues the worker's abandon
//     with an asynchronous invocation (the run ends with ExecutionLost;
//     Lambda retries it, then the run-failures dead-letter queue: Express
//     sends no status events to push) and fails.
//   - provision.asl.json, the provisioning state machine: one execution per
//     request, whose input is the deploy-worker event itself
//     ({"action":"provision","org_id","deployment_id","revision_id"} or
//     {"action":"delete","org_id","deployment_id"}); one Task invokes the
//     deploy-worker Lambda with it, retried with backoff.
//
// Every Lambda task retries throttling (Lambda.TooManyRequestsException)
// apart, with jittered waits of up to a minute (about 13 minutes in all on
// average, 26 at most): the workers have reserved concurrency (infra/stack),
// so a burst of runs past it must wait for a worker rather than be
// abandoned after the half minute the other errors get.
//
// run.asl.json and provision.asl.json must be created as STANDARD state
// machines: executions last as long as a run does, park on task tokens, and
// waiters ask about them with DescribeExecution, none of which Express
// supports. express.asl.json is created as EXPRESS.
//
// The documents name their Lambdas and the run machine with
// CloudFormation-style placeholders, ${RunWorkerArn}, ${DeployWorkerArn} and
// ${RunMachineArn}: the CDK app passes the documents
// as they are with DefinitionSubstitutions, tests and tools call Substitute
// (or RunDefinition / ProvisionDefinition).
package awsflow

import (
	_ "embed"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Placeholder names used in the documents (without ${ }).
const (
	RunWorkerArn    = "RunWorkerArn"
	DeployWorkerArn = "DeployWorkerArn"
	RunMachineArn   = "RunMachineArn"
)

// ExpressASL is the Express front of the run machine with its
// ${RunWorkerArn} and ${RunMachineArn} placeholders.
//
//go:embed express.asl.json
var ExpressASL string

// ExpressStepBudget is the run worker's budget in an Express step
// (budget_seconds), and ExpressStepTimeout the step's TimeoutSeconds: a
// step stops at the first checkpoint past its budget, so the timeout leaves
// room for one super-step more. Both are far inside Express's 5 minutes,
// which must also hold the hand-over's retries and an abandon.
const (
	ExpressStepBudget  = 30
	ExpressStepTimeout = 60
)

// RunASL is the run state machine with its ${RunWorkerArn} placeholder.
//
//go:embed run.asl.json
var RunASL string

// ProvisionASL is the provisioning state machine with its
// ${DeployWorkerArn} placeholder.
//
//go:embed provision.asl.json
var ProvisionASL string

var placeholder = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)\}`)

// Placeholders lists the distinct placeholder names of an ASL document,
// sorted.
func Placeholders(definition string) []string {
	seen := map[string]bool{}
	for _, m := range placeholder.FindAllStringSubmatch(definition, -1) {
		seen[m[1]] = true
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Substitute replaces every ${Name} of definition with values[Name], as
// CloudFormation's DefinitionSubstitutions does. It fails when a
// placeholder has no value, a value is empty, or a value names no
// placeholder (a typo would otherwise go unnoticed). Values are inserted as
// they are: they must not need JSON escaping (ARNs do not).
func Substitute(definition string, values map[string]string) (string, error) {
	names := Placeholders(definition)
	used := map[string]bool{}
	var missing []string
	for _, n := range names {
		v, ok := values[n]
		if !ok || v == "" {
			missing = append(missing, n)
			continue
		}
		if strings.ContainsAny(v, "\"\\\n") {
			return "", fmt.Errorf("awsflow: value of %s must not contain quotes, backslashes or newlines", n)
		}
		used[n] = true
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("awsflow: no value for placeholder(s) %s", strings.Join(missing, ", "))
	}
	for n := range values {
		if !used[n] {
			return "", fmt.Errorf("awsflow: the definition has no placeholder ${%s}", n)
		}
	}
	return placeholder.ReplaceAllStringFunc(definition, func(m string) string {
		return values[m[2:len(m)-1]]
	}), nil
}

// RunDefinition is the run state machine invoking the run-worker Lambda
// runWorkerARN.
func RunDefinition(runWorkerARN string) (string, error) {
	return Substitute(RunASL, map[string]string{RunWorkerArn: runWorkerARN})
}

// ExpressDefinition is the Express front of the run machine: it invokes
// the run-worker Lambda runWorkerARN and hands runs over to the Standard
// run machine runMachineARN.
func ExpressDefinition(runWorkerARN, runMachineARN string) (string, error) {
	return Substitute(ExpressASL, map[string]string{RunWorkerArn: runWorkerARN, RunMachineArn: runMachineARN})
}

// ProvisionDefinition is the provisioning state machine invoking the
// deploy-worker Lambda deployWorkerARN.
func ProvisionDefinition(deployWorkerARN string) (string, error) {
	return Substitute(ProvisionASL, map[string]string{DeployWorkerArn: deployWorkerARN})
}

// ExecutionStatusChange is the detail-type of the events Step Functions
// sends to EventBridge when an execution changes status. The stack routes
// those of the run state machine whose status is one of RunEndedStatuses to
// the run worker (internal/lambdaapp), which ends the run its execution no
// longer carries: failures are pushed, not found by waiters polling
// DescribeExecution.
const ExecutionStatusChange = "Step Functions Execution Status Change"

// RunEndedStatuses are the statuses of a run execution that ended without
// the run being done: FAILED (the Abandon state ended it already, or
// could not), TIMED_OUT and ABORTED (an operator's StopExecution, or a
// redrive limit).
var RunEndedStatuses = []string{"FAILED", "TIMED_OUT", "ABORTED"}

package stack

import (
	"fmt"
	"time"
)

// The functions: one Lambda per seeded endpoint, one per remaining route
// group, and the two Step Functions workers. Each name is a directory
// functions/<name> in the main module, built by `make lambdas` into
// bin/lambdas/<name>/bootstrap.
const (
	FnCreateProvider   = "create-provider"
	FnCreateDeployment = "create-deployment"
	FnThreadRunWait    = "thread-run-wait"
	FnStatelessRunWait = "stateless-run-wait"
	FnProviders        = "providers"
	FnDeployments      = "deployments"
	FnAssistants       = "assistants"
	FnThreads          = "threads"
	FnRuns             = "runs"
	FnSystem           = "system"
	FnRunWorker        = "run-worker"
	FnDeployWorker     = "deploy-worker"
)

// Environment variables every function receives.
const (
	EnvTablePrefix        = "STEPGRAPH_TABLE_PREFIX"
	EnvSecretsPrefix      = "STEPGRAPH_SECRETS_PREFIX"
	EnvRunStateMachineARN = "STEPGRAPH_RUN_STATE_MACHINE_ARN"
	EnvDeployStateMachine = "STEPGRAPH_DEPLOY_STATE_MACHINE_ARN"
	EnvLogLevel           = "STEPGRAPH_LOG_LEVEL"
	// EnvRateLimit is the API functions' per-key rate limit, set only when
	// Props.RateLimit is (internal/lambdaapp.EnvRateLimit).
	EnvRateLimit = "STEPGRAPH_RATE_LIMIT"
	// EnvRuntimeRoleARN is the role of the runtime functions the
	// deploy-worker makes from deployments' images (RuntimeRole); only the
	// deploy-worker gets it.
	EnvRuntimeRoleARN = "STEPGRAPH_RUNTIME_ROLE_ARN"
)

// RuntimeNamePrefix follows the resource prefix in the names of the runtime
// functions the deploy-worker makes from external_docker deployments'
// images: <resource prefix>rt-<deployment id> (internal/lambdaruntime).
// Every grant on runtimes is scoped to these names.
const RuntimeNamePrefix = "rt-"

// What a function may do with the deployments' runtime functions (Lambda
// functions named after RuntimeNamePrefix). Derived from the main module:
// function nodes and function tools run in the run-worker (runs.StepRun),
// and the describe call of a deployment's runtime and the making of the
// runtime from an image happen while provisioning, in the deploy-worker;
// the API functions hand both to the state machines and call no runtime.
type runtimeAccess uint8

const (
	invokeRuntimes runtimeAccess = 1 << iota // lambda:InvokeFunction
	manageRuntimes                           // create, update, read them; pass the runtime role
)

// What a function may do with the state machines' executions. Derived from
// the main module: every API function wires the run dispatcher and the
// provisioner (internal/lambdaapp), but only creating a run starts a run
// execution (runs.Service.CreateRun) and only waiting on or joining one
// describes it (runs.Service.Wait/Join through sfn.Dispatcher.Lost); the
// deployment operations start provisioning executions and never read them;
// the workers are invoked by the state machines and start nothing, but for
// the deploy worker's scheduled resume, which restarts provisioning that
// lost its execution (and so lists the running ones).
type executions uint8

const (
	startRun     executions = 1 << iota // states:StartExecution on the run machine
	watchRun                            // states:DescribeExecution on its executions
	startDeploy                         // states:StartExecution on the deploy machine
	resumeDeploy                        // states:ListExecutions on the deploy machine
)

// FunctionSpec is what the stack gives one function beyond what all share
// (code, runtime, architecture, environment, its log group, the tables and
// the secrets under the prefix).
type FunctionSpec struct {
	Name string
	// API: served behind the HTTP API (false: a Step Functions worker).
	API bool
	// Timeout is the Lambda timeout. See the package doc on timeouts.
	Timeout time.Duration
	// MemoryMB is the Lambda memory size (CPU scales with it).
	MemoryMB int
	// Executions: what the function may do with state machine executions.
	Executions executions
	// Runtimes: what the function may do with the runtime functions.
	Runtimes runtimeAccess
}

// ResumeEvery is how often the deploy worker resumes dropped provisioning
// (internal/lambdaapp.HandleDeployTask, action "resume").
const ResumeEvery = 5 * time.Minute

// apiTimeout is the Lambda timeout of every API function. The HTTP API gives
// an integration at most 30 s; internal/lambdaapp answers within
// min(28 s, the invocation deadline - 1 s), so a wait still in progress
// answers 200 with a WaitTimeout __error__ and a Location to join, never a
// gateway 503.
const apiTimeout = 29 * time.Second

// Functions lists every function of the stack, in the order of
// functions/routes.json.
var Functions = []FunctionSpec{
	{Name: FnCreateProvider, API: true, Timeout: apiTimeout, MemoryMB: 512},
	{Name: FnProviders, API: true, Timeout: apiTimeout, MemoryMB: 512},
	{Name: FnCreateDeployment, API: true, Timeout: apiTimeout, MemoryMB: 512, Executions: startDeploy},
	{Name: FnDeployments, API: true, Timeout: apiTimeout, MemoryMB: 512, Executions: startDeploy},
	{Name: FnAssistants, API: true, Timeout: apiTimeout, MemoryMB: 512},
	{Name: FnThreads, API: true, Timeout: apiTimeout, MemoryMB: 512},
	{Name: FnThreadRunWait, API: true, Timeout: apiTimeout, MemoryMB: 512, Executions: startRun | watchRun},
	{Name: FnStatelessRunWait, API: true, Timeout: apiTimeout, MemoryMB: 512, Executions: startRun | watchRun},
	{Name: FnRuns, API: true, Timeout: apiTimeout, MemoryMB: 512, Executions: startRun | watchRun},
	{Name: FnSystem, API: true, Timeout: apiTimeout, MemoryMB: 256},
	// run-worker: one Step task of the run state machine. It executes
	// super-steps for half its remaining time, then answers "continue"; a
	// timed-out attempt is retried by the state machine from the last
	// checkpoint. 10 minutes leaves room for slow model and tool calls
	// within a step (Lambda's maximum is 15; the run lease, 16).
	{Name: FnRunWorker, Timeout: 10 * time.Minute, MemoryMB: 1024, Runtimes: invokeRuntimes},
	// deploy-worker: one provisioning task (check the source: clone the
	// repository at repo_ref and read its graph config; make the runtime
	// function of an image and ask the runtime to describe the graphs;
	// settle the status).
	// Every ResumeEvery it is also invoked with {"action":"resume"}.
	{Name: FnDeployWorker, Timeout: 5 * time.Minute, MemoryMB: 1024, Runtimes: invokeRuntimes | manageRuntimes,
		Executions: startDeploy | resumeDeploy},
}

// checkFunctions fails unless Functions and the functions of routes.json
// are the same, with the same roles: a function added on either side needs
// its grants decided here.
func checkFunctions(entries []FunctionEntry) error {
	specs := map[string]FunctionSpec{}
	for _, s := range Functions {
		specs[s.Name] = s
	}
	seen := map[string]bool{}
	for _, e := range entries {
		s, ok := specs[e.Name]
		if !ok {
			return fmt.Errorf("function %s of functions/routes.json has no FunctionSpec in infra/stack/functions.go", e.Name)
		}
		wantRole := "api"
		if !s.API {
			wantRole = s.Name
		}
		if e.Role != wantRole {
			return fmt.Errorf("function %s: role %q in functions/routes.json, %q here", e.Name, e.Role, wantRole)
		}
		seen[e.Name] = true
	}
	for _, s := range Functions {
		if !seen[s.Name] {
			return fmt.Errorf("function %s is not in functions/routes.json", s.Name)
		}
	}
	return nil
}

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
	FnRunStream        = "run-stream"
	FnSystem           = "system"
	FnStore            = "store"
	FnAppCalls         = "app-calls"
	FnRunWorker        = "run-worker"
	FnDeployWorker     = "deploy-worker"
	FnCrons            = "crons"
	FnCronFire         = "cron-fire"
)

// Environment variables every function receives.
const (
	EnvTablePrefix        = "STEPGRAPH_TABLE_PREFIX"
	EnvSecretsPrefix      = "STEPGRAPH_SECRETS_PREFIX"
	EnvRunStateMachineARN = "STEPGRAPH_RUN_STATE_MACHINE_ARN"
	EnvDeployStateMachine = "STEPGRAPH_DEPLOY_STATE_MACHINE_ARN"
	// EnvRunExpressStateMachineARN is the run machine's Express front, set
	// on the functions granted start-run-express when the stack has one
	// (internal/lambdaapp.EnvRunExpressStateMachineARN).
	EnvRunExpressStateMachineARN = "STEPGRAPH_RUN_EXPRESS_STATE_MACHINE_ARN"
	EnvLogLevel                  = "STEPGRAPH_LOG_LEVEL"
	// EnvRateLimit is the API functions' per-key rate limit, set only when
	// Props.RateLimit is (internal/lambdaapp.EnvRateLimit).
	EnvRateLimit = "STEPGRAPH_RATE_LIMIT"
	// EnvRuntimeRoleARN is the role of the runtime functions the
	// deploy-worker makes from deployments' images (RuntimeRole); only the
	// deploy-worker gets it.
	EnvRuntimeRoleARN = "STEPGRAPH_RUNTIME_ROLE_ARN"
	// EnvCronScheduleGroup, EnvCronTargetARN, EnvCronRoleARN: the crons'
	// schedule group, their target (cron-fire) and the role EventBridge
	// Scheduler invokes it with; the functions granted SchedulesManage get
	// them (internal/lambdaapp.EnvCronScheduleGroup).
	EnvCronScheduleGroup = "STEPGRAPH_CRON_SCHEDULE_GROUP"
	EnvCronTargetARN     = "STEPGRAPH_CRON_TARGET_ARN"
	EnvCronRoleARN       = "STEPGRAPH_CRON_ROLE_ARN"
	// The store's embeddings endpoint (internal/lambdaapp.EnvStore*).
	EnvStoreEmbeddingsURL       = "STEPGRAPH_STORE_EMBEDDINGS_URL"
	EnvStoreEmbeddingsModel     = "STEPGRAPH_STORE_EMBEDDINGS_MODEL"
	EnvStoreEmbeddingsDims      = "STEPGRAPH_STORE_EMBEDDINGS_DIMS"
	EnvStoreIndexFields         = "STEPGRAPH_STORE_INDEX_FIELDS"
	EnvStoreEmbeddingsKeySecret = "STEPGRAPH_STORE_EMBEDDINGS_KEY_SECRET"
	// EnvVaultKeyID is the vault KMS key's ARN, given to the functions
	// granted Vault actions (internal/lambdaapp.EnvVaultKeyID).
	EnvVaultKeyID = "STEPGRAPH_VAULT_KEY_ID"
	// EnvPublicURL is the stage's public address, set on the API functions
	// only when Props.PublicURL is (a custom domain): without it they take
	// the API Gateway address each request came to
	// (internal/lambdaapp.EnvPublicURL). The run-worker always has it
	// (graph nodes' authorization URLs): Props.PublicURL, else the REST
	// API's URL.
	EnvPublicURL = "STEPGRAPH_PUBLIC_URL"
)

// CronScheduleGroupName follows the resource prefix in the name of the
// crons' schedule group.
const CronScheduleGroupName = "crons"

// RuntimeNamePrefix follows the resource prefix in the names of the runtime
// functions the deploy-worker makes from external_docker deployments'
// images: <resource prefix>rt-<deployment id> (internal/lambdaruntime).
// Every grant on runtimes is scoped to these names.
const RuntimeNamePrefix = "rt-"

// FunctionSpec is how the stack deploys one function beyond what all share
// (code, runtime, architecture, environment, its log group). What its role
// may do is not here: it is the function's grants in functions/routes.json
// (internal/lambdaapp.Functions), next to its routes.
type FunctionSpec struct {
	Name string
	// API: served behind the HTTP API (false: a Step Functions worker).
	API bool
	// Timeout is the Lambda timeout. See the package doc on timeouts.
	Timeout time.Duration
	// MemoryMB is the Lambda memory size (CPU scales with it).
	MemoryMB int
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

// streamTimeout is the Lambda timeout of the functions whose routes stream
// (FunctionEntry.Stream): the 15 minutes a REST API streams a response,
// and Lambda's maximum. internal/lambdaapp ends a streamed response
// within min(14 min 30 s, the invocation deadline - 1 s); behind the HTTP
// API the same function still answers buffered within 28 s.
const streamTimeout = 15 * time.Minute

// Functions lists every function of the stack, in the order of
// functions/routes.json.
var Functions = []FunctionSpec{
	{Name: FnCreateProvider, API: true, Timeout: apiTimeout, MemoryMB: 512},
	{Name: FnProviders, API: true, Timeout: apiTimeout, MemoryMB: 512},
	{Name: FnCreateDeployment, API: true, Timeout: apiTimeout, MemoryMB: 512},
	{Name: FnDeployments, API: true, Timeout: apiTimeout, MemoryMB: 512},
	{Name: FnAssistants, API: true, Timeout: apiTimeout, MemoryMB: 512},
	{Name: FnThreads, API: true, Timeout: apiTimeout, MemoryMB: 512},
	// The waits and the streams execute no run: they poll the run (or
	// tail its event log) and write the answer, mostly asleep. 256 MB
	// (about a seventh of a vCPU) is their CPU: cold start (INIT, about
	// 30 ms of CPU on a full core for these functions' own operations,
	// bench/results/2026-11-26-cold-start.md) and encoding an answer of a
	// few MB; half the GB-seconds of 512 MB for the same sleep (review
	// #19). The run-worker keeps its GB for the graph's CPU.
	{Name: FnThreadRunWait, API: true, Timeout: streamTimeout, MemoryMB: 256},
	{Name: FnStatelessRunWait, API: true, Timeout: streamTimeout, MemoryMB: 256},
	// run-stream tails the event log and writes SSE: it executes no run.
	{Name: FnRunStream, API: true, Timeout: streamTimeout, MemoryMB: 256},
	{Name: FnRuns, API: true, Timeout: apiTimeout, MemoryMB: 512},
	{Name: FnStore, API: true, Timeout: apiTimeout, MemoryMB: 512},
	// runtime: what LangGraph apps' graphs on Lambda call back during a
	// run call (their store, their users' provider tokens, their live
	// events), with the call's signed token.
	{Name: FnAppCalls, API: true, Timeout: apiTimeout, MemoryMB: 512},
	{Name: FnSystem, API: true, Timeout: apiTimeout, MemoryMB: 256},
	{Name: FnCrons, API: true, Timeout: apiTimeout, MemoryMB: 512},
	// run-worker: one Step task of the run state machine. It executes
	// super-steps for half its remaining time, then answers "continue"; a
	// timed-out attempt is retried by the state machine from the last
	// checkpoint. 10 minutes leaves room for slow model and tool calls
	// within a step (Lambda's maximum is 15; the run lease, 16).
	{Name: FnRunWorker, Timeout: 10 * time.Minute, MemoryMB: 1024},
	// deploy-worker: one provisioning task (check the source: clone the
	// repository at repo_ref and read its graph config; make the runtime
	// function of an image and ask the runtime to describe the graphs;
	// settle the status).
	// Every ResumeEvery it is also invoked with {"action":"resume"}.
	{Name: FnDeployWorker, Timeout: 5 * time.Minute, MemoryMB: 1024},
	// cron-fire: the target of the crons' EventBridge schedules; one
	// firing claims the slot, creates the run (its execution does the
	// work) and moves the schedule.
	{Name: FnCronFire, Timeout: time.Minute, MemoryMB: 512},
}

// checkFunctions fails unless Functions and the functions of routes.json
// are the same, with the same roles, and every function's grants are in
// the vocabulary of policy.go on tables of tables.
func checkFunctions(entries []FunctionEntry, tables []string) error {
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
		if e.Stream && (!s.API || s.Timeout != streamTimeout) {
			return fmt.Errorf("function %s streams its routes (functions/routes.json): it must be an API function with the %s timeout of a streamed response", e.Name, streamTimeout)
		}
		if !e.Stream && s.API && s.Timeout > apiTimeout {
			return fmt.Errorf("function %s: timeout %s, more than a buffered integration waits (%s)", e.Name, s.Timeout, apiTimeout)
		}
		if err := checkGrants(e.Name, e.Grants, tables); err != nil {
			return fmt.Errorf("functions/routes.json: %w", err)
		}
		if err := checkTenant(e.Name, e.Grants.Tenant, tables); err != nil {
			return fmt.Errorf("functions/routes.json: %w", err)
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

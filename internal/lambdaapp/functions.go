package lambdaapp

import (
	"slices"
	"strings"

	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

// Function is one Lambda of functions/<Name>: its role, for API functions
// the API Gateway routes (HTTP API route keys) it serves, and what its IAM
// role is granted.
type Function struct {
	Name   string   `json:"name"`
	Role   string   `json:"role"` // "api", "run-worker", "deploy-worker" or "cron-fire"
	Routes []string `json:"routes,omitempty"`
	// Stream: behind the REST API, every route of the function streams
	// its response (integration ResponseTransferMode STREAM, up to 15
	// minutes; Router, StreamingHandler): the run streams, the waits and
	// the join. Behind the HTTP API it is buffered like every function.
	Stream bool   `json:"stream,omitempty"`
	Grants Grants `json:"grants"`
}

// Grants is what a function may do on AWS: what the code behind its routes
// (an API function serves no others, see Config.Function) or its worker
// role does, and no more. The CDK app (infra/stack) builds each function's
// IAM role from exactly this, read from functions/routes.json; a test of
// functions/ runs every route and worker action on the emulator and
// requires every AWS call each function makes to be granted here, since
// the emulator enforces no IAM.
type Grants struct {
	// Tables maps a table (dynamo.Table*, without the prefix) to Read
	// (dynamodb:GetItem, Query, ConditionCheckItem) or Write (Read and
	// PutItem, UpdateItem, DeleteItem, BatchWriteItem), on the table and
	// its indexes.
	Tables map[string]string `json:"tables,omitempty"`
	// Secrets maps a kind of secret, the first segment of its reference
	// (SecretProviders, SecretDeployments, SecretOrgs), to the actions
	// SecretCreate, SecretGet, SecretDelete on the secrets of that kind:
	// the IAM grant is on <secrets prefix><kind>/*.
	Secrets map[string][]string `json:"secrets,omitempty"`
	// Executions: StartRun, StartRunExpress, DescribeRun, StartDeploy,
	// ListDeploy, WakeRun.
	Executions []string `json:"executions,omitempty"`
	// Runtimes: what it may do with the runtime functions the deploy
	// worker makes (named <table prefix>rt-*): InvokeRuntimes,
	// ManageRuntimes (create, update, read, delete them, pass their role).
	Runtimes []string `json:"runtimes,omitempty"`
	// Schedules: ManageSchedules, to create, update and delete the
	// EventBridge schedules of crons in the stage's schedule group (and
	// pass their role to EventBridge Scheduler).
	Schedules []string `json:"schedules,omitempty"`
	// Vault: SecretCreate, SecretGet, SecretDelete on agent auth's token
	// vault (internal/secrets/kmsvault): its items are in the providers
	// table (the function needs Write on it), and the stack's vault KMS key
	// wraps their data keys: create is kms:GenerateDataKey, get
	// kms:Decrypt, each only under the vault's encryption context
	// (kmsvault.ContextKey: agentauth/*). The function gets the key in
	// EnvVaultKeyID.
	Vault []string `json:"vault,omitempty"`
	// Builds: StartBuilds, to start and read the builds of the stage's
	// CodeBuild project of LangGraph apps (codebuild:StartBuild,
	// BatchGetBuilds on it) and read their logs (logs:GetLogEvents on its
	// log group); the function gets the project in EnvBuildProject. The
	// builds' objects are in the payload bucket (the function's payload
	// access, which follows its tables).
	Builds []string `json:"builds,omitempty"`
	// Tenant is what one organization's session may do (the run worker's:
	// review #9's tenant-scoped session, docs/aws.md "Tenant sessions"):
	// the stack makes a tenant role of it, which the function may assume
	// only with the session tag org=<the organization>.
	Tenant *TenantGrants `json:"tenant,omitempty"`
}

// TenantGrants is a tenant role's grants. Every pattern holds OrgPlaceholder
// where the session's org tag goes (${aws:PrincipalTag/org} in IAM) and is
// matched as IAM's StringLike does (* any run of characters, ? one).
type TenantGrants struct {
	// Tables maps a table to its access and the partition keys the
	// session may reach (dynamodb:LeadingKeys, ForAllValues:StringLike).
	Tables map[string]TenantTable `json:"tables"`
	// Secrets maps a kind of secret to actions, on the secrets of the kind
	// tagged org=<the organization> (secretsmanager:ResourceTag/org).
	Secrets map[string][]string `json:"secrets,omitempty"`
	// Vault: actions on the vault key under the encryption context
	// agentauth/<the organization>/* only.
	Vault []string `json:"vault,omitempty"`
}

// TenantTable is one table of a tenant role.
type TenantTable struct {
	Access      string   `json:"access"`
	LeadingKeys []string `json:"leading_keys"`
}

// OrgPlaceholder stands for the session's organization in TenantGrants.
const OrgPlaceholder = "{org}"

// OrgTag is the tag naming a secret's organization, and the session tag of
// a tenant session (infra/stack: secretsmanager:ResourceTag/org =
// ${aws:PrincipalTag/org}).
const OrgTag = "org"

// orgSecretKinds are the kinds of secret named <kind>/<org>/…; a
// deployment's are named after the deployment and carry no org tag.
var orgSecretKinds = []string{SecretProviders, SecretOrgs, SecretAgentAuth}

// OrgTags are the tags of a new secret named name (secrets/aws
// Options.Tags): org=<its organization> for the kinds named after one.
func OrgTags(name string) map[string]string {
	parts := strings.SplitN(name, "/", 3)
	if len(parts) < 3 || parts[1] == "" || !slices.Contains(orgSecretKinds, parts[0]) {
		return nil
	}
	return map[string]string{OrgTag: parts[1]}
}

// PayloadAccess is what a function may do with the payload store (the S3
// bucket of EnvPayloadBucket): it follows the tables, since the DynamoDB
// adapter reads an item's payloads wherever it reads items and writes
// (and deletes) them wherever it writes items. Write when any table is
// written, Read when any is read, "" for a function without tables.
func (g Grants) PayloadAccess() string {
	access := ""
	for _, a := range g.Tables {
		if a == Write {
			return Write
		}
		access = Read
	}
	return access
}

// The vocabulary of Grants.
const (
	Read  = "read"
	Write = "write"

	SecretProviders   = "providers"   // OAuth client secrets (internal/providers)
	SecretDeployments = "deployments" // deployment secret values (internal/deployments)
	SecretOrgs        = "orgs"        // per-organization keys: webhook signing (internal/webhooks), request hashes (internal/auth), PKCE verifiers (internal/agentauth)
	SecretAgentAuth   = "agentauth"   // agent-auth token values in Secrets Manager: only a stage without EnvVaultKeyID (Grants.Vault otherwise)
	SecretStore       = "store"       // the operator's embeddings API key of the store (EnvStoreEmbeddingsKeySecret)
	SecretCreate      = "create"
	SecretGet         = "get"
	SecretDelete      = "delete"

	StartRun = "start-run" // states:StartExecution on the run machine
	// StartRunExpress: states:StartExecution on the run machine's Express
	// front (a stack deployed with -c expressRuns=false has none, and
	// grants nothing for it).
	StartRunExpress = "start-run-express"
	DescribeRun     = "describe-run" // states:DescribeExecution on its executions
	StartDeploy     = "start-deploy" // states:StartExecution on the deploy machine
	ListDeploy      = "list-deploy"  // states:ListExecutions on the deploy machine
	// WakeRun: states:SendTaskSuccess on the run machine, to wake a queued
	// run's parked execution (runs.Parking).
	WakeRun = "wake-run"

	InvokeRuntimes = "invoke"
	ManageRuntimes = "manage"

	ManageSchedules = "manage"

	StartBuilds = "start"
)

// Functions lists every function; functions/routes.json is the same list
// for tools outside this module (the CDK app), and a test keeps the two,
// the mains under functions/ and the OpenAPI document in step: every
// operation is routed to exactly one function.
//
// Every API operation but the public ones authenticates its key first
// (organizations, Read). The rest of each function's grants follow from
// what its routes' use cases do; the test of functions/ (grants_test.go)
// holds the table to what the functions do on the emulator.
var Functions = []Function{
	{Name: "create-provider", Role: "api", Routes: []string{
		"POST /v2/auth/providers",
	}, Grants: Grants{
		// The Idempotency-Key record, hashed under the organization's
		// request-hash key (an organization secret, made and recorded on the
		// organization on first use); the provider; its client secret
		// (deleted again when the provider cannot be stored).
		Tables: tables(dynamo.TableOrganizations, Write, dynamo.TableIdempotency, Write, dynamo.TableProviders, Write),
		Secrets: map[string][]string{SecretProviders: {SecretCreate, SecretDelete},
			SecretOrgs: {SecretCreate, SecretGet}},
	}},
	{Name: "providers", Role: "api", Routes: []string{
		"GET /v2/auth/providers",
		"GET /v2/auth/providers/{provider_id}",
		"PATCH /v2/auth/providers/{provider_id}",
		"DELETE /v2/auth/providers/{provider_id}",
		// Agent auth (internal/agentauth), the rest of the /v2/auth group.
		"POST /v2/auth/authenticate",
		"GET /v2/auth/wait/{auth_id}",
		"GET /v2/auth/callback/{provider_id}",
		"GET /v2/auth/tokens/exists",
		"DELETE /v2/auth/tokens",
		"POST /v2/auth/callback/{provider_id}",
		"GET /v2/auth/tokens",
		"DELETE /v2/auth/tokens/{token_id}",
	}, Grants: Grants{
		// A PATCH with a client_secret stores the new one and deletes the
		// old; DELETE deletes it (and the provider's agent-auth tokens).
		// Agent auth keeps its attempts and token records in the providers
		// table, reads the client secret for the code exchange, derives
		// PKCE verifiers from an organization key (made and recorded on
		// first use), and keeps token values in the vault (KMS-sealed items
		// of the providers table).
		Tables: tables(dynamo.TableOrganizations, Write, dynamo.TableProviders, Write),
		Secrets: map[string][]string{SecretProviders: {SecretCreate, SecretGet, SecretDelete},
			SecretOrgs: {SecretCreate, SecretGet}},
		Vault: []string{SecretCreate, SecretGet, SecretDelete},
	}},
	{Name: "create-deployment", Role: "api", Routes: []string{
		"POST /v2/deployments",
	}, Grants: Grants{
		// The Idempotency-Key record (hashed as for create-provider); the
		// deployment and its first revision; their secret values; the
		// provisioning execution.
		Tables: tables(dynamo.TableOrganizations, Write, dynamo.TableIdempotency, Write, dynamo.TableDeployments, Write),
		Secrets: map[string][]string{SecretDeployments: {SecretCreate, SecretDelete},
			SecretOrgs: {SecretCreate, SecretGet}},
		Executions: []string{StartDeploy},
	}},
	{Name: "deployments", Role: "api", Routes: []string{
		"GET /v2/deployments",
		"GET /v2/deployments/{deployment_id}",
		"PATCH /v2/deployments/{deployment_id}",
		"DELETE /v2/deployments/{deployment_id}",
		"GET /v2/deployments/{deployment_id}/revisions",
		"POST /v2/deployments/{deployment_id}/revisions",
		"GET /v2/deployments/{deployment_id}/revisions/{revision_id}",
		"POST /v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy",
		"POST /v1/projects/{project_id}/revisions/{revision_id}/build_logs",
		"POST /v1/projects/{project_id}/revisions/{revision_id}/deploy_logs",
		"POST /v1/projects/{project_id}/deploy_logs",
	}, Grants: Grants{
		// New revisions store their changed secret values (and delete them
		// when the revision cannot be stored); the deletion of the old ones
		// and of the deployment's happens in the deploy worker.
		Tables:     tables(dynamo.TableOrganizations, Read, dynamo.TableDeployments, Write),
		Secrets:    map[string][]string{SecretDeployments: {SecretCreate, SecretDelete}},
		Executions: []string{StartDeploy},
	}},
	{Name: "assistants", Role: "api", Routes: []string{
		"POST /assistants",
		"POST /assistants/search",
		"GET /assistants/{assistant_id}",
		"DELETE /assistants/{assistant_id}",
		"GET /assistants/{assistant_id}/graph",
		"GET /assistants/{assistant_id}/schemas",
		"POST /assistants/count",
		"PATCH /assistants/{assistant_id}",
		"POST /assistants/{assistant_id}/versions",
		"POST /assistants/{assistant_id}/latest",
		"GET /assistants/{assistant_id}/subgraphs",
		"GET /assistants/{assistant_id}/subgraphs/{namespace}",
		// The JS SDK's getComponent (of an assistant's graph): behind the
		// API key, answered without a use case (no graph has a UI bundle).
		"POST /ui/{graph_id}",
	}, Grants: Grants{
		// A deployed graph is resolved from the deployment serving it (its
		// revision compiled with the deployment's secret values); a
		// LangGraph app's is described and drawn by its function.
		Tables:   tables(dynamo.TableOrganizations, Read, dynamo.TableAssistants, Write, dynamo.TableDeployments, Read),
		Secrets:  map[string][]string{SecretDeployments: {SecretGet}},
		Runtimes: []string{InvokeRuntimes},
	}},
	{Name: "threads", Role: "api", Routes: []string{
		"POST /threads",
		"POST /threads/search",
		"GET /threads/{thread_id}",
		"PATCH /threads/{thread_id}",
		"DELETE /threads/{thread_id}",
		"GET /threads/{thread_id}/state",
		"GET /threads/{thread_id}/state/{checkpoint_id}",
		"POST /threads/{thread_id}/history",
		"POST /threads/count",
		"POST /threads/prune",
		"POST /threads/{thread_id}/copy",
		"POST /threads/{thread_id}/state",
		"PATCH /threads/{thread_id}/state",
		"POST /threads/{thread_id}/state/checkpoint",
		// Upstream's GET history, a thread's storage, and the
		// organization's metrics (its run queue is on its busy threads).
		"GET /threads/{thread_id}/history",
		"GET /threads/{thread_id}/storage",
		"GET /metrics",
	}, Grants: Grants{
		// State edits (update_state, supersteps on create) resolve the
		// thread's graph; a deployed one is compiled from its deployment
		// with the deployment's secret values. Deleting or pruning a
		// thread wakes its runs' parked executions (runs.Parking). A
		// LangGraph app's state edits and subgraph states are its
		// function's calls.
		Tables:     tables(dynamo.TableOrganizations, Read, dynamo.TableThreads, Write, dynamo.TableDeployments, Read),
		Secrets:    map[string][]string{SecretDeployments: {SecretGet}},
		Executions: []string{WakeRun},
		Runtimes:   []string{InvokeRuntimes},
	}},
	// The waits stream: keep-alive newlines, then the run's output, for
	// up to 15 minutes (and any size) instead of 28 s and 6 MB.
	{Name: "thread-run-wait", Role: "api", Stream: true, Routes: []string{
		"POST /threads/{thread_id}/runs/wait",
	}, Grants: runsGrants(),
	},
	{Name: "stateless-run-wait", Role: "api", Stream: true, Routes: []string{
		"POST /runs/wait",
	}, Grants: runsGrants(),
	},
	// run-stream follows runs: it creates and streams them, joins their
	// streams and waits (join), and follows a thread's runs. It executes
	// nothing: the run worker writes a streamed run's events to the event
	// log (in the threads table) and this function tails it
	// (runs.Service.TailEvents).
	{Name: "run-stream", Role: "api", Stream: true, Routes: []string{
		"POST /threads/{thread_id}/runs/stream",
		"POST /runs/stream",
		"GET /threads/{thread_id}/runs/{run_id}/stream",
		"GET /threads/{thread_id}/runs/{run_id}/join",
		"GET /threads/{thread_id}/stream",
		"POST /threads/{thread_id}/stream/events",
	}, Grants: runsGrants(),
	},
	{Name: "runs", Role: "api", Routes: []string{
		"GET /threads/{thread_id}/runs",
		"POST /threads/{thread_id}/runs",
		"GET /threads/{thread_id}/runs/{run_id}",
		"DELETE /threads/{thread_id}/runs/{run_id}",
		"POST /threads/{thread_id}/runs/{run_id}/cancel",
		"POST /runs",
		// The thread event protocol's commands start runs (its event stream
		// is run-stream's: it tails the thread's event log).
		"POST /threads/{thread_id}/commands",
		"POST /runs/batch",
		"POST /runs/cancel",
		// MCP and A2A (internal/interop) run assistants as runs/wait does,
		// and read assistants for tools/list and agent cards: the runs
		// grants. A2A message/stream is buffered like the streams above.
		"POST /mcp",
		"GET /mcp",
		"DELETE /mcp",
		"POST /a2a/{assistant_id}",
		"GET /a2a/{assistant_id}",
		"GET /a2a/{assistant_id}/.well-known/agent-card.json",
		"GET /a2a/{assistant_id}/.well-known/agent.json",
		"GET /.well-known/agent-card.json",
	}, Grants: runsGrants(),
	},
	// crons: the cron records, the assistant (and the deployment serving a
	// deployed graph by name) and thread a cron names, and the cron's
	// EventBridge schedule, made, moved and deleted with it.
	{Name: "crons", Role: "api", Routes: []string{
		"POST /runs/crons",
		"POST /threads/{thread_id}/runs/crons",
		"POST /runs/crons/search",
		"POST /runs/crons/count",
		"GET /runs/crons/{cron_id}",
		"PATCH /runs/crons/{cron_id}",
		"DELETE /runs/crons/{cron_id}",
	}, Grants: Grants{
		Tables: tables(dynamo.TableOrganizations, Read, dynamo.TableCrons, Write, dynamo.TableAssistants, Write,
			dynamo.TableDeployments, Read, dynamo.TableThreads, Read),
		Schedules: []string{ManageSchedules},
	}},
	// The long-term memory store: items in the threads table (counted in
	// the organization's usage there); the operator's embeddings key, read
	// at a cold start when semantic search is configured.
	{Name: "store", Role: "api", Routes: []string{
		"PUT /store/items",
		"GET /store/items",
		"DELETE /store/items",
		"POST /store/items/search",
		"POST /store/namespaces",
	}, Grants: Grants{
		Tables:  tables(dynamo.TableOrganizations, Read, dynamo.TableThreads, Write),
		Secrets: map[string][]string{SecretStore: {SecretGet}},
	}},
	// LangGraph apps' run calls on Lambda calling back (internal/calltoken):
	// the graphs' store (items, the calls' budgets and the mailboxes of
	// their posted events in the threads table), their users' provider tokens (agent auth: attempts and
	// tokens in the providers table, the vault, the PKCE key); the call
	// tokens' keys are read, never made here (the run worker signs).
	{Name: "app-calls", Role: "api", Routes: []string{
		"POST /runtime/store",
		"POST /runtime/auth/token",
		"POST /runtime/events",
	}, Grants: Grants{
		Tables: tables(dynamo.TableOrganizations, Write, dynamo.TableProviders, Write, dynamo.TableThreads, Write),
		Secrets: map[string][]string{SecretOrgs: {SecretCreate, SecretGet}, SecretProviders: {SecretGet},
			SecretStore: {SecretGet}},
		Vault: []string{SecretCreate, SecretGet, SecretDelete},
	}},
	// Public routes only (and $default, answered without a use case): no
	// table, no secret.
	{Name: "system", Role: "api", Routes: []string{
		"GET /ok",
		"GET /info",
		"GET /openapi.json",
		"GET /docs",
		"GET /docs/assets/{asset}",
		// The web console (internal/console): its page and assets.
		"GET /",
		"GET /console/assets/{asset}",
		"GET /v2/graph-schema",
		"GET /v2/graph-config-schema",
	}},
	// run-worker: the run's thread, runs and checkpoints; the assistant and
	// the deployed graph's revision, compiled with its secret values; the
	// runtime's function nodes; and the webhook: its organization's signing
	// key, made on first use (a secret, and its reference on the
	// organization).
	//
	// Graph nodes with auth (agentauth.OrgTokens: Authenticate, as the
	// providers function runs it): the provider and the user's token
	// record (providers table); the token value from the vault; a token
	// about to expire is refreshed with the provider's client secret, the
	// new value sealed into the vault, the record moved to it and the old
	// value deleted (Write on the table, vault create and delete); without
	// a usable token, a new attempt is recorded (Write) with its PKCE
	// verifier derived from the organization's key (SecretOrgs, as for
	// webhooks) and the run interrupts with its authorization URL, built
	// on EnvPublicURL (the worker serves no request to take it from).
	//
	// All of that is done in a session of the run's organization (Tenant,
	// tenant.go) but what belongs to no one organization, which is all its
	// own role may do: run markers and temporary results (threads), the
	// sweep of expired threads (threads, every organization's), an
	// authorization's state marker written with its attempt (providers),
	// deployment secret values and the store's key, the payload store, the
	// runtimes, the wake.
	{Name: "run-worker", Role: "run-worker", Grants: Grants{
		Tables: tables(dynamo.TableThreads, Write, dynamo.TableProviders, Write),
		Secrets: map[string][]string{
			SecretDeployments: {SecretGet},
			// The store's embeddings key (graphs' store nodes).
			SecretStore: {SecretGet},
		},
		Runtimes: []string{InvokeRuntimes},
		// Waking the parked execution of the next run of a thread.
		Executions: []string{WakeRun},
		Tenant:     runWorkerTenant,
	}},
	// deploy-worker: the deployment's lifecycle (its revisions, their
	// secret values read for the runtime and deleted with the deployment),
	// the default assistants of the graphs it publishes, the runtime made
	// from an image or from a LangGraph app's build (made, described,
	// deleted), the app's build, and the scheduled resume.
	{Name: "deploy-worker", Role: "deploy-worker", Grants: Grants{
		Tables:     tables(dynamo.TableDeployments, Write, dynamo.TableAssistants, Write),
		Secrets:    map[string][]string{SecretDeployments: {SecretGet, SecretDelete}},
		Executions: []string{StartDeploy, ListDeploy},
		Runtimes:   []string{InvokeRuntimes, ManageRuntimes},
		// hosted_repo LangGraph apps' builds (CodeBuild).
		Builds: []string{StartBuilds},
	}},
	{Name: "cron-fire", Role: "cron-fire", Grants: cronFireGrants()},
}

// cron-fire: the target of the crons' EventBridge schedules. It claims the
// slot (the cron), creates the run as runs do (runsGrants, without the
// waits), and moves the schedule to the next slot.
func cronFireGrants() Grants {
	g := runsGrants()
	delete(g.Tables, dynamo.TableOrganizations) // it authenticates no request
	g.Tables[dynamo.TableCrons] = Write
	g.Executions = []string{StartRun, StartRunExpress}
	g.Schedules = []string{ManageSchedules}
	return g
}

// runsGrants are the grants of the functions that create, wait on and read
// runs: the thread, its runs and checkpoints; the assistant, and the
// deployment serving a deployed graph with its secret values; starting
// the run's execution (Express or Standard), asking whether it is lost, and waking the parked
// executions of the runs a request ends (a pending run's cancel, an
// abandoned lost run: runs.Parking).
func runsGrants() Grants {
	return Grants{
		Tables: tables(dynamo.TableOrganizations, Read, dynamo.TableThreads, Write,
			dynamo.TableAssistants, Write, dynamo.TableDeployments, Read),
		Secrets:    map[string][]string{SecretDeployments: {SecretGet}},
		Executions: []string{StartRun, StartRunExpress, DescribeRun, WakeRun},
		// Resolving a LangGraph app's graph describes it in its function
		// (its shape, for the run's request rules).
		Runtimes: []string{InvokeRuntimes},
	}
}

// tables builds Grants.Tables from pairs of table and access.
// runWorkerTenant is what the run worker touches of one organization, by
// table: every partition key of these starts with something made of the
// organization's id (store/dynamo's key scheme: doc.go, agentauth.go,
// kmsvault), measured by functions' TestGrantsCoverWhatFunctionsDo, which
// records every key the run worker sends and fails on one that is neither
// here nor in its list of stage-wide keys.
var runWorkerTenant = &TenantGrants{
	Tables: map[string]TenantTable{
		// The run's thread, runs and checkpoints; its stream's events;
		// the organization's running-runs set and usage counters.
		dynamo.TableThreads:     {Write, []string{"T#{org}#*", "EVR#{org}#*", "SLOTS#{org}", "USAGE#{org}"}},
		dynamo.TableAssistants:  {Read, []string{"{org}"}},
		dynamo.TableDeployments: {Read, []string{"ORG#{org}", "DEP#{org}#*"}},
		// The webhook key's reference on the organization.
		dynamo.TableOrganizations: {Write, []string{"ORG#{org}"}},
		// Providers, agent-auth attempts, token records and vault items.
		dynamo.TableProviders: {Write, []string{"{org}", "agentauth-attempt#{org}", "agentauth-token#{org}#*",
			"agentauth-tokenid#{org}", "vault#agentauth/{org}/*"}},
	},
	Secrets: map[string][]string{
		// Its webhook signing key and PKCE key (made on first use).
		SecretOrgs: {SecretCreate, SecretGet, SecretDelete},
		// The client secret of a provider whose token is refreshed.
		SecretProviders: {SecretGet},
	},
	Vault: []string{SecretCreate, SecretGet, SecretDelete},
}

func tables(pairs ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

// FunctionNamed returns the function of Functions named name.
func FunctionNamed(name string) (Function, bool) {
	for _, f := range Functions {
		if f.Name == name {
			return f, true
		}
	}
	return Function{}, false
}

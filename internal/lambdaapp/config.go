package lambdaapp

import (
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/cors"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// Role is what a function does: serve the API or work for a state machine.
type Role int

// Roles.
const (
	RoleAPI Role = iota
	RoleRunWorker
	RoleDeployWorker
	// RoleCronFire is the target of the crons' schedules.
	RoleCronFire
)

func (r Role) String() string {
	switch r {
	case RoleAPI:
		return "api"
	case RoleRunWorker:
		return "run-worker"
	case RoleDeployWorker:
		return "deploy-worker"
	case RoleCronFire:
		return "cron-fire"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// Environment variables read by FromEnv (the SDK reads its own: AWS_REGION,
// AWS_ENDPOINT_URL, credentials).
const (
	EnvTablePrefix           = "STEPGRAPH_TABLE_PREFIX"
	EnvSecretsPrefix         = "STEPGRAPH_SECRETS_PREFIX"
	EnvRunStateMachineARN    = "STEPGRAPH_RUN_STATE_MACHINE_ARN"
	EnvDeployStateMachineARN = "STEPGRAPH_DEPLOY_STATE_MACHINE_ARN"
	// EnvRunExpressStateMachineARN is the Express front of the run machine
	// (internal/awsflow, express.asl.json): runs that can start now start
	// there. Unset (the stack's -c expressRuns=false): every run is a
	// Standard execution.
	EnvRunExpressStateMachineARN = "STEPGRAPH_RUN_EXPRESS_STATE_MACHINE_ARN"
	EnvLogLevel                  = "STEPGRAPH_LOG_LEVEL"
	// EnvPayloadBucket names the S3 bucket of the payload store: documents
	// over dynamo.PayloadThreshold (run inputs and results, states,
	// checkpoints, interrupts, events) live there, with a pointer in the
	// DynamoDB item, so no item exceeds 400 KB (docs/aws.md, "Sizes"). The
	// stack always sets it; without it documents stay in DynamoDB and a
	// run whose input or result nears 400 KB cannot be stored.
	EnvPayloadBucket = "STEPGRAPH_PAYLOAD_BUCKET"
	// EnvWebhooksAllowPrivate=true lets webhooks reach loopback and private
	// addresses: for the emulator tests, never on AWS.
	EnvWebhooksAllowPrivate = "STEPGRAPH_WEBHOOKS_ALLOW_PRIVATE"
	// EnvPublicURL is the stage's public address (https://…): agent
	// auth's OAuth redirect URIs are <it>/v2/auth/callback/{provider_id}.
	// Unset, POST /v2/auth/authenticate answers 409 saying so.
	EnvPublicURL = "STEPGRAPH_PUBLIC_URL"
	// EnvVaultKeyID is the KMS key (ARN) of agent auth's token vault: set,
	// token values are KMS-sealed items of the providers table
	// (internal/secrets/kmsvault); unset, Secrets Manager secrets under
	// agentauth/ (a stage without the key; docs/agent-auth.md, "On AWS").
	EnvVaultKeyID = "STEPGRAPH_VAULT_KEY_ID"
	// EnvRuntimeRoleARN is the IAM role of the Lambda functions the deploy
	// worker makes from external_docker deployments' images
	// (internal/lambdaruntime). Optional: without it, such a revision
	// fails, saying so.
	EnvRuntimeRoleARN = lambdaruntime.EnvRoleARN
	// EnvBuildProject is the CodeBuild project that builds hosted_repo
	// LangGraph apps' Lambda zips (internal/codebuild), in the payload
	// bucket under builds/. Optional: without it (or without the payload
	// bucket), such a revision fails, saying the server does not run
	// LangGraph apps.
	EnvBuildProject = "STEPGRAPH_BUILD_PROJECT"
	// EnvTenantRoleARN is the run worker's tenant role (infra/stack): it
	// executes each run's tenant work with credentials of that role,
	// assumed with the session tag org=<the run's organization>
	// (tenant.go). Unset: everything on the function's own role.
	EnvTenantRoleARN = "STEPGRAPH_TENANT_ROLE_ARN"
	// EnvRuntimeLogGroup is the log group the runtime functions write to
	// (the stack's, with its retention: lambdaruntime.Provisioner.LogGroup).
	// Optional: without it, each runtime logs to /aws/lambda/<its name>.
	EnvRuntimeLogGroup = "STEPGRAPH_RUNTIME_LOG_GROUP"
	// EnvRateLimit is requests per second per API key in each instance of
	// an API function, bursts of twice that; 0 turns the limit off. The
	// local server's variable of the same name, with DefaultRateLimit as
	// the default: see RateLimit.
	EnvRateLimit = "STEPGRAPH_RATE_LIMIT"
	// EnvCORSOrigins is the stage's CORS allow-list (comma-separated
	// origins, or *; cors.Parse): the answers of the API
	// functions carry the CORS headers for these origins. Behind the REST
	// API the gateway answers the preflights (infra/stack) and the
	// functions' headers reach the browser; behind the HTTP API the gateway
	// does both. Unset: no cross-origin access.
	EnvCORSOrigins = "STEPGRAPH_CORS_ORIGINS"
	// EnvMaxRunningPerOrg caps the runs of one organization that execute at
	// once (runs.Service.MaxRunningPerOrg): a whole number, 0 for no cap;
	// unset, runs.DefaultMaxRunningPerOrg. The run worker's claims hold it
	// (each run's execution claims its run): a run over the cap stays
	// pending in its execution's wait loop until a slot frees.
	EnvMaxRunningPerOrg = "STEPGRAPH_MAX_RUNNING_PER_ORG"
	// EnvFaultDir turns on fault injection in binaries built with
	// -tags stepgraph_faults (the end-to-end tests' run-worker) and is
	// ignored by every other build: see faults.go.
	EnvFaultDir = "STEPGRAPH_FAULT_DIR"
	// EnvLocalRepoDirs lets hosted_repo revisions name local repositories
	// (file:// URLs) under these directories (a path list), as the local
	// server's -allow-local-repos does. Only binaries built with -tags
	// stepgraph_faults (the emulator tests' functions, whose repositories
	// are on the test machine) take it; any other build refuses to start
	// with it set: on AWS, git sources are https:// only.
	EnvLocalRepoDirs = "STEPGRAPH_LOCAL_REPO_DIRS"
	// EnvStreamBudget is how long one streamed response lasts at most (a
	// duration, at most 15m; DefaultStreamBudget when unset): then a
	// stream ends and its client reconnects with Last-Event-ID, and a
	// wait answers WaitTimeout. Tests shorten it to cross the boundary.
	EnvStreamBudget = "STEPGRAPH_STREAM_BUDGET"
	// EnvCronScheduleGroup, EnvCronTargetARN and EnvCronRoleARN place the
	// crons' EventBridge schedules: their group, their target (the
	// cron-fire function) and the role EventBridge Scheduler invokes it
	// with. Required by cron-fire; an API function without them keeps no
	// schedules (its crons are stored and never fire).
	EnvCronScheduleGroup = "STEPGRAPH_CRON_SCHEDULE_GROUP"
	EnvCronTargetARN     = "STEPGRAPH_CRON_TARGET_ARN"
	EnvCronRoleARN       = "STEPGRAPH_CRON_ROLE_ARN"
	// The long-term memory store's semantic search (the local server's
	// -store-embeddings-* flags): the OpenAI-compatible endpoint's base
	// URL (https), its model, the vector length to ask for, the default
	// index fields (comma-separated), and the reference of the Secrets
	// Manager secret holding its API key, under the stage's secrets prefix
	// (store/<name>: the kind the store function may read). Unset URL:
	// searches filter only.
	EnvStoreEmbeddingsURL       = "STEPGRAPH_STORE_EMBEDDINGS_URL"
	EnvStoreEmbeddingsModel     = "STEPGRAPH_STORE_EMBEDDINGS_MODEL"
	EnvStoreEmbeddingsDims      = "STEPGRAPH_STORE_EMBEDDINGS_DIMS"
	EnvStoreIndexFields         = "STEPGRAPH_STORE_INDEX_FIELDS"
	EnvStoreEmbeddingsKeySecret = "STEPGRAPH_STORE_EMBEDDINGS_KEY_SECRET"
)

// DefaultRateLimit is EnvRateLimit's default: 100 requests per second per
// API key in one instance, bursts of 200. A Lambda instance serves one
// request at a time, so one instance cannot pass that many unless its
// answers take under 10 ms: the limit stops a client hammering cheap
// requests (tight polling, floods of 404s), not ordinary use. It is lower
// than the local server's 1000 because there it is the only limit; here
// API Gateway's stage throttle is the guard of the whole stage (infra/).
const DefaultRateLimit = 100

// Config is what a function reads from its environment.
type Config struct {
	Role Role
	// Function is the function's name in Functions (StartAPI's name, not
	// read from the environment). An API function with a name serves only
	// its routes: API Gateway sends it no others, and its IAM role is
	// granted only what they need (Function.Grants). "" serves every
	// operation (tests and tools that run the whole API in one process).
	Function string
	// TablePrefix names the DynamoDB tables: prefix + "threads", ...
	TablePrefix string
	// SecretsPrefix is prepended to every Secrets Manager secret name.
	SecretsPrefix string
	// PayloadBucket is the payload store's S3 bucket (EnvPayloadBucket).
	PayloadBucket string
	// RunStateMachineARN and DeployStateMachineARN are the state machines
	// the API starts (API functions only: the workers are invoked by them).
	RunStateMachineARN    string
	DeployStateMachineARN string
	// RunExpressStateMachineARN is EnvRunExpressStateMachineARN ("": none).
	RunExpressStateMachineARN string
	LogLevel                  slog.Level
	WebhooksAllowPrivate      bool
	// RuntimeRoleARN is the execution role of the runtimes made from
	// images ("" when not set).
	RuntimeRoleARN string
	// BuildProject is EnvBuildProject ("": none).
	BuildProject string
	// LocalRepoDirs is EnvLocalRepoDirs (a path list; "": none). Set
	// directly (not from the environment) it works in any build: the
	// emulator tests' in-process API functions.
	LocalRepoDirs string
	// TenantRoleARN is the run worker's tenant role (EnvTenantRoleARN;
	// "" when not set).
	TenantRoleARN string
	// RuntimeLogGroup is EnvRuntimeLogGroup ("": Lambda's default).
	RuntimeLogGroup string
	// RateLimit is requests per second per API key of an API function
	// (EnvRateLimit); 0 is no limit. The limiter is auth.Limiter, in the
	// instance's memory like the local server's: each Lambda instance
	// counts only the requests it serves itself, so a key spread over n
	// instances gets up to n times the rate. It is a first line against
	// one client flooding one instance; the bound of the whole stage is
	// API Gateway's throttle, and of the workers their reserved
	// concurrency (infra/stack). docs/reliability.md, "AWS edge".
	RateLimit float64
	// CORSOrigins is the CORS allow-list (EnvCORSOrigins), checked, as
	// comma-separated origins (a string: Config stays comparable); "":
	// none.
	CORSOrigins string
	// MaxRunningPerOrg as runs.Service.MaxRunningPerOrg takes it: 0 its
	// default, negative no cap.
	MaxRunningPerOrg int
	// Limits and RunTimeout are the run limits and organization quotas
	// (limitsFromEnv; zero: the defaults, quotas off).
	Limits     runs.Limits
	RunTimeout time.Duration
	// StreamBudget bounds one streamed response (EnvStreamBudget; 0:
	// DefaultStreamBudget).
	StreamBudget time.Duration
	// CronScheduleGroup, CronTargetARN and CronRoleARN: see
	// EnvCronScheduleGroup ("" when not set).
	CronScheduleGroup string
	CronTargetARN     string
	CronRoleARN       string
	// PublicURL is EnvPublicURL ("" when unset).
	PublicURL string
	// VaultKeyID is EnvVaultKeyID ("" when unset).
	VaultKeyID string
	// Store is the long-term memory store's semantic search (EnvStore*).
	Store StoreConfig
}

// StoreConfig is the store's embeddings endpoint; URL "" turns semantic
// search off.
type StoreConfig struct {
	EmbeddingsURL   string
	EmbeddingsModel string
	EmbeddingsDims  int
	// IndexFields are the default index paths, comma-separated ("" for
	// the whole value).
	IndexFields string
	// KeySecret is the reference of the API key's secret ("" for none).
	KeySecret string
}

// tablePrefix: DynamoDB table names are [A-Za-z0-9_.-]{3,255}; the longest
// table name adds 13 characters.
var tablePrefix = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,200}$`)

// bucketName is the S3 rule for bucket names (general purpose buckets).
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// roleARN is an IAM role's ARN.
var roleARN = regexp.MustCompile(`^arn:aws(?:-[a-z]+)*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$`)

// kmsKeyARN is a KMS key's ARN.
var kmsKeyARN = regexp.MustCompile(`^arn:aws(?:-[a-z]+)*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]{1,128}$`)

// FromEnv reads the configuration of role through lookup (os.LookupEnv in
// a function). Every problem names its variable.
func FromEnv(role Role, lookup func(string) (string, bool)) (Config, error) {
	c := Config{Role: role}
	var problems []string
	get := func(name string, required bool) string {
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		if required && (!ok || v == "") {
			problems = append(problems, name+" is not set")
		}
		return v
	}
	c.TablePrefix = get(EnvTablePrefix, true)
	if c.TablePrefix != "" && !tablePrefix.MatchString(c.TablePrefix) {
		problems = append(problems, EnvTablePrefix+" must be 1-200 characters of A-Z a-z 0-9 _ . -")
	}
	c.SecretsPrefix = get(EnvSecretsPrefix, true)
	c.PayloadBucket = get(EnvPayloadBucket, false)
	if c.PayloadBucket != "" && !bucketName.MatchString(c.PayloadBucket) {
		problems = append(problems, EnvPayloadBucket+" must be an S3 bucket name (3-63 of a-z 0-9 . -)")
	}
	if role == RoleAPI || role == RoleCronFire {
		c.RunStateMachineARN = get(EnvRunStateMachineARN, true)
		c.RunExpressStateMachineARN = get(EnvRunExpressStateMachineARN, false)
	}
	c.CronScheduleGroup = get(EnvCronScheduleGroup, role == RoleCronFire)
	c.CronTargetARN = get(EnvCronTargetARN, role == RoleCronFire)
	c.CronRoleARN = get(EnvCronRoleARN, role == RoleCronFire)
	if c.CronRoleARN != "" && !roleARN.MatchString(c.CronRoleARN) {
		problems = append(problems, EnvCronRoleARN+" must be an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
	}
	if role == RoleAPI || role == RoleDeployWorker {
		c.DeployStateMachineARN = get(EnvDeployStateMachineARN, true)
	}
	c.RuntimeRoleARN = get(EnvRuntimeRoleARN, false)
	c.BuildProject = get(EnvBuildProject, false)
	if v := get(EnvLocalRepoDirs, false); v != "" {
		if localReposFromEnv {
			c.LocalRepoDirs = v
		} else {
			problems = append(problems, EnvLocalRepoDirs+" is taken only by test binaries (built with -tags stepgraph_faults): on AWS, git sources are https:// URLs")
		}
	}
	if role == RoleRunWorker {
		c.TenantRoleARN = get(EnvTenantRoleARN, false)
		if c.TenantRoleARN != "" && !roleARN.MatchString(c.TenantRoleARN) {
			problems = append(problems, EnvTenantRoleARN+" must be an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
		}
	}
	c.RuntimeLogGroup = get(EnvRuntimeLogGroup, false)
	if c.RuntimeRoleARN != "" && !roleARN.MatchString(c.RuntimeRoleARN) {
		problems = append(problems, EnvRuntimeRoleARN+" must be an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
	}
	if lv := get(EnvLogLevel, false); lv != "" {
		if err := c.LogLevel.UnmarshalText([]byte(lv)); err != nil {
			problems = append(problems, EnvLogLevel+" must be debug, info, warn or error")
		}
	}
	c.RateLimit = DefaultRateLimit
	if v := get(EnvRateLimit, false); v != "" {
		rate, err := strconv.ParseFloat(v, 64)
		if err != nil || rate < 0 || math.IsInf(rate, 0) || math.IsNaN(rate) {
			problems = append(problems, EnvRateLimit+" must be a number of requests per second, 0 or more (0: no limit)")
		} else {
			c.RateLimit = rate
		}
	}
	if origins, err := cors.Parse(get(EnvCORSOrigins, false)); err != nil {
		problems = append(problems, EnvCORSOrigins+": "+err.Error())
	} else {
		c.CORSOrigins = strings.Join(origins, ",")
	}
	switch v := get(EnvWebhooksAllowPrivate, false); v {
	case "", "false":
	case "true":
		c.WebhooksAllowPrivate = true
	default:
		problems = append(problems, EnvWebhooksAllowPrivate+" must be true or false")
	}
	if v := get(EnvMaxRunningPerOrg, false); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 0:
			problems = append(problems, EnvMaxRunningPerOrg+" must be a whole number >= 0 (0: no cap)")
		case n == 0:
			c.MaxRunningPerOrg = -1
		default:
			c.MaxRunningPerOrg = n
		}
	}
	if v := get(EnvStreamBudget, false); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Millisecond || d > MaxStreamBudget {
			problems = append(problems, EnvStreamBudget+" must be a duration from 100ms to 15m, like 14m30s")
		} else {
			c.StreamBudget = d
		}
	}
	c.PublicURL = get(EnvPublicURL, false)
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			problems = append(problems, EnvPublicURL+" must be an https:// URL without query or fragment")
		}
	}
	c.VaultKeyID = get(EnvVaultKeyID, false)
	if c.VaultKeyID != "" && !kmsKeyARN.MatchString(c.VaultKeyID) {
		problems = append(problems, EnvVaultKeyID+" must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)")
	}
	problems = append(problems, c.limitsFromEnv(get)...)
	problems = append(problems, c.storeFromEnv(get)...)
	if len(problems) > 0 {
		return c, fmt.Errorf("%s configuration: %s", role, strings.Join(problems, "; "))
	}
	return c, nil
}

// Env is the environment of cfg as FromEnv reads it: what a test or a tool
// gives a function it deploys.
func (c Config) Env() map[string]string {
	env := map[string]string{
		EnvTablePrefix:   c.TablePrefix,
		EnvSecretsPrefix: c.SecretsPrefix,
		EnvLogLevel:      strings.ToLower(c.LogLevel.String()),
		EnvRateLimit:     strconv.FormatFloat(c.RateLimit, 'g', -1, 64),
	}
	if c.RunStateMachineARN != "" {
		env[EnvRunStateMachineARN] = c.RunStateMachineARN
	}
	if c.RunExpressStateMachineARN != "" {
		env[EnvRunExpressStateMachineARN] = c.RunExpressStateMachineARN
	}
	if c.PayloadBucket != "" {
		env[EnvPayloadBucket] = c.PayloadBucket
	}
	if c.DeployStateMachineARN != "" {
		env[EnvDeployStateMachineARN] = c.DeployStateMachineARN
	}
	if c.WebhooksAllowPrivate {
		env[EnvWebhooksAllowPrivate] = "true"
	}
	if c.CORSOrigins != "" {
		env[EnvCORSOrigins] = c.CORSOrigins
	}
	if c.RuntimeRoleARN != "" {
		env[EnvRuntimeRoleARN] = c.RuntimeRoleARN
	}
	if c.BuildProject != "" {
		env[EnvBuildProject] = c.BuildProject
	}
	if c.LocalRepoDirs != "" {
		env[EnvLocalRepoDirs] = c.LocalRepoDirs
	}
	if c.TenantRoleARN != "" {
		env[EnvTenantRoleARN] = c.TenantRoleARN
	}
	if c.RuntimeLogGroup != "" {
		env[EnvRuntimeLogGroup] = c.RuntimeLogGroup
	}
	for k, v := range map[string]string{EnvCronScheduleGroup: c.CronScheduleGroup, EnvCronTargetARN: c.CronTargetARN,
		EnvCronRoleARN: c.CronRoleARN} {
		if v != "" {
			env[k] = v
		}
	}
	if c.PublicURL != "" {
		env[EnvPublicURL] = c.PublicURL
	}
	if c.VaultKeyID != "" {
		env[EnvVaultKeyID] = c.VaultKeyID
	}
	if c.MaxRunningPerOrg != 0 {
		env[EnvMaxRunningPerOrg] = strconv.Itoa(max(c.MaxRunningPerOrg, 0))
	}
	for _, l := range runs.LimitSettings {
		if v := l.Get(&c.Limits); v != 0 {
			env[l.Env] = strconv.FormatInt(v, 10)
		}
	}
	if c.RunTimeout != 0 {
		env[EnvMaxRunTime] = c.RunTimeout.String()
	}
	if c.StreamBudget != 0 {
		env[EnvStreamBudget] = c.StreamBudget.String()
	}
	if c.Store.EmbeddingsURL != "" {
		env[EnvStoreEmbeddingsURL] = c.Store.EmbeddingsURL
		env[EnvStoreEmbeddingsModel] = c.Store.EmbeddingsModel
		if c.Store.EmbeddingsDims > 0 {
			env[EnvStoreEmbeddingsDims] = strconv.Itoa(c.Store.EmbeddingsDims)
		}
		if c.Store.IndexFields != "" {
			env[EnvStoreIndexFields] = c.Store.IndexFields
		}
		if c.Store.KeySecret != "" {
			env[EnvStoreEmbeddingsKeySecret] = c.Store.KeySecret
		}
	}
	return env
}

// storeFromEnv reads the store's embeddings endpoint; each problem names
// its variable.
func (c *Config) storeFromEnv(get func(name string, required bool) string) []string {
	var problems []string
	st := &c.Store
	st.EmbeddingsURL = get(EnvStoreEmbeddingsURL, false)
	if st.EmbeddingsURL == "" {
		return nil
	}
	if err := weburl.Check(EnvStoreEmbeddingsURL, st.EmbeddingsURL, false); err != nil {
		problems = append(problems, fail.MessageOf(err))
	}
	st.EmbeddingsModel = get(EnvStoreEmbeddingsModel, false)
	if st.EmbeddingsModel == "" {
		st.EmbeddingsModel = "text-embedding-3-small"
	}
	if v := get(EnvStoreEmbeddingsDims, false); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 4096 {
			problems = append(problems, EnvStoreEmbeddingsDims+" must be an integer from 1 to 4096")
		}
		st.EmbeddingsDims = n
	}
	st.IndexFields = get(EnvStoreIndexFields, false)
	st.KeySecret = get(EnvStoreEmbeddingsKeySecret, false)
	if st.KeySecret != "" && !strings.HasPrefix(st.KeySecret, SecretStore+"/") {
		problems = append(problems, EnvStoreEmbeddingsKeySecret+" must be a reference under "+SecretStore+"/ (the kind the functions may read)")
	}
	return problems
}

// Limits and quotas (docs/reliability.md, "Limits and quotas"): the
// settings of runs.LimitSettings, under the local server's environment
// variables. Unset: the defaults (runs.Limits), quotas off.

// EnvMaxRunTime is the time per run (a duration, 1h when unset).
const EnvMaxRunTime = "STEPGRAPH_MAX_RUN_TIME"

// limitsFromEnv reads the limits; each problem names its variable.
func (c *Config) limitsFromEnv(get func(name string, required bool) string) []string {
	var problems []string
	for _, l := range runs.LimitSettings {
		raw := get(l.Env, false)
		if raw == "" {
			continue
		}
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			problems = append(problems, l.Env+" must be an integer")
			continue
		}
		if err := l.Set(&c.Limits, v); err != nil {
			problems = append(problems, l.Env+" "+err.Error())
		}
	}
	if raw := get(EnvMaxRunTime, false); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < time.Second {
			problems = append(problems, EnvMaxRunTime+" must be a duration of at least 1s, like 1h")
		} else {
			c.RunTimeout = d
		}
	}
	return problems
}

// indexFields splits StoreConfig.IndexFields.
func (c StoreConfig) indexFields() []string {
	var out []string
	for _, f := range strings.Split(c.IndexFields, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

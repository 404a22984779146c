package lambdaapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	awscodebuild "github.com/aws/aws-sdk-go-v2/service/codebuild"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/assembly"
	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/calltoken"
	"github.com/stepgraph/stepgraph/internal/codebuild"
	"github.com/stepgraph/stepgraph/internal/cors"
	"github.com/stepgraph/stepgraph/internal/crons"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/dispatch/eventbridge"
	"github.com/stepgraph/stepgraph/internal/dispatch/sfn"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
	payloadss3 "github.com/stepgraph/stepgraph/internal/payloads/s3"
	"github.com/stepgraph/stepgraph/internal/providers"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/secrets"
	secretsaws "github.com/stepgraph/stepgraph/internal/secrets/aws"
	"github.com/stepgraph/stepgraph/internal/secrets/kmsvault"
	"github.com/stepgraph/stepgraph/internal/sources/git"
	"github.com/stepgraph/stepgraph/internal/store/dynamo"
	"github.com/stepgraph/stepgraph/internal/storeapi"
	"github.com/stepgraph/stepgraph/internal/webhooks"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// Version is reported by /info; set at build time with
// -ldflags "-X github.com/stepgraph/stepgraph/internal/lambdaapp.Version=...".
var Version = "0.1.0-dev"

// Timings of the AWS shape (see the package documentation).
const (
	// APIPollInterval makes a waiting API function read the run every 25
	// intervals (runs.Service.Wait): 0.5 s after the run finished at most.
	APIPollInterval = 20 * time.Millisecond
	// WorkerPollInterval is how often a running step renews its lease and
	// looks for a cancellation.
	WorkerPollInterval = time.Second
	// AuthCacheTTL is how long an API function remembers what an API key
	// resolved to (auth.Keys.CacheTTL): a busy key costs one DynamoDB read
	// per instance per 30 s, and a repeated bad key too. It bounds the
	// revocation latency: a key deleted from the table still authenticates
	// for at most 30 s in an instance that had resolved it (docs/aws.md,
	// "The edge").
	AuthCacheTTL = 30 * time.Second
	// LeaseDuration outlasts the longest Lambda timeout (15 min), so a run
	// never changes hands while its step is still executing.
	LeaseDuration = 16 * time.Minute
)

// LambdaMaxBodyBytes bounds request bodies on Lambda. A synchronous invoke
// carries at most 6 MB (6,291,456 bytes) of event, and API Gateway puts the
// body into the event as a string — base64-encoded (4/3 of its size) when
// it does not take it for text — next to the headers and the request
// context (at most about 16 KB: HTTP API's request line and headers are
// limited to 10 KB). 4,500,000 bytes encode to 6,000,000, which leaves
// room for the rest, so every body the function accepts reaches it, and a
// larger one gets the API's 413 naming the limit instead of a failed
// invoke. Bodies whose event is over 6 MB never reach the function: API
// Gateway answers them itself (with an error status, and over 10 MB with
// 413); see docs/aws.md, "Sizes".
const LambdaMaxBodyBytes = 4_500_000

// LambdaTempDir is where the deploy worker fetches git sources: /tmp is the
// only writable directory of a Lambda function (512 MiB by default, above
// git.DefaultMaxBytes), and each fetch removes its own directory.
const LambdaTempDir = "/tmp"

// App is one function's wiring: the adapters and the use cases on them.
type App struct {
	Config      Config
	Log         *slog.Logger
	Store       *dynamo.DB
	Secrets     *secretsaws.Store
	Keys        *auth.Keys
	Providers   *providers.Service
	Deployments *deployments.Service
	Runs        *runs.Service
	Crons       *crons.Service
	Webhooks    *webhooks.Sender
	// CallTokens sign and verify the tokens of LangGraph apps' run calls
	// (internal/calltoken).
	CallTokens *calltoken.Signer
	// AppLinks, in the run worker of a stage with a public URL, hands a
	// LangGraph app's run call on Lambda its links to the stage's API
	// (/runtime/store, /runtime/auth/token, /runtime/events) with a
	// signed token: a function cannot reach a loopback bridge. Its graphs
	// are pyapp.Graph{Bridge: AppLinks} over pyapp.LambdaClient{Mailbox:
	// Store}, which reads the events the calls post as they run. nil
	// elsewhere.
	AppLinks *pyapp.StageLinks
	// Handler is the whole HTTP API (RoleAPI only).
	Handler http.Handler
}

// LoadAWS loads the SDK configuration from the environment (AWS_REGION,
// AWS_ENDPOINT_URL for an emulator, the Lambda's credentials).
func LoadAWS(ctx context.Context) (aws.Config, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return cfg, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return cfg, errors.New("AWS configuration: AWS_REGION is not set")
	}
	return cfg, nil
}

// Open wires a function of cfg.Role on the AWS services of awsCfg.
func Open(cfg Config, awsCfg aws.Config, log *slog.Logger) (*App, error) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Role == RoleRunWorker && cfg.TenantRoleARN != "" {
		// Each run's tenant work in a session of its organization
		// (tenant.go): every client below signs per request.
		awsCfg = withTenantSessions(cfg, awsCfg)
	}
	dbOpts := dynamo.DeployedOptions(cfg.TablePrefix)
	if cfg.PayloadBucket != "" {
		// Path-style addressing when the endpoint is overridden (an
		// emulator); AWS's own endpoints take the virtual-hosted style.
		dbOpts.Payloads = payloadss3.New(awsCfg, cfg.PayloadBucket, awsCfg.BaseEndpoint != nil)
	} else {
		log.Warn("no payload store: " + EnvPayloadBucket + " is not set, so documents near DynamoDB's 400 KB item limit cannot be stored")
	}
	db := dynamo.New(awsCfg, dbOpts)
	sec, err := secretsaws.New(awsCfg, secretsaws.Options{Prefix: cfg.SecretsPrefix, Grouped: true, Tags: OrgTags})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvSecretsPrefix, err)
	}
	client := awssfn.NewFromConfig(awsCfg)
	// Every outbound call of deployed graphs and deployments (runtimes,
	// models, tools, git fetches) refuses private, loopback and metadata
	// addresses.
	outbound := weburl.GuardedClient(false, 0)
	adapters := assembly.Adapters{
		Store: db,
		// The event log of resumable streams: the run worker appends, the
		// API functions read it, and the streaming ones tail it.
		Events:   db,
		RunStore: faultyRuns(db, log),
		Secrets:  sec,
		// No local repositories (but in the emulator tests: LocalRepoDirs);
		// git sources are fetched through the guard within the default
		// limits (200 MiB fetched, 64 MiB per object), to Lambda's one
		// writable directory.
		Sources:  &git.Checker{HTTPClient: outbound, TempDir: LambdaTempDir, LocalDirs: filepath.SplitList(cfg.LocalRepoDirs)},
		Outbound: outbound,
		// Agent auth: attempts and token records in the providers table;
		// token values too, sealed under the stage's vault KMS key (with no
		// key, Secrets Manager secrets under agentauth/).
		AgentAuth: db,
	}
	if cfg.VaultKeyID != "" {
		vault, err := kmsvault.New(awsCfg, kmsvault.Options{Table: cfg.TablePrefix + dynamo.TableProviders, KeyID: cfg.VaultKeyID})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvVaultKeyID, err)
		}
		adapters.Vault = vault
	}
	// Runtimes that are Lambda functions (a custom_url given as a function
	// ARN, or the function made from an image_uri) are invoked through
	// Lambda. The deploy worker makes them (lambdaruntime), named after the
	// table prefix (the stack's resource prefix) so that the grants can be
	// scoped to their names; the API functions use the provisioner only to
	// refuse a custom_url naming one of them.
	lc := awslambda.NewFromConfig(awsCfg)
	// Images only from the stack's own ECR: the runtime role's account
	// (arn:aws:iam::<account>:role/...) and the functions' region.
	var account string
	if parts := strings.Split(cfg.RuntimeRoleARN, ":"); len(parts) > 4 {
		account = parts[4]
	}
	adapters.Runtimes = &lambdaruntime.Provisioner{Client: lc, NamePrefix: cfg.TablePrefix, RoleARN: cfg.RuntimeRoleARN,
		LogGroup: cfg.RuntimeLogGroup, Registry: lambdaruntime.ECRRegistry(account, awsCfg.Region)}
	adapters.LambdaRuntimes = lambdaruntime.Runtimes(lc)
	// LangGraph apps run in their Lambda functions: runs, states and the
	// assistants' schemas and drawings invoke them.
	// The events their calls post are read from the event log; the run
	// worker gives the calls their links to the stage's API (below).
	appFunctions := &pyapp.LambdaApps{Invoker: lambdaruntime.Functions{Client: lc}, Mailbox: db}
	adapters.AppFunctions = appFunctions
	// hosted_repo LangGraph apps: built by the stage's CodeBuild project
	// into the payload bucket, then made into runtime functions.
	if cfg.BuildProject != "" && cfg.PayloadBucket != "" {
		adapters.AppBuilder = &codebuild.Builder{CodeBuild: awscodebuild.NewFromConfig(awsCfg),
			S3: s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = awsCfg.BaseEndpoint != nil }), Logs: cloudwatchlogs.NewFromConfig(awsCfg),
			Project: cfg.BuildProject, Bucket: cfg.PayloadBucket, TempDir: LambdaTempDir}
	}
	opts := assembly.Options{Log: log, WebhooksAllowPrivate: cfg.WebhooksAllowPrivate,
		LeaseDuration: LeaseDuration, PollInterval: WorkerPollInterval, MaxRunningPerOrg: cfg.MaxRunningPerOrg,
		Limits: cfg.Limits, RunTimeout: cfg.RunTimeout, PublicURL: cfg.PublicURL,
		// No workers sweep expired store items here: writes do.
		Store: assembly.StoreOptions{IndexFields: cfg.Store.indexFields(), SweepOnWrite: true}}
	if adapters.Embedder, err = storeEmbedder(cfg.Store, sec, outbound, log); err != nil {
		return nil, err
	}
	switch cfg.Role {
	case RoleDeployWorker:
		// The provisioner of the periodic resume (HandleDeployTask): it
		// starts only work that has no running execution.
		p, err := sfn.NewProvisioner(client, cfg.DeployStateMachineARN, log)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvDeployStateMachineARN, err)
		}
		p.SkipRunning = true
		adapters.Provisioner = func(*deployments.Service) deployments.Provisioner { return p }
	case RoleAPI:
		d, err := runDispatcher(client, cfg)
		if err != nil {
			return nil, err
		}
		p, err := sfn.NewProvisioner(client, cfg.DeployStateMachineARN, log)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvDeployStateMachineARN, err)
		}
		adapters.Dispatcher, opts.PollInterval = d, APIPollInterval
		adapters.Provisioner = func(*deployments.Service) deployments.Provisioner { return p }
	}
	if cfg.CronTargetARN != "" && (cfg.Role == RoleAPI || cfg.Role == RoleCronFire) {
		adapters.CronScheduler = eventbridge.New(awsCfg, cfg.CronScheduleGroup, cfg.CronTargetARN, cfg.CronRoleARN)
	}
	if cfg.Role == RoleCronFire {
		// A firing creates the run as the API does: its execution starts.
		d, err := runDispatcher(client, cfg)
		if err != nil {
			return nil, err
		}
		adapters.Dispatcher = d
	}
	svc := assembly.Assemble(adapters, opts)
	// The sweep of expired threads within a step reaches every
	// organization: never in a run's tenant session.
	svc.Runs.StageContext = stageContext
	if wakesParkedRuns(cfg) {
		// Queued runs' executions park until the run ahead of them ends:
		// whoever ends it wakes the next (SendTaskSuccess) — the run
		// worker, or an API function whose request ends runs.
		svc.Runs.Parking = runs.Parking{Store: db, Waker: sfn.NewWaker(client)}
	}
	if cfg.Role == RoleAPI {
		// Runs execute in the run worker, another Lambda: streams follow
		// them through the event log, and streamed runs are logged.
		svc.Runs.TailEvents = true
		svc.Keys.CacheTTL = AuthCacheTTL
	}
	a := &App{Config: cfg, Log: log, Store: db, Secrets: sec, Keys: svc.Keys, Providers: svc.Providers,
		Deployments: svc.Deployments, Runs: svc.Runs, Crons: svc.Crons, Webhooks: svc.Webhooks, CallTokens: svc.CallTokens}
	if cfg.Role == RoleRunWorker && cfg.PublicURL != "" {
		a.AppLinks = &pyapp.StageLinks{BaseURL: cfg.PublicURL, Signer: svc.CallTokens,
			Store: svc.Store != nil, Auth: svc.AgentAuth != nil, Events: true}
		appFunctions.Bridge = a.AppLinks
		// An external_docker app's HTTP runtime gets the same links, without
		// the event mailbox: it streams its events in its answer.
		if ra, ok := svc.Graphs.ExternalApps.(*pyapp.RuntimeApps); ok {
			ra.Bridge = &pyapp.StageLinks{BaseURL: cfg.PublicURL, Signer: svc.CallTokens,
				Store: a.AppLinks.Store, Auth: a.AppLinks.Auth}
		}
	}
	if cfg.Role != RoleAPI {
		return a, nil
	}
	apiCfg := svc.APIConfig()
	apiCfg.Version = Version
	// A request body must fit Lambda's invoke payload (LambdaMaxBodyBytes):
	// past it, the API's own 413 answers rather than a gateway error.
	apiCfg.MaxBodyBytes = LambdaMaxBodyBytes
	// Per key, in this instance's memory, bursts of twice the rate as in
	// the local server (cmd/stepgraph): see Config.RateLimit for what that
	// bounds on Lambda.
	apiCfg.RateLimit = &auth.Limiter{Rate: cfg.RateLimit, Burst: int(2 * cfg.RateLimit)}
	if cfg.CORSOrigins != "" {
		origins, err := cors.Parse(cfg.CORSOrigins)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvCORSOrigins, err)
		}
		apiCfg.CORS = &cors.Policy{Origins: origins}
	}
	if cfg.Function != "" {
		f, ok := FunctionNamed(cfg.Function)
		if !ok || f.Role != RoleAPI.String() {
			return nil, fmt.Errorf("function %q: not an API function of functions/routes.json", cfg.Function)
		}
		// Only its routes, and for the system function (which also gets
		// the $default route: any request no route matched) only its
		// public operations: no request it is sent can reach a table or
		// a secret that its role is not granted.
		apiCfg.Operations = f.Routes
	}
	h, err := api.New(apiCfg)
	if err != nil {
		return nil, err
	}
	a.Handler = h
	return a, nil
}

// storeEmbedder is the store's embeddings endpoint of cfg (nil without
// one), its API key read from the secrets store once, at the cold start.
// The key is in no error: a failed read names the reference only.
func storeEmbedder(cfg StoreConfig, sec secrets.Store, outbound *http.Client, log *slog.Logger) (storeapi.Embedder, error) {
	if cfg.EmbeddingsURL == "" {
		return nil, nil
	}
	var key string
	if cfg.KeySecret != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		v, err := sec.Get(ctx, cfg.KeySecret)
		if err != nil {
			return nil, fmt.Errorf("%s: reading secret %s failed", EnvStoreEmbeddingsKeySecret, cfg.KeySecret)
		}
		key = string(v)
	}
	return &storeapi.OpenAIEmbeddings{URL: cfg.EmbeddingsURL, Model: cfg.EmbeddingsModel, APIKey: key,
		Dimensions: cfg.EmbeddingsDims, Client: weburl.LogFailures(outbound, log), Log: log}, nil
}

// wakesParkedRuns reports whether the function wakes queued runs' parked
// executions: the run worker, and the API functions granted WakeRun (those
// whose requests end runs without a worker); a process serving every route
// (Function "") too.
func wakesParkedRuns(cfg Config) bool {
	switch cfg.Role {
	case RoleRunWorker:
		return true
	case RoleAPI:
		if cfg.Function == "" {
			return true
		}
		f, ok := FunctionNamed(cfg.Function)
		return ok && slices.Contains(f.Grants.Executions, WakeRun)
	}
	return false
}

// runDispatcher starts run executions: on the Express front for runs that
// can start now when the stack has one (EnvRunExpressStateMachineARN), on
// the Standard run machine otherwise.
func runDispatcher(client sfn.API, cfg Config) (*sfn.Dispatcher, error) {
	d, err := sfn.NewDispatcher(client, cfg.RunStateMachineARN)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvRunStateMachineARN, err)
	}
	if cfg.RunExpressStateMachineARN != "" {
		if err := d.UseExpress(cfg.RunExpressStateMachineARN); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvRunExpressStateMachineARN, err)
		}
	}
	return d, nil
}

package stack

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3assets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

// Props select what differs between deployments of the stack.
type Props struct {
	awscdk.StackProps
	// Stage names the deployment: resources are prefixed "stepgraph-<stage>-"
	// (tables, functions, state machines) and secrets "stepgraph/<stage>/".
	// It is not an API Gateway stage: the HTTP API serves its $default stage,
	// so paths carry no stage prefix. Default "dev".
	Stage string
	// Arch is the Lambda architecture, "arm64" (default) or "x86_64"; the
	// bootstraps must have been built for it.
	Arch string
	// RepoRoot is the main module's directory: internal/api/openapi.yaml and
	// functions/routes.json are read from it.
	RepoRoot string
	// LambdaDir holds <name>/bootstrap for every function; default
	// RepoRoot/bin/lambdas (what `make lambdas` writes).
	LambdaDir string
	// LogLevel is STEPGRAPH_LOG_LEVEL of every function; default "info".
	LogLevel string
	// RetainData keeps the tables, the bucket, the log groups, the vault
	// key and the stage's secrets when the stack is deleted
	// (CloudFormation DeletionPolicy RetainExceptOnCreate: a failed first
	// create still rolls back whole). Default false here; the app turns it
	// on unless context retain=false. Either way the stack's delete
	// deletes the runtime functions (newTeardown).
	RetainData bool
	// LogRetention of every function's log group; default two weeks.
	LogRetention awslogs.RetentionDays
	// ThrottleRate and ThrottleBurst are the HTTP API stage's default
	// route throttling: requests per second on average and the burst
	// allowed over it, for the whole stage (every key and route together);
	// over it API Gateway answers 429 without invoking a function. 0 means
	// DefaultThrottleRate and DefaultThrottleBurst.
	ThrottleRate  float64
	ThrottleBurst int
	// RunWorkerConcurrency and DeployWorkerConcurrency are the workers'
	// reserved concurrency (ReservedConcurrentExecutions): what the worker
	// may use at most, and is kept for it whatever the rest of the account
	// does. 0 means DefaultRunWorkerConcurrency and
	// DefaultDeployWorkerConcurrency; NoReservation reserves none (for
	// accounts whose concurrency quota leaves no room, see
	// AccountConcurrency).
	RunWorkerConcurrency    int
	DeployWorkerConcurrency int
	// AccountConcurrency is the account's Lambda concurrency quota in the
	// region (0 means DefaultAccountConcurrency). The reservations must
	// leave 100 of it unreserved, as Lambda requires; New checks that, so
	// a deploy the account would refuse fails at synth, saying what to
	// change. Reservations of other stacks in the account are not known
	// here.
	AccountConcurrency int
	// PublicURL, when set (https://…, no query), is STEPGRAPH_PUBLIC_URL of
	// the API functions: the address clients and browsers use, e.g. a
	// custom domain. Unset, each API function takes the API Gateway
	// address its request came to (domain and stage from the request
	// context, which API Gateway sets; never a Host header): right for the
	// execute-api URLs. It cannot be the API's own URL here: the API
	// depends on the functions (its integrations), so a function's
	// environment naming it would be a cycle. The run-worker, no
	// integration, gets PublicURL or else the REST API's URL (graph nodes'
	// authorization URLs).
	PublicURL string
	// RateLimit, when set, is STEPGRAPH_RATE_LIMIT of the API functions:
	// requests per second per API key in each instance, "0" for no limit;
	// "" leaves the functions' default (internal/lambdaapp.DefaultRateLimit).
	RateLimit string
	// Edge is the stage's CORS allow-list and WAF web ACL (edge.go).
	Edge EdgeProps
	// NoExpressRuns deploys the run machine alone (context
	// expressRuns=false): every run is a Standard execution. By default
	// the Express front (RunExpressStateMachineName, express.go) starts
	// the runs that can start now and hands the others to it.
	NoExpressRuns bool
	// Store is the long-term memory store's semantic search: the
	// STEPGRAPH_STORE_EMBEDDINGS_* variables of the functions that use it
	// (the store function and the run worker). Its API key is a secret the
	// operator creates under the stage's secrets prefix as store/<name>,
	// named by KeySecret. Empty EmbeddingsURL: searches filter only.
	Store StoreProps
}

// StoreProps is the store's embeddings endpoint (internal/lambdaapp
// StoreConfig).
type StoreProps struct {
	EmbeddingsURL   string
	EmbeddingsModel string
	EmbeddingsDims  string
	IndexFields     string
	KeySecret       string
}

// env sets the store's variables of a function in env.
func (sp StoreProps) env(env map[string]*string) {
	if sp.EmbeddingsURL == "" {
		return
	}
	for name, v := range map[string]string{
		EnvStoreEmbeddingsURL: sp.EmbeddingsURL, EnvStoreEmbeddingsModel: sp.EmbeddingsModel,
		EnvStoreEmbeddingsDims: sp.EmbeddingsDims, EnvStoreIndexFields: sp.IndexFields,
		EnvStoreEmbeddingsKeySecret: sp.KeySecret,
	} {
		if v != "" {
			env[name] = jsii.String(v)
		}
	}
}

// Defaults of the edge (Props): see docs/reliability.md, "AWS edge".
const (
	// DefaultThrottleRate and DefaultThrottleBurst throttle the HTTP API's
	// stage: 100 requests per second, bursts of 200. Far under the
	// account's default (10,000 per second across every API of the
	// region), so one stage cannot use the account's API budget, and a
	// flood costs at most about 8.6 million requests a day. Raise them
	// (-c throttleRate, -c throttleBurst) for real traffic.
	DefaultThrottleRate  = 100
	DefaultThrottleBurst = 200
	// DefaultRunWorkerConcurrency: 100 run steps at once (a run holds the
	// run-worker only while it executes a step; waiting runs hold
	// nothing). Beyond it Lambda throttles the step and the run state
	// machine retries it (internal/awsflow).
	DefaultRunWorkerConcurrency = 100
	// DefaultDeployWorkerConcurrency: 10 provisioning steps at once.
	DefaultDeployWorkerConcurrency = 10
	// DefaultAccountConcurrency is Lambda's default concurrency quota per
	// region. New accounts may have far less (as little as 10): there,
	// deploy with -c runWorkerConcurrency=none -c
	// deployWorkerConcurrency=none, or ask for a quota increase.
	DefaultAccountConcurrency = 1000
	// MinUnreserved is what Lambda keeps unreserved in an account: a
	// reservation that leaves less is refused.
	MinUnreserved = 100
	// NoReservation (RunWorkerConcurrency, DeployWorkerConcurrency): the
	// worker shares the account's unreserved pool. Not 0, which to Lambda
	// means a function that never runs.
	NoReservation = -1
)

var stageRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,15}$`)

// TablePrefix is STEPGRAPH_TABLE_PREFIX of a stage.
func TablePrefix(stage string) string { return "stepgraph-" + stage + "-" }

// SecretsPrefix is STEPGRAPH_SECRETS_PREFIX of a stage.
func SecretsPrefix(stage string) string { return "stepgraph/" + stage + "/" }

// ResourcePrefix begins the names of a stage's functions, log groups, state
// machines and API.
func ResourcePrefix(stage string) string { return "stepgraph-" + stage + "-" }

// State machine names (after the resource prefix).
const (
	RunStateMachineName    = "run"
	DeployStateMachineName = "deploy"
	// RunExpressStateMachineName is the run machine's Express front.
	RunExpressStateMachineName = "run-express"
)

// New declares the stepgraph stack: the DynamoDB tables, one Lambda per
// function of Functions, the HTTP API with one route per OpenAPI operation,
// the run and deploy state machines, least-privilege roles and the outputs.
func New(scope constructs.Construct, id string, p Props) (awscdk.Stack, error) {
	if p.Stage == "" {
		p.Stage = "dev"
	}
	if !stageRE.MatchString(p.Stage) {
		return nil, fmt.Errorf("stage %q: want 1-16 of a-z 0-9 -, starting with a letter", p.Stage)
	}
	if p.PublicURL != "" {
		if u, err := url.Parse(p.PublicURL); err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("publicUrl %q: want an https:// URL without credentials, query or fragment", p.PublicURL)
		}
	}
	var arch awslambda.Architecture
	switch p.Arch {
	case "", "arm64":
		arch = awslambda.Architecture_ARM_64()
	case "x86_64", "amd64":
		arch = awslambda.Architecture_X86_64()
	default:
		return nil, fmt.Errorf("arch %q: want arm64 or x86_64", p.Arch)
	}
	if p.RepoRoot == "" {
		return nil, fmt.Errorf("RepoRoot is required")
	}
	if p.LambdaDir == "" {
		p.LambdaDir = filepath.Join(p.RepoRoot, "bin", "lambdas")
	}
	if p.LogLevel == "" {
		p.LogLevel = "info"
	}
	if p.LogRetention == "" {
		p.LogRetention = awslogs.RetentionDays_TWO_WEEKS
	}
	if err := p.edgeDefaults(); err != nil {
		return nil, err
	}
	if err := p.Edge.check(); err != nil {
		return nil, err
	}
	removal := awscdk.RemovalPolicy_DESTROY
	if p.RetainData {
		// RetainExceptOnCreate: a first create that fails and rolls back
		// deletes what it made, so the next create of these fixed names
		// does not meet "already exists"; once created, kept.
		removal = awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE
	}

	routes, entries, err := LoadRoutes(p.RepoRoot)
	if err != nil {
		return nil, err
	}
	var tableNames []string
	for _, in := range dynamo.TableDefinitions("") {
		tableNames = append(tableNames, aws.ToString(in.TableName))
	}
	if err := checkFunctions(entries, tableNames); err != nil {
		return nil, err
	}
	runASL, deployASL := Definitions()

	s := awscdk.NewStack(scope, jsii.String(id), &p.StackProps)
	prefix := ResourcePrefix(p.Stage)
	tablePrefix, secretsPrefix := TablePrefix(p.Stage), SecretsPrefix(p.Stage)

	tables, err := newTables(s, tablePrefix, removal)
	if err != nil {
		return nil, err
	}
	payloadBucket := newPayloadBucket(s, removal)

	// The state machines have fixed names, so their ARNs are known before
	// they exist: every function, the workers they invoke included, gets
	// them in its environment without a dependency cycle.
	machineARN := func(name string) *string {
		return s.FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("states"), Resource: jsii.String("stateMachine"),
			ResourceName: jsii.String(prefix + name), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
		})
	}
	executionsARN := func(name string) *string {
		return s.FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("states"), Resource: jsii.String("execution"),
			ResourceName: jsii.String(prefix + name + ":*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
		})
	}
	runARN, deployARN := machineARN(RunStateMachineName), machineARN(DeployStateMachineName)

	// Agent auth's token vault (internal/secrets/kmsvault): one key wraps
	// the data keys of the values, which are items of the providers table.
	// Only the functions granted Vault actions may use it, and only under
	// the vault's encryption context.
	var vaultKey awskms.Key
	for _, e := range entries {
		if opensVault(e.Grants) && vaultKey == nil {
			vaultKey = awskms.NewKey(s, jsii.String("VaultKey"), &awskms.KeyProps{
				Description:       jsii.String("stepgraph " + p.Stage + ": agent auth's token vault (data keys of token values)"),
				EnableKeyRotation: jsii.Bool(true),
				RemovalPolicy:     removal,
				PendingWindow:     awscdk.Duration_Days(jsii.Number(7)),
			})
		}
	}

	tableByName := map[string]Table{}
	for _, t := range tables {
		tableByName[t.Name] = t
	}
	grants := map[string]Grants{}
	for _, e := range entries {
		grants[e.Name] = e.Grants
	}
	secretsARN := func(kind string) string {
		return *s.FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("secretsmanager"), Resource: jsii.String("secret"),
			ResourceName: jsii.String(secretsPrefix + kind + "/*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
		})
	}

	// The runtimes the deploy-worker makes from deployments' images
	// (internal/lambdaruntime) run with this role: their own log groups,
	// nothing else — a deployment's code reaches no table and no secret.
	runtimesARN := s.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("lambda"), Resource: jsii.String("function"),
		ResourceName: jsii.String(prefix + RuntimeNamePrefix + "*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
	ecrReposARN := s.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("ecr"), Resource: jsii.String("repository"), ResourceName: jsii.String("*"),
	})
	runtimeRole := awsiam.NewRole(s, jsii.String("Role-runtime"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("stepgraph " + p.Stage + " deployments' runtime functions"),
	})
	// They all write to the stack's runtimes log group (the stack's
	// retention and removal), never a group of their own.
	runtimeLogs := newRuntimesLogGroup(s, p, prefix, removal)
	runtimeLogs.GrantWrite(runtimeRole)

	// Crons: one EventBridge schedule per cron in the stage's group, whose
	// target is cron-fire, invoked with the scheduler's role (nothing but
	// that). cron-fire's name is fixed, so its ARN is known before it
	// exists.
	cronGroup := awsscheduler.NewCfnScheduleGroup(s, jsii.String("CronScheduleGroup"), &awsscheduler.CfnScheduleGroupProps{
		Name: jsii.String(prefix + CronScheduleGroupName),
	})
	cronGroup.ApplyRemovalPolicy(awscdk.RemovalPolicy_DESTROY, nil)
	cronFireARN := s.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("lambda"), Resource: jsii.String("function"),
		ResourceName: jsii.String(prefix + FnCronFire), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
	cronSchedulesARN := s.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("scheduler"), Resource: jsii.String("schedule"),
		ResourceName: jsii.String(prefix + CronScheduleGroupName + "/*"), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
	cronRole := awsiam.NewRole(s, jsii.String("Role-cron-scheduler"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), nil),
		Description: jsii.String("stepgraph " + p.Stage + " crons' schedules: invoke cron-fire"),
	})
	cronRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("InvokeCronFire"), Actions: jsii.Strings("lambda:InvokeFunction"),
		Resources: jsii.Strings(*cronFireARN),
	}))

	builds, err := newAppBuild(s, p, prefix, payloadBucket, removal)
	if err != nil {
		return nil, err
	}

	fns := map[string]awslambda.Function{}
	for _, spec := range Functions {
		dir := filepath.Join(p.LambdaDir, spec.Name)
		if _, err := os.Stat(filepath.Join(dir, "bootstrap")); err != nil {
			return nil, fmt.Errorf("function %s: %v (run `make lambdas`)", spec.Name, err)
		}
		name := prefix + spec.Name
		logs := awslogs.NewLogGroup(s, jsii.String("Logs-"+spec.Name), &awslogs.LogGroupProps{
			LogGroupName:  jsii.String("/aws/lambda/" + name),
			Retention:     p.LogRetention,
			RemovalPolicy: removal,
		})
		// A role of its own, without AWSLambdaBasicExecutionRole (whose
		// logs statement is on every resource): only its log group.
		role := awsiam.NewRole(s, jsii.String("Role-"+spec.Name), &awsiam.RoleProps{
			AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
			Description: jsii.String("stepgraph " + p.Stage + " function " + spec.Name),
		})
		logs.GrantWrite(role)
		g := grants[spec.Name]
		statement := func(sid string, actions, resources []string) {
			role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: jsii.String(sid), Actions: jsii.Strings(actions...), Resources: jsii.Strings(resources...),
			}))
		}
		// Tables: each at its access, the indexes of those that have them
		// queried only.
		byAccess := map[string][]string{}
		var indexes []string
		for _, name := range sortedKeys(g.Tables) {
			t := tableByName[name]
			byAccess[g.Tables[name]] = append(byAccess[g.Tables[name]], *t.Cfn.AttrArn())
			if len(t.Input.GlobalSecondaryIndexes) > 0 {
				indexes = append(indexes, *t.Cfn.AttrArn()+"/index/*")
			}
		}
		for _, access := range []string{AccessRead, AccessWrite} {
			if len(byAccess[access]) > 0 {
				statement("Tables"+strings.ToUpper(access[:1])+access[1:], TableActions[access], byAccess[access])
			}
		}
		if len(indexes) > 0 {
			statement("Indexes", []string{"dynamodb:Query"}, indexes)
		}
		// Secrets: per kind, only under the kind's prefix.
		for _, kind := range sortedKeys(g.Secrets) {
			var actions []string
			for _, a := range g.Secrets[kind] {
				for _, iam := range SecretActions[a] {
					if !slices.Contains(actions, iam) {
						actions = append(actions, iam)
					}
				}
			}
			sort.Strings(actions)
			statement("Secrets"+strings.ToUpper(kind[:1])+kind[1:], actions, []string{secretsARN(kind)})
		}
		for _, e := range g.Executions {
			if e == "start-run-express" && p.NoExpressRuns {
				continue // no Express front to start
			}
			eg := ExecutionGrants[e]
			res := machineARN(eg.Machine)
			if eg.OnExecutions {
				res = executionsARN(eg.Machine)
			}
			statement(eg.Sid, []string{eg.Action}, []string{*res})
		}
		if slices.Contains(g.Runtimes, RuntimesInvoke) {
			statement("InvokeRuntimes", []string{"lambda:InvokeFunction"}, []string{*runtimesARN})
		}
		// The payload store: what the adapter does with it follows the
		// tables (PayloadAccess); ListBucket only for deleting by prefix.
		payloadAccess := g.PayloadAccess()
		if payloadAccess != "" {
			statement("Payloads"+strings.ToUpper(payloadAccess[:1])+payloadAccess[1:], PayloadActions[payloadAccess],
				[]string{*payloadBucket.ArnForObjects(jsii.String("*"))})
		}
		if payloadAccess == AccessWrite {
			statement("PayloadsList", []string{"s3:ListBucket"}, []string{*payloadBucket.BucketArn()})
		}
		// The tenant role of a function that runs one organization's work
		// at a time (the run worker): it may assume it, tagged with the
		// organization, and nothing else may.
		var tenantRoleARN *string
		if g.Tenant != nil {
			tr := tenantRole{stage: p.Stage, secretsPrefix: secretsPrefix, worker: role, vaultKey: vaultKey, secretsARN: secretsARN,
				tableARN: func(name string) string { return *tableByName[name].Cfn.AttrArn() }}
			tenant := tr.newTenantRole(s, spec.Name, g.Tenant)
			statement("AssumeTenantRole", []string{"sts:AssumeRole", "sts:TagSession"}, []string{*tenant.RoleArn()})
			tenantRoleARN = tenant.RoleArn()
		}
		env := map[string]*string{
			EnvTablePrefix:        jsii.String(tablePrefix),
			EnvSecretsPrefix:      jsii.String(secretsPrefix),
			EnvRunStateMachineARN: runARN,
			EnvDeployStateMachine: deployARN,
			EnvLogLevel:           jsii.String(p.LogLevel),
		}
		if payloadAccess != "" {
			env[EnvPayloadBucket] = payloadBucket.BucketName()
		}
		if tenantRoleARN != nil {
			env[EnvTenantRoleARN] = tenantRoleARN
		}
		if slices.Contains(g.Executions, "start-run-express") && !p.NoExpressRuns {
			env[EnvRunExpressStateMachineARN] = machineARN(RunExpressStateMachineName)
		}
		if slices.Contains(g.Runtimes, RuntimesManage) {
			// TagResource: a function is created with its stage's tag
			// (the teardown's mark).
			role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: jsii.String("ManageRuntimes"),
				Actions: jsii.Strings("lambda:CreateFunction", "lambda:TagResource", "lambda:UpdateFunctionCode",
					"lambda:UpdateFunctionConfiguration", "lambda:GetFunction", "lambda:DeleteFunction"),
				Resources: jsii.Strings(*runtimesARN),
			}))
			// Lambda takes a container image only from ECR in the
			// function's account and region, and the caller of
			// CreateFunction/UpdateFunctionCode must be able to pull it
			// (the repository's policy must also allow
			// lambda.amazonaws.com: docs/aws.md). The deploy worker
			// refuses any other registry up front (lambdaruntime.Registry).
			role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:       jsii.String("PullRuntimeImages"),
				Actions:   jsii.Strings("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"),
				Resources: jsii.Strings(*ecrReposARN),
			}))
			role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: jsii.String("PassRuntimeRole"), Actions: jsii.Strings("iam:PassRole"),
				Resources:  jsii.Strings(*runtimeRole.RoleArn()),
				Conditions: &map[string]any{"StringEquals": map[string]any{"iam:PassedToService": "lambda.amazonaws.com"}},
			}))
			env[EnvRuntimeRoleARN] = runtimeRole.RoleArn()
			env[EnvRuntimeLogGroup] = runtimeLogs.LogGroupName()
		}
		if slices.Contains(g.Builds, BuildsStart) {
			statement("AppBuilds", []string{"codebuild:StartBuild", "codebuild:BatchGetBuilds"}, []string{builds.projectARN})
			statement("AppBuildLogs", []string{"logs:GetLogEvents"}, []string{builds.logGroupARN})
			env[EnvBuildProject] = jsii.String(builds.name)
		}
		if slices.Contains(g.Schedules, SchedulesManage) {
			statement("ManageSchedules", ScheduleActions, []string{*cronSchedulesARN})
			role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: jsii.String("PassCronSchedulerRole"), Actions: jsii.Strings("iam:PassRole"),
				Resources:  jsii.Strings(*cronRole.RoleArn()),
				Conditions: &map[string]any{"StringEquals": map[string]any{"iam:PassedToService": "scheduler.amazonaws.com"}},
			}))
			env[EnvCronScheduleGroup] = cronGroup.Name()
			env[EnvCronTargetARN] = cronFireARN
			env[EnvCronRoleARN] = cronRole.RoleArn()
		}
		if len(g.Vault) > 0 {
			var actions []string
			for _, a := range g.Vault {
				if VaultActions[a] != "" {
					actions = append(actions, VaultActions[a])
				}
			}
			sort.Strings(actions)
			if len(actions) > 0 {
				role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
					Sid: jsii.String("VaultKey"), Actions: jsii.Strings(actions...),
					Resources: jsii.Strings(*vaultKey.KeyArn()),
					Conditions: &map[string]any{
						"StringLike":                map[string]any{"kms:EncryptionContext:" + VaultContextKey: VaultContextValues},
						"ForAllValues:StringEquals": map[string]any{"kms:EncryptionContextKeys": []string{VaultContextKey}},
					},
				}))
			}
			env[EnvVaultKeyID] = vaultKey.KeyArn()
		}
		if g.Tenant != nil && len(g.Tenant.Vault) > 0 {
			// Its tenant sessions open the vault (TenantVaultKey).
			env[EnvVaultKeyID] = vaultKey.KeyArn()
		}
		if (spec.API || buildsAuthURLs(spec, g)) && p.PublicURL != "" {
			env[EnvPublicURL] = jsii.String(p.PublicURL)
		}
		if spec.API && p.RateLimit != "" {
			env[EnvRateLimit] = jsii.String(p.RateLimit)
		}
		if spec.Name == FnStore || spec.Name == FnRunWorker || spec.Name == FnAppCalls {
			p.Store.env(env)
		}
		var reserved *float64
		if n := p.reserved(spec.Name); n > 0 {
			reserved = jsii.Number(n)
		}
		fns[spec.Name] = awslambda.NewFunction(s, jsii.String("Fn-"+spec.Name), &awslambda.FunctionProps{
			FunctionName: jsii.String(name),
			Description:  jsii.String("stepgraph " + spec.Name),
			Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
			Architecture: arch,
			Handler:      jsii.String("bootstrap"),
			// Only the bootstrap: `make lambdas` leaves bootstrap.zip next
			// to it, which would double the asset.
			Code: awslambda.Code_FromAsset(jsii.String(dir), &awss3assets.AssetOptions{
				Exclude: jsii.Strings("*", "!bootstrap"),
			}),
			Timeout:     awscdk.Duration_Seconds(jsii.Number(spec.Timeout.Seconds())),
			MemorySize:  jsii.Number(spec.MemoryMB),
			Role:        role,
			LogGroup:    logs,
			Environment: &env,
			// The workers' reservation; the API functions share the
			// unreserved pool, bounded by the stage's throttle.
			ReservedConcurrentExecutions: reserved,
			// X-Ray active tracing: a request's trace runs from the
			// gateway through the function into the state machine.
			// (CDK grants xray:PutTraceSegments and PutTelemetryRecords,
			// which have no resource-level permissions: on *.) Not the
			// public system function, which has nothing but its logs.
			Tracing: tracing(spec.Name),
		})
	}

	newTeardown(s, p, teardownDeps{
		prefix: prefix, secretsPrefix: secretsPrefix, arch: arch, removal: removal,
		lambdaDir: filepath.Join(p.LambdaDir, FnDeployWorker), runtimesARN: runtimesARN,
		secretsARN: *s.FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("secretsmanager"), Resource: jsii.String("secret"),
			ResourceName: jsii.String(secretsPrefix + "*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
		}),
		bucket: payloadBucket,
	}, fns)

	// State machines: the ASL of internal/awsflow with its placeholders
	// substituted by the worker ARNs; each may invoke only the workers its
	// definition names.
	machinesOut := map[string]awsstepfunctions.StateMachine{}
	for _, m := range []struct{ name, asl string }{{RunStateMachineName, runASL}, {DeployStateMachineName, deployASL}} {
		uses, err := checkDefinition(m.asl, placeholders)
		if err != nil {
			return nil, fmt.Errorf("state machine %s: %w", m.name, err)
		}
		subs := map[string]*string{}
		for _, ph := range uses {
			subs[ph] = fns[placeholders[ph]].FunctionArn()
		}
		sm := awsstepfunctions.NewStateMachine(s, jsii.String("StateMachine-"+m.name), &awsstepfunctions.StateMachineProps{
			StateMachineName:        jsii.String(prefix + m.name),
			StateMachineType:        awsstepfunctions.StateMachineType_STANDARD,
			DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(jsii.String(m.asl)),
			DefinitionSubstitutions: &subs,
			RemovalPolicy:           awscdk.RemovalPolicy_DESTROY,
			TracingEnabled:          jsii.Bool(true),
		})
		for _, ph := range uses {
			fns[placeholders[ph]].GrantInvoke(sm)
		}
		machinesOut[m.name] = sm
	}

	var expressMachine awsstepfunctions.StateMachine
	if !p.NoExpressRuns {
		expressMachine = newExpressMachine(s, p, prefix, fns[FnRunWorker], machinesOut[RunStateMachineName], removal)
	}

	// The deploy worker's resume, on a schedule: provisioning whose
	// execution never started (a lost StartExecution) is started again.
	awsevents.NewRule(s, jsii.String("ResumeProvisioning"), &awsevents.RuleProps{
		RuleName:    jsii.String(prefix + "resume-provisioning"),
		Description: jsii.String("stepgraph " + p.Stage + ": restart provisioning that has no execution"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(ResumeEvery.Minutes()))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fns[FnDeployWorker], &awseventstargets.LambdaFunctionProps{
			Event: awsevents.RuleTargetInput_FromObject(map[string]any{"action": "resume"}),
		})},
	})

	// The HTTP API: a route per operation of the OpenAPI document to its
	// function; $default (any other method and path) to the system function,
	// so unknown paths get the API's own 404/405 answers.
	integrations := map[string]awsapigatewayv2integrations.HttpLambdaIntegration{}
	integration := func(fn string) awsapigatewayv2integrations.HttpLambdaIntegration {
		if in, ok := integrations[fn]; ok {
			return in
		}
		in := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("Integration-"+fn), fns[fn], nil)
		integrations[fn] = in
		return in
	}
	api := awsapigatewayv2.NewHttpApi(s, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:            jsii.String(prefix + "api"),
		Description:        jsii.String("stepgraph " + p.Stage + ": the LangGraph Platform API"),
		DefaultIntegration: integration(FnSystem),
		CreateDefaultStage: jsii.Bool(true),
	})
	// The stage's default route throttling: the guard of the whole stage
	// (every tenant and route together). The default stage is kept (a new
	// stage named $default would be created before the old one is
	// deleted, and collide with it on update), its throttle set on the
	// CloudFormation resource.
	stage, ok := api.DefaultStage().Node().DefaultChild().(awsapigatewayv2.CfnStage)
	if !ok {
		return nil, fmt.Errorf("the HTTP API's default stage is not an AWS::ApiGatewayV2::Stage")
	}
	stage.SetDefaultRouteSettings(&awsapigatewayv2.CfnStage_RouteSettingsProperty{
		ThrottlingRateLimit:  jsii.Number(p.ThrottleRate),
		ThrottlingBurstLimit: jsii.Number(p.ThrottleBurst),
	})
	for _, r := range routes {
		if _, ok := fns[r.Function]; !ok {
			return nil, fmt.Errorf("route %s: unknown function %s", r.Key(), r.Function)
		}
		api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(r.Path),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)},
			Integration: integration(r.Function),
		})
	}
	for _, spec := range Functions {
		if spec.API && integrations[spec.Name] == nil {
			return nil, fmt.Errorf("function %s serves no route of the OpenAPI document", spec.Name)
		}
	}

	rest, err := newRestAPI(s, p, prefix, routes, fns)
	if err != nil {
		return nil, err
	}
	onePermissionPerAPI(s, fns, api, rest)
	if err := newEdge(s, p, prefix, api, rest, fns); err != nil {
		return nil, err
	}
	// A worker that builds authorization URLs (the run-worker: graph nodes
	// with auth interrupt with one) serves no request to take the public
	// address from: without a publicUrl it gets the REST API's (stage
	// api), the stack's ApiUrl. No cycle: the REST API depends only on the
	// functions it integrates, and no worker is one.
	if p.PublicURL == "" {
		for _, spec := range Functions {
			if buildsAuthURLs(spec, grants[spec.Name]) {
				fns[spec.Name].AddEnvironment(jsii.String(EnvPublicURL), rest.Url(), nil)
			}
		}
	}
	alarms := newAlarms(s, prefix, fns, machinesOut[RunStateMachineName], expressMachine, tables, api, rest)
	newRunFailures(s, prefix, p.Stage, fns[FnRunWorker], machinesOut[RunStateMachineName], alarms)

	out := func(id string, v *string, desc string) {
		awscdk.NewCfnOutput(s, jsii.String(id), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
	}
	out("ApiUrl", rest.Url(), "Base URL of the API (the SDKs' url): the REST API, whose run streams and waits stream")
	out("RestApiId", rest.RestApiId(), "REST API id")
	out("HttpApiUrl", api.ApiEndpoint(), "The HTTP API: every route, buffered (no stream lasts over 28 s there); what the emulator tests use")
	out("ApiId", api.ApiId(), "HTTP API id (an emulator serves it at /_aws/execute-api/<id>/)")
	out("RunStateMachineArn", machinesOut[RunStateMachineName].StateMachineArn(), "Run state machine")
	out("DeployStateMachineArn", machinesOut[DeployStateMachineName].StateMachineArn(), "Deploy state machine")
	out("TablePrefix", jsii.String(tablePrefix), "Prefix of the DynamoDB table names")
	out("AlarmTopicArn", alarms.TopicArn(), "SNS topic of the stage's alarms (subscribe to be told)")
	out("SecretsPrefix", jsii.String(secretsPrefix), "Prefix of the Secrets Manager secret names")
	out("PayloadBucket", payloadBucket.BucketName(), "The payload store's S3 bucket (documents over 16 KiB, by reference from DynamoDB)")
	return s, nil
}

var placeholderRE = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)\}`)

// checkDefinition checks that asl is JSON, that every ${placeholder} in it is
// one of known, and that every Task invokes a Lambda named by a placeholder
// (directly or through arn:aws:states:::lambda:invoke): the state machine's
// role is granted exactly that. It returns the placeholders used, sorted.
func checkDefinition(asl string, known map[string]string) ([]string, error) {
	var doc map[string]any
	if err := json.Unmarshal([]byte(asl), &doc); err != nil {
		return nil, fmt.Errorf("definition is not JSON: %w", err)
	}
	set := map[string]bool{}
	for _, m := range placeholderRE.FindAllStringSubmatch(asl, -1) {
		if _, ok := known[m[1]]; !ok {
			return nil, fmt.Errorf("unknown placeholder ${%s}", m[1])
		}
		set[m[1]] = true
	}
	if err := checkStates(doc, known); err != nil {
		return nil, err
	}
	var uses []string
	for k := range set {
		uses = append(uses, k)
	}
	sort.Strings(uses)
	return uses, nil
}

func checkStates(machine map[string]any, known map[string]string) error {
	states, _ := machine["States"].(map[string]any)
	if len(states) == 0 {
		return fmt.Errorf("no States")
	}
	isPlaceholder := func(v any) bool {
		s, _ := v.(string)
		m := placeholderRE.FindStringSubmatch(s)
		return m != nil && m[0] == s && known[m[1]] != ""
	}
	for name, v := range states {
		st, _ := v.(map[string]any)
		switch st["Type"] {
		case "Task":
			res, _ := st["Resource"].(string)
			switch {
			case isPlaceholder(res):
			case strings.HasPrefix(res, "arn:aws:states:::lambda:invoke"):
				params, _ := st["Parameters"].(map[string]any)
				if params == nil {
					params, _ = st["Arguments"].(map[string]any)
				}
				if !isPlaceholder(params["FunctionName"]) {
					return fmt.Errorf("state %s: lambda:invoke of %v: name the function by a placeholder", name, params["FunctionName"])
				}
			default:
				return fmt.Errorf("state %s: task resource %q: infra/stack grants the state machine only its workers' Lambdas", name, res)
			}
		case "Map":
			for _, key := range []string{"ItemProcessor", "Iterator"} {
				if sub, ok := st[key].(map[string]any); ok {
					if err := checkStates(sub, known); err != nil {
						return fmt.Errorf("state %s: %w", name, err)
					}
				}
			}
		case "Parallel":
			branches, _ := st["Branches"].([]any)
			for _, b := range branches {
				sub, _ := b.(map[string]any)
				if err := checkStates(sub, known); err != nil {
					return fmt.Errorf("state %s: %w", name, err)
				}
			}
		}
	}
	return nil
}

// edgeDefaults fills in the throttling and concurrency defaults and checks
// them against AWS's rules.
func (p *Props) edgeDefaults() error {
	if p.ThrottleRate == 0 {
		p.ThrottleRate = DefaultThrottleRate
	}
	if p.ThrottleBurst == 0 {
		p.ThrottleBurst = DefaultThrottleBurst
	}
	if p.RunWorkerConcurrency == 0 {
		p.RunWorkerConcurrency = DefaultRunWorkerConcurrency
	}
	if p.DeployWorkerConcurrency == 0 {
		p.DeployWorkerConcurrency = DefaultDeployWorkerConcurrency
	}
	if p.AccountConcurrency == 0 {
		p.AccountConcurrency = DefaultAccountConcurrency
	}
	if p.ThrottleRate < 0 || math.IsInf(p.ThrottleRate, 0) || math.IsNaN(p.ThrottleRate) {
		return fmt.Errorf("throttleRate %v: want requests per second, more than 0", p.ThrottleRate)
	}
	if p.ThrottleBurst < 0 {
		return fmt.Errorf("throttleBurst %d: want requests, more than 0", p.ThrottleBurst)
	}
	if p.RateLimit != "" {
		r, err := strconv.ParseFloat(p.RateLimit, 64)
		if err != nil || r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
			return fmt.Errorf("rateLimit %q: want requests per second per API key, 0 or more (0: no limit)", p.RateLimit)
		}
	}
	if p.AccountConcurrency < 0 {
		return fmt.Errorf("accountConcurrency %d: want the account's Lambda concurrency quota", p.AccountConcurrency)
	}
	sum := 0
	for _, w := range []struct {
		key string
		n   int
	}{{"runWorkerConcurrency", p.RunWorkerConcurrency}, {"deployWorkerConcurrency", p.DeployWorkerConcurrency}} {
		if w.n < 0 && w.n != NoReservation {
			return fmt.Errorf("%s %d: want a number of concurrent executions, or none", w.key, w.n)
		}
		sum += max(w.n, 0)
	}
	// Lambda refuses a reservation that leaves the account fewer than 100
	// unreserved executions; MiniStack does not check, so this does.
	if sum > max(p.AccountConcurrency-MinUnreserved, 0) {
		return fmt.Errorf("the workers reserve %d concurrent executions, and the account's quota of %d (accountConcurrency) "+
			"must keep %d unreserved: lower runWorkerConcurrency and deployWorkerConcurrency, or set them to none",
			sum, p.AccountConcurrency, MinUnreserved)
	}
	return nil
}

// reserved is the reserved concurrency of the function named, 0 for none.
func (p *Props) reserved(fn string) int {
	switch fn {
	case FnRunWorker:
		return max(p.RunWorkerConcurrency, 0)
	case FnDeployWorker:
		return max(p.DeployWorkerConcurrency, 0)
	}
	return 0
}

// RestAPIStage is the REST API's stage: the first segment of the clients'
// base URL (https://<id>.execute-api.<region>.amazonaws.com/api/); the
// functions see paths without it.
const RestAPIStage = "api"

// streamTimeoutMillis is the integration timeout of a streamed route: the
// 15 minutes a REST API streams one response.
const streamTimeoutMillis = 900_000

// newRestAPI declares the REST API, the clients' origin: the routes of the
// OpenAPI document to their functions (AWS_PROXY, payload 1.0), one ANY
// per path where one function serves the path (restMethods, edge.go), and
// "/" and {proxy+} (any other path) to the system function. The routes
// of functions that stream (FunctionEntry.Stream: the run streams, the
// waits, the join) have response streaming: the integration's
// ResponseTransferMode is STREAM, its URI the function's
// response-streaming-invocations (API Gateway calls
// InvokeWithResponseStream), its timeout 15 minutes. The pinned CDK's
// LambdaIntegration has no transfer mode, so those three properties are
// set on the method's CloudFormation resource. A regional endpoint: a
// streamed response may be idle for 5 minutes there (30 s on an
// edge-optimized one). The stage has the HTTP API's throttle.
func newRestAPI(s awscdk.Stack, p Props, prefix string, routes []Route, fns map[string]awslambda.Function) (awsapigateway.RestApi, error) {
	rest := awsapigateway.NewRestApi(s, jsii.String("RestApi"), &awsapigateway.RestApiProps{
		RestApiName:   jsii.String(prefix + "rest-api"),
		Description:   jsii.String("stepgraph " + p.Stage + ": the LangGraph Platform API, run streams and waits streamed"),
		EndpointTypes: &[]awsapigateway.EndpointType{awsapigateway.EndpointType_REGIONAL},
		// No account-wide CloudWatch role from this stack.
		CloudWatchRole: jsii.Bool(false),
		DeployOptions: &awsapigateway.StageOptions{
			StageName:            jsii.String(RestAPIStage),
			ThrottlingRateLimit:  jsii.Number(p.ThrottleRate),
			ThrottlingBurstLimit: jsii.Number(p.ThrottleBurst),
		},
	})
	integrations := map[string]awsapigateway.LambdaIntegration{}
	integration := func(fn string) awsapigateway.LambdaIntegration {
		if in, ok := integrations[fn]; ok {
			return in
		}
		// AllowTestInvoke off: one permission per method, not two (a
		// function's resource policy is limited to 20 KB).
		in := awsapigateway.NewLambdaIntegration(fns[fn], &awsapigateway.LambdaIntegrationOptions{
			Proxy: jsii.Bool(true), AllowTestInvoke: jsii.Bool(false)})
		integrations[fn] = in
		return in
	}
	// One method per path when a single function serves the path (ANY: a
	// wrong method gets the API's own 405, and a browser's preflight the
	// function's CORS answer, never the system function's 405); the paths
	// shared by two functions keep a method per route, and their OPTIONS
	// goes to the first one's function. One ANY instead of a method per
	// route also keeps the stack under CloudFormation's 500 resources
	// (restMethods).
	for _, m := range restMethods(routes, p.Edge.origins() != nil) {
		if m.Path == "/" && m.Method == "ANY" && m.Function == FnSystem {
			continue // the root's ANY below
		}
		fn, ok := fns[m.Function]
		if !ok {
			return nil, fmt.Errorf("route %s %s: unknown function %s", m.Method, m.Path, m.Function)
		}
		method := rest.Root().ResourceForPath(jsii.String(m.Path)).AddMethod(jsii.String(m.Method), integration(m.Function), nil)
		if !m.Stream {
			continue
		}
		cfn, ok := method.Node().DefaultChild().(awsapigateway.CfnMethod)
		if !ok {
			return nil, fmt.Errorf("route %s %s: the method is not an AWS::ApiGateway::Method", m.Method, m.Path)
		}
		cfn.AddPropertyOverride(jsii.String("Integration.ResponseTransferMode"), jsii.String("STREAM"))
		cfn.AddPropertyOverride(jsii.String("Integration.TimeoutInMillis"), jsii.Number(streamTimeoutMillis))
		cfn.AddPropertyOverride(jsii.String("Integration.Uri"), map[string]any{"Fn::Join": []any{"", []any{
			"arn:", awscdk.Aws_PARTITION(), ":apigateway:", awscdk.Aws_REGION(),
			":lambda:path/2021-11-15/functions/", fn.FunctionArn(), "/response-streaming-invocations",
		}}})
	}
	// Any other path or method: the system function's own 404/405.
	rest.Root().AddMethod(jsii.String("ANY"), integration(FnSystem), nil)
	rest.Root().AddProxy(&awsapigateway.ProxyResourceOptions{DefaultIntegration: integration(FnSystem), AnyMethod: jsii.Bool(true)})
	return rest, nil
}

// tracing is a function's X-Ray mode: active, but for the system function.
func tracing(fn string) awslambda.Tracing {
	if fn == FnSystem {
		return awslambda.Tracing_DISABLED
	}
	return awslambda.Tracing_ACTIVE
}

// XRayActions are what active tracing grants a function, on "*" (X-Ray has
// no resource-level permissions); XRayMachineActions a state machine's.
var (
	XRayActions        = []string{"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
	XRayMachineActions = []string{"xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules", "xray:GetSamplingTargets"}
)

// Alarms of the stage (AWS/... metrics, 5-minute periods), all notifying
// one SNS topic:
//   - the run worker's errors and throttles (a throttled step is retried,
//     then the run is abandoned), and every function's throttles together
//     (the account's concurrency is used up);
//   - stuck runs: run executions that failed (abandoned after their steps
//     kept failing), timed out (RunTimeout) or were throttled;
//   - DynamoDB throttling of the threads table (every run writes there);
//   - 5xx answers of the APIs.
func newAlarms(s awscdk.Stack, prefix string, fns map[string]awslambda.Function, runMachine, expressMachine awsstepfunctions.StateMachine,
	tables []Table, httpAPI awsapigatewayv2.HttpApi, rest awsapigateway.RestApi) awssns.Topic {
	topic := awssns.NewTopic(s, jsii.String("Alarms"), &awssns.TopicProps{TopicName: jsii.String(prefix + "alarms")})
	action := awscloudwatchactions.NewSnsAction(topic)
	period := awscdk.Duration_Minutes(jsii.Number(5))
	sum := func(namespace, metric string, dims map[string]*string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(namespace), MetricName: jsii.String(metric),
			DimensionsMap: &dims, Statistic: jsii.String("Sum"), Period: period})
	}
	alarm := func(id, desc string, m awscloudwatch.Metric) {
		a := awscloudwatch.NewAlarm(s, jsii.String("Alarm-"+id), &awscloudwatch.AlarmProps{
			AlarmName: jsii.String(prefix + id), AlarmDescription: jsii.String(desc), Metric: m,
			Threshold: jsii.Number(1), EvaluationPeriods: jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		a.AddAlarmAction(action)
	}
	worker := fns[FnRunWorker].FunctionName()
	alarm("run-worker-errors", "The run worker failed (a step that fails is retried, then its run abandoned)",
		sum("AWS/Lambda", "Errors", map[string]*string{"FunctionName": worker}))
	alarm("run-worker-throttles", "The run worker was throttled: its reserved concurrency is used up",
		sum("AWS/Lambda", "Throttles", map[string]*string{"FunctionName": worker}))
	alarm("lambda-throttles", "Functions of the account were throttled (its concurrency is used up)",
		sum("AWS/Lambda", "Throttles", map[string]*string{}))
	machine := map[string]*string{"StateMachineArn": runMachine.StateMachineArn()}
	alarm("runs-failed", "Run executions failed: runs abandoned after their steps kept failing",
		sum("AWS/States", "ExecutionsFailed", machine))
	alarm("runs-timed-out", "Run executions timed out: stuck runs, ended by the run timeout",
		sum("AWS/States", "ExecutionsTimedOut", machine))
	alarm("runs-throttled", "Run executions were throttled (Step Functions quotas)",
		sum("AWS/States", "ExecutionThrottled", machine))
	if expressMachine != nil {
		// Express executions send no status events (the run failures'
		// rule is the Standard machine's): their failures are alarms only.
		express := map[string]*string{"StateMachineArn": expressMachine.StateMachineArn()}
		alarm("runs-express-failed", "Express run executions failed: a hand-over to Standard kept failing, the run ended with ExecutionLost",
			sum("AWS/States", "ExecutionsFailed", express))
		alarm("runs-express-timed-out", "Express run executions timed out (5 minutes): their runs are left to the waiters' lost check",
			sum("AWS/States", "ExecutionsTimedOut", express))
	}
	for _, t := range tables {
		if t.Name != dynamo.TableThreads {
			continue
		}
		alarm("threads-throttled", "DynamoDB throttled writes to the threads table (its indexes included)",
			sum("AWS/DynamoDB", "WriteThrottleEvents", map[string]*string{"TableName": t.Cfn.Ref()}))
	}
	alarm("http-api-5xx", "The HTTP API answered 5xx",
		sum("AWS/ApiGateway", "5xx", map[string]*string{"ApiId": httpAPI.ApiId()}))
	alarm("rest-api-5xx", "The REST API answered 5xx",
		sum("AWS/ApiGateway", "5XXError", map[string]*string{"ApiName": rest.RestApiName()}))
	return topic
}

// onePermissionPerAPI replaces the invoke permissions the integrations
// made, one per route and method (about two hundred: CloudFormation takes
// at most 500 resources in a stack, and a function's resource policy at
// most 20 KB), with one per API function and API, for any of its routes.
// The pinned CDK has no option to scope them so (scopePermissionToRoute
// came later). Other principals' permissions (the scheduled rule's) stay.
func onePermissionPerAPI(s awscdk.Stack, fns map[string]awslambda.Function, httpAPI awsapigatewayv2.HttpApi, rest awsapigateway.RestApi) {
	for _, c := range *s.Node().FindAll(constructs.ConstructOrder_POSTORDER) {
		perm, ok := c.(awslambda.CfnPermission)
		if !ok || aws.ToString(perm.Principal()) != "apigateway.amazonaws.com" {
			continue
		}
		c.Node().Scope().Node().TryRemoveChild(c.Node().Id())
	}
	principal := awsiam.NewServicePrincipal(jsii.String("apigateway.amazonaws.com"), nil)
	for _, spec := range Functions {
		fn, ok := fns[spec.Name]
		if !spec.API || !ok {
			continue
		}
		fn.AddPermission(jsii.String("InvokeFromHttpApi"), &awslambda.Permission{Principal: principal,
			SourceArn: httpAPI.ArnForExecuteApi(nil, nil, nil)})
		fn.AddPermission(jsii.String("InvokeFromRestApi"), &awslambda.Permission{Principal: principal,
			SourceArn: rest.ArnForExecuteApi(nil, nil, nil)})
	}
}

// buildsAuthURLs: a worker granted the token vault runs graph nodes with
// auth, which interrupt with an authorization URL built on the stage's
// public address (EnvPublicURL), and has no request to derive it from.
func buildsAuthURLs(spec FunctionSpec, g Grants) bool {
	return !spec.API && opensVault(g)
}

// opensVault: the function's role or its tenant sessions may use the
// token vault.
func opensVault(g Grants) bool {
	return len(g.Vault) > 0 || (g.Tenant != nil && len(g.Tenant.Vault) > 0)
}

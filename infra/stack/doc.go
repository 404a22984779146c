// Package stack declares stepgraph's AWS deployment as one CDK stack,
// "stepgraph-<stage>":
//
//   - the DynamoDB tables of internal/store/dynamo, translated field for field
//     from dynamo.TableDefinitionsFor(dynamo.DeployedOptions(prefix)) (the
//     one source of truth, shared with the functions: a field
//     the translation does not know fails the synth), on-demand billing,
//     point-in-time recovery, TTL on attribute "ttl" of the idempotency and
//     threads tables;
//   - one Go Lambda per function of functions/routes.json (the main module's
//     internal/lambdaapp.Functions), from the prebuilt bin/lambdas/<name>/
//     bootstrap (`make lambdas`), provided.al2023, arm64 or x86_64, each
//     with its own log group (retention two weeks) and its own role;
//   - the REST API (payload 1.0, regional, stage "api"), the clients'
//     origin: the paths of internal/api/openapi.yaml to the functions
//     routes.json assigns them — ANY where one function serves the path,
//     a method per route (and OPTIONS, for preflights) where two do
//     (restMethods) — "/" and {proxy+} to the system function; the routes
//     of functions marked "stream" in routes.json (the run streams, the
//     waits, the join) stream their responses (newRestAPI);
//   - the edge (edge.go): the stage's CORS allow-list on both APIs and in
//     the API functions' environment, and a WAF web ACL with per-key and
//     per-address rate rules on the REST API's stage;
//   - the HTTP API (API Gateway v2, payload 2.0, $default stage): the same
//     routes, buffered, and $default to the system function so any
//     other path or method gets the API's own 404/405;
//   - the run and deploy (provisioning) Standard state machines, their ASL
//     from internal/awsflow with ${RunWorkerArn}/${DeployWorkerArn}
//     substituted;
//   - the builds of hosted_repo LangGraph apps (appbuild.go): a CodeBuild
//     project, <prefix>app-build, on a python3.11 image of the stack's
//     architecture, with awsflow's buildspec, the stepgraph CLI of `make
//     lambdas` (bin/lambdas/stepgraph-build/stepgraph) as an asset, its
//     log group and a role that may only read the builds' source.zip and
//     write their app.zip and stepgraph_build.json (payload bucket,
//     builds/*), read the CLI and write its logs; the deploy worker may
//     start and read its builds (grant "builds") and gets its name;
//   - the run machine's Express front (express.go; not with Props.
//     NoExpressRuns, context expressRuns=false): an EXPRESS machine on
//     awsflow's express.asl.json whose role may invoke the run worker and
//     start run executions (the hand-over), logging its failures at ERROR
//     without execution data to /aws/vendedlogs/states/<prefix>run-express
//     (Express executions keep no history; CDK's log-delivery grant is on
//     *, which that API requires); the functions that start runs get its
//     ARN (STEPGRAPH_RUN_EXPRESS_STATE_MACHINE_ARN) and may start it;
//   - X-Ray active tracing on every function but system and on both state
//     machines; CloudWatch alarms (newAlarms: run-worker errors and
//     throttles, the account's Lambda throttles, failed, timed-out and
//     throttled run executions, failed and timed-out Express ones, threads
//     table write throttles, both APIs'
//     5xx) notifying the SNS topic <prefix>alarms (docs/aws.md);
//   - the run failures' rule (newRunFailures, runfailures.go): run
//     executions that fail, time out or are aborted are handed to the run
//     worker, which ends their runs; a dead-letter queue
//     <prefix>run-failures-dlq (the rule's and the worker's asynchronous
//     invocations') with an alarm;
//   - the Teardown custom resource (teardown.go): its function (the
//     deploy-worker's bootstrap with STEPGRAPH_TEARDOWN=true, a role of
//     its own) deletes, when the stack is deleted, what the stage made at
//     run time outside CloudFormation — the runtime functions, and unless
//     the stack retains its data, the stage's secrets and the payload
//     bucket's objects — recognising them by name and by the tag
//     stepgraph:prefix; every function depends on it, so they are gone
//     before it runs. The runtime functions log to the stack's
//     /aws/lambda/<prefix>runtimes group (retention, removal policy);
//   - outputs: ApiUrl (the REST API), RestApiId, HttpApiUrl, ApiId (the
//     HTTP API), RunStateMachineArn, RunExpressStateMachineArn (with the
//     Express front), DeployStateMachineArn, TablePrefix,
//     SecretsPrefix, AlarmTopicArn.
//
// # Permissions
//
// No statement but X-Ray's is on every resource and no managed policy is
// attached.
// Every function may write its own log group, and do what its grants in
// functions/routes.json say (internal/lambdaapp.Functions: the main module
// derives them from the code behind each function's routes, and
// functions/grants_test holds them to every AWS call the functions make on
// the emulator), translated in policy.go and nothing more:
//
//   - tables, each read (dynamodb:GetItem, Query, ConditionCheckItem) or
//     written (and PutItem, UpdateItem, DeleteItem, BatchWriteItem), their
//     indexes queried only; never Scan, BatchGetItem or DescribeTable;
//   - secrets by kind, each under its own prefix stepgraph/<stage>/<kind>/*
//     (providers: OAuth client secrets; deployments: deployment secret
//     values; orgs: webhook signing keys), with only the actions used
//     (SecretActions: a create or delete of a value is a compare-and-set
//     write of its owner's map, internal/secrets/aws), encrypted with the
//     AWS-managed key aws/secretsmanager (no KMS statement needed);
//   - X-Ray's write actions, on * (X-Ray has no resource-level
//     permissions), for tracing;
//   - the state machines: run functions start run executions (Express or
//     Standard) and describe
//     them (a wait asking whether its run's execution was lost), the
//     deployment functions start provisioning, the deploy worker's
//     scheduled resume lists and starts provisioning;
//   - the runtimes (below).
//
// So the system function, which serves only public operations (and API
// Gateway's $default route, answered without any use case), has its log
// group and nothing else; every other API function reads the organizations
// table (API keys); the creates that record an organization's keys write
// it, and the run-worker's tenant role its own organization's item
// (webhook keys). An API function serves only its own routes
// (internal/lambdaapp, Config.Function), so no request can need more than
// its role has. Each state machine may invoke only the worker its
// definition names. The deployments' runtime functions (Lambda functions
// the deploy-worker makes from external_docker images, named
// stepgraph-<stage>-rt-*) run with a role of their own that may only write
// the stack's runtimes log group; the deploy-worker may create (tagged),
// update, read and delete them and pass that role (STEPGRAPH_RUNTIME_ROLE_ARN, in its environment)
// to Lambda only, and the run-worker and the deploy-worker may invoke them
// (function nodes; describe) — no other function, so a custom_url naming
// any other function is refused by IAM. The emulator enforces no IAM, so
// the tests here check the policies themselves. Tenants are separated by
// IAM for the run-worker only (tenant.go): its tenant role, assumed with
// the session tag org=<organization>, reaches only that organization's
// partition keys (dynamodb:LeadingKeys), its org-tagged secrets and its
// vault values, and only the run-worker's role may assume it
// (STEPGRAPH_TENANT_ROLE_ARN); every other role reaches the items of every
// organization in the tables it is granted (docs/aws.md, "Tenant
// sessions").
//
// # Throttling and concurrency
//
// The HTTP API's $default stage throttles every route together (default
// route settings: Props.ThrottleRate, Props.ThrottleBurst), the guard of
// the whole stage; the API functions add a per-key limit in each instance
// (STEPGRAPH_RATE_LIMIT). The workers have reserved concurrency
// (Props.RunWorkerConcurrency, Props.DeployWorkerConcurrency): each is
// capped, and always has that much, whatever the rest of the account does;
// New refuses reservations that would leave the account fewer than 100
// unreserved executions, which Lambda refuses at deploy. The emulator
// applies neither; the tests check the template.
//
// The state machines have fixed names, so every function gets their ARNs in
// its environment without a dependency cycle (the machines depend on the
// workers' ARNs).
//
// # Timeouts, and waits longer than API Gateway allows
//
// A buffered integration waits 29–30 s at most. The buffered API functions
// time out after 29 s and internal/lambdaapp answers within min(28 s,
// invocation deadline - 1 s): a runs/wait (or join) whose run is still going
// answers 200 with {"__error__": {"error": "WaitTimeout", ...}} and a
// Location header to join it, and the run goes on in its Step Functions
// execution — never a gateway 5xx once the run exists, never a lost run.
// Behind the REST API the run streams, the waits and the join stream
// instead (ResponseTransferMode STREAM, the functions invoked through
// response-streaming-invocations): their functions time out after 15
// minutes (streamTimeout), a response lasts up to 14 min 30 s, a wait's
// keep-alive newlines reach the client and its output follows, and a
// stream ends for the client to reconnect with Last-Event-ID.
// docs/streaming.md, "On AWS", says why the REST API and not function URLs.
//
// The run-worker times out after 10 minutes: each Step task executes
// super-steps for half of its remaining time, then hands back to the state
// machine; a task that times out is retried from the last checkpoint. The
// deploy-worker has 5 minutes for one provisioning step (cloning a
// repository included).
package stack

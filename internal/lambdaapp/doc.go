// Package lambdaapp is the composition root of the AWS deployment: the only
// package that reads the environment of a Lambda function. Each main of
// functions/ is one call: StartAPI(name), StartRunWorker() or
// StartDeployWorker(). Open wires, on the AWS services of an aws.Config:
//
//   - the DynamoDB store (internal/store/dynamo, tables named
//     STEPGRAPH_TABLE_PREFIX + "threads", ...) and the Secrets Manager
//     store (internal/secrets/aws, names prefixed with
//     STEPGRAPH_SECRETS_PREFIX), with the S3 payload store
//     (internal/payloads/s3, STEPGRAPH_PAYLOAD_BUCKET) holding documents
//     over 16 KiB (dynamo.PayloadThreshold) for the DynamoDB store;
//   - agent auth's token vault: KMS-sealed items of the providers table
//     (internal/secrets/kmsvault) under STEPGRAPH_VAULT_KEY_ID, or Secrets
//     Manager without it; agent auth's public URL is STEPGRAPH_PUBLIC_URL
//     or, unset, the API Gateway address of each request (domain and stage
//     of its request context, never a Host header);
//   - runs.Service, with the Step Functions dispatcher (internal/dispatch/sfn,
//     STEPGRAPH_RUN_STATE_MACHINE_ARN, and the Express front
//     STEPGRAPH_RUN_EXPRESS_STATE_MACHINE_ARN where runs that can start now
//     start) in API functions, and at most
//     STEPGRAPH_MAX_RUNNING_PER_ORG runs of one organization running at
//     once (runs.DefaultMaxRunningPerOrg when unset, 0 for no cap), held by
//     the run worker's claims;
//   - deployments.Service, with the Step Functions provisioner
//     (STEPGRAPH_DEPLOY_STATE_MACHINE_ARN) in API functions, the git
//     source checker (https only: no file:// on AWS; only the emulator
//     tests' binaries, -tags stepgraph_faults, take local repositories,
//     STEPGRAPH_LOCAL_REPO_DIRS) and the runtime
//     provisioner (internal/lambdaruntime): an external_docker revision
//     with an image_uri and no custom_url gets a Lambda function made from
//     the image, named STEPGRAPH_TABLE_PREFIX + "rt-" + the deployment id,
//     with the role STEPGRAPH_RUNTIME_ROLE_ARN (without it, such a
//     revision fails, saying so); a hosted_repo LangGraph app is built by the
//     CodeBuild project STEPGRAPH_BUILD_PROJECT into the payload bucket
//     (internal/codebuild) and made into the same function from the zip;
//     its graphs are served from the function (pyapp.LambdaApps);
//   - deployedgraphs.Host with a Lambda client: a runtime that is a Lambda
//     function ARN is called with Lambda Invoke, any other over HTTP;
//   - providers.Service refusing plain-http loopback URLs, the API keys,
//     the webhook sender (private addresses refused unless
//     STEPGRAPH_WEBHOOKS_ALLOW_PRIVATE=true, for the emulator tests);
//   - the whole HTTP API (internal/api) for API functions, with the
//     per-key rate limit of STEPGRAPH_RATE_LIMIT (DefaultRateLimit): in
//     each instance's memory, so a first line only; API Gateway's stage
//     throttle and the workers' reserved concurrency (infra/) bound the
//     stage as a whole.
//
// The workers need no state machine ARN (the state machines invoke them and
// are created after them), only the tables and secrets.
//
// # Roles
//
// API functions serve API Gateway HTTP API events through
// aws-lambda-go-api-proxy, completed by HTTPHandler (a status and a
// Content-Type on every response, headers as sent, named stages, a
// response budget under the gateway's 30 s), and REST API events (Router):
// buffered (HTTPHandler.HandleV1), or streamed for the functions whose
// routes stream (Function.Stream: StreamingHandler, the documented
// streamed integration response, a budget of up to 15 minutes,
// EnvStreamBudget). Their runs.Service has TailEvents: a stream follows a
// run through the event log the run worker writes, and a run created by a
// stream request is logged. Their runs.Service polls a
// waited-on run every APIPollInterval×25 = 0.5 s (runs finish in another
// Lambda, so the poll is how a waiter learns of it) and asks Step Functions
// every 10 s whether the run's execution still runs.
//
// run-worker handles RunTask events of the run state machine (with
// EnvTenantRoleARN, each run's tenant work in a session of the run's
// organization: tenant.go, docs/aws.md "Tenant sessions"): "step" calls
// runs.Service.StepRun (super-steps for half the Lambda's remaining time,
// then the state machine calls again), "abandon" calls AbandonRun with the
// Catch output as the reason. It waits for webhook deliveries before
// answering: a Lambda is frozen once it answered. Its lease on a run
// (LeaseDuration) outlasts any Lambda timeout, and it renews it and looks
// for cancellations every WorkerPollInterval.
//
// The deploy-worker's bootstrap with STEPGRAPH_TEARDOWN=true is the
// stack's teardown function instead (teardown.go, StartTeardown): the
// Teardown custom resource's handler, which deletes on the stack's delete
// the runtime functions and, unless the stack retains its data, the
// secrets and payloads the stage made at run time.
//
// deploy-worker handles DeployTask events of the provisioning state
// machine: "provision" calls deployments.Service.Provision, "delete"
// FinishDelete. A revision that ends *_FAILED is a successful task; only
// errors (the work could not be done now) fail it, and the state machine
// retries. "resume", sent by the stack's schedule, restarts provisioning
// whose execution was never started (ResumeIdle, running executions
// skipped).
//
// Functions lists every function with its routes and its grants (what its
// IAM role allows: the needs of its routes or worker role, no more);
// functions/routes.json is the same list for the CDK app, which builds the
// roles from it. An API function started under its name (StartAPI) serves
// only its own routes, so that nothing it is sent can need more than its
// grants; the system function, which API Gateway also sends every request
// no route matched, serves public operations only and is granted nothing. Package sample runs the functions on the
// emulator (make invoke, the tests of functions/).
package lambdaapp

package functions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/calltoken"
	"github.com/stepgraph/stepgraph/internal/dispatch/eventbridge"
	"github.com/stepgraph/stepgraph/internal/dispatch/sfn"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/lambdaapp/sample"
	payloadss3 "github.com/stepgraph/stepgraph/internal/payloads/s3"
	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/secrets/kmsvault"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

// calls records, per function, the AWS calls it makes, as the grants they
// need ("table threads write", "secret providers create", "execution
// start-run", "runtime invoke"); a call no grant can allow is recorded as
// "not grantable: ...".
type calls struct {
	prefix, runARN, deployARN string
	expressARN                string

	mu  sync.Mutex
	got map[string]map[string]string // function → need → an example call
	// touched is what the run-worker touched (resourceKeys): its
	// tenant-isolation inventory, held to lambdaapp's tenant grants.
	touched touchedKeys
}

func (c *calls) add(fn, need, example string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got[fn] == nil {
		c.got[fn] = map[string]string{}
	}
	if _, ok := c.got[fn][need]; !ok {
		c.got[fn][need] = example
	}
}

// middleware records every call of a client made from the aws.Config it
// is added to, by its input, before it is sent (a call that fails needed
// its grant all the same).
func (c *calls) middleware(fn string) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("record-grants",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if fn == "run-worker" {
					// Whose grant a call needs (the worker's role or its
					// tenant session's) is known once it is signed:
					// settleRunWorker.
					ctx = c.touched.add(ctx, c.prefix, in.Parameters, c.needs(in.Parameters))
					return next.HandleInitialize(ctx, in)
				}
				for _, need := range c.needs(in.Parameters) {
					c.add(fn, need, fmt.Sprintf("%T", in.Parameters))
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	}
}

// signer records, after signing, the access key id each run-worker
// request was signed with (touchedKeys).
func (c *calls) signer(st *middleware.Stack) error {
	return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("record-signer",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			signedWith(ctx, in.Request)
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// needs maps a call to the grants it needs, in the vocabulary of
// lambdaapp.Grants: dynamodb:GetItem, Query and ConditionCheckItem are
// reads, PutItem, UpdateItem, DeleteItem and BatchWriteItem writes (a
// transaction needs the action of each of its items).
func (c *calls) needs(in any) []string {
	table := func(name *string, access string) string {
		return "table " + strings.TrimPrefix(aws.ToString(name), c.prefix) + " " + access
	}
	secret := func(id *string, action string) string {
		kind, _, _ := strings.Cut(strings.TrimPrefix(aws.ToString(id), c.prefix), "/")
		return "secret " + kind + " " + action
	}
	machine := func(arn *string, op string) string {
		switch aws.ToString(arn) {
		case c.runARN:
			return "execution " + op + "-run"
		case c.expressARN:
			return "execution " + op + "-run-express"
		case c.deployARN:
			return "execution " + op + "-deploy"
		}
		return "not grantable: " + op + " on " + aws.ToString(arn)
	}
	// The vault's items (kmsvault) are in the providers table under
	// vault#<ref>: they need the table and the vault grant.
	vault := func(key map[string]ddbtypes.AttributeValue, action string) []string {
		if pk, ok := key["pk"].(*ddbtypes.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "vault#") {
			return []string{"vault " + action}
		}
		return nil
	}
	switch in := in.(type) {
	case *kms.GenerateDataKeyInput:
		return []string{"vault " + lambdaapp.SecretCreate}
	case *kms.DecryptInput:
		return []string{"vault " + lambdaapp.SecretGet}
	case *dynamodb.GetItemInput:
		return append([]string{table(in.TableName, lambdaapp.Read)}, vault(in.Key, lambdaapp.SecretGet)...)
	case *dynamodb.QueryInput:
		return []string{table(in.TableName, lambdaapp.Read)}
	case *dynamodb.PutItemInput:
		return append([]string{table(in.TableName, lambdaapp.Write)}, vault(in.Item, lambdaapp.SecretCreate)...)
	case *dynamodb.UpdateItemInput:
		return []string{table(in.TableName, lambdaapp.Write)}
	case *dynamodb.DeleteItemInput:
		return append([]string{table(in.TableName, lambdaapp.Write)}, vault(in.Key, lambdaapp.SecretDelete)...)
	case *dynamodb.BatchWriteItemInput:
		var out []string
		for name := range in.RequestItems {
			out = append(out, table(aws.String(name), lambdaapp.Write))
		}
		return out
	case *dynamodb.TransactWriteItemsInput:
		var out []string
		for _, it := range in.TransactItems {
			switch {
			case it.ConditionCheck != nil:
				out = append(out, table(it.ConditionCheck.TableName, lambdaapp.Read))
			case it.Put != nil:
				out = append(out, table(it.Put.TableName, lambdaapp.Write))
			case it.Update != nil:
				out = append(out, table(it.Update.TableName, lambdaapp.Write))
			case it.Delete != nil:
				out = append(out, table(it.Delete.TableName, lambdaapp.Write))
			}
		}
		return out
	case *secretsmanager.CreateSecretInput:
		return []string{secret(in.Name, lambdaapp.SecretCreate)}
	case *secretsmanager.GetSecretValueInput:
		// A create or delete reads the owner's map at the stage its
		// compare-and-set is on, AWSCURRENT, named (internal/secrets/aws).
		if aws.ToString(in.VersionStage) == "AWSCURRENT" {
			return []string{secret(in.SecretId, secretWrite)}
		}
		return []string{secret(in.SecretId, lambdaapp.SecretGet)}
	case *secretsmanager.PutSecretValueInput:
		// The label of the new version says what made it.
		switch {
		case slices.Contains(in.VersionStages, "stepgraph-add"):
			return []string{secret(in.SecretId, lambdaapp.SecretCreate)}
		case slices.Contains(in.VersionStages, "stepgraph-remove"):
			return []string{secret(in.SecretId, lambdaapp.SecretDelete)}
		}
		return []string{"not grantable: PutSecretValue with labels " + strings.Join(in.VersionStages, ",")}
	case *secretsmanager.UpdateSecretVersionStageInput:
		return []string{secret(in.SecretId, secretWrite)}
	case *secretsmanager.DeleteSecretInput:
		return []string{secret(in.SecretId, lambdaapp.SecretDelete)}
	case *awssfn.StartExecutionInput:
		return []string{machine(in.StateMachineArn, "start")}
	case *awssfn.SendTaskSuccessInput:
		// A task token names no machine; the run machine's Park task is
		// the only one that issues tokens.
		return []string{"execution wake-run"}
	case *awssfn.ListExecutionsInput:
		return []string{machine(in.StateMachineArn, "list")}
	case *awssfn.DescribeExecutionInput:
		// arn:…:execution:<machine>:<name> → arn:…:stateMachine:<machine>
		arn := aws.ToString(in.ExecutionArn)
		machineARN := strings.Replace(arn[:max(strings.LastIndex(arn, ":"), 0)], ":execution:", ":stateMachine:", 1)
		return []string{machine(&machineARN, "describe")}
	case *scheduler.CreateScheduleInput, *scheduler.UpdateScheduleInput, *scheduler.DeleteScheduleInput:
		return []string{"schedules " + lambdaapp.ManageSchedules}
	case *s3.GetObjectInput:
		return []string{"payloads " + lambdaapp.Read}
	case *s3.PutObjectInput, *s3.DeleteObjectsInput, *s3.ListObjectsV2Input:
		return []string{"payloads " + lambdaapp.Write}
	case *sts.AssumeRoleInput:
		// The run worker's tenant sessions (IAM: its tenant role only).
		return []string{tenantAssume}
	case *lambda.InvokeInput:
		// Any function: IAM scopes it to the runtimes (<prefix>rt-*),
		// infra/stack's business; here, who invokes at all.
		return []string{"runtime " + lambdaapp.InvokeRuntimes}
	case *lambda.CreateFunctionInput, *lambda.UpdateFunctionCodeInput, *lambda.UpdateFunctionConfigurationInput,
		*lambda.GetFunctionInput, *lambda.DeleteFunctionInput:
		return []string{"runtime " + lambdaapp.ManageRuntimes}
	}
	return []string{fmt.Sprintf("not grantable: %T", in)}
}

// tenantAssume is the need of assuming the tenant role (Grants.Tenant).
const tenantAssume = "tenant assume"

// secretWrite is the need of the calls a create and a delete of grouped
// secret values share (the read and the stage move of their
// compare-and-set): either grant allows them (infra/stack SecretActions).
const secretWrite = "write"

// granted is what g allows, in the terms of calls.needs.
func granted(g lambdaapp.Grants) map[string]bool {
	out := map[string]bool{}
	for t, access := range g.Tables {
		out["table "+t+" "+lambdaapp.Read] = true
		if access == lambdaapp.Write {
			out["table "+t+" "+lambdaapp.Write] = true
		}
	}
	// The payload store follows the tables (Grants.PayloadAccess).
	switch g.PayloadAccess() {
	case lambdaapp.Write:
		out["payloads "+lambdaapp.Write] = true
		out["payloads "+lambdaapp.Read] = true
	case lambdaapp.Read:
		out["payloads "+lambdaapp.Read] = true
	}
	for kind, actions := range g.Secrets {
		for _, a := range actions {
			out["secret "+kind+" "+a] = true
			if a == lambdaapp.SecretCreate || a == lambdaapp.SecretDelete {
				out["secret "+kind+" "+secretWrite] = true
			}
		}
	}
	for _, e := range g.Executions {
		out["execution "+e] = true
	}
	for _, r := range g.Runtimes {
		out["runtime "+r] = true
	}
	for _, sc := range g.Schedules {
		out["schedules "+sc] = true
	}
	for _, a := range g.Vault {
		out["vault "+a] = true
	}
	if g.Tenant != nil {
		out[tenantAssume] = true
	}
	return out
}

// grantList is every grant of g once, in the terms of calls.needs: a table
// at its access (its write grant includes reading, which is not listed
// apart).
func grantList(g lambdaapp.Grants) []string {
	var out []string
	for t, access := range g.Tables {
		out = append(out, "table "+t+" "+access)
	}
	for kind, actions := range g.Secrets {
		for _, a := range actions {
			out = append(out, "secret "+kind+" "+a)
		}
	}
	for _, e := range g.Executions {
		out = append(out, "execution "+e)
	}
	for _, r := range g.Runtimes {
		out = append(out, "runtime "+r)
	}
	for _, sc := range g.Schedules {
		out = append(out, "schedules "+sc)
	}
	for _, a := range g.Vault {
		out = append(out, "vault "+a)
	}
	if g.Tenant != nil {
		out = append(out, tenantAssume)
	}
	return out
}

// unreached are the grants a function needs on paths this test does not
// take, and why.
var unreached = map[string]map[string]string{
	"create-provider": {
		"secret providers delete": "the client secret is deleted again when the provider cannot be stored",
		"secret orgs get":         orgKeyCheck,
	},
	"create-deployment": {
		"secret deployments delete": "the secret values are deleted again when the deployment cannot be stored",
		"secret orgs create":        orgKeyCheck,
		"table organizations write": orgKeyCheck,
	},
	"deployments": {
		"secret deployments delete": "the changed secret values are deleted again when the revision cannot be stored",
	},
	"providers": {
		// The functions refuse loopback and private addresses, so no token
		// endpoint of this test can answer: the exchange fails, no token is
		// stored by the function (the test stores one, which the function
		// reads and deletes). internal/api's agent-auth tests store, read,
		// refresh and delete them against a real OAuth server.
		"vault create":         "token values are stored after a code exchange, which no token endpoint here can answer",
		"secret providers get": "the code exchange reads the client secret, which this instance has cached since it stored it (another instance reads it)",
		"secret orgs get":      "the PKCE key is read back from this instance's cache, where it was put when made (another instance reads it)",
	},
	"thread-run-wait":    {"execution describe-run": lostCheck, "execution wake-run": parkCheck, "runtime invoke": appCall},
	"stateless-run-wait": {"execution describe-run": lostCheck, "execution wake-run": parkCheck, "runtime invoke": appCall},
	// runs: A2A message/stream follows its run's stream, whose lost-run
	// check describes the run's execution after a long silence only.
	"runs":       {"execution describe-run": lostCheck, "execution wake-run": parkCheck, "runtime invoke": appCall},
	"run-stream": {"execution describe-run": lostCheck, "execution wake-run": parkCheck, "runtime invoke": appCall},
	"threads":    {"execution wake-run": parkCheck, "runtime invoke": appCall},
	"assistants": {"runtime invoke": appCall},
	"run-worker": {
		"secret store get": storeKeyCheck,
	},
	tenantFunctionName: {
		// (secret orgs get: the PKCE key of the graph's authorization, made
		// by the providers function, authGraph.)
		"secret orgs delete": "a new webhook key is deleted again when its reference cannot be stored",
		// A graph node's token refresh fails here (no token endpoint can
		// answer: authGraph), so no new value is sealed and no old one
		// deleted; internal/api's agent-auth tests refresh against a real
		// OAuth server.
		"vault create": "a refreshed token's value is stored after the token endpoint answers, which none here can",
		"vault delete": "the old value of a refreshed token is deleted once the new one is stored, which no refresh here reaches",
	},
	"store": {"secret store get": storeKeyCheck},
	"app-calls": {
		"secret store get": storeKeyCheck,
		// The organization's PKCE key was made by the providers function
		// (its first authorization); a graph's can be the first.
		"secret orgs create":        "the PKCE key is made by an organization's first authorization, here the providers function's",
		"table organizations write": "the PKCE key's reference is stored by an organization's first authorization, here the providers function's",
		// No token endpoint here can answer a refresh (as for run-worker).
		"secret providers get": "an expired token is refreshed with the client secret, and no token here has expired",
		"vault create":         "a refreshed token's value is stored after the token endpoint answers, which none here can",
		"vault delete":         "the old value of a refreshed token is deleted once the new one is stored, which no refresh here reaches",
	},
	// A cron's run starts at its slot: on the Express front when the stack
	// has one (this test's), on the Standard machine without it (-c
	// expressRuns=false).
	"cron-fire": {"execution start-run": "a cron's run starts now, on the Express front here; on the Standard machine in a stack without one (expressRuns=false)",
		"runtime invoke": appCall},
	"deploy-worker": {
		"execution start-deploy": resumeCheck,
		"execution list-deploy":  resumeCheck,
	},
}

// appCall: a LangGraph app's graph answers its shape, schemas, state and
// state edits through its function (pyapp.LambdaApps), and this scenario
// deploys graph documents only; internal/lambdaruntime
// TestHostedAppOnMiniStack calls a deployed app's function.
const appCall = "a deployed LangGraph app's graphs are calls to its runtime function, and this scenario deploys none"

const (
	// parkCheck: a request that ends runs without a worker (a pending
	// run's cancel, a thread's deletion or prune, a lost run abandoned by
	// its waiter) wakes the parked executions of the thread's runs; this
	// scenario's driver steps queued runs again instead of parking them,
	// so none is parked here. TestRunsEndedByARequestWakeTheParkedRuns
	// wakes them on the real run machine.
	parkCheck = "waking parked executions, of which this scenario's driver makes none"
	// storeKeyCheck: the operator's embeddings key is read at a cold start
	// only when semantic search is configured with it
	// (STEPGRAPH_STORE_EMBEDDINGS_KEY_SECRET); the emulator's functions
	// reach no embeddings endpoint, so this scenario runs without one.
	storeKeyCheck = "the store's embeddings API key, read at a cold start when the operator configured semantic search"
	// orgKeyCheck: the organization's request-hash key (Idempotency-Key
	// records) is made by the first create that carries a key, and read by
	// every later one; here create-provider makes it and create-deployment
	// finds it, so each uses one side.
	orgKeyCheck = "the organization's request-hash key is made by whichever create comes first with an Idempotency-Key, and read by the others"
	lostCheck   = "a wait, join or stream asks Step Functions whether the run's execution was lost only after the run was silent for 10 minutes (failures are pushed: the run-failures rule); the runs here end sooner"
	resumeCheck = "the scheduled resume restarts provisioning idle for lambdaapp.ResumeIdle (2 min), listing the running executions first; none is idle that long here"
)

// grantsTest is the functions wired on the emulator as on AWS, each API
// function serving only its routes, each recording its calls.
type grantsTest struct {
	t     *testing.T
	calls *calls
	apps  map[string]*lambdaapp.App
	owner *http.ServeMux // route pattern → its function (the HTTP API's routing)
	key   string
	orgID string
	plain aws.Config // unrecorded: the test's own calls
	sfn   *awssfn.Client
	// vault is the agent-auth vault (unrecorded): the test stores a token
	// value as a code exchange would.
	vault  *kmsvault.Store
	tables *dynamo.DB
	// signer signs LangGraph apps' call tokens as the run worker does
	// (unrecorded: the key is made here).
	signer *calltoken.Signer

	mu     sync.Mutex
	served map[string]int // route key → best status answered
}

// call sends a request as API Gateway would: to the function of the route
// it matches, else ($default) to system.
func (g *grantsTest) call(method, path string, body any, header ...string) (int, string) {
	g.t.Helper()
	return g.callWithin(55*time.Second, method, path, body, header...) // the flow is under test, not the budget
}

// callWithin is call with the function's response budget: what an endless
// answer (the thread stream) has sent by then is its answer, as API
// Gateway's buffered integration gives it.
func (g *grantsTest) callWithin(budget time.Duration, method, path string, body any, header ...string) (int, string) {
	g.t.Helper()
	p, q, _ := strings.Cut(path, "?")
	probe := httptest.NewRequest(method, p, nil)
	routeKey, fn := "$default", "system"
	if _, pattern := g.owner.Handler(probe); pattern != "" && strings.HasPrefix(pattern, method+" ") {
		routeKey, fn = pattern, ownerOf(pattern)
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: routeKey, RawPath: p, RawQueryString: q,
		Headers: map[string]string{"x-api-key": g.key},
		RequestContext: events.APIGatewayV2HTTPRequestContext{Stage: "$default", DomainName: "api.example",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: p, SourceIP: "192.0.2.1"}},
	}
	for i := 0; i+1 < len(header); i += 2 {
		ev.Headers[header[i]] = header[i+1]
	}
	if body != nil {
		b, _ := json.Marshal(body)
		ev.Body = string(b)
		ev.Headers["content-type"] = "application/json"
	}
	status, raw := g.invoke(fn, budget, ev, body != nil)
	g.mu.Lock()
	if prev, ok := g.served[routeKey]; !ok || status < prev {
		g.served[routeKey] = status
	}
	g.mu.Unlock()
	return status, raw
}

// invoke runs function fn's handler on ev as its gateway would: the
// functions whose routes stream (lambdaapp.Function.Stream) get the REST
// API's event and answer through lambdaapp.StreamingHandler, read to its
// end; the others the HTTP API's, buffered.
func (g *grantsTest) invoke(fn string, budget time.Duration, ev events.APIGatewayV2HTTPRequest, hasBody bool) (int, string) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if f, _ := lambdaapp.FunctionNamed(fn); f.Stream {
		h := lambdaapp.NewStreamingHandler(g.apps[fn].Handler)
		h.Budget = budget
		v1 := events.APIGatewayProxyRequest{Resource: ev.RouteKey, Path: ev.RawPath, HTTPMethod: ev.RequestContext.HTTP.Method,
			Headers: ev.Headers, Body: ev.Body,
			RequestContext: events.APIGatewayProxyRequestContext{DomainName: "api.example",
				Identity: events.APIGatewayRequestIdentity{SourceIP: "192.0.2.1"}}}
		if q, err := url.ParseQuery(ev.RawQueryString); err == nil && len(q) > 0 {
			v1.MultiValueQueryStringParameters = q
		}
		resp, err := h.Handle(ctx, v1)
		if err != nil {
			g.t.Fatalf("%s %s: %v", v1.HTTPMethod, v1.Path, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			g.t.Fatalf("%s %s: reading the stream: %v", v1.HTTPMethod, v1.Path, err)
		}
		return resp.StatusCode, string(b)
	}
	h := lambdaapp.NewHTTPHandler(g.apps[fn].Handler)
	h.Budget = budget
	resp, err := h.Handle(ctx, ev)
	if err != nil {
		g.t.Fatalf("%s %s: %v", ev.RequestContext.HTTP.Method, ev.RawPath, err)
	}
	return resp.StatusCode, resp.Body
}

// must calls, requires a 2xx answer and decodes it into out (when not nil).
func (g *grantsTest) mustInto(out any, method, path string, body any, header ...string) {
	g.t.Helper()
	status, raw := g.call(method, path, body, header...)
	if status/100 != 2 {
		g.t.Fatalf("%s %s: %d %s", method, path, status, raw)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(raw), out); err != nil {
			g.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

// must calls, requires a 2xx answer and returns it as an object (nil when
// it is none).
func (g *grantsTest) must(method, path string, body any, header ...string) map[string]any {
	g.t.Helper()
	var out map[string]any
	status, raw := g.call(method, path, body, header...)
	if status/100 != 2 {
		g.t.Fatalf("%s %s: %d %s", method, path, status, raw)
	}
	_ = json.Unmarshal([]byte(raw), &out)
	return out
}

func ownerOf(routeKey string) string {
	for _, f := range lambdaapp.Functions {
		if slices.Contains(f.Routes, routeKey) {
			return f.Name
		}
	}
	return ""
}

// drive plays the state machines: every execution started on the run
// machine is stepped by the run-worker until it is done (or parks, waiting
// longer than a test should), every one on the deploy machine handed to
// the deploy-worker, as the machines' tasks would.
func (g *grantsTest) drive(ctx context.Context, machine string, handle func(ctx context.Context, input string)) {
	seen := map[string]bool{}
	for ctx.Err() == nil {
		out, err := g.sfn.ListExecutions(ctx, &awssfn.ListExecutionsInput{StateMachineArn: aws.String(machine)})
		if err == nil {
			for _, e := range out.Executions {
				arn := aws.ToString(e.ExecutionArn)
				if seen[arn] {
					continue
				}
				seen[arn] = true
				d, err := g.sfn.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: e.ExecutionArn})
				if err == nil {
					go handle(ctx, aws.ToString(d.Input))
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Every function's IAM grants (lambdaapp.Functions, functions/routes.json,
// from which infra/stack builds the roles) cover every AWS call it makes:
// each API function serving every one of its routes with a 2xx answer,
// the system function also $default, and the workers every action. The
// emulator enforces no IAM, so on it a missing grant would only show on
// AWS, as AccessDenied; this test is what holds the table to the code.
func TestGrantsCoverWhatFunctionsDo(t *testing.T) {
	ep := awstest.Start(t)
	prefix := awstest.Prefix(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := dynamo.New(ep.Config, dynamo.DeployedOptions(prefix)).CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	// State machines that only wait: the test plays their tasks (drive).
	sc := awssfn.NewFromConfig(ep.Config)
	machine := func(name string) string {
		return awstest.StateMachine(t, sc, &awssfn.CreateStateMachineInput{
			Name: aws.String(prefix + name), RoleArn: aws.String("arn:aws:iam::000000000000:role/grants-test"),
			Type:       sfntypes.StateMachineTypeStandard,
			Definition: aws.String(`{"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":3600,"End":true}}}`),
		})
	}
	c := &calls{prefix: prefix, runARN: machine("run"), expressARN: machine("run-express"), deployARN: machine("deploy"),
		got: map[string]map[string]string{}}
	log := testLog(t)
	// The crons' schedule group (the stack's, here made by the test).
	cronGroup := prefix + "crons"
	if _, err := scheduler.NewFromConfig(ep.Config).CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(cronGroup)}); err != nil {
		t.Fatal(err)
	}
	// The payload store, as deployed: its calls are recorded too.
	bucket := payloadss3.BucketName(prefix)
	if err := payloadss3.New(ep.Config, bucket, true).CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	// The vault's KMS key (the stack's).
	vaultKey, err := kms.NewFromConfig(ep.Config).CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String("grants-test vault")})
	if err != nil {
		t.Fatal(err)
	}
	base := lambdaapp.Config{TablePrefix: prefix, SecretsPrefix: prefix, RunStateMachineARN: c.runARN, PayloadBucket: bucket,
		RunExpressStateMachineARN: c.expressARN,
		PublicURL:                 "https://stepgraph.example.test", VaultKeyID: aws.ToString(vaultKey.KeyMetadata.Arn),
		DeployStateMachineARN: c.deployARN, WebhooksAllowPrivate: true, LogLevel: slog.LevelInfo,
		RuntimeRoleARN:    "arn:aws:iam::000000000000:role/grants-test-runtime",
		CronScheduleGroup: cronGroup, CronTargetARN: "arn:aws:lambda:us-east-1:000000000000:function:" + prefix + "cron-fire",
		CronRoleARN: "arn:aws:iam::000000000000:role/grants-test-cron-scheduler"}
	g := &grantsTest{t: t, calls: c, apps: map[string]*lambdaapp.App{}, owner: http.NewServeMux(),
		plain: ep.Config, sfn: sc, served: map[string]int{}, tables: dynamo.New(ep.Config, dynamo.Options{TablePrefix: prefix})}
	if g.vault, err = kmsvault.New(ep.Config, kmsvault.Options{Table: prefix + dynamo.TableProviders, KeyID: base.VaultKeyID}); err != nil {
		t.Fatal(err)
	}
	for _, f := range lambdaapp.Functions {
		cfg := base
		switch f.Role {
		case "api":
			cfg.Role, cfg.Function = lambdaapp.RoleAPI, f.Name
		case "run-worker":
			cfg.Role = lambdaapp.RoleRunWorker
			// Tenant sessions: MiniStack hands out a new access key for
			// each assumed session (and enforces no policy: the test
			// checks the keys, checkTenantSessions).
			cfg.TenantRoleARN = "arn:aws:iam::000000000000:role/grants-test-tenant"
		case "deploy-worker":
			cfg.Role = lambdaapp.RoleDeployWorker
		case "cron-fire":
			cfg.Role = lambdaapp.RoleCronFire
		}
		awsCfg := ep.Config.Copy()
		awsCfg.APIOptions = append(slices.Clone(awsCfg.APIOptions), c.middleware(f.Name))
		if f.Role == "run-worker" {
			awsCfg.APIOptions = append(awsCfg.APIOptions, c.signer)
		}
		a, err := lambdaapp.Open(cfg, awsCfg, log.With("function", f.Name))
		if err != nil {
			t.Fatalf("open %s: %v", f.Name, err)
		}
		g.apps[f.Name] = a
		for _, r := range f.Routes {
			g.owner.Handle(r, http.NotFoundHandler())
		}
	}
	// The organization and its key, made by the test (unrecorded).
	setup, err := lambdaapp.Open(base, ep.Config, log)
	if err != nil {
		t.Fatal(err)
	}
	org, _, err := setup.Keys.EnsureOrganization(ctx, "grants-"+uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	if g.key, err = setup.Keys.Create(ctx, org.ID); err != nil {
		t.Fatal(err)
	}
	g.orgID = org.ID
	g.signer = setup.CallTokens

	// The workers, as the state machines' tasks (the Express front's
	// executions are stepped to the end here, not handed over).
	stepRun := func(ctx context.Context, input string) {
		var in sfn.Input
		_ = json.Unmarshal([]byte(input), &in)
		worker := g.apps["run-worker"]
		for i := 0; i < 100 && ctx.Err() == nil; i++ {
			out, err := worker.HandleRunTask(ctx, lambdaapp.RunTask{Action: "step", RunID: in.RunID, ExecutionInput: in})
			switch {
			case err != nil:
				time.Sleep(50 * time.Millisecond) // the machine retries
			case out.Status == "done":
				return
			case out.Status == "wait" && out.WaitSeconds > 5:
				return // scheduled for later: parked here
			case out.Status == "wait", out.Status == "park": // a park: stepped again here, not woken
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	go g.drive(ctx, c.runARN, stepRun)
	go g.drive(ctx, c.expressARN, stepRun)
	go g.drive(ctx, c.deployARN, func(ctx context.Context, input string) {
		var task lambdaapp.DeployTask
		_ = json.Unmarshal([]byte(input), &task)
		for i := 0; i < 3 && ctx.Err() == nil; i++ {
			_, err := g.apps["deploy-worker"].HandleDeployTask(ctx, task)
			if err == nil {
				return
			}
			t.Logf("deploy task %s (the machine retries): %v", task.Action, err)
			time.Sleep(100 * time.Millisecond)
		}
	})

	g.scenario(ctx)
	second := g.secondOrganization(ctx, setup)
	cancel()

	// Every route was served, 2xx; but MCP's GET and DELETE, which answer
	// no stream (405) and no session (404) as upstream's endpoint does,
	// and a graph's UI component, which no graph has (404).
	notOK := map[string]int{"GET /mcp": 405, "DELETE /mcp": 404, "POST /ui/{graph_id}": 404}
	for _, f := range lambdaapp.Functions {
		for _, r := range f.Routes {
			if want, ok := notOK[r]; ok {
				if status := g.served[r]; status != want {
					t.Errorf("route %s (%s) answered %d here, want %d", r, f.Name, status, want)
				}
				continue
			}
			if status, ok := g.served[r]; !ok || status/100 != 2 {
				t.Errorf("route %s (%s) was not served with a 2xx answer here (best %d): the scenario must cover it", r, f.Name, status)
			}
		}
	}
	// Every call was granted, and every grant used, but for those this
	// scenario cannot reach (unreached); the run worker's calls signed
	// with a tenant session against its tenant grants.
	c.settleRunWorker(t, ep.Config)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range append(slices.Clone(lambdaapp.Functions), tenantFunction()) {
		allowed := granted(f.Grants)
		var missing []string
		for need, example := range c.got[f.Name] {
			if !allowed[need] {
				missing = append(missing, need+" ("+example+")")
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s makes calls its grants do not allow:\n  %s", f.Name, strings.Join(missing, "\n  "))
		}
		for _, grant := range grantList(f.Grants) {
			_, used := c.got[f.Name][grant]
			_, excused := unreached[f.Name][grant]
			switch {
			case !used && !excused:
				t.Errorf("%s is granted %q and did not use it: drop it from lambdaapp.Functions, or say in unreached why it is needed", f.Name, grant)
			case used && excused:
				t.Errorf("%s used %q, which unreached says this test cannot reach: drop it from unreached", f.Name, grant)
			}
		}
		if testing.Verbose() {
			t.Logf("%s uses: %s", f.Name, strings.Join(slices.Sorted(maps.Keys(c.got[f.Name])), ", "))
		}
	}
	// What the run worker touched is its organization's (its tenant
	// session's grants) or one of the listed stage-wide keys, and what it
	// touched of an organization it touched in that organization's
	// session.
	checkTenantKeys(t, c.touched.list(), g.orgID, second)
	checkTenantSessions(t, c.touched.requests(), ep.Config, prefix, g.orgID, second)
	if testing.Verbose() {
		for _, shape := range shapes(c.touched.list(), g.orgID) {
			t.Logf("run-worker touched: %s", shape)
		}
	}
	if len(c.got["system"]) > 0 {
		t.Errorf("system made AWS calls: %v", c.got["system"])
	}
	// The large stateless run went through the payload store.
	for fn, need := range map[string]string{"stateless-run-wait": "payloads write", "run-worker": "payloads read"} {
		if _, ok := c.got[fn][need]; !ok {
			t.Errorf("%s made no %q call: the large run did not reach the payload store", fn, need)
		}
	}
}

var assetRef = regexp.MustCompile(`/docs/assets/[A-Za-z0-9._-]+`)

// scenario serves every route of every API function, and every worker
// action, on a small tenant: providers, deployments (one served by the
// example runtime, a Lambda the deploy worker describes), assistants,
// threads and runs (one with a webhook).
func (g *grantsTest) scenario(ctx context.Context) {
	t := g.t
	idem := func() []string { return []string{"idempotency-key", uuid.NewString()} }

	// system, and $default.
	for _, p := range []string{"/ok", "/info", "/openapi.json", "/v2/graph-schema", "/v2/graph-config-schema"} {
		g.must("GET", p, nil)
	}
	status, page := g.call("GET", "/docs", nil)
	if status != 200 {
		t.Fatalf("GET /docs: %d", status)
	}
	asset := assetRef.FindString(page)
	if asset == "" {
		t.Fatalf("no asset on the docs page")
	}
	g.must("GET", asset, nil)
	// The web console: its page and an asset it references.
	status, page = g.call("GET", "/", nil)
	if status != 200 {
		t.Fatalf("GET /: %d", status)
	}
	consoleAsset := regexp.MustCompile(`/console/assets/[A-Za-z0-9._-]+`).FindString(page)
	if consoleAsset == "" {
		t.Fatalf("no asset on the console page")
	}
	g.must("GET", consoleAsset, nil)
	for _, c := range []struct {
		method, path string
		status       int
	}{{"GET", "/nope", 404}, {"HEAD", "/threads/" + uuid.NewString(), 405}, {"OPTIONS", "/threads", 405}} {
		if status, body := g.call(c.method, c.path, nil); status != c.status {
			t.Errorf("%s %s through $default: %d %s, want %d", c.method, c.path, status, body, c.status)
		}
	}

	// The long-term memory store.
	g.must("PUT", "/store/items", map[string]any{"namespace": []string{"users", "u1"}, "key": "prefs",
		"value": map[string]any{"theme": "dark"}, "ttl": 60})
	if it := g.must("GET", "/store/items?namespace=users.u1&key=prefs", nil); it["key"] != "prefs" {
		t.Errorf("GET /store/items: %v", it)
	}
	if res := g.must("POST", "/store/items/search", map[string]any{"namespace_prefix": []string{"users"},
		"filter": map[string]any{"theme": "dark"}}); len(res["items"].([]any)) != 1 {
		t.Errorf("POST /store/items/search: %v", res)
	}
	if res := g.must("POST", "/store/namespaces", map[string]any{"prefix": []string{"users"}}); len(res["namespaces"].([]any)) != 1 {
		t.Errorf("POST /store/namespaces: %v", res)
	}
	g.must("DELETE", "/store/items", map[string]any{"namespace": []string{"users", "u1"}, "key": "prefs"})

	// Providers.
	prov := map[string]any{"provider_id": "gh", "name": "GitHub", "client_id": "Iv1.abc", "client_secret": "s3cret-1",
		"auth_url": "https://github.com/login/oauth/authorize", "token_url": "https://github.com/login/oauth/access_token"}
	g.must("POST", "/v2/auth/providers", prov, idem()...)
	g.must("GET", "/v2/auth/providers", nil)
	g.must("GET", "/v2/auth/providers/gh", nil)
	g.must("PATCH", "/v2/auth/providers/gh", map[string]any{"client_secret": "s3cret-2"})

	// Agent auth: an authorization (PKCE: the organization's key), its
	// callback (the exchange at an address no test server can have fails
	// the attempt, 200), the wait, the token routes.
	g.must("PATCH", "/v2/auth/providers/gh", map[string]any{"uses_pkce": true, "token_url": "https://idp.invalid/token"})
	_, started := g.call("POST", "/v2/auth/authenticate", map[string]any{"provider": "gh", "scopes": []string{"repo"}, "user_id": "u1"})
	var attempt struct {
		URL    string `json:"url"`
		AuthID string `json:"auth_id"`
	}
	if err := json.Unmarshal([]byte(started), &attempt); err != nil || attempt.AuthID == "" {
		t.Fatalf("authenticate: %s", started)
	}
	authURL, err := url.Parse(attempt.URL)
	if err != nil {
		t.Fatal(err)
	}
	g.must("GET", "/v2/auth/callback/gh?"+url.Values{"state": {authURL.Query().Get("state")}, "code": {"c0de"}}.Encode(), nil)
	g.must("GET", "/v2/auth/wait/"+attempt.AuthID+"?timeout=0", nil)
	// The frontend-bridged POST callback of a second attempt (it fails the
	// same way, 200).
	_, started = g.call("POST", "/v2/auth/authenticate", map[string]any{"provider": "gh", "scopes": []string{"repo"}, "user_id": "u1", "force_new": true})
	if err := json.Unmarshal([]byte(started), &attempt); err != nil || attempt.AuthID == "" {
		t.Fatalf("authenticate: %s", started)
	}
	if authURL, err = url.Parse(attempt.URL); err != nil {
		t.Fatal(err)
	}
	g.must("POST", "/v2/auth/callback/gh", map[string]any{"code": "c0de", "state": authURL.Query().Get("state")})
	// A LangGraph app's run call on Lambda calling back with its signed
	// token: a provider token (none yet: a new authorization's URL) and
	// the graph's store.
	call, _, err := g.signer.Issue(ctx, calltoken.Claims{OrgID: g.orgID, RunID: "run-1", AssistantID: "asst-1", UserID: "u1"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	callAuth := []string{"authorization", "Bearer " + call}
	if res := g.must("POST", "/runtime/auth/token", map[string]any{"provider": "gh", "scopes": []string{"repo"}}, callAuth...); res["status"] != "pending" {
		t.Errorf("POST /runtime/auth/token: %v", res)
	}
	g.must("POST", "/runtime/store", map[string]any{"ops": []any{
		map[string]any{"op": "put", "namespace": []string{"memories"}, "key": "k", "value": map[string]any{"v": 1}},
		map[string]any{"op": "get", "namespace": []string{"memories"}, "key": "k"}}}, callAuth...)
	g.must("POST", "/runtime/events", map[string]any{"events": []any{
		map[string]any{"type": "event", "seq": 1, "mode": "custom", "ns": []string{}, "data": map[string]any{"step": 1}}}}, callAuth...)
	// A token stored as a code exchange would store it (value in the
	// vault, record in the providers table): listed, then deleted, read
	// first from the vault to revoke it at the provider's revocation_url
	// (which no address here can answer: the revocation fails, the token
	// is deleted all the same).
	g.must("PATCH", "/v2/auth/providers/gh", map[string]any{"revocation_url": "https://idp.invalid/revoke"})
	ref, err := g.vault.Create(ctx, "agentauth/"+g.orgID+"/gh/u1", []byte(`{"access_token":"at-grants","refresh_token":"rt-grants"}`))
	if err != nil {
		t.Fatal(err)
	}
	tokID := uuid.NewString()
	now := time.Now()
	if _, err := g.tables.PutAgentToken(ctx, store.AgentToken{ID: tokID, OrgID: g.orgID, UserID: "u1", ProviderID: "gh",
		Scopes: []string{"repo"}, SecretRef: ref, ExpiresAt: now.Add(time.Hour), Usable: true, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	// A run call's graph gets it (the user's unscoped token).
	if res := g.must("POST", "/runtime/auth/token", map[string]any{"provider": "gh", "scopes": []string{"repo"}, "agent_id": nil},
		callAuth...); res["status"] != "completed" || res["token"] != "at-grants" {
		t.Errorf("POST /runtime/auth/token of a stored token: %v", res)
	}
	var toks []map[string]any
	g.mustInto(&toks, "GET", "/v2/auth/tokens?provider_id=gh", nil)
	if len(toks) != 1 || toks[0]["id"] != tokID {
		t.Fatalf("GET /v2/auth/tokens: %v", toks)
	}
	g.must("DELETE", "/v2/auth/tokens/"+tokID, nil)
	if _, err := g.vault.Get(ctx, ref); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("the deleted token's value: %v, want it gone", err)
	}
	g.must("GET", "/v2/auth/tokens/exists?provider_id=gh&user_id=u1", nil)
	g.must("DELETE", "/v2/auth/tokens?provider_id=gh", nil)
	g.must("DELETE", "/v2/auth/providers/gh", nil)

	// Deployments: one served by the example runtime (a Lambda the deploy
	// worker describes), one from an image the deploy worker makes a
	// runtime of (it fails here: the emulator has no Docker to run it).
	runtimeARN, err := (&sample.Stack{AWS: g.plain, Prefix: g.calls.prefix}).ExampleRuntime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := g.must("POST", "/v2/deployments", map[string]any{"name": "agent", "source": "external_docker",
		"source_config":          map[string]any{"custom_url": runtimeARN},
		"source_revision_config": map[string]any{"image_uri": "registry.example/agent:1"},
		"secrets":                []any{map[string]any{"name": "OPENAI_API_KEY", "value": "sk-grants-1"}}}, idem()...)
	dep := d["id"].(string)
	g.waitStatus("/v2/deployments/"+dep, "READY")
	img := g.must("POST", "/v2/deployments", map[string]any{"name": "img", "source": "external_docker",
		"source_config": map[string]any{}, "source_revision_config": map[string]any{"image_uri": "registry.example/img:1"}}, idem()...)
	g.must("GET", "/v2/deployments", nil)
	g.must("GET", "/v2/deployments/"+dep, nil)
	g.must("PATCH", "/v2/deployments/"+dep, map[string]any{
		"secrets": []any{map[string]any{"name": "OPENAI_API_KEY", "value": "sk-grants-2"}}})
	revs := g.must("GET", "/v2/deployments/"+dep+"/revisions", nil)
	rev := revs["resources"].([]any)[0].(map[string]any)["id"].(string)
	g.must("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil)
	g.must("POST", "/v2/deployments/"+dep+"/revisions", map[string]any{})
	g.waitStatus("/v2/deployments/"+dep, "READY")
	g.must("POST", "/v2/deployments/"+dep+"/revisions/"+rev+"/redeploy", nil)
	g.must("POST", "/v1/projects/"+dep+"/revisions/"+rev+"/build_logs", map[string]any{"limit": 10})
	g.must("POST", "/v1/projects/"+dep+"/revisions/"+rev+"/deploy_logs", map[string]any{})
	g.must("POST", "/v1/projects/"+dep+"/deploy_logs", map[string]any{"order": "asc"})
	g.waitStatus("/v2/deployments/"+dep, "READY")

	// Assistants, on a built-in graph and on the deployed one.
	a := g.must("POST", "/assistants", map[string]any{"graph_id": "echo"})
	aid := a["assistant_id"].(string)
	g.must("POST", "/assistants/search", map[string]any{})
	g.must("GET", "/assistants/"+aid, nil)
	g.must("GET", "/assistants/"+aid+"/graph", nil)
	g.must("GET", "/assistants/"+aid+"/schemas", nil)
	g.must("PATCH", "/assistants/"+aid, map[string]any{"name": "renamed"})
	g.must("POST", "/assistants/"+aid+"/versions", map[string]any{})
	g.must("POST", "/assistants/"+aid+"/latest", map[string]any{"version": 1})
	g.must("POST", "/assistants/count", map[string]any{})
	g.must("GET", "/assistants/"+aid+"/subgraphs", nil)
	g.must("GET", "/assistants/"+aid+"/subgraphs/inner", nil)
	g.must("DELETE", "/assistants/"+aid, nil)
	support := g.must("POST", "/assistants", map[string]any{"graph_id": "support"})
	g.must("GET", "/assistants/"+support["assistant_id"].(string)+"/schemas", nil)

	// Threads and runs; the first run sends a webhook.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer hook.Close()
	th := g.must("POST", "/threads", map[string]any{})["thread_id"].(string)
	g.must("PATCH", "/threads/"+th, map[string]any{"metadata": map[string]any{"k": "v"}})
	g.must("GET", "/threads/"+th, nil)
	g.must("POST", "/threads/search", map[string]any{})
	g.must("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "counter",
		"input": map[string]any{"steps": 2}, "webhook": hook.URL + "/hook"})
	g.must("GET", "/threads/"+th+"/state", nil)
	var history []struct {
		Checkpoint struct {
			CheckpointID string `json:"checkpoint_id"`
		}
	}
	g.mustInto(&history, "POST", "/threads/"+th+"/history", map[string]any{})
	if len(history) == 0 {
		t.Fatal("no history")
	}
	cp := history[0].Checkpoint.CheckpointID
	g.must("GET", "/threads/"+th+"/state/"+cp, nil)
	run := g.must("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "echo",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}})
	rid := run["run_id"].(string)
	g.must("GET", "/threads/"+th+"/runs/"+rid+"/join", nil)
	g.must("GET", "/threads/"+th+"/runs", nil)
	g.must("GET", "/threads/"+th+"/runs/"+rid, nil)
	g.must("DELETE", "/threads/"+th+"/runs/"+rid, nil)
	// A run on the deployed graph (it fails at the model call: no network
	// here, but it resolves the deployment and its secrets on the way).
	// These two start a second ahead: on the Standard run machine, not its
	// Express front.
	g.must("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "support", "after_seconds": 1,
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "where is my order?"}}}})
	g.must("POST", "/runs/wait", map[string]any{"assistant_id": "support", "after_seconds": 1,
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hello"}}}})
	bg := g.must("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "support",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hello"}}}})
	g.must("GET", "/threads/"+th+"/runs/"+bg["run_id"].(string)+"/join", nil)
	// A deployed graph whose node carries auth, in the run-worker.
	g.authGraph(ctx)
	// State edits resolve the thread's graph: here the deployed one its
	// last run stamped.
	g.must("POST", "/threads/"+th+"/state", map[string]any{"as_node": "__end__"})
	g.must("PATCH", "/threads/"+th+"/state", map[string]any{"metadata": map[string]any{"label": "x"}})
	g.must("POST", "/threads/"+th+"/state/checkpoint", map[string]any{"checkpoint": map[string]any{"checkpoint_id": cp}})
	g.must("POST", "/threads/count", map[string]any{})
	cpy := g.must("POST", "/threads/"+th+"/copy", nil)["thread_id"].(string)
	g.must("POST", "/threads/prune", map[string]any{"thread_ids": []string{cpy}})
	// Streams, answered streamed (run-stream): runs the run worker executes
	// in another function, so a follower here tails their events in the
	// event log (streamed runs are logged whether or not they ask for
	// stream_resumable), one joined again from its first event, and the
	// thread's stream, which never ends by itself: its answer is what the
	// budget left time for.
	streamed := func(method, path string, body any, header ...string) string {
		t.Helper()
		status, raw := g.call(method, path, body, header...)
		if status != 200 || !strings.Contains(raw, "event: metadata") {
			t.Fatalf("%s %s: %d %s", method, path, status, raw)
		}
		return raw
	}
	raw := streamed("POST", "/threads/"+th+"/runs/stream", map[string]any{"assistant_id": "echo",
		"input":       map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}},
		"stream_mode": []any{"values", "updates"}})
	sid := regexp.MustCompile(`"run_id":\s*"([^"]+)"`).FindStringSubmatch(raw)
	if sid == nil {
		t.Fatalf("no run_id in the stream: %s", raw)
	}
	streamed("GET", "/threads/"+th+"/runs/"+sid[1]+"/stream", nil, "last-event-id", "-1")
	streamed("POST", "/runs/stream", map[string]any{"assistant_id": "echo", "input": map[string]any{}})
	streamed("POST", "/runs/stream", map[string]any{"assistant_id": "echo", "input": map[string]any{}, "after_seconds": 1})
	// A stream of the deployed graph: the deployment is resolved (and its
	// secret values read) to create the run; the run fails at the model.
	streamed("POST", "/runs/stream", map[string]any{"assistant_id": "support",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hello"}}}})
	if status, raw := g.callWithin(2*time.Second, "GET", "/threads/"+th+"/stream", nil); status != 200 {
		t.Fatalf("GET /threads/%s/stream: %d %s", th, status, raw)
	}
	// The thread event protocol: run.start makes the thread and a run the
	// run worker executes, appending its protocol events to the thread's
	// event log; once it ended, the thread's event stream (endless too)
	// replays them from the log within its budget.
	pth := uuid.NewString()
	cmdReply := g.must("POST", "/threads/"+pth+"/commands", map[string]any{"id": 1, "method": "run.start",
		"params": map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{}}}})
	result, _ := cmdReply["result"].(map[string]any)
	prid, _ := result["run_id"].(string)
	if cmdReply["type"] != "success" || prid == "" {
		t.Fatalf("run.start: %v", cmdReply)
	}
	g.must("GET", "/threads/"+pth+"/runs/"+prid+"/join", nil)
	if status, raw := g.callWithin(2*time.Second, "POST", "/threads/"+pth+"/stream/events",
		map[string]any{"channels": []string{"lifecycle"}}); status != 200 || !strings.Contains(raw, `"event":"completed"`) {
		t.Fatalf("POST /threads/%s/stream/events: %d %s", pth, status, raw)
	}
	// A run scheduled an hour ahead stays pending: cancelled; another one
	// is abandoned by the run worker.
	later := g.must("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "echo", "input": map[string]any{},
		"after_seconds": 3600})
	g.must("POST", "/threads/"+th+"/runs/"+later["run_id"].(string)+"/cancel", nil)
	// The park of a run that is no longer pending (as a parked execution of
	// it would send) wakes its execution at once: SendTaskSuccess (the
	// token here names no task).
	if _, err := g.apps["run-worker"].HandleRunTask(ctx, lambdaapp.RunTask{Action: lambdaapp.ActionPark,
		RunID: later["run_id"].(string), OrgID: g.orgID, ThreadID: th, TaskToken: "grants-test-token"}); err != nil {
		t.Fatalf("park: %v", err)
	}
	other := g.must("POST", "/threads", map[string]any{})["thread_id"].(string)
	lost := g.must("POST", "/threads/"+other+"/runs", map[string]any{"assistant_id": "echo", "input": map[string]any{},
		"after_seconds": 3600})
	// (Its execution input does not name the organization, as one started
	// before inputs did: the worker reads it from the run's marker.)
	if _, err := g.apps["run-worker"].HandleRunTask(ctx, lambdaapp.RunTask{Action: "abandon",
		RunID: lost["run_id"].(string), Error: json.RawMessage(`{"Error":"States.Timeout","Cause":""}`)}); err != nil {
		t.Fatalf("abandon: %v", err)
	}
	// Crons: one of the deployed graph, fired by cron-fire at its slot (a
	// run started, the schedule moved), one on the thread; every route.
	cr := g.must("POST", "/runs/crons", map[string]any{"assistant_id": "support", "schedule": "*/5 * * * *",
		"on_run_completed": "keep", "input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "report"}}}})
	cid := cr["cron_id"].(string)
	tcr := g.must("POST", "/threads/"+th+"/runs/crons", map[string]any{"assistant_id": "echo", "schedule": "0 * * * *"})
	g.must("POST", "/runs/crons/search", map[string]any{})
	g.must("POST", "/runs/crons/count", map[string]any{})
	g.must("GET", "/runs/crons/"+cid, nil)
	g.must("PATCH", "/runs/crons/"+tcr["cron_id"].(string), map[string]any{"enabled": false})
	slot, err := time.Parse(time.RFC3339, cr["next_run_date"].(string))
	if err != nil {
		t.Fatal(err)
	}
	fire := g.apps["cron-fire"]
	fire.Crons.Now = func() time.Time { return slot.Add(time.Second) }
	if err := fire.HandleCronEvent(ctx, eventbridge.Event{OrgID: g.orgID, CronID: cid, ScheduledTime: slot.Format(time.RFC3339)}); err != nil {
		t.Fatalf("cron-fire: %v", err)
	}
	var fired []map[string]any
	g.mustInto(&fired, "POST", "/threads/search", map[string]any{"metadata": map[string]any{"cron_id": cid}})
	if len(fired) != 1 {
		t.Fatalf("threads of the fired cron: %v", fired)
	}
	if after := g.must("GET", "/runs/crons/"+cid, nil); after["next_run_date"] == cr["next_run_date"] {
		t.Fatalf("next_run_date did not move: %v", after)
	}
	g.must("DELETE", "/runs/crons/"+cid, nil)
	g.must("DELETE", "/runs/crons/"+tcr["cron_id"].(string), nil)

	// Stateless runs.
	g.must("POST", "/runs/wait", map[string]any{"assistant_id": "echo", "input": map[string]any{}})
	// One large enough for the payload store (its input and result over
	// dynamo.PayloadThreshold): the S3 calls are recorded and must be granted too.
	g.must("POST", "/runs/wait", map[string]any{"assistant_id": "echo", "input": map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("payload ", 20_000)}}}})
	g.must("POST", "/runs", map[string]any{"assistant_id": "echo", "input": map[string]any{}})
	g.mustInto(&[]map[string]any{}, "POST", "/runs/batch", []any{map[string]any{"assistant_id": "echo", "input": map[string]any{}}})
	pending := g.must("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "echo", "input": map[string]any{},
		"after_seconds": 3600})
	g.must("POST", "/runs/cancel", map[string]any{"thread_id": th, "run_ids": []string{pending["run_id"].(string)}})
	g.must("POST", "/runs/cancel", map[string]any{"status": "pending"})
	// MCP and A2A: tools and agents are assistants, their calls runs.
	mcp := func(method string, params any) map[string]any {
		t.Helper()
		out := g.must("POST", "/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
			"accept", "application/json, text/event-stream")
		if out["result"] == nil {
			t.Fatalf("mcp %s: %v", method, out)
		}
		return out["result"].(map[string]any)
	}
	mcp("initialize", map[string]any{"protocolVersion": "2025-06-18"})
	mcp("tools/list", map[string]any{})
	if res := mcp("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}}); res["isError"] == true {
		t.Fatalf("mcp tools/call: %v", res)
	}
	for _, p := range []string{"/a2a/echo", "/a2a/echo/.well-known/agent-card.json", "/a2a/echo/.well-known/agent.json",
		"/.well-known/agent-card.json?assistant_id=echo"} {
		g.must("GET", p, nil)
	}
	send := func(method string) map[string]any {
		return map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": map[string]any{"message": map[string]any{
			"role": "user", "messageId": "m", "parts": []any{map[string]any{"kind": "text", "text": "hi"}}}}}
	}
	sent := g.must("POST", "/a2a/echo", send("message/send"), "accept", "application/json")
	if task, _ := sent["result"].(map[string]any); task == nil || task["status"].(map[string]any)["state"] != "completed" {
		t.Fatalf("a2a message/send: %v", sent)
	}
	if status, raw := g.call("POST", "/a2a/echo", send("message/stream"), "accept", "text/event-stream"); status != 200 ||
		!strings.Contains(raw, `"final":true`) {
		t.Fatalf("a2a message/stream: %d %s", status, raw)
	}
	// MCP's GET and DELETE; upstream's GET history, the thread's storage
	// and the organization's metrics.
	if status, raw := g.call("GET", "/mcp", nil, "accept", "text/event-stream"); status != 405 {
		t.Fatalf("GET /mcp: %d %s", status, raw)
	}
	if status, raw := g.call("DELETE", "/mcp", nil); status != 404 {
		t.Fatalf("DELETE /mcp: %d %s", status, raw)
	}
	if status, raw := g.call("POST", "/ui/echo", map[string]any{"name": "card"}); status != 404 {
		t.Fatalf("POST /ui/echo: %d %s", status, raw)
	}
	var hist []map[string]any
	g.mustInto(&hist, "GET", "/threads/"+th+"/history?limit=2", nil)
	if len(hist) != 2 {
		t.Fatalf("GET history limit=2: %d states", len(hist))
	}
	if st := g.must("GET", "/threads/"+th+"/storage", nil); st["checkpoints"].(map[string]any)["count"].(float64) < 2 ||
		st["total_bytes"].(float64) <= 0 {
		t.Fatalf("thread storage: %v", st)
	}
	if m := g.must("GET", "/metrics?format=json", nil); m["queue"] == nil {
		t.Fatalf("metrics: %v", m)
	}
	g.must("DELETE", "/threads/"+th, nil)

	// Deleting the deployments (their secrets and the runtime function go
	// in the deploy worker), and the scheduled resume.
	g.must("DELETE", "/v2/deployments/"+dep, nil)
	g.must("DELETE", "/v2/deployments/"+img["id"].(string), nil)
	g.waitGone("/v2/deployments/" + dep)
	g.waitGone("/v2/deployments/" + img["id"].(string))
	if _, err := g.apps["deploy-worker"].HandleDeployTask(ctx, lambdaapp.DeployTask{Action: "resume"}); err != nil {
		t.Fatalf("resume: %v", err)
	}
}

// waitStatus polls until the resource has the status (the deploy worker
// works in the background).
func (g *grantsTest) waitStatus(path, want string) {
	g.t.Helper()
	var last string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		status, raw := g.call("GET", path, nil)
		var body struct{ Status string }
		if status == 200 && json.Unmarshal([]byte(raw), &body) == nil && body.Status == want {
			return
		}
		last = raw
	}
	g.t.Fatalf("%s never became %s: %v", path, want, last)
}

// waitGone polls until the resource is gone.
func (g *grantsTest) waitGone(path string) {
	g.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if status, _ := g.call("GET", path, nil); status == 404 {
			return
		}
	}
	g.t.Fatalf("%s is still there", path)
}

// secondOrganization runs a thread's run with a webhook (its signing key is
// made on first use) and a stateless run of a second organization on the
// same run worker, and returns its id: the tenant sessions of two
// organizations, interleaved in one instance.
func (g *grantsTest) secondOrganization(ctx context.Context, setup *lambdaapp.App) string {
	t := g.t
	org, _, err := setup.Keys.EnsureOrganization(ctx, "grants-second-"+uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	key, err := setup.Keys.Create(ctx, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	first := g.key
	g.key = key
	defer func() { g.key = first }()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer hook.Close()
	th := g.must("POST", "/threads", map[string]any{})["thread_id"].(string)
	g.must("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "counter",
		"input": map[string]any{"steps": 2}, "webhook": hook.URL + "/hook"})
	g.must("POST", "/runs/wait", map[string]any{"assistant_id": "echo", "input": map[string]any{}})
	return org.ID
}

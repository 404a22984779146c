package lambdaruntime_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/deployedgraphs"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// emulatorRole names a role in the emulator (it enforces no IAM).
const emulatorRole = "arn:aws:iam::000000000000:role/stepgraph-runtime"

// namePrefix is a short unique prefix of function names: a runtime's name
// adds 35 characters, and Lambda allows 64.
func namePrefix(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "sg" + hex.EncodeToString(b) + "-"
}

// The provisioner's calls as the emulator's Lambda API answers them: a
// container image function is created, then updated, each time as a new
// version carrying the image, and no environment. (The emulator cannot run
// an image without Docker: invoking one is TestImageRevisionOnMiniStack.)
func TestProvisionerOnMiniStack(t *testing.T) {
	ep := awstest.Start(t)
	ctx := t.Context()
	lc := lambda.NewFromConfig(ep.Config)
	p := &lambdaruntime.Provisioner{Client: lc, NamePrefix: namePrefix(t), RoleARN: emulatorRole,
		Poll: 100 * time.Millisecond, ReadyWait: 30 * time.Second}
	const deploymentID = "6f1d0c2e-8a4b-4c3d-9e5f-0a1b2c3d4e5f"
	name := lambdaruntime.FunctionName(p.NamePrefix, deploymentID)
	image1 := "000000000000.dkr.ecr.us-east-1.amazonaws.com/agent:1"
	image2 := "000000000000.dkr.ecr.us-east-1.amazonaws.com/agent:2"

	arn1, err := p.EnsureRuntime(ctx, deploymentID, image1)
	if err != nil {
		t.Fatal(err)
	}
	arnPattern := regexp.MustCompile(`^arn:aws:lambda:us-east-1:[0-9]{12}:function:` + name + `:([0-9]+)$`)
	if !arnPattern.MatchString(arn1) {
		t.Fatalf("runtime %q, want the ARN of a version of function %s", arn1, name)
	}
	check := func(function, image string) {
		t.Helper()
		got, err := lc.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(function)})
		if err != nil {
			t.Fatal(err)
		}
		c := got.Configuration
		if c.PackageType != types.PackageTypeImage || aws.ToString(c.Role) != emulatorRole ||
			c.Environment != nil && len(c.Environment.Variables) > 0 {
			t.Errorf("%s: package %s, role %s, environment %+v", function, c.PackageType, aws.ToString(c.Role), c.Environment)
		}
		if got.Code == nil || aws.ToString(got.Code.ImageUri) != image {
			t.Errorf("%s: code %+v, want image %s", function, got.Code, image)
		}
	}
	check(arn1, image1)

	arn2, err := p.EnsureRuntime(ctx, deploymentID, image2)
	if err != nil {
		t.Fatal(err)
	}
	if !arnPattern.MatchString(arn2) || arn2 == arn1 {
		t.Fatalf("runtime after an update %q, want another version of %s than %s", arn2, name, arn1)
	}
	check(name, image2)
	check(arn2, image2)

	// Deleting the deployment's runtime removes the function and its
	// versions; a second delete finds nothing and is no error.
	for range 2 {
		if err := p.DeleteRuntime(ctx, deploymentID); err != nil {
			t.Fatal(err)
		}
	}
	for _, function := range []string{name, arn1, arn2} {
		_, err := lc.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(function)})
		var missing *types.ResourceNotFoundException
		if !errors.As(err, &missing) {
			t.Errorf("%s after DeleteRuntime: %v, want ResourceNotFoundException", function, err)
		}
	}
}

// runtimeFunction deploys examples/python/runtime.py as a python3.11 zip
// Lambda (the emulator runs it as a local Python process) and returns its
// ARN. modelURL is the chat model its support graph describes.
func runtimeFunction(t *testing.T, lc *lambda.Client, name, modelURL string) string {
	t.Helper()
	return pythonFunction(t, lc, name, "runtime.lambda_handler", nil, map[string]string{
		"STEPGRAPH_EXAMPLE_MODEL_URL":      modelURL,
		"STEPGRAPH_EXAMPLE_API_KEY_SECRET": "", // no API key
	})
}

// pythonFunction deploys examples/python/runtime.py, with more modules
// (name → source), as a python3.11 zip Lambda whose handler is handler.
func pythonFunction(t *testing.T, lc *lambda.Client, name, handler string, modules, env map[string]string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "python", "runtime.py"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	files := map[string]string{"runtime.py": string(src)}
	for name, source := range modules {
		files[name] = source
	}
	for name, source := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(source)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := lc.CreateFunction(t.Context(), &lambda.CreateFunctionInput{
		FunctionName: aws.String(name),
		Runtime:      types.RuntimePython311,
		Handler:      aws.String(handler),
		Role:         aws.String(emulatorRole),
		Code:         &types.FunctionCode{ZipFile: buf.Bytes()},
		Timeout:      aws.Int32(30),
		Environment:  &types.Environment{Variables: env},
	})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(out.FunctionArn)
	waitActive(t, lc, arn)
	return arn
}

// waitActive waits for the function to be Active (the deadline is a
// safety net only).
func waitActive(t *testing.T, lc *lambda.Client, arn string) {
	t.Helper()
	waiter := lambda.NewFunctionActiveV2Waiter(lc, func(o *lambda.FunctionActiveV2WaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
	})
	if err := waiter.Wait(t.Context(), &lambda.GetFunctionInput{FunctionName: aws.String(arn)}, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// platform is a deployments service and the deployed graphs' host on a
// local store, with the Lambda client of the emulator (nil: a server
// without AWS).
type platform struct {
	svc  *deployments.Service
	host *deployedgraphs.Host
}

func newPlatform(t *testing.T, lc *lambda.Client) *platform {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sec, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	svc := &deployments.Service{Store: db, Secrets: sec}
	host := &deployedgraphs.Host{Source: svc, Secrets: sec, HTTPClient: &http.Client{}, AllowLoopbackHTTP: true}
	if lc != nil {
		host.Lambda = lambdaruntime.Runtimes(lc)
	}
	svc.Graphs = host
	return &platform{svc: svc, host: host}
}

// deploy creates an external_docker deployment and provisions its first
// revision, returning the deployment and the revision as it ended.
func (p *platform) deploy(t *testing.T, name, customURL string, secrets map[string]string) (deployments.Deployment, deployments.Revision) {
	t.Helper()
	in := map[string]any{"name": name, "source": "external_docker",
		"source_config":          map[string]any{},
		"source_revision_config": map[string]any{"image_uri": "000000000000.dkr.ecr.us-east-1.amazonaws.com/agent:1"}}
	if customURL != "" {
		in["source_config"] = map[string]any{"custom_url": customURL}
	}
	var list []map[string]string
	for k, v := range secrets {
		list = append(list, map[string]string{"name": k, "value": v})
	}
	in["secrets"] = list
	raw, _ := json.Marshal(in)
	var ci deployments.CreateInput
	if err := json.Unmarshal(raw, &ci); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	d, err := p.svc.Create(ctx, "org-1", ci)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.svc.Provision(ctx, "org-1", d.ID, *d.LatestRevisionID); err != nil {
		t.Fatal(err)
	}
	rev, err := p.svc.Revision(ctx, "org-1", d.ID, *d.LatestRevisionID)
	if err != nil {
		t.Fatal(err)
	}
	return d, rev
}

func reason(r deployments.Revision) string {
	if r.StatusMessage == nil {
		return ""
	}
	return *r.StatusMessage
}

// fakeModel is an OpenAI-compatible Chat Completions endpoint: it asks for
// lookup_order of the order in the user's message, then answers with the
// tool's result.
func fakeModel(t *testing.T) string {
	orderNumber := regexp.MustCompile(`[0-9]+`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []map[string]any `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&body) != nil || len(body.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		last := body.Messages[len(body.Messages)-1]
		w.Header().Set("Content-Type", "application/json")
		message := map[string]any{"role": "assistant", "content": "Order: " + fmt.Sprint(last["content"])}
		if last["role"] != "tool" {
			args, _ := json.Marshal(map[string]string{"order_id": orderNumber.FindString(fmt.Sprint(last["content"]))})
			message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": "call_1", "type": "function", "function": map[string]any{"name": "lookup_order", "arguments": string(args)}}}}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": message}}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// runGraph runs a served graph from a new thread (from nil) or on.
func runGraph(t *testing.T, p *platform, graphID string, from *graph.Checkpoint, input any) (graph.Checkpoint, graph.Outcome) {
	t.Helper()
	dg, err := p.host.Current(t.Context(), "org-1", graphID)
	if err != nil {
		t.Fatal(err)
	}
	cp, out, err := graph.Run(t.Context(), dg.Graph, from, input, graph.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status == graph.Failed {
		t.Fatalf("%s failed: %s: %s", graphID, out.Error.Kind, out.Error.Message)
	}
	return cp, out
}

// A deployment whose custom_url is a Lambda function's ARN: the describe
// call while deploying, its function nodes and its function tool all go
// through Lambda Invoke, to examples/python/runtime.py running as a Lambda.
// The same deployment on a server without a Lambda client fails to deploy,
// saying why.
func TestLambdaRuntimeOnMiniStack(t *testing.T) {
	ep := awstest.Start(t)
	lc := lambda.NewFromConfig(ep.Config)
	arn := runtimeFunction(t, lc, namePrefix(t)+"example", fakeModel(t))

	p := newPlatform(t, lc)
	_, rev := p.deploy(t, "agent", arn, nil)
	if rev.Status != deployments.RevDeployed {
		t.Fatalf("revision %s: %s", rev.Status, reason(rev))
	}

	// refund: a function node that asks a human, resumed.
	cp, out := runGraph(t, p, "refund", nil, map[string]any{"order_id": "42"})
	if out.Status != graph.Interrupted || len(out.Interrupts) != 1 {
		t.Fatalf("refund: %s %+v, want one interrupt", out.Status, out.Interrupts)
	}
	if q, _ := out.Interrupts[0].Value.(map[string]any)["question"].(string); q != "Refund order 42 (59.90 EUR)?" {
		t.Errorf("interrupt %v", out.Interrupts[0].Value)
	}
	cp, out = runGraph(t, p, "refund", &cp, graph.Command{Resume: "yes"})
	if out.Status != graph.Done || cp.Values["approved"] != true {
		t.Fatalf("refund resumed: %s, values %v", out.Status, cp.Values)
	}

	// support: a function node (classify), then the model calls a function
	// tool (lookup_order), both in the Lambda.
	cp, out = runGraph(t, p, "support", nil, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Where is order 42?"}}})
	if out.Status != graph.Done || cp.Values["topic"] != "orders" {
		t.Fatalf("support: %s, values %v", out.Status, cp.Values)
	}
	msgs, _ := cp.Values["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	if content := fmt.Sprint(last["content"]); !strings.Contains(content, `"status": "shipped"`) && !strings.Contains(content, `"status":"shipped"`) {
		t.Errorf("support's answer %q, want the looked-up order (messages %v)", content, msgs)
	}

	// A function that fails: the node's error names it and Lambda's report.
	_, out, err := func() (graph.Checkpoint, graph.Outcome, error) {
		dg, err := p.host.Current(t.Context(), "org-1", "refund")
		if err != nil {
			t.Fatal(err)
		}
		return graph.Run(t.Context(), dg.Graph, nil, map[string]any{"order_id": "7"}, graph.Options{}, nil)
	}()
	if err != nil || out.Status != graph.Failed || out.Error.Kind != "LookupError" ||
		!strings.Contains(out.Error.Message, `node "confirm": no order 7`) {
		t.Fatalf("refund of an unknown order: %v, %s %+v", err, out.Status, out.Error)
	}

	// The local server has no Lambda client: the revision fails, saying so.
	noAWS := newPlatform(t, nil)
	_, rev = noAWS.deploy(t, "agent", arn, nil)
	if rev.Status != deployments.RevDeployFailed || !strings.Contains(reason(rev), arn+" is a Lambda function, and this server has no Lambda client") {
		t.Fatalf("without a Lambda client: %s %q", rev.Status, reason(rev))
	}
}

// recordingProvisioner stands for the AWS one and hands out a function
// that exists.
type recordingProvisioner struct {
	arn   string
	mu    sync.Mutex
	calls int
}

func (r *recordingProvisioner) Reserved(string) bool { return false }

func (r *recordingProvisioner) DeleteRuntime(context.Context, string) error { return nil }

func (r *recordingProvisioner) EnsureRuntime(context.Context, string, string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return r.arn, nil
}

func (r *recordingProvisioner) EnsureAppRuntime(ctx context.Context, id string, _ deployments.AppCode) (string, error) {
	return r.EnsureRuntime(ctx, id, "")
}

// An external_docker revision without a custom_url, on a server that makes
// runtimes from images: the runtime it is given describes its graphs, and
// runs call it, through Lambda. With the real provisioner, the emulator
// creates the image function but cannot run it (no Docker): the revision
// fails with the describe call's function error, which shows the whole path
// up to the container — the function was made, and invoked.
func TestImageRevisionOnMiniStack(t *testing.T) {
	ep := awstest.Start(t)
	lc := lambda.NewFromConfig(ep.Config)
	prefix := namePrefix(t)
	arn := runtimeFunction(t, lc, prefix+"example", fakeModel(t))

	p := newPlatform(t, lc)
	prov := &recordingProvisioner{arn: arn}
	p.svc.Runtimes = prov
	_, rev := p.deploy(t, "agent", "", map[string]string{"OPENAI_API_KEY": "sk-test"})
	if rev.Status != deployments.RevDeployed {
		t.Fatalf("revision %s: %s", rev.Status, reason(rev))
	}
	if prov.calls != 1 {
		t.Errorf("%d runtimes made, want one", prov.calls)
	}
	cp, out := runGraph(t, p, "refund", nil, map[string]any{"order_id": "43"})
	if out.Status != graph.Interrupted {
		t.Fatalf("refund: %s, values %v", out.Status, cp.Values)
	}

	// The real provisioner: the function is made from the image; invoking
	// it is where the emulator stops.
	p = newPlatform(t, lc)
	p.svc.Runtimes = &lambdaruntime.Provisioner{Client: lc, NamePrefix: prefix, RoleARN: emulatorRole,
		Poll: 100 * time.Millisecond, ReadyWait: 30 * time.Second}
	d, rev := p.deploy(t, "image-agent", "", nil)
	name := lambdaruntime.FunctionName(prefix, d.ID)
	if rev.Status != deployments.RevDeployFailed ||
		!strings.Contains(reason(rev), "source_revision_config.image_uri: the runtime made from the image (arn:aws:lambda:us-east-1:") ||
		!strings.Contains(reason(rev), ":function:"+name+":1): the runtime's describe call failed: Lambda function") ||
		!strings.Contains(reason(rev), "failed (Unhandled): Runtime.Docker") {
		t.Fatalf("image revision on the emulator: %s %q", rev.Status, reason(rev))
	}
	got, err := lc.GetFunction(t.Context(), &lambda.GetFunctionInput{FunctionName: aws.String(name)})
	if err != nil || aws.ToString(got.Code.ImageUri) != "000000000000.dkr.ecr.us-east-1.amazonaws.com/agent:1" {
		t.Fatalf("the runtime function: %+v, %v", got, err)
	}

	// An image of another registry: the revision fails with the reason,
	// and no function is made.
	p.svc.Runtimes = &lambdaruntime.Provisioner{Client: lc, NamePrefix: prefix, RoleARN: emulatorRole,
		Registry: lambdaruntime.ECRRegistry("111122223333", "us-east-1"), Poll: 100 * time.Millisecond, ReadyWait: 30 * time.Second}
	d, rev = p.deploy(t, "foreign-image", "", nil)
	const foreign = "source_revision_config.image_uri: the deployment's runtime cannot be made from the image: " +
		"the image 000000000000.dkr.ecr.us-east-1.amazonaws.com/agent:1 is not in this platform's registry 111122223333.dkr.ecr.us-east-1.amazonaws.com"
	if rev.Status != deployments.RevDeployFailed || !strings.HasPrefix(reason(rev), foreign) {
		t.Fatalf("a foreign image: %s %q", rev.Status, reason(rev))
	}
	if _, err := lc.GetFunction(t.Context(), &lambda.GetFunctionInput{FunctionName: aws.String(lambdaruntime.FunctionName(prefix, d.ID))}); err == nil {
		t.Error("a function was made from the foreign image")
	}

	// Without a role, the revision fails naming the variable.
	p.svc.Runtimes = &lambdaruntime.Provisioner{Client: lc, NamePrefix: prefix}
	_, rev = p.deploy(t, "no-role", "", nil)
	var want = "source_revision_config.image_uri: the deployment's runtime cannot be made from the image: STEPGRAPH_RUNTIME_ROLE_ARN is not set"
	if rev.Status != deployments.RevDeployFailed || !strings.HasPrefix(reason(rev), want) {
		t.Fatalf("without a role: %s %q", rev.Status, reason(rev))
	}
}

package lambdaruntime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	pyruntime "github.com/stepgraph/stepgraph/runtimes/python"
)

// repoFile is a path under the repository's root.
func repoFile(t *testing.T, elem ...string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(append([]string{wd, "..", ".."}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v (run scripts/install-test-deps.sh for the test dependencies)", p, err)
	}
	return p
}

// basicZip is the runtime's basic test app built by `stepgraph build`
// offline from the test wheelhouse, once per test binary.
var basicZip struct {
	once     sync.Once
	code     []byte
	manifest []byte
	err      error
}

func builtApp(t *testing.T) (code, manifest []byte) {
	t.Helper()
	basicZip.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var buf bytes.Buffer
		m, err := pyapp.Build(ctx, pyapp.BuildOptions{Dir: repoFile(t, "runtimes", "python", "tests", "apps", "basic"),
			Python: repoFile(t, ".venv", "bin", "python"), RuntimeFiles: pyruntime.Files(), RuntimeRequirements: pyruntime.Requirements,
			FindLinks: repoFile(t, ".deps", "lambda-wheels", "x86_64"), NoIndex: true}, &buf)
		basicZip.code, basicZip.err = buf.Bytes(), err
		basicZip.manifest, _ = json.Marshal(m)
	})
	if basicZip.err != nil {
		t.Fatal(basicZip.err)
	}
	return basicZip.code, basicZip.manifest
}

// putObject stores body in a new bucket of the emulator: the bucket and
// key.
func putObject(t *testing.T, cfg aws.Config, key string, body []byte) (string, string) {
	t.Helper()
	c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	bucket := strings.ToLower(awstest.Prefix(t)) + "builds"
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	return bucket, key
}

// A LangGraph app's zip in S3 becomes the deployment's function with the
// manifest's runtime, handler and architecture, one version per
// revision, and pyapp.LambdaClient runs its graphs there (an interrupt
// and its resume). A manifest Lambda cannot run is refused before any
// call, naming the key.
func TestAppRuntimeFromZipOnMiniStack(t *testing.T) {
	ep := awstest.Start(t)
	ctx := t.Context()
	lc := lambda.NewFromConfig(ep.Config)
	code, manifest := builtApp(t)
	bucket, key := putObject(t, ep.Config, "builds/rev-1/app.zip", code)
	p := &lambdaruntime.Provisioner{Client: lc, NamePrefix: namePrefix(t), RoleARN: emulatorRole,
		Poll: 100 * time.Millisecond, ReadyWait: time.Minute}
	const deploymentID = "0c5e1f2a-3b4c-4d5e-8f60-718293a4b5c6"
	name := lambdaruntime.FunctionName(p.NamePrefix, deploymentID)
	app := deployments.AppCode{Bucket: bucket, Key: key, Manifest: manifest}

	arn1, err := p.EnsureAppRuntime(ctx, deploymentID, app)
	if err != nil {
		t.Fatal(err)
	}
	version := regexp.MustCompile(`^arn:aws:lambda:us-east-1:[0-9]{12}:function:` + name + `:([0-9]+)$`)
	if !version.MatchString(arn1) {
		t.Fatalf("runtime %q, want the ARN of a version of function %s", arn1, name)
	}
	got, err := lc.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(arn1)})
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Configuration; c.PackageType != types.PackageTypeZip || c.Runtime != types.RuntimePython311 ||
		aws.ToString(c.Handler) != pyapp.LambdaHandler || len(c.Architectures) != 1 || c.Architectures[0] != types.ArchitectureX8664 ||
		c.Environment != nil && len(c.Environment.Variables) != 0 {
		t.Errorf("the app's function: %+v", c)
	}

	rt := &pyapp.LambdaClient{Function: arn1, Invoker: lambdaruntime.Functions{Client: lc}}
	if graphs, err := rt.Health(ctx); err != nil || !strings.Contains(strings.Join(graphs, ","), "hitl") {
		t.Fatalf("health of the app's function: %v %v", graphs, err)
	}
	end, bundle := runToEnd(t, rt, pyapp.RunRequest{Graph: "hitl", ThreadID: "t-1", Input: json.RawMessage(`{"topic": "zips"}`)})
	if end.Status != "interrupted" || len(end.Interrupts) != 1 {
		t.Fatalf("hitl: %+v", end)
	}
	end, _ = runToEnd(t, rt, pyapp.RunRequest{Graph: "hitl", ThreadID: "t-1", Command: json.RawMessage(`{"resume": "yes"}`), Checkpoint: bundle})
	if end.Status != "success" || !strings.Contains(string(end.Values), `"approved": true`) && !strings.Contains(string(end.Values), `"approved":true`) {
		t.Fatalf("hitl resumed: %s %s", end.Status, end.Values)
	}

	// A later revision: another version; the first still answers.
	arn2, err := p.EnsureAppRuntime(ctx, deploymentID, app)
	if err != nil || !version.MatchString(arn2) || arn2 == arn1 {
		t.Fatalf("runtime after an update %q (%v), want another version than %s", arn2, err, arn1)
	}
	if _, err := rt.Health(ctx); err != nil {
		t.Errorf("the first version after an update: %v", err)
	}

	// Manifests Lambda cannot run: refused, naming the key, and the
	// function is not touched.
	for field, bad := range map[string]string{
		"runtime":      `{"handler": "stepgraph_runtime.lambda_handler.handler", "runtime": "python2.7", "architecture": "x86_64"}`,
		"architecture": `{"handler": "stepgraph_runtime.lambda_handler.handler", "runtime": "python3.11", "architecture": "sparc"}`,
		"handler":      `{"handler": "rm -rf /", "runtime": "python3.11", "architecture": "x86_64"}`,
		"JSON":         `not json`,
	} {
		_, err := p.EnsureAppRuntime(ctx, deploymentID, deployments.AppCode{Bucket: bucket, Key: key, Manifest: []byte(bad)})
		var refusedErr *deployments.RuntimeRefusedError
		if !errors.As(err, &refusedErr) || !strings.Contains(err.Error(), "stepgraph_build.json") || !strings.Contains(err.Error(), field) {
			t.Errorf("manifest %s: %v, want a refusal naming %s", bad, err, field)
		}
	}
	if err := p.DeleteRuntime(ctx, deploymentID); err != nil {
		t.Fatal(err)
	}
}

// runToEnd runs req on rt, continuing the calls that yield, and returns the
// end message and the last checkpoint's bundle.
func runToEnd(t *testing.T, rt pyapp.Runtime, req pyapp.RunRequest) (pyapp.Message, json.RawMessage) {
	t.Helper()
	bundle := req.Checkpoint
	for {
		var end pyapp.Message
		err := rt.Run(t.Context(), req, func(m pyapp.Message) error {
			switch m.Type {
			case "checkpoint":
				var cp struct {
					Bundle json.RawMessage `json:"langgraph"`
				}
				if err := json.Unmarshal(m.Checkpoint, &cp); err != nil {
					return err
				}
				bundle = cp.Bundle
			case "end":
				end = m
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if end.Status != "yielded" {
			return end, bundle
		}
		req = pyapp.RunRequest{Graph: req.Graph, ThreadID: req.ThreadID, Checkpoint: bundle, Continued: true}
	}
}

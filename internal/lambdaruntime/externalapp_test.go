package lambdaruntime_test

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
	"github.com/stepgraph/stepgraph/internal/pyapp"
)

// A LangGraph app brought as an external_docker deployment on the
// emulator: the user makes a Lambda function of their own from `stepgraph
// build`'s zip and gives its ARN as custom_url. Its describe call answers
// that it is a LangGraph app, so the revision deploys as an app revision
// (its graph ids from that answer, its function asked for them), and the
// hitl graph runs to its interrupt and resumes through the deployed
// graphs' host (pyapp.RuntimeApps over Lambda). The function is the
// deployment's own: no call carries the revision's secrets.
func TestExternalAppFromZipOnMiniStack(t *testing.T) {
	ep := awstest.Start(t)
	ctx := t.Context()
	lc := lambda.NewFromConfig(ep.Config)
	code, _ := builtApp(t)
	bucket, key := putObject(t, ep.Config, "user/app.zip", code)
	// What the user does: aws lambda create-function --runtime python3.11
	// --handler stepgraph_runtime.lambda_handler.handler --code S3Bucket=…
	made, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName: aws.String(namePrefix(t) + "my-app"),
		Runtime:      types.RuntimePython311,
		Handler:      aws.String(pyapp.LambdaHandler),
		Role:         aws.String(emulatorRole),
		Code:         &types.FunctionCode{S3Bucket: aws.String(bucket), S3Key: aws.String(key)},
		Timeout:      aws.Int32(900),
		MemorySize:   aws.Int32(1024),
	})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(made.FunctionArn)
	waitActive(t, lc, arn)
	t.Cleanup(func() {
		_, _ = lc.DeleteFunction(context.Background(), &lambda.DeleteFunctionInput{FunctionName: aws.String(arn)})
	})

	p := newPlatform(t, lc)
	inv := &recordingFunctions{next: lambdaruntime.Functions{Client: lc}}
	p.host.ExternalApps = &pyapp.RuntimeApps{Lambda: &pyapp.LambdaApps{Invoker: inv}}
	d, rev := p.deploy(t, "zip-app", arn, map[string]string{"OPENAI_API_KEY": "sk-not-for-the-runtime"})
	if rev.Status != deployments.RevDeployed {
		t.Fatalf("revision %s: %s", rev.Status, reason(rev))
	}
	rg, err := p.svc.RevisionGraphs(ctx, "org-1", d.ID, rev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !rg.App || !rg.ExternalApp || !slices.Contains(rg.GraphIDs, "hitl") || len(rg.GraphIDs) != 6 || rg.RuntimeURL != arn || rg.RuntimeSecrets {
		t.Fatalf("the revision: app %v, external %v, graphs %v, runtime %s, secrets per call %v",
			rg.App, rg.ExternalApp, rg.GraphIDs, rg.RuntimeURL, rg.RuntimeSecrets)
	}

	runHitl(t, p)
	payloads := inv.all()
	if len(payloads) < 3 {
		t.Errorf("%d invocations of the app's function", len(payloads))
	}
	for _, p := range payloads {
		if bytes.Contains(p, []byte("sk-not-for-the-runtime")) || bytes.Contains(p, []byte(`"secrets"`)) {
			t.Fatalf("a call to the deployment's own function carried the secrets: %.200s", p)
		}
	}
}

// recordingFunctions keeps the payloads it passes on.
type recordingFunctions struct {
	next     pyapp.FunctionInvoker
	mu       sync.Mutex
	payloads [][]byte
}

func (r *recordingFunctions) InvokeFunction(ctx context.Context, function string, payload []byte) ([]byte, error) {
	r.mu.Lock()
	r.payloads = append(r.payloads, slices.Clone(payload))
	r.mu.Unlock()
	return r.next.InvokeFunction(ctx, function, payload)
}

func (r *recordingFunctions) all() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.payloads)
}

package lambdaruntime_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/deployedgraphs"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
)

var _ deployedgraphs.SecretsCarrier = (*lambdaruntime.Runtime)(nil)

// secretCheck wraps examples/python/runtime.py: refund's confirm node first
// reads the deployment's secret from os.environ, as an app reads its
// configuration, and fails unless it is there with the value whose SHA-256
// the function's own (secret-free) environment names.
const secretCheck = `import hashlib
import os

import runtime

_confirm = runtime.app._nodes[("refund", "confirm")]


def confirm(call):
    key = os.environ.get("ORDER_API_KEY")
    if key is None:
        raise LookupError("no ORDER_API_KEY in the environment")
    if hashlib.sha256(key.encode()).hexdigest() != os.environ["ORDER_API_KEY_SHA256"]:
        raise LookupError("ORDER_API_KEY is not the deployment's")
    return _confirm(call)


runtime.app._nodes[("refund", "confirm")] = confirm
lambda_handler = runtime.lambda_handler
`

// The revision's secrets reach the runtime the platform made from its
// image with each call, never through the function's configuration
// (review #15): after deploying a revision with a secret, the function
// made from the image shows no secret value (GetFunction, which includes
// GetFunctionConfiguration's answer); a run's function node on a runtime
// the platform made reads the secret from os.environ inside the function;
// a runtime of the deployment's own (custom_url) gets no secret. The value
// is in no log line, revision record or checkpoint of the test.
func TestRuntimeSecretsPerCallOnMiniStack(t *testing.T) {
	ep := awstest.Start(t)
	lc := lambda.NewFromConfig(ep.Config)
	prefix := namePrefix(t)
	const secret = "sk-order-api-7f3c1d9e"
	sum := sha256.Sum256([]byte(secret))
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	// The real provisioner: the function made from the image carries no
	// secret (the emulator cannot run the image: the describe call fails).
	p := newPlatform(t, lc)
	p.svc.Runtimes = &lambdaruntime.Provisioner{Client: lc, NamePrefix: prefix, RoleARN: emulatorRole,
		Poll: 100 * time.Millisecond, ReadyWait: 30 * time.Second}
	d, rev := p.deploy(t, "image-agent", "", map[string]string{"ORDER_API_KEY": secret})
	got, err := lc.GetFunction(t.Context(), &lambda.GetFunctionInput{FunctionName: aws.String(lambdaruntime.FunctionName(prefix, d.ID))})
	if err != nil {
		t.Fatalf("the runtime function (revision %s: %s): %v", rev.Status, reason(rev), err)
	}
	config, _ := json.Marshal(got)
	if strings.Contains(string(config), secret) || strings.Contains(string(config), "ORDER_API_KEY") {
		t.Errorf("the runtime function's configuration shows the secret: %s", config)
	}
	if env := got.Configuration.Environment; env != nil && len(env.Variables) > 0 {
		t.Errorf("the runtime function's environment %v, want none", env.Variables)
	}

	// A runtime the platform made (handed out here as a zip function the
	// emulator can run): the node reads the secret from os.environ.
	arn := pythonFunction(t, lc, prefix+"secrets", "check.lambda_handler", map[string]string{"check.py": secretCheck},
		map[string]string{"ORDER_API_KEY_SHA256": hex.EncodeToString(sum[:]), "STEPGRAPH_EXAMPLE_API_KEY_SECRET": ""})
	p = newPlatform(t, lc)
	p.svc.Runtimes = &recordingProvisioner{arn: arn}
	_, rev = p.deploy(t, "made", "", map[string]string{"ORDER_API_KEY": secret})
	if rev.Status != deployments.RevDeployed {
		t.Fatalf("revision %s: %s", rev.Status, reason(rev))
	}
	cp, out := runGraph(t, p, "refund", nil, map[string]any{"order_id": "42"})
	if out.Status != graph.Interrupted || len(out.Interrupts) != 1 {
		t.Fatalf("refund on the made runtime: %s %+v, want the node to read its secret and ask", out.Status, out.Interrupts)
	}
	records, _ := json.Marshal([]any{cp, out, rev})

	// The deployment's own runtime (custom_url, the same function): no
	// secret travels to it.
	own := newPlatform(t, lc)
	_, rev = own.deploy(t, "own", arn, map[string]string{"ORDER_API_KEY": secret})
	if rev.Status != deployments.RevDeployed {
		t.Fatalf("revision %s: %s", rev.Status, reason(rev))
	}
	dg, err := own.host.Current(t.Context(), "org-1", "refund")
	if err != nil {
		t.Fatal(err)
	}
	cp, out, err = graph.Run(t.Context(), dg.Graph, nil, map[string]any{"order_id": "42"}, graph.Options{}, nil)
	if err != nil || out.Status != graph.Failed || !strings.Contains(out.Error.Message, "no ORDER_API_KEY in the environment") {
		t.Fatalf("refund on the deployment's own runtime: %v, %s %+v, want the node to find no secret", err, out.Status, out.Error)
	}
	more, _ := json.Marshal([]any{cp, out, rev})
	records = append(records, more...)

	if strings.Contains(string(records), secret) {
		t.Errorf("the secret is in a checkpoint, an outcome or a revision: %s", records)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the secret is in a log line:\n%s", logs.String())
	}
}

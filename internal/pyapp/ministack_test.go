package pyapp_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
	"github.com/stepgraph/stepgraph/internal/pyapp"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// countingInvoker counts the invocations it passes on.
type countingInvoker struct {
	next  pyapp.FunctionInvoker
	calls atomic.Int32
}

func (c *countingInvoker) InvokeFunction(ctx context.Context, function string, payload []byte) ([]byte, error) {
	c.calls.Add(1)
	return c.next.InvokeFunction(ctx, function, payload)
}

// TestBuiltZipRunsOnMiniStack: the zip of stepgraph build is a python3.11
// Lambda function on the emulator (which runs it in a Python worker
// process: no container, no Lambda limits), reached through LambdaClient
// and lambdaruntime.Functions over the real Lambda Invoke API. Runs
// continue over several invocations (a budget of one superstep per call),
// an interrupt is resumed, update_state writes as a node: the answers,
// states and histories are those of the same app on a local runtime.
func TestBuiltZipRunsOnMiniStack(t *testing.T) {
	ep := awstest.Start(t)
	lc := lambda.NewFromConfig(ep.Config)
	code, m := builtBasicApp(t)
	ctx := context.Background()
	arn := createZipFunction(t, lc, code, m)
	inv := &countingInvoker{next: lambdaruntime.Functions{Client: lc}}
	rt := &pyapp.LambdaClient{Function: arn, Invoker: inv}
	if graphs, err := rt.Health(ctx); err != nil || len(graphs) != len(m.Graphs) {
		t.Fatalf("health of the function: %v %v", graphs, err)
	}
	local := startRuntime(t, basicApp(t))
	want := newEnvWith(t, filepath.Join(t.TempDir(), "db"), local, nil)
	onLambda := newEnvWith(t, filepath.Join(t.TempDir(), "db"), rt, &pyapp.YieldBudget{Bytes: 1})
	onLambda.deadline = perProcessDeadline
	runsMade := playBoth(t, want, onLambda, "local", "Lambda")
	if n := int(inv.calls.Load()); n < 2*runsMade {
		t.Errorf("%d invocations for %d runs: the runs did not continue across invocations", n, runsMade)
	}
	t.Logf("zip %d bytes (%d unzipped), %d invocations for %d runs", len(code), m.Unzipped, inv.calls.Load(), runsMade)
}

// createZipFunction makes a python function of the zip of stepgraph build
// on the emulator, as its manifest says, and waits until it is active.
func createZipFunction(t *testing.T, lc *lambda.Client, code []byte, m pyapp.Manifest) string {
	t.Helper()
	ctx := context.Background()
	created, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName:  aws.String(awstest.Prefix(t) + "app"),
		Runtime:       types.Runtime(m.Runtime),
		Handler:       aws.String(m.Handler),
		Architectures: []types.Architecture{types.Architecture(m.Architecture)},
		Role:          aws.String("arn:aws:iam::000000000000:role/stepgraph-runtime"),
		Code:          &types.FunctionCode{ZipFile: code},
		Timeout:       aws.Int32(900),
		MemorySize:    aws.Int32(1024),
	})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(created.FunctionArn)
	waiter := lambda.NewFunctionActiveV2Waiter(lc, func(o *lambda.FunctionActiveV2WaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
	})
	if err := waiter.Wait(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(arn)}, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return arn
}

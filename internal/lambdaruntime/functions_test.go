package lambdaruntime

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/stepgraph/stepgraph/internal/pyapp"
)

var _ pyapp.FunctionInvoker = Functions{}

// Functions carries a LangGraph app's runtime calls (pyapp.LambdaClient):
// the payload as given, throttling retried, function errors and oversized
// answers refused.
func TestFunctionsCarryLangGraphRuntimeCalls(t *testing.T) {
	fake := &fakeLambda{answer: func(_ context.Context, n int, payload map[string]any) (*lambda.InvokeOutput, error) {
		if n == 1 {
			return nil, operationError(&ltypes.TooManyRequestsException{Message: aws.String("Rate exceeded")})
		}
		if payload["action"] != "health" {
			t.Errorf("payload %v", payload)
		}
		return answerPayload(`{"status": 200, "body": {"status": "ok", "graphs": ["agent"]}}`), nil
	}}
	lc := &pyapp.LambdaClient{Function: testFunctionARN, Invoker: Functions{Client: fake}}
	graphs, err := lc.Health(context.Background())
	if err != nil || len(graphs) != 1 || graphs[0] != "agent" || fake.count() != 2 {
		t.Fatalf("Health: %v %v after %d calls", graphs, err, fake.count())
	}
	if fn := aws.ToString(fake.calls[1].FunctionName); fn != testFunctionARN {
		t.Errorf("invoked %s", fn)
	}

	failing := &fakeLambda{answer: func(context.Context, int, map[string]any) (*lambda.InvokeOutput, error) {
		return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"),
			Payload: []byte(`{"errorType": "Runtime.ImportModuleError", "errorMessage": "No module named 'stepgraph_runtime'"}`)}, nil
	}}
	_, err = Functions{Client: failing}.InvokeFunction(context.Background(), testFunctionARN, []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "Runtime.ImportModuleError: No module named 'stepgraph_runtime'") || failing.count() != 1 {
		t.Errorf("function error: %v after %d calls", err, failing.count())
	}

	big := &fakeLambda{answer: func(context.Context, int, map[string]any) (*lambda.InvokeOutput, error) {
		return &lambda.InvokeOutput{StatusCode: 200, Payload: make([]byte, MaxSyncPayload+1)}, nil
	}}
	if _, err := (Functions{Client: big}).InvokeFunction(context.Background(), testFunctionARN, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized answer: %v", err)
	}
}

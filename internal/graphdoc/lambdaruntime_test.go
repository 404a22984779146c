package graphdoc

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/stepgraph/stepgraph/internal/graph"
)

const testFunctionARN = "arn:aws:lambda:us-east-1:123456789012:function:stepgraph-test-rt-1"

// fakeLambda answers Invoke calls with answer, one call at a time, and
// records them.
type fakeLambda struct {
	mu     sync.Mutex
	calls  []*lambda.InvokeInput
	opts   []lambda.Options
	answer func(ctx context.Context, n int, payload map[string]any) (*lambda.InvokeOutput, error)
}

func (f *fakeLambda) Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	f.mu.Lock()
	f.calls = append(f.calls, in)
	n := len(f.calls)
	var o lambda.Options
	for _, fn := range optFns {
		fn(&o)
	}
	f.opts = append(f.opts, o)
	f.mu.Unlock()
	var payload map[string]any
	if err := json.Unmarshal(in.Payload, &payload); err != nil {
		return nil, err
	}
	return f.answer(ctx, n, payload)
}

func (f *fakeLambda) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func answerPayload(body string) *lambda.InvokeOutput {
	return &lambda.InvokeOutput{StatusCode: 200, Payload: []byte(body)}
}

// operationError wraps an API error as the SDK returns it.
func operationError(err error) error {
	return &smithy.OperationError{ServiceID: "Lambda", OperationName: "Invoke", Err: err}
}

func lambdaGraph(t *testing.T, client LambdaInvoker, doc string) *graph.Graph {
	t.Helper()
	rt := &LambdaRuntime{Function: testFunctionARN, Client: client, Backoff: time.Millisecond}
	return compileDocs(t, testOptions(rt), map[string]string{"g": doc})["g"]
}

func TestLambdaRuntimeCall(t *testing.T) {
	fake := &fakeLambda{answer: func(_ context.Context, _ int, p map[string]any) (*lambda.InvokeOutput, error) {
		return answerPayload(`{"update": {"count": 2, "answer": "yes"}, "goto": "after"}`), nil
	}}
	cp, out := run(t, lambdaGraph(t, fake, functionDoc), nil, map[string]any{"count": 1}, graph.Options{Context: map[string]any{"tenant": "acme"}})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, cp.Values, `{"count": 3, "answer": "after yes"}`)
	if fake.count() != 1 {
		t.Fatalf("%d calls, want 1", fake.count())
	}
	in := fake.calls[0]
	if aws.ToString(in.FunctionName) != testFunctionARN || in.InvocationType != ltypes.InvocationTypeRequestResponse {
		t.Errorf("Invoke of %q (%s), want %s with RequestResponse", aws.ToString(in.FunctionName), in.InvocationType, testFunctionARN)
	}
	var payload struct {
		Action  string         `json:"action"`
		Request map[string]any `json:"request"`
	}
	if err := json.Unmarshal(in.Payload, &payload); err != nil {
		t.Fatal(err)
	}
	if payload.Action != "invoke" {
		t.Errorf("action %q, want invoke", payload.Action)
	}
	req := payload.Request
	jsonEqual(t, map[string]any{"graph": req["graph"], "node": req["node"], "state": req["state"], "context": req["context"], "resume": req["resume"]},
		`{"graph": "g", "node": "fn", "state": {"count": 1}, "context": {"tenant": "acme"}, "resume": []}`)
	if md, _ := req["config"].(map[string]any)["metadata"].(map[string]any); md["langgraph_node"] != "fn" || md["graph_id"] != "g" {
		t.Errorf("config %v, want the run's metadata", req["config"])
	}
	// The SDK does not retry on its own: the runtime's policy is the only one.
	if _, ok := fake.opts[0].Retryer.(aws.NopRetryer); !ok {
		t.Errorf("the Invoke call's retryer is %T, want aws.NopRetryer", fake.opts[0].Retryer)
	}
}

func TestLambdaRuntimeDescribe(t *testing.T) {
	fake := &fakeLambda{answer: func(_ context.Context, _ int, p map[string]any) (*lambda.InvokeOutput, error) {
		if len(p) != 1 || p["action"] != "describe" {
			t.Errorf("describe payload %v, want {\"action\": \"describe\"}", p)
		}
		return answerPayload(`{"graphs": {"g": {"nodes": {}}}}`), nil
	}}
	raw, err := (&LambdaRuntime{Function: testFunctionARN, Client: fake}).Describe(context.Background())
	if err != nil || string(raw) != `{"graphs": {"g": {"nodes": {}}}}` {
		t.Fatalf("Describe: %s, %v", raw, err)
	}

	// Bounded like an HTTP runtime's.
	_, err = (&LambdaRuntime{Function: testFunctionARN, Client: fake, MaxResponseBytes: 10}).Describe(context.Background())
	var ce *CallError
	if !errors.As(err, &ce) || ce.Failure != BadResponse || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Fatalf("oversized describe: %v, want a BadResponse naming the bound", err)
	}
}

func TestLambdaRuntimeFailures(t *testing.T) {
	throttled := operationError(&ltypes.TooManyRequestsException{Message: aws.String("Rate exceeded")})
	cases := []struct {
		name     string
		answer   func(ctx context.Context, n int) (*lambda.InvokeOutput, error)
		calls    int
		kind     string
		fragment []string
	}{
		{"the function raised", func(context.Context, int) (*lambda.InvokeOutput, error) {
			return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"),
				Payload: []byte(`{"errorType": "ValueError", "errorMessage": "no order 7", "stackTrace": ["..."]}`)}, nil
		}, 1, graph.KindGeneric, []string{`node "fn": the function runtime failed: Lambda function ` + testFunctionARN + ` failed (Unhandled): ValueError: no order 7`}},
		{"a function error that is not JSON", func(context.Context, int) (*lambda.InvokeOutput, error) {
			return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(`Runtime exited`)}, nil
		}, 1, graph.KindGeneric, []string{`node "fn"`, "failed (Unhandled): Runtime exited"}},
		{"garbage", func(context.Context, int) (*lambda.InvokeOutput, error) {
			return answerPayload(`<html>oops</html>`), nil
		}, 1, graph.KindValue, []string{`node "fn": the function's answer is not valid: the answer is not a JSON object: <html>oops</html>`}},
		{"null", func(context.Context, int) (*lambda.InvokeOutput, error) {
			return answerPayload(`null`), nil
		}, 1, graph.KindValue, []string{`node "fn"`, "not a JSON object"}},
		{"a key of another protocol", func(context.Context, int) (*lambda.InvokeOutput, error) {
			return answerPayload(`{"updates": {"count": 1}}`), nil
		}, 1, graph.KindValue, []string{`node "fn"`, `"updates": is not part of the protocol`}},
		{"throttled on every attempt", func(context.Context, int) (*lambda.InvokeOutput, error) {
			return nil, throttled
		}, 3, graph.KindGeneric, []string{`node "fn": the function runtime failed: Lambda Invoke of ` + testFunctionARN + `: TooManyRequestsException: Rate exceeded (3 attempts)`}},
		{"a service error on every attempt", func(context.Context, int) (*lambda.InvokeOutput, error) {
			return nil, operationError(&ltypes.ServiceException{Message: aws.String("internal")})
		}, 3, graph.KindGeneric, []string{"ServiceException: internal (3 attempts)"}},
		{"no such function: not retried", func(context.Context, int) (*lambda.InvokeOutput, error) {
			return nil, operationError(&ltypes.ResourceNotFoundException{Message: aws.String("Function not found: " + testFunctionARN)})
		}, 1, graph.KindGeneric, []string{`node "fn"`, "ResourceNotFoundException: Function not found"}},
		{"access denied: not retried", func(context.Context, int) (*lambda.InvokeOutput, error) {
			return nil, operationError(&smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: lambda:InvokeFunction"})
		}, 1, graph.KindGeneric, []string{"AccessDeniedException: not authorized"}},
		{"no connection: retried", func(context.Context, int) (*lambda.InvokeOutput, error) {
			return nil, operationError(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
		}, 3, kindConnection, []string{`node "fn": the function runtime is unreachable: Lambda Invoke of`, "connection refused (3 attempts)"}},
		{"a connection lost after sending: not retried", func(context.Context, int) (*lambda.InvokeOutput, error) {
			return nil, operationError(&net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")})
		}, 1, kindConnection, []string{`node "fn"`, "connection reset by peer"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := &fakeLambda{answer: func(ctx context.Context, n int, _ map[string]any) (*lambda.InvokeOutput, error) {
				return c.answer(ctx, n)
			}}
			cp, out := run(t, lambdaGraph(t, fake, functionDoc), nil, map[string]any{}, graph.Options{})
			wantError(t, out, c.kind, c.fragment...)
			if fake.count() != c.calls {
				t.Errorf("%d calls, want %d", fake.count(), c.calls)
			}
			if len(cp.Next) != 1 || cp.Next[0] != "fn" {
				t.Errorf("next = %v, want [fn]: the failed step can run again", cp.Next)
			}
		})
	}
}

func TestLambdaRuntimeRetriesThrottling(t *testing.T) {
	fake := &fakeLambda{answer: func(_ context.Context, n int, _ map[string]any) (*lambda.InvokeOutput, error) {
		switch n {
		case 1:
			return nil, operationError(&ltypes.TooManyRequestsException{Message: aws.String("Rate exceeded")})
		case 2:
			return nil, operationError(&ltypes.ResourceConflictException{Message: aws.String("The function is currently in the following state: Pending")})
		}
		return answerPayload(`{"update": {"count": 1}}`), nil
	}}
	cp, out := run(t, lambdaGraph(t, fake, functionDoc), nil, map[string]any{}, graph.Options{})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, cp.Values, `{"count": 1}`)
	if fake.count() != 3 {
		t.Errorf("%d calls, want 3", fake.count())
	}
}

func TestLambdaRuntimeTimeout(t *testing.T) {
	var hanging atomic.Bool
	hanging.Store(true)
	fake := &fakeLambda{answer: func(ctx context.Context, _ int, _ map[string]any) (*lambda.InvokeOutput, error) {
		if hanging.Load() {
			<-ctx.Done() // as the SDK does: the request ends with the context
			return nil, operationError(&aws.RequestCanceledError{Err: ctx.Err()})
		}
		return answerPayload(`{"update": {"answer": "late"}}`), nil
	}}
	g := lambdaGraph(t, fake, `
state: {answer: }
nodes: {fn: {kind: function, timeout: 0.2}}
edges: [{from: __start__, to: fn}]
`)
	cp, out := run(t, g, nil, map[string]any{"answer": "none"}, graph.Options{})
	wantError(t, out, graph.KindTimeout, `node "fn": the function did not answer within 200ms`)
	if fake.count() != 1 {
		t.Errorf("%d calls, want 1: a timeout is not retried (the function may have run)", fake.count())
	}

	// The thread is consistent: the failed step runs again.
	hanging.Store(false)
	cp, out = run(t, g, &cp, nil, graph.Options{})
	wantStatus(t, out, graph.Done)
	jsonEqual(t, cp.Values, `{"answer": "late"}`)

	// Describe reports a timeout as TimedOut.
	hanging.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := (&LambdaRuntime{Function: testFunctionARN, Client: fake}).Describe(ctx)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Failure != TimedOut || ce.Attempts != 1 {
		t.Fatalf("describe past its deadline: %#v, want a TimedOut CallError after 1 attempt", err)
	}
}

func TestLambdaRuntimeTools(t *testing.T) {
	fake := &fakeLambda{answer: func(_ context.Context, _ int, p map[string]any) (*lambda.InvokeOutput, error) {
		req := p["request"].(map[string]any)
		tool, _ := req["tool"].(map[string]any)
		if tool["name"] != "lookup" {
			return answerPayload(`{"error": {"type": "KeyError", "message": "no tool"}}`), nil
		}
		return answerPayload(`{"output": "found ` + tool["args"].(map[string]any)["id"].(string) + `"}`), nil
	}}
	rt := &LambdaRuntime{Function: testFunctionARN, Client: fake}
	resp, err := rt.Call(context.Background(), FunctionRequest{Graph: "g", Node: "tools",
		Tool: &ToolCall{ID: "c1", Name: "lookup", Args: map[string]any{"id": "42"}}})
	if err != nil || resp.Output != "found 42" {
		t.Fatalf("tool call: %+v, %v", resp, err)
	}
}

func TestIsLambdaFunctionARN(t *testing.T) {
	for s, want := range map[string]bool{
		"arn:aws:lambda:us-east-1:123456789012:function:my-runtime":                 true,
		"arn:aws:lambda:eu-central-1:123456789012:function:my_runtime:live":         true,
		"arn:aws:lambda:us-east-1:123456789012:function:my-runtime:7":               true,
		"arn:aws:lambda:us-east-1:123456789012:function:my-runtime:$LATEST":         true,
		"arn:aws-cn:lambda:cn-north-1:123456789012:function:f":                      true,
		"arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:f":               true,
		"arn:aws:lambda:us-east-1:000000000000:function:stepgraph-dev-rt-0a1b":      true,
		"https://runtime.example.com":                                               false,
		"arn:aws:lambda:us-east-1:123456789012:function:":                           false,
		"arn:aws:lambda:us-east-1:12345:function:f":                                 false,
		"arn:aws:lambda:us-east-1:123456789012:layer:f":                             false,
		"arn:aws:s3:us-east-1:123456789012:function:f":                              false,
		"arn:aws:lambda:us-east-1:123456789012:function:f:a:b":                      false,
		"arn:aws:lambda:us-east-1:123456789012:function:f g":                        false,
		"arn:aws:lambda:us-east-1:123456789012:function:" + strings.Repeat("f", 65): false,
		" arn:aws:lambda:us-east-1:123456789012:function:f":                         false,
	} {
		if got := IsLambdaFunctionARN(s); got != want {
			t.Errorf("IsLambdaFunctionARN(%q) = %v, want %v", s, got, want)
		}
	}
}

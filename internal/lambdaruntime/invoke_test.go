package lambdaruntime

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/stepgraph/stepgraph/internal/graphdoc"
)

const testFunctionARN = "arn:aws:lambda:us-east-1:123456789012:function:stepgraph-test-rt-1"

var _ graphdoc.Runtime = (*Runtime)(nil)

// fakeLambda answers Invoke calls with answer and records them. The
// transport's behaviour on the real Lambda API is held by ministack_test.go
// and the runtime contract suite; this fake reaches the error answers an
// emulator cannot produce (throttling, service errors, dropped connections).
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

func testRuntime(fake *fakeLambda) *Runtime {
	return &Runtime{Function: testFunctionARN, Client: fake, Backoff: time.Millisecond}
}

func TestRuntimeCall(t *testing.T) {
	fake := &fakeLambda{answer: func(_ context.Context, _ int, p map[string]any) (*lambda.InvokeOutput, error) {
		return answerPayload(`{"update": {"count": 2, "answer": "yes"}, "goto": "after"}`), nil
	}}
	resp, err := testRuntime(fake).Call(context.Background(), graphdoc.FunctionRequest{Graph: "g", Node: "fn",
		State: map[string]any{"count": 1}, Context: map[string]any{"tenant": "acme"}})
	if err != nil || len(resp.Goto) != 1 || resp.Goto[0] != "after" {
		t.Fatalf("Call: %+v, %v", resp, err)
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
	got, _ := json.Marshal(payload.Request)
	if payload.Action != "invoke" || !strings.Contains(string(got), `"graph":"g","node":"fn"`) || !strings.Contains(string(got), `"resume":[]`) {
		t.Errorf("payload %s %s, want the invoke action with the request", payload.Action, got)
	}
	// The SDK does not retry on its own: the runtime's policy is the only one.
	if _, ok := fake.opts[0].Retryer.(aws.NopRetryer); !ok {
		t.Errorf("the Invoke call's retryer is %T, want aws.NopRetryer", fake.opts[0].Retryer)
	}
}

func TestRuntimeDescribe(t *testing.T) {
	fake := &fakeLambda{answer: func(_ context.Context, _ int, p map[string]any) (*lambda.InvokeOutput, error) {
		if len(p) != 1 || p["action"] != "describe" {
			t.Errorf("describe payload %v, want {\"action\": \"describe\"}", p)
		}
		return answerPayload(`{"graphs": {"g": {"nodes": {}}}}`), nil
	}}
	raw, err := testRuntime(fake).Describe(context.Background())
	if err != nil || string(raw) != `{"graphs": {"g": {"nodes": {}}}}` {
		t.Fatalf("Describe: %s, %v", raw, err)
	}
	// Bounded like an HTTP runtime's.
	_, err = (&Runtime{Function: testFunctionARN, Client: fake, MaxResponseBytes: 10}).Describe(context.Background())
	var ce *graphdoc.CallError
	if !errors.As(err, &ce) || ce.Failure != graphdoc.BadResponse || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Fatalf("oversized describe: %v, want a BadResponse naming the bound", err)
	}
}

// A runtime given the revision's secrets (WithSecrets: the one the platform
// made) sends them with each invoke call, as the payload's "secrets", and
// not with describe; the runtime it was made from sends none; a function
// error quotes the function, never the secrets.
func TestRuntimeSecretsPerCall(t *testing.T) {
	var payloads []map[string]any
	fake := &fakeLambda{answer: func(_ context.Context, n int, p map[string]any) (*lambda.InvokeOutput, error) {
		payloads = append(payloads, p)
		if n == 4 {
			return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"),
				Payload: []byte(`{"errorType": "KeyError", "errorMessage": "'ORDER_ID'"}`)}, nil
		}
		return answerPayload(`{"update": {}}`), nil
	}}
	plain := testRuntime(fake)
	withSecrets := plain.WithSecrets(map[string]string{"TOKEN": "t-secret-1"})
	req := graphdoc.FunctionRequest{Graph: "g", Node: "fn"}
	if _, err := withSecrets.Call(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := withSecrets.Describe(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Call(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	_, err := withSecrets.Call(context.Background(), req)
	if err == nil || strings.Contains(err.Error(), "t-secret-1") {
		t.Errorf("a failed call: %v, want an error without the secret", err)
	}
	if got, _ := json.Marshal(payloads[0]["secrets"]); string(got) != `{"TOKEN":"t-secret-1"}` {
		t.Errorf("invoke payload's secrets %s, want the revision's", got)
	}
	for i, want := range []string{"describe", "invoke"} {
		if p := payloads[i+1]; p["action"] != want || p["secrets"] != nil {
			t.Errorf("%s payload %v, want no secrets", want, p)
		}
	}
}

// Which answers of Lambda are retried, and what each failure says.
func TestRuntimeFailures(t *testing.T) {
	throttled := operationError(&ltypes.TooManyRequestsException{Message: aws.String("Rate exceeded")})
	cases := []struct {
		name     string
		answer   func() (*lambda.InvokeOutput, error)
		calls    int
		failure  graphdoc.Failure
		fragment string
	}{
		{"the function raised", func() (*lambda.InvokeOutput, error) {
			return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"),
				Payload: []byte(`{"errorType": "ValueError", "errorMessage": "no order 7", "stackTrace": ["..."]}`)}, nil
		}, 1, graphdoc.BadStatus, `Lambda function ` + testFunctionARN + ` failed (Unhandled): ValueError: no order 7`},
		{"a function error that is not JSON", func() (*lambda.InvokeOutput, error) {
			return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(`Runtime exited`)}, nil
		}, 1, graphdoc.BadStatus, "failed (Unhandled): Runtime exited"},
		{"garbage", func() (*lambda.InvokeOutput, error) {
			return answerPayload(`<html>oops</html>`), nil
		}, 1, graphdoc.BadResponse, `the answer is not a JSON object: <html>oops</html>`},
		{"a key of another protocol", func() (*lambda.InvokeOutput, error) {
			return answerPayload(`{"updates": {"count": 1}}`), nil
		}, 1, graphdoc.BadResponse, `"updates": is not part of the protocol`},
		{"throttled on every attempt", func() (*lambda.InvokeOutput, error) {
			return nil, throttled
		}, 3, graphdoc.BadStatus, `Lambda Invoke of ` + testFunctionARN + `: TooManyRequestsException: Rate exceeded (3 attempts)`},
		{"a service error on every attempt", func() (*lambda.InvokeOutput, error) {
			return nil, operationError(&ltypes.ServiceException{Message: aws.String("internal")})
		}, 3, graphdoc.BadStatus, "ServiceException: internal (3 attempts)"},
		{"no such function: not retried", func() (*lambda.InvokeOutput, error) {
			return nil, operationError(&ltypes.ResourceNotFoundException{Message: aws.String("Function not found: " + testFunctionARN)})
		}, 1, graphdoc.BadStatus, "ResourceNotFoundException: Function not found"},
		{"access denied: not retried", func() (*lambda.InvokeOutput, error) {
			return nil, operationError(&smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: lambda:InvokeFunction"})
		}, 1, graphdoc.BadStatus, "AccessDeniedException: not authorized"},
		{"no connection: retried", func() (*lambda.InvokeOutput, error) {
			return nil, operationError(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
		}, 3, graphdoc.Unreachable, "connection refused (3 attempts)"},
		{"a connection lost after sending: not retried", func() (*lambda.InvokeOutput, error) {
			return nil, operationError(&net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")})
		}, 1, graphdoc.Unreachable, "connection reset by peer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := &fakeLambda{answer: func(context.Context, int, map[string]any) (*lambda.InvokeOutput, error) { return c.answer() }}
			_, err := testRuntime(fake).Call(context.Background(), graphdoc.FunctionRequest{Graph: "g", Node: "fn"})
			var ce *graphdoc.CallError
			if !errors.As(err, &ce) || ce.Failure != c.failure || !strings.Contains(err.Error(), c.fragment) {
				t.Errorf("error %v (%#v), want failure %d containing %q", err, ce, c.failure, c.fragment)
			}
			if fake.count() != c.calls {
				t.Errorf("%d calls, want %d", fake.count(), c.calls)
			}
		})
	}
}

func TestRuntimeRetriesThrottling(t *testing.T) {
	fake := &fakeLambda{answer: func(_ context.Context, n int, _ map[string]any) (*lambda.InvokeOutput, error) {
		switch n {
		case 1:
			return nil, operationError(&ltypes.TooManyRequestsException{Message: aws.String("Rate exceeded")})
		case 2:
			return nil, operationError(&ltypes.ResourceConflictException{Message: aws.String("The function is currently in the following state: Pending")})
		}
		return answerPayload(`{"update": {"count": 1}}`), nil
	}}
	resp, err := testRuntime(fake).Call(context.Background(), graphdoc.FunctionRequest{Graph: "g", Node: "fn"})
	if err != nil || len(resp.Update) != 1 || fake.count() != 3 {
		t.Fatalf("Call: %+v, %v after %d calls, want the update after 3", resp, err, fake.count())
	}
}

// A timeout is not retried: the function may have run.
func TestRuntimeTimeout(t *testing.T) {
	fake := &fakeLambda{answer: func(ctx context.Context, _ int, _ map[string]any) (*lambda.InvokeOutput, error) {
		<-ctx.Done() // as the SDK does: the request ends with the context
		return nil, operationError(&aws.RequestCanceledError{Err: ctx.Err()})
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := testRuntime(fake).Call(ctx, graphdoc.FunctionRequest{Graph: "g", Node: "fn"})
	var ce *graphdoc.CallError
	if !errors.As(err, &ce) || ce.Failure != graphdoc.TimedOut || ce.Attempts != 1 || fake.count() != 1 {
		t.Fatalf("call past its deadline: %#v after %d calls, want a TimedOut CallError after 1", err, fake.count())
	}
}

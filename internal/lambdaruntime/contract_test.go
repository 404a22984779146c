package lambdaruntime_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/graphdoc"
	"github.com/stepgraph/stepgraph/internal/graphdoc/runtimetest"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
)

// invokePayload is what the Runtime sends (docs/runtime-protocol.md).
type invokePayload struct {
	Action  string          `json:"action"`
	Request json.RawMessage `json:"request"`
}

// answer asks fn how to answer an invoke payload.
func answer(fn *runtimetest.Function, payload []byte) runtimetest.Answer {
	var p invokePayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return runtimetest.Answer{Kind: runtimetest.Crash, Body: []byte("the payload is not JSON: " + err.Error())}
	}
	switch p.Action {
	case "invoke":
		return fn.Invoke(p.Request)
	case "describe":
		return fn.Describe()
	}
	return runtimetest.Answer{Kind: runtimetest.Crash, Body: []byte("unknown action " + p.Action)}
}

// scriptedLambda is the Lambda API as it answers a function that plays
// fn's script: a crash is a function error (Unhandled), a call turned away
// is throttling, and a hang ends when the caller's context does, as the
// SDK's call would.
type scriptedLambda struct{ fn *runtimetest.Function }

func (l scriptedLambda) Invoke(ctx context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	a := answer(l.fn, in.Payload)
	switch a.Kind {
	case runtimetest.Crash:
		doc, _ := json.Marshal(map[string]any{"errorType": "Exception", "errorMessage": string(a.Body), "stackTrace": []string{}})
		return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: doc}, nil
	case runtimetest.Unavailable:
		return nil, &smithy.OperationError{ServiceID: "Lambda", OperationName: "Invoke",
			Err: &ltypes.TooManyRequestsException{Message: aws.String(string(a.Body))}}
	case runtimetest.Hang:
		select {
		case <-ctx.Done():
		case <-l.fn.Released():
		}
		return nil, &smithy.OperationError{ServiceID: "Lambda", OperationName: "Invoke",
			Err: &aws.RequestCanceledError{Err: context.Cause(ctx)}}
	}
	return &lambda.InvokeOutput{StatusCode: 200, Payload: a.Body}, nil
}

func contractRuntime(function string, client lambdaruntime.Invoker, s runtimetest.Settings) graphdoc.Runtime {
	return &lambdaruntime.Runtime{Function: function, Client: client,
		MaxAttempts: s.MaxAttempts, Backoff: s.Backoff, MaxResponseBytes: s.MaxResponseBytes}
}

// The Lambda transport honours the runtime contract against the Lambda
// API's answers, faked.
func TestRuntimeContract(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T, fn *runtimetest.Function, s runtimetest.Settings) graphdoc.Runtime {
		return contractRuntime("arn:aws:lambda:us-east-1:123456789012:function:contract", scriptedLambda{fn}, s)
	})
}

// The Lambda transport honours the runtime contract with real Invoke calls
// on the emulator, to a function per case that hands each event to the
// script (awstest.LambdaProxy): a crash is an exception the function
// raises, a hang a function that has not answered yet. The emulator
// cannot be made to throttle an Invoke call, so the cases of calls turned
// away (Unavailable) are left to TestRuntimeContract.
func TestRuntimeContractOnMiniStack(t *testing.T) {
	ep := awstest.Start(t)
	client := lambda.NewFromConfig(ep.Config)
	runtimetest.Run(t, func(t *testing.T, fn *runtimetest.Function, s runtimetest.Settings) graphdoc.Runtime {
		arn := awstest.LambdaProxy(t, ep, "runtime", 30, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			payload, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			a := answer(fn, payload)
			switch a.Kind {
			case runtimetest.Reply:
				_, _ = w.Write(a.Body)
			case runtimetest.Hang:
				select {
				case <-r.Context().Done():
				case <-fn.Released():
				}
				http.Error(w, "the caller gave up", http.StatusGatewayTimeout)
			default: // Crash (Unavailable is never scripted here)
				http.Error(w, string(a.Body), http.StatusInternalServerError)
			}
		}))
		return contractRuntime(arn, client, s)
	}, runtimetest.Unavailable)
}

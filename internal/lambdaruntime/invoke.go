package lambdaruntime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stepgraph/stepgraph/internal/graphdoc"
)

// Invoker is the part of the Lambda API a Runtime uses;
// *lambda.Client implements it.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Runtimes returns what deployedgraphs.Host.Lambda asks for: the Runtime of
// a function, invoked through client, its answers bounded by maxBytes (the
// Runtime's default when 0).
func Runtimes(client Invoker) func(functionARN string, maxBytes int64) graphdoc.Runtime {
	return func(functionARN string, maxBytes int64) graphdoc.Runtime {
		return &Runtime{Function: functionARN, Client: client, MaxResponseBytes: maxBytes}
	}
}

// The payloads of the Lambda transport (docs/runtime-protocol.md): one
// handler serves both requests.
type lambdaPayload struct {
	Action  string                    `json:"action"`
	Request *graphdoc.FunctionRequest `json:"request,omitempty"`
	// Secrets are the revision's secret values by name, on the invoke
	// calls of a runtime the platform made (Runtime.Secrets).
	Secrets map[string]string `json:"secrets,omitempty"`
}

const (
	lambdaActionInvoke   = "invoke"
	lambdaActionDescribe = "describe"
)

// Runtime is the graphdoc.Runtime of a runtime that is a Lambda function, with
// synchronous Invoke calls (RequestResponse): {"action": "invoke",
// "request": <graphdoc.FunctionRequest>} runs a function, {"action": "describe"}
// returns the graph config. Like graphdoc.HTTPRuntime, it retries only what did not
// run the function — a throttled call, a service error of Lambda's, a
// connection that could not be made — with backoff, so a function runs at
// most once per call otherwise. The SDK's own retries are turned off for
// its calls: the policy is this one alone.
type Runtime struct {
	// Function is the function's ARN (a deployment's custom_url, or the
	// runtime the platform made from its image_uri).
	Function string
	// Client makes the calls (a *lambda.Client). Required.
	Client Invoker
	// MaxAttempts bounds the attempts of one call (default 3).
	MaxAttempts int
	// Backoff is the wait before the second attempt, doubled after
	// (default 200 ms).
	Backoff time.Duration
	// MaxResponseBytes bounds an answer (default 10 MiB; Lambda itself
	// returns at most 6 MB).
	MaxResponseBytes int64
	// Secrets, when set, go with every invoke call as the payload's
	// "secrets": the revision's secret values, for the runtime the
	// platform made from its image, which holds none in its environment
	// (docs/runtime-protocol.md). They are in no error: errors name the
	// function and quote only its answer.
	Secrets map[string]string
}

// WithSecrets implements deployedgraphs.SecretsCarrier: a copy of r whose
// invoke calls carry values.
func (r *Runtime) WithSecrets(values map[string]string) graphdoc.Runtime {
	c := *r
	c.Secrets = values
	return &c
}

// Call implements graphdoc.Runtime.
func (r *Runtime) Call(ctx context.Context, req graphdoc.FunctionRequest) (graphdoc.FunctionResponse, error) {
	if req.Resume == nil {
		req.Resume = []any{}
	}
	payload, err := json.Marshal(lambdaPayload{Action: lambdaActionInvoke, Request: &req, Secrets: r.Secrets})
	if err != nil {
		return graphdoc.FunctionResponse{}, fmt.Errorf("the request is not JSON: %w", err)
	}
	raw, attempts, err := r.exchange(ctx, payload)
	if err != nil {
		return graphdoc.FunctionResponse{}, err
	}
	resp, err := graphdoc.ParseFunctionResponse(raw)
	if err != nil {
		return graphdoc.FunctionResponse{}, &graphdoc.CallError{Failure: graphdoc.BadResponse, Attempts: attempts, Err: err}
	}
	return resp, nil
}

// Describe implements graphdoc.Runtime.
func (r *Runtime) Describe(ctx context.Context) ([]byte, error) {
	payload, _ := json.Marshal(lambdaPayload{Action: lambdaActionDescribe})
	raw, _, err := r.exchange(ctx, payload)
	return raw, err
}

// exchange invokes the function, retrying what is safe to retry.
func (r *Runtime) exchange(ctx context.Context, payload []byte) ([]byte, int, error) {
	if r.Client == nil {
		return nil, 0, errors.New("lambdaruntime: Runtime.Client is not set")
	}
	policy := graphdoc.Retry{MaxAttempts: r.MaxAttempts, Backoff: r.Backoff}
	return policy.Do(ctx, func() ([]byte, bool, *graphdoc.CallError) { return r.attempt(ctx, payload) })
}

// noSDKRetries leaves retrying to Runtime: the SDK's standard
// retryer would also retry a connection reset after the request was sent,
// when the function may have run.
func noSDKRetries(o *lambda.Options) { o.Retryer = aws.NopRetryer{} }

func (r *Runtime) attempt(ctx context.Context, payload []byte) (raw []byte, retry bool, err *graphdoc.CallError) {
	out, e := r.Client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(r.Function),
		InvocationType: ltypes.InvocationTypeRequestResponse,
		Payload:        payload,
	}, noSDKRetries)
	if e != nil {
		return nil, r.retryable(e), r.classify(e)
	}
	if out.FunctionError != nil {
		return nil, false, &graphdoc.CallError{Failure: graphdoc.BadStatus, Err: fmt.Errorf("Lambda function %s failed (%s): %s",
			r.Function, aws.ToString(out.FunctionError), lambdaErrorText(out.Payload))}
	}
	if out.StatusCode != 0 && out.StatusCode != 200 {
		return nil, false, &graphdoc.CallError{Failure: graphdoc.BadStatus, Err: fmt.Errorf("Lambda Invoke of %s answered status %d: %s",
			r.Function, out.StatusCode, graphdoc.Excerpt(out.Payload))}
	}
	if limit := cmp.Or(r.MaxResponseBytes, 10<<20); int64(len(out.Payload)) > limit {
		return nil, false, &graphdoc.CallError{Failure: graphdoc.BadResponse, Err: fmt.Errorf("Lambda function %s: the answer is larger than %d bytes", r.Function, limit)}
	}
	return out.Payload, false, nil
}

// lambdaRetryCodes are the Invoke errors that say Lambda did not run the
// function: throttling, a function not ready yet, Lambda's own failure.
var lambdaRetryCodes = []string{
	"TooManyRequestsException", "EC2ThrottledException", "ThrottlingException",
	"ServiceException", "ResourceNotReadyException", "ResourceConflictException", "SnapStartNotReadyException",
}

// retryable: an error of Lambda's that did not run the function, or a
// connection that could not be made (the request was never sent).
func (r *Runtime) retryable(err error) bool {
	if isTimeout(err) || errors.Is(err, context.Canceled) {
		return false
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		if slices.Contains(lambdaRetryCodes, api.ErrorCode()) {
			return true
		}
		var re *smithyhttp.ResponseError
		return errors.As(err, &re) && slices.Contains([]int{500, 503, 504}, re.HTTPStatusCode())
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// classify turns a failed Invoke into a graphdoc.CallError.
func (r *Runtime) classify(err error) *graphdoc.CallError {
	switch {
	case isTimeout(err):
		return &graphdoc.CallError{Failure: graphdoc.TimedOut, Err: fmt.Errorf("Lambda Invoke of %s: no answer in the time allowed", r.Function)}
	case errors.Is(err, context.Canceled):
		return &graphdoc.CallError{Failure: graphdoc.Unreachable, Err: err}
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return &graphdoc.CallError{Failure: graphdoc.BadStatus, Err: &lambdaAPIError{function: r.Function, api: api, err: err}}
	}
	return &graphdoc.CallError{Failure: graphdoc.Unreachable, Err: fmt.Errorf("Lambda Invoke of %s: %w", r.Function, err)}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// lambdaAPIError is an error answer of the Lambda API, shortened to its
// code and message (the SDK's text carries request ids and status lines).
type lambdaAPIError struct {
	function string
	api      smithy.APIError
	err      error
}

func (e *lambdaAPIError) Error() string {
	return fmt.Sprintf("Lambda Invoke of %s: %s: %s", e.function, e.api.ErrorCode(), graphdoc.Truncate(e.api.ErrorMessage(), 300))
}

func (e *lambdaAPIError) Unwrap() error { return e.err }

// lambdaErrorText reads a function error's payload, {"errorType",
// "errorMessage", "stackTrace"}: "ValueError: boom".
func lambdaErrorText(payload []byte) string {
	var doc struct {
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal(payload, &doc) != nil || doc.ErrorType+doc.ErrorMessage == "" {
		return graphdoc.Excerpt(payload)
	}
	text := cmp.Or(doc.ErrorType, "Error")
	if doc.ErrorMessage != "" {
		text += ": " + doc.ErrorMessage
	}
	return graphdoc.Truncate(text, 600)
}

// Functions invokes Lambda functions by name for a caller that brings its
// own protocol: internal/pyapp's LambdaClient (a LangGraph app's runtime
// function) uses it as its pyapp.FunctionInvoker. Calls get Runtime's
// retry policy (only what did not run the function is retried) and
// Lambda's 6 MB answer bound.
type Functions struct {
	Client Invoker
}

// MaxSyncPayload is Lambda's bound on a synchronous invocation's answer.
const MaxSyncPayload = 6 << 20

// InvokeFunction invokes function with payload and answers its result; a
// function error is an error naming its type and message.
func (f Functions) InvokeFunction(ctx context.Context, function string, payload []byte) ([]byte, error) {
	r := &Runtime{Function: function, Client: f.Client, MaxResponseBytes: MaxSyncPayload}
	raw, _, err := r.exchange(ctx, payload)
	return raw, err
}

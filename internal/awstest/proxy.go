package awstest

import (
	"archive/zip"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// proxyHandler is the Lambda function of LambdaProxy: it posts its event
// to AWSTEST_PROXY_URL (no proxy servers: the address is a loopback one)
// and answers what it is told.
const proxyHandler = `import json, os, urllib.error, urllib.request

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def handler(event, context):
    remaining = context.get_remaining_time_in_millis()
    req = urllib.request.Request(os.environ["AWSTEST_PROXY_URL"], data=json.dumps(event).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "X-Remaining-Ms": str(remaining)})
    try:
        with _opener.open(req, timeout=max(1, remaining / 1000)) as r:
            text = r.read().decode()
    except urllib.error.HTTPError as e:
        raise Exception(e.read().decode())
    try:
        return json.loads(text)
    except ValueError:
        return text
`

// LambdaProxy creates a Lambda function on the emulator (named Prefix(t) +
// name, with a timeout of timeoutSeconds) that hands every event it is
// invoked with to h, in this process, and returns the function's ARN. It
// puts code under test behind real Lambda Invoke calls — as the target of a
// Step Functions task, say — without building a Lambda package.
//
// The function is a Python one, run by the emulator as a local process: it
// posts the event as JSON to a server on 127.0.0.1 serving h, the time the
// invocation has left being the request's deadline. h's answer is the
// function's: a 200 body that is JSON is returned as that value, other text
// as it is; any other status makes the function raise an exception whose
// message is the body (a function error). The server stops at the end of
// the test; the function stays (nothing resets the emulator's state).
func LambdaProxy(t testing.TB, ep Endpoint, name string, timeoutSeconds int32, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ms, err := strconv.Atoi(r.Header.Get("X-Remaining-Ms")); err == nil && ms > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), time.Duration(ms)*time.Millisecond)
			defer cancel()
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("handler.py")
	if err == nil {
		_, err = w.Write([]byte(proxyHandler))
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lc := lambda.NewFromConfig(ep.Config)
	out, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName: aws.String(Prefix(t) + name),
		Runtime:      ltypes.RuntimePython312,
		Handler:      aws.String("handler.handler"),
		Role:         aws.String("arn:aws:iam::000000000000:role/awstest-proxy"),
		Code:         &ltypes.FunctionCode{ZipFile: buf.Bytes()},
		Timeout:      aws.Int32(timeoutSeconds),
		Environment:  &ltypes.Environment{Variables: map[string]string{"AWSTEST_PROXY_URL": srv.URL}},
	})
	if err != nil {
		t.Fatalf("awstest: create the proxy function %s: %v", name, err)
	}
	arn := aws.ToString(out.FunctionArn)
	waiter := lambda.NewFunctionActiveV2Waiter(lc, func(o *lambda.FunctionActiveV2WaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
	})
	if err := waiter.Wait(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(arn)}, time.Minute); err != nil {
		t.Fatalf("awstest: the proxy function %s: %v", name, err)
	}
	return arn
}

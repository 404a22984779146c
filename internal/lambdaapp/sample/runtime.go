package sample

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/stepgraph/stepgraph/internal/ministack"
)

// ExampleRuntimePath is the example function runtime, relative to the
// module root: its lambda_handler serves the runtime protocol's Lambda
// payloads (docs/runtime-protocol.md).
const ExampleRuntimePath = "examples/python/runtime.py"

// ExampleRuntime deploys examples/python/runtime.py on the stack's emulator
// as a python3.11 zip Lambda (the emulator runs it as a local Python
// process), named Prefix + "example-runtime", and returns its ARN: a
// deployment whose custom_url is that ARN is described and served through
// Lambda Invoke. Its support graph's chat model sends no API key. It is
// made once per stack.
func (s *Stack) ExampleRuntime(ctx context.Context) (string, error) {
	root, err := ministack.ModuleRoot()
	if err != nil {
		return "", err
	}
	src, err := os.ReadFile(filepath.Join(root, ExampleRuntimePath))
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("runtime.py")
	if err == nil {
		_, err = w.Write(src)
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return "", err
	}
	lc := lambda.NewFromConfig(s.AWS)
	name := s.Prefix + "example-runtime"
	var arn string
	out, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName: aws.String(name),
		Runtime:      ltypes.RuntimePython311,
		Handler:      aws.String("runtime.lambda_handler"),
		Role:         aws.String(emulatorRole),
		Code:         &ltypes.FunctionCode{ZipFile: buf.Bytes()},
		Timeout:      aws.Int32(30),
		Environment:  &ltypes.Environment{Variables: map[string]string{"STEPGRAPH_EXAMPLE_API_KEY_SECRET": ""}},
	})
	var conflict *ltypes.ResourceConflictException
	switch {
	case errors.As(err, &conflict): // made before, or an SDK retry of a create that went through
		got, gerr := lc.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
		if gerr != nil {
			return "", fmt.Errorf("create function %s: %w", name, err)
		}
		arn = aws.ToString(got.Configuration.FunctionArn)
	case err != nil:
		return "", fmt.Errorf("create function %s: %w", name, err)
	default:
		arn = aws.ToString(out.FunctionArn)
	}
	waiter := lambda.NewFunctionActiveV2Waiter(lc, func(o *lambda.FunctionActiveV2WaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
	})
	if err := waiter.Wait(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(arn)}, time.Minute); err != nil {
		return "", fmt.Errorf("function %s: %w", name, err)
	}
	return arn, nil
}

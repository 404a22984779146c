package lambdaapp

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
	payloadss3 "github.com/stepgraph/stepgraph/internal/payloads/s3"
	secretsaws "github.com/stepgraph/stepgraph/internal/secrets/aws"
)

// EnvTeardown "true" makes the deploy-worker's bootstrap the stack's
// teardown function (infra/stack, teardown.go) instead of the deploy
// worker: the same binary, another role.
const EnvTeardown = "STEPGRAPH_TEARDOWN"

// TeardownRetainProperty is the custom resource's property saying whether
// the stack keeps its data ("true": tables, bucket and log groups are
// retained, and so are the secrets their records name).
const TeardownRetainProperty = "RetainData"

// Teardown is the stack's custom resource that deletes, when the stack is
// deleted, what the stage made at run time outside CloudFormation: the
// runtime functions (with their versions), and unless the stack retains
// its data, the stage's secrets and the payload bucket's objects (so that
// CloudFormation can delete the bucket). Create and Update do nothing.
type Teardown struct {
	// Lambda lists and deletes the runtime functions of NamePrefix.
	Lambda     lambdaruntime.TeardownAPI
	NamePrefix string
	// Secrets deletes the secrets its prefix's stores created.
	Secrets interface {
		DeleteAll(ctx context.Context) ([]string, error)
	}
	// Payloads empties the payload bucket; nil when the stack has none.
	Payloads interface {
		Empty(ctx context.Context) error
	}
	Log *slog.Logger
}

// Handle is the custom resource's handler (cfn.LambdaWrap answers
// CloudFormation). Its physical id never changes, so an update never
// replaces it (a replacement would delete the old one: a teardown).
// Every step is idempotent: a retried or repeated delete finds less.
func (t *Teardown) Handle(ctx context.Context, event cfn.Event) (string, map[string]any, error) {
	id := t.NamePrefix + "teardown"
	if event.RequestType != cfn.RequestDelete {
		return id, nil, nil
	}
	functions, err := lambdaruntime.DeleteRuntimes(ctx, t.Lambda, t.NamePrefix)
	t.Log.Info("teardown: runtime functions deleted", "count", len(functions), "functions", functions)
	if err != nil {
		return id, nil, err
	}
	if event.ResourceProperties[TeardownRetainProperty] == "true" {
		t.Log.Info("teardown: the stack retains its data: secrets and payloads kept")
		return id, nil, nil
	}
	names, err := t.Secrets.DeleteAll(ctx)
	t.Log.Info("teardown: secrets deleted", "count", len(names))
	if err != nil {
		return id, nil, err
	}
	if t.Payloads != nil {
		if err := t.Payloads.Empty(ctx); err != nil {
			return id, nil, fmt.Errorf("empty the payload bucket: %w", err)
		}
		t.Log.Info("teardown: payload bucket emptied")
	}
	return id, nil, nil
}

// StartTeardown runs the teardown function: the stage's prefixes and bucket
// come from the same variables as the other functions'.
func StartTeardown() {
	t, err := teardownFromEnv(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "teardown: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(cfn.LambdaWrap(t.Handle))
}

func teardownFromEnv(ctx context.Context) (*Teardown, error) {
	prefix, secretsPrefix := os.Getenv(EnvTablePrefix), os.Getenv(EnvSecretsPrefix)
	if prefix == "" || secretsPrefix == "" {
		return nil, fmt.Errorf("%s and %s are required", EnvTablePrefix, EnvSecretsPrefix)
	}
	awsCfg, err := LoadAWS(ctx)
	if err != nil {
		return nil, err
	}
	sec, err := secretsaws.New(awsCfg, secretsaws.Options{Prefix: secretsPrefix, Grouped: true})
	if err != nil {
		return nil, err
	}
	level := slog.LevelInfo
	if v := os.Getenv(EnvLogLevel); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return nil, fmt.Errorf("%s must be debug, info, warn or error", EnvLogLevel)
		}
	}
	t := &Teardown{Lambda: awslambda.NewFromConfig(awsCfg), NamePrefix: prefix, Secrets: sec,
		Log: NewLogger(os.Stdout, level).With("function", "teardown")}
	if bucket := os.Getenv(EnvPayloadBucket); bucket != "" {
		t.Payloads = payloadss3.New(awsCfg, bucket, awsCfg.BaseEndpoint != nil)
	}
	return t, nil
}

package sample

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	stypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/stepgraph/stepgraph/internal/awsflow"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	payloadss3 "github.com/stepgraph/stepgraph/internal/payloads/s3"
	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

// emulatorRole is the IAM role named in the emulator's resources (it
// enforces no IAM).
const emulatorRole = "arn:aws:iam::" + emulatorAccount + ":role/stepgraph-sample"

// emulatorAccount is the account the emulator's resources belong to.
const emulatorAccount = "000000000000"

// Options of Deploy.
type Options struct {
	// Prefix names everything: tables (Prefix + "threads"), functions
	// (Prefix + "run-worker"), state machines, secrets.
	Prefix string
	// Bootstraps holds run-worker/bootstrap and deploy-worker/bootstrap
	// (see Build).
	Bootstraps string
	// WorkerTimeout is the workers' Lambda timeout in seconds (30 when 0).
	WorkerTimeout int32
	// WorkerEnv is added to the workers' environment.
	WorkerEnv map[string]string
	// WebhooksAllowPrivate lets the functions deliver webhooks to loopback
	// receivers.
	WebhooksAllowPrivate bool
	// ExpressRuns adds the run machine's Express front (as the CDK stack
	// does by default): the API functions start the runs that can start
	// now there.
	ExpressRuns bool
	// BuildProject, RuntimeRoleARN and LocalRepoDirs are the workers' and
	// API functions' lambdaapp.Config fields of the same names: hosted_repo
	// LangGraph apps built by that CodeBuild project (a local one in the
	// tests: give the workers AWS_ENDPOINT_URL_CODEBUILD in WorkerEnv),
	// made into functions with that role, from repositories under those
	// directories (the workers take them only when built with -tags
	// stepgraph_faults).
	BuildProject, RuntimeRoleARN, LocalRepoDirs string
	// PublicURL is the stage's public URL (lambdaapp.Config.PublicURL):
	// the run worker's links for LangGraph apps' calls.
	PublicURL string
}

// Stack is what Deploy created.
type Stack struct {
	AWS             aws.Config
	Prefix          string
	RunWorkerARN    string
	DeployWorkerARN string
	// API is the configuration of an API function on the stack; Worker of
	// a worker.
	API, Worker lambdaapp.Config
}

// Deploy creates the stack of opts on the emulator addressed by cfg.
func Deploy(ctx context.Context, cfg aws.Config, opts Options) (*Stack, error) {
	if err := dynamo.New(cfg, dynamo.DeployedOptions(opts.Prefix)).CreateTables(ctx); err != nil {
		return nil, err
	}
	s := &Stack{AWS: cfg, Prefix: opts.Prefix}
	// The payload store's bucket, as the CDK stack declares one.
	bucket := payloadss3.BucketName(opts.Prefix)
	if err := payloadss3.New(cfg, bucket, true).CreateBucket(ctx); err != nil {
		return nil, err
	}
	// The workers are made before the state machines that call them, so the
	// deploy worker is told its machine's ARN from the name it will have,
	// as the CDK stack does (checked once the machine exists).
	s.Worker = lambdaapp.Config{Role: lambdaapp.RoleRunWorker, TablePrefix: opts.Prefix,
		SecretsPrefix: opts.Prefix, PayloadBucket: bucket, LogLevel: slog.LevelInfo, WebhooksAllowPrivate: opts.WebhooksAllowPrivate,
		DeployStateMachineARN: "arn:aws:states:" + cfg.Region + ":" + emulatorAccount + ":stateMachine:" + opts.Prefix + "provision",
		// Tenant sessions, as the CDK stack gives the run worker (the
		// emulator hands out sessions and enforces no policy).
		TenantRoleARN: "arn:aws:iam::" + emulatorAccount + ":role/" + opts.Prefix + "tenant",
		BuildProject:  opts.BuildProject, RuntimeRoleARN: opts.RuntimeRoleARN, LocalRepoDirs: opts.LocalRepoDirs, PublicURL: opts.PublicURL}
	timeout := opts.WorkerTimeout
	if timeout == 0 {
		timeout = 30
	}
	lc := lambda.NewFromConfig(cfg)
	for _, fn := range []struct {
		name string
		arn  *string
	}{{"run-worker", &s.RunWorkerARN}, {"deploy-worker", &s.DeployWorkerARN}} {
		code, err := Zip(filepath.Join(opts.Bootstraps, fn.name, "bootstrap"))
		if err != nil {
			return nil, err
		}
		env := s.Worker.Env()
		for k, v := range opts.WorkerEnv {
			env[k] = v
		}
		name := opts.Prefix + fn.name
		out, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{
			FunctionName:  aws.String(name),
			Runtime:       ltypes.RuntimeProvidedal2023,
			Handler:       aws.String("bootstrap"),
			Role:          aws.String(emulatorRole),
			Code:          &ltypes.FunctionCode{ZipFile: code},
			Timeout:       aws.Int32(timeout),
			MemorySize:    aws.Int32(256),
			Architectures: []ltypes.Architecture{hostArchitecture()},
			Environment:   &ltypes.Environment{Variables: env},
		})
		var conflict *ltypes.ResourceConflictException
		if errors.As(err, &conflict) { // an SDK retry of a create that went through
			got, gerr := lc.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
			if gerr != nil {
				return nil, fmt.Errorf("create function %s: %w", fn.name, err)
			}
			out, err = &lambda.CreateFunctionOutput{FunctionArn: got.Configuration.FunctionArn}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("create function %s: %w", fn.name, err)
		}
		*fn.arn = aws.ToString(out.FunctionArn)
	}

	runDef, err := awsflow.RunDefinition(s.RunWorkerARN)
	if err != nil {
		return nil, err
	}
	provDef, err := awsflow.ProvisionDefinition(s.DeployWorkerARN)
	if err != nil {
		return nil, err
	}
	sc := sfn.NewFromConfig(cfg)
	machine := func(name, def string) (string, error) {
		typ := stypes.StateMachineTypeStandard
		if name == "run-express" {
			typ = stypes.StateMachineTypeExpress
		}
		out, err := sc.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{
			Name: aws.String(opts.Prefix + name), Definition: aws.String(def),
			RoleArn: aws.String(emulatorRole), Type: typ,
		})
		var exists *stypes.StateMachineAlreadyExists
		if errors.As(err, &exists) { // an SDK retry of a create that went through
			if arn, ok := findMachine(ctx, sc, opts.Prefix+name); ok {
				return arn, nil
			}
		}
		if err != nil {
			return "", fmt.Errorf("create state machine %s: %w", name, err)
		}
		return aws.ToString(out.StateMachineArn), nil
	}
	s.API = s.Worker
	s.API.Role = lambdaapp.RoleAPI
	if s.API.RunStateMachineARN, err = machine("run", runDef); err != nil {
		return nil, err
	}
	if s.API.DeployStateMachineARN, err = machine("provision", provDef); err != nil {
		return nil, err
	}
	if opts.ExpressRuns {
		expressDef, err := awsflow.ExpressDefinition(s.RunWorkerARN, s.API.RunStateMachineARN)
		if err != nil {
			return nil, err
		}
		if s.API.RunExpressStateMachineARN, err = machine("run-express", expressDef); err != nil {
			return nil, err
		}
	}
	if s.API.DeployStateMachineARN != s.Worker.DeployStateMachineARN {
		return nil, fmt.Errorf("the provisioning state machine is %s, not %s as the deploy worker was told",
			s.API.DeployStateMachineARN, s.Worker.DeployStateMachineARN)
	}
	return s, nil
}

// Open wires a function of role on the stack, logging to log. An API
// function opened here serves every operation; OpenFunction serves one
// function's routes, as on AWS.
func (s *Stack) Open(role lambdaapp.Role, log *slog.Logger) (*lambdaapp.App, error) {
	return s.OpenFunction(role, "", log)
}

// OpenFunction wires the function named fn (lambdaapp.Functions) of role.
func (s *Stack) OpenFunction(role lambdaapp.Role, fn string, log *slog.Logger) (*lambdaapp.App, error) {
	cfg := s.Worker
	if role == lambdaapp.RoleAPI || role == lambdaapp.RoleCronFire {
		// cron-fire creates runs as an API function does: it starts their
		// executions.
		cfg = s.API
		cfg.Function = fn
	}
	cfg.Role = role
	return lambdaapp.Open(cfg, s.AWS, log)
}

// findMachine looks a state machine up by name.
func findMachine(ctx context.Context, sc *sfn.Client, name string) (string, bool) {
	p := sfn.NewListStateMachinesPaginator(sc, &sfn.ListStateMachinesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", false
		}
		for _, m := range page.StateMachines {
			if aws.ToString(m.Name) == name {
				return aws.ToString(m.StateMachineArn), true
			}
		}
	}
	return "", false
}

// DeployAPI creates API function fn (lambdaapp.Functions; its bootstrap
// under bootstraps, see Build) on the stack as a real Lambda, configured
// as the stack's API functions are, plus env, with a Lambda timeout of
// timeout seconds. It returns the function's name. The emulator invokes it
// as API Gateway would (Invoke, or InvokeWithResponseStream for a
// function whose routes stream).
func (s *Stack) DeployAPI(ctx context.Context, fn, bootstraps string, env map[string]string, timeout int32) (string, error) {
	code, err := Zip(filepath.Join(bootstraps, fn, "bootstrap"))
	if err != nil {
		return "", err
	}
	vars := s.API.Env()
	for k, v := range env {
		vars[k] = v
	}
	name := s.Prefix + fn
	_, err = lambda.NewFromConfig(s.AWS).CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName:  aws.String(name),
		Runtime:       ltypes.RuntimeProvidedal2023,
		Handler:       aws.String("bootstrap"),
		Role:          aws.String(emulatorRole),
		Code:          &ltypes.FunctionCode{ZipFile: code},
		Timeout:       aws.Int32(timeout),
		MemorySize:    aws.Int32(256),
		Architectures: []ltypes.Architecture{hostArchitecture()},
		Environment:   &ltypes.Environment{Variables: vars},
	})
	var conflict *ltypes.ResourceConflictException
	if err != nil && !errors.As(err, &conflict) { // a conflict: an SDK retry of a create that went through
		return "", fmt.Errorf("create function %s: %w", fn, err)
	}
	return name, nil
}

package lambdaapp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

// StartAPI is the main of an API function: it wires the app from the
// environment and serves API Gateway HTTP API events until the Lambda
// ends. name is the function's name, for the logs. It answers the HTTP
// API's events buffered and the REST API's streamed or buffered, as its
// Function.Stream says (Router).
func StartAPI(name string) {
	a := mustOpen(RoleAPI, name)
	f, _ := FunctionNamed(name)
	r := NewRouter(a.Handler, f.Stream)
	r.Streaming.Budget = a.Config.StreamBudget
	lambda.Start(r.Invoke)
}

// StartRunWorker is the main of the run-worker function.
func StartRunWorker() {
	a := mustOpen(RoleRunWorker, "run-worker")
	lambda.Start(a.HandleRunTask)
}

// StartDeployWorker is the main of the deploy-worker function, and of the
// stack's teardown function when EnvTeardown is "true".
func StartDeployWorker() {
	if os.Getenv(EnvTeardown) == "true" {
		StartTeardown()
		return
	}
	a := mustOpen(RoleDeployWorker, "deploy-worker")
	lambda.Start(a.HandleDeployTask)
}

// OpenFromEnv wires a function of role from the process environment.
// StartCronFire runs the cron-fire function: the target of the crons'
// EventBridge schedules.
func StartCronFire() {
	a := mustOpen(RoleCronFire, "cron-fire")
	lambda.Start(a.HandleCronEvent)
}

func OpenFromEnv(ctx context.Context, role Role, name string) (*App, error) {
	cfg, err := FromEnv(role, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	cfg.Function = name
	awsCfg, err := LoadAWS(ctx)
	if err != nil {
		return nil, err
	}
	return Open(cfg, awsCfg, NewLogger(os.Stdout, cfg.LogLevel).With("function", name))
}

// mustOpen ends the process with the reason when the function cannot be
// wired: Lambda reports an init error, the log says which variable.
func mustOpen(role Role, name string) *App {
	a, err := OpenFromEnv(context.Background(), role, name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	return a
}

// NewLogger writes JSON lines (what CloudWatch Logs parses) at level.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// Command infra is the stepgraph CDK app: `cdk synth` / `cdk deploy` run it
// (infra/cdk.json: "go run ."; the repository root's cdk.json builds it and
// runs it from the root). It declares one stack, "stepgraph-<stage>"; see
// package stack for what it holds.
//
// Context (cdk -c key=value):
//
//	stage     deployment name, prefixes every resource (default "dev")
//	arch      Lambda architecture: arm64 (default) or x86_64
//	logLevel  STEPGRAPH_LOG_LEVEL of the functions (default "info")
//	retain    "false" deletes tables, bucket, log groups and the stage's
//	          secrets with the stack (default: they are kept, except by
//	          the rollback of a failed first create; runtime functions go
//	          either way: docs/aws.md, "Teardown")
//	lambdaDir directory of <function>/bootstrap (default ../bin/lambdas)
//	expressRuns "false": the run machine alone, every run a Standard
//	          execution (default: its Express front starts the runs that
//	          can start now; docs/aws.md, "Express or Standard")
//	publicUrl the stage's public https address (a custom domain), for
//	          agent auth's OAuth redirect URIs; default: the API Gateway
//	          address each request came to (the run-worker: the REST
//	          API's URL)
//
// The edge (docs/reliability.md, "AWS edge"; defaults in package stack):
//
//	throttleRate            HTTP API stage throttle, requests/s (100)
//	throttleBurst           its burst (200)
//	runWorkerConcurrency    run-worker reserved concurrency (100), or none
//	deployWorkerConcurrency deploy-worker reserved concurrency (10), or none
//	accountConcurrency      the account's Lambda concurrency quota (1000),
//	                        which the reservations must leave 100 of
//	rateLimit               STEPGRAPH_RATE_LIMIT of the API functions, 0 for
//	                        none (default: the functions' own, 100)
//	corsOrigins             the stage's CORS allow-list, comma-separated
//	                        origins or *, none for no CORS (default:
//	                        LangGraph Studio, https://smith.langchain.com)
//	waf                     false: no WAF web ACL on the REST API (default:
//	                        one, with the two rate rules below)
//	wafKeyLimit             requests per API key per minute, all instances
//	                        together (6000)
//	wafIpLimit              requests per client address per 5 minutes (30000)
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/stepgraph/stepgraph/infra/stack"
	"github.com/stepgraph/stepgraph/internal/cors"
)

func main() {
	app := awscdk.NewApp(nil)
	err := build(app)
	if err == nil {
		app.Synth(nil)
	}
	jsii.Close() // stops the jsii node process, removes its temporary files
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

// build declares the stack on app as its context says.
func build(app awscdk.App) error {
	ctx := func(key, def string) string {
		if v, ok := app.Node().TryGetContext(jsii.String(key)).(string); ok && v != "" {
			return v
		}
		return def
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	lambdaDir := ctx("lambdaDir", "")
	if lambdaDir != "" && !filepath.IsAbs(lambdaDir) {
		lambdaDir = filepath.Join(root, "infra", lambdaDir)
	}
	stage := ctx("stage", "dev")
	edge, err := edgeContext(ctx)
	if err != nil {
		return err
	}
	p := stack.Props{
		StackProps: awscdk.StackProps{
			Description: jsii.String("stepgraph " + stage + ": serverless LangGraph-Platform-compatible agent platform"),
			// Account and region from the CLI's environment, when it has one.
			Env: &awscdk.Environment{
				Account: optional(os.Getenv("CDK_DEFAULT_ACCOUNT")),
				Region:  optional(os.Getenv("CDK_DEFAULT_REGION")),
			},
		},
		Stage:      stage,
		Arch:       ctx("arch", "arm64"),
		RepoRoot:   root,
		LambdaDir:  lambdaDir,
		LogLevel:   ctx("logLevel", "info"),
		RetainData: ctx("retain", "true") != "false",

		ThrottleRate:            edge.throttleRate,
		ThrottleBurst:           edge.throttleBurst,
		RunWorkerConcurrency:    edge.runWorker,
		DeployWorkerConcurrency: edge.deployWorker,
		AccountConcurrency:      edge.account,
		RateLimit:               edge.rateLimit,
		Edge:                    edge.props,
		PublicURL:               ctx("publicUrl", ""),
		NoExpressRuns:           ctx("expressRuns", "true") == "false",
	}
	_, err = stack.New(app, "stepgraph-"+stage, p)
	return err
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// repoRoot is the main module's directory: the parent of infra/, found from
// the working directory (cdk runs the app in infra/).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "internal", "api", "openapi.yaml")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no internal/api/openapi.yaml in %s or above", dir)
		}
	}
}

// edge is the context of the stack's throttling and concurrency; zero
// values leave package stack's defaults.
type edge struct {
	throttleRate             float64
	throttleBurst, runWorker int
	deployWorker, account    int
	rateLimit                string
	props                    stack.EdgeProps
}

// edgeContext reads the edge's context keys. A value that is no number
// fails, naming the key; the ranges are checked by stack.New.
func edgeContext(ctx func(key, def string) string) (edge, error) {
	var e edge
	var err error
	number := func(key string) float64 {
		v := ctx(key, "")
		if v == "" || err != nil {
			return 0
		}
		f, perr := strconv.ParseFloat(v, 64)
		if perr != nil || f <= 0 {
			err = fmt.Errorf("context %s=%q: want a number more than 0", key, v)
		}
		return f
	}
	count := func(key string, noneOK bool) int {
		v := ctx(key, "")
		if v == "" || err != nil {
			return 0
		}
		if noneOK && v == "none" {
			return stack.NoReservation
		}
		n, perr := strconv.Atoi(v)
		if perr != nil || n <= 0 {
			want := "a whole number more than 0"
			if noneOK {
				// 0 is refused: to Lambda, a reserved concurrency of 0
				// stops the function.
				want += ", or none for no reservation"
			}
			err = fmt.Errorf("context %s=%q: want %s", key, v, want)
		}
		return n
	}
	e.throttleRate = number("throttleRate")
	e.throttleBurst = count("throttleBurst", false)
	e.runWorker = count("runWorkerConcurrency", true)
	e.deployWorker = count("deployWorkerConcurrency", true)
	e.account = count("accountConcurrency", false)
	e.rateLimit = ctx("rateLimit", "") // checked by stack.New; "0" turns it off
	switch v := ctx("corsOrigins", ""); v {
	case "": // the stack's default
	case "none":
		e.props.NoCORS = true
	default:
		origins, perr := cors.Parse(v)
		if perr != nil && err == nil {
			err = fmt.Errorf("context corsOrigins=%q: %w", v, perr)
		}
		e.props.CORSOrigins = origins
	}
	switch v := ctx("waf", ""); v {
	case "", "true":
	case "false":
		e.props.NoWAF = true
	default:
		if err == nil {
			err = fmt.Errorf("context waf=%q: want true or false", v)
		}
	}
	e.props.WAFKeyLimit = count("wafKeyLimit", false)
	e.props.WAFIPLimit = count("wafIpLimit", false)
	return e, err
}

//go:build unix

// Command lambda-invoke runs one function of functions/ once, on a sample
// event, against an AWS emulator, and prints the function's answer — what
// `make invoke FN=<name> EVENT=events/<file>.json` does:
//
//	go run ./cmd/lambda-invoke -fn thread-run-wait -event events/thread-run-wait.json
//
// It starts MiniStack (installed in .venv-ministack by
// scripts/install-ministack.sh) on a free 127.0.0.1 port, or uses the one at
// -endpoint; builds the run-worker and deploy-worker bootstraps for this
// machine and deploys them, the DynamoDB tables and both Standard state
// machines under a fresh prefix (so runs started by the API really execute
// through Step Functions and the worker Lambda); stores the records the
// sample events refer to and fills their {{PLACEHOLDERS}} (see
// internal/lambdaapp/sample); then runs the function's handler in this
// process, prints its answer as JSON on stdout (logs go to stderr), and stops
// the emulator it started. Nothing leaves 127.0.0.1.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/lambdaapp/sample"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lambda-invoke:", err)
		os.Exit(1)
	}
}

func run() error {
	fn := flag.String("fn", "", "function name (a directory of functions/)")
	eventPath := flag.String("event", "", "sample event file (events/<file>.json)")
	endpoint := flag.String("endpoint", "", "use the emulator at this URL instead of starting one")
	timeout := flag.Duration("timeout", time.Minute, "the handler's deadline (the Lambda timeout)")
	verbose := flag.Bool("v", false, "log at debug level")
	flag.Parse()
	if *fn == "" || *eventPath == "" {
		return errors.New("usage: lambda-invoke -fn NAME -event FILE [-endpoint URL]")
	}
	if _, err := sample.RoleOf(*fn); err != nil {
		return err
	}
	raw, err := os.ReadFile(*eventPath)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := lambdaapp.NewLogger(os.Stderr, level)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := sample.ModuleRoot()
	if err != nil {
		return err
	}
	cfg := sample.EmulatorConfig(strings.TrimRight(*endpoint, "/"))
	if *endpoint == "" {
		fmt.Fprintln(os.Stderr, "starting MiniStack on 127.0.0.1 ...")
		emu, err := sample.StartMiniStack(root)
		if err != nil {
			return err
		}
		defer emu.Stop()
		cfg = emu.Config
	}
	dir, err := os.MkdirTemp("", "lambda-invoke-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintln(os.Stderr, "building run-worker and deploy-worker for this machine ...")
	if err := sample.Build(ctx, root, dir, nil, "run-worker", "deploy-worker"); err != nil {
		return err
	}
	prefix := "invoke-" + uuid.NewString()[:8] + "-"
	stack, err := sample.Deploy(ctx, cfg, sample.Options{Prefix: prefix, Bootstraps: dir})
	if err != nil {
		return err
	}
	vars, err := sample.Prepare(ctx, stack, log)
	if err != nil {
		return err
	}
	event, err := sample.Expand(raw, vars)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(*eventPath), err)
	}
	fmt.Fprintf(os.Stderr, "invoking %s with %s ...\n", *fn, *eventPath)
	start := time.Now()
	out, err := sample.Invoke(ctx, stack, *fn, event, *timeout, log)
	var lerr *sample.LambdaError
	switch {
	case errors.As(err, &lerr):
		out, _ = json.Marshal(lerr)
	case err != nil:
		return err
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") != nil {
		pretty.Write(out)
	}
	fmt.Println(pretty.String())
	fmt.Fprintf(os.Stderr, "answered in %s\n", time.Since(start).Round(time.Millisecond))
	if lerr != nil {
		return errors.New("the handler failed")
	}
	return nil
}

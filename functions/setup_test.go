package functions_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/lambdaapp/sample"
)

var workDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stepgraph-functions-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workDir = dir
	code := awstest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// workerTimeout is the workers' Lambda timeout: the emulator waits that
// long for a worker that died without answering.
const workerTimeout = 10

var (
	stackOnce sync.Once
	stack     *sample.Stack
	stackErr  error
	faultDir  string

	binOnce sync.Once
	binDir  string
	binErr  error
)

// bootstraps builds, once per test binary, the workers for this machine
// with fault injection (and local repositories) compiled in, and returns
// their directory (sample.Options.Bootstraps).
func bootstraps() (string, error) {
	binOnce.Do(func() {
		root, err := sample.ModuleRoot()
		if err != nil {
			binErr = err
			return
		}
		bin := filepath.Join(workDir, "bin")
		if binErr = sample.Build(context.Background(), root, bin, []string{"stepgraph_faults"}, "run-worker", "deploy-worker"); binErr == nil {
			binDir = bin
		}
	})
	return binDir, binErr
}

// sharedStack deploys, once per test binary, the workers (built for this
// machine, with fault injection compiled in) and the state machines on the
// emulator, under a prefix of their own.
func sharedStack(t *testing.T) *sample.Stack {
	t.Helper()
	ep := awstest.Start(t)
	stackOnce.Do(func() {
		var bin string
		if bin, stackErr = bootstraps(); stackErr != nil {
			return
		}
		faultDir = filepath.Join(workDir, "faults")
		if stackErr = os.MkdirAll(faultDir, 0o700); stackErr != nil {
			return
		}
		stack, stackErr = sample.Deploy(context.Background(), ep.Config, sample.Options{
			Prefix: awstest.Prefix(t), Bootstraps: bin, WorkerTimeout: workerTimeout,
			WorkerEnv:            map[string]string{lambdaapp.EnvFaultDir: faultDir},
			WebhooksAllowPrivate: true,
		})
	})
	if stackErr != nil {
		t.Fatalf("deploy the stack on the emulator: %v", stackErr)
	}
	return stack
}

// testLog collects a test's logs and prints them when it fails.
func testLog(t *testing.T) *slog.Logger {
	t.Helper()
	var mu sync.Mutex
	var buf bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("logs:\n%s", buf.String())
			mu.Unlock()
		}
	})
	return slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Package awstest gives tests an AWS emulator: one MiniStack process per test
// binary, on a free loopback port, started on first use and stopped when the
// binary ends.
//
// MiniStack (PyPI ministack, pinned in scripts/install-ministack.sh) lives in
// the project's venv .venv-ministack; `make test-deps` installs it. A test
// that needs the emulator when it is not installed fails with a message
// saying so — it is never skipped, so a machine without the emulator cannot
// pass the AWS tests by accident.
//
// Usage, in the package's tests:
//
//	func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		ep := awstest.Start(t)
//		client := dynamodb.NewFromConfig(ep.Config)
//		prefix := awstest.Prefix(t) // unique resource-name prefix
//		...
//	}
//
// Tests share the emulator and isolate themselves by resource names (tables,
// secrets) carrying a unique prefix; nothing resets the emulator's state.
//
// LambdaProxy puts code of the test process behind real Lambda Invoke calls:
// a small Python function on the emulator that hands each event to an
// http.Handler on 127.0.0.1 (contract suites use it for Lambda runtimes and
// for the workers Step Functions invokes).
//
// Subpackage codebuildlocal is a CodeBuild that runs builds on this machine
// (the emulator's runs none without Docker).
//
// Setting AWSTEST_ENDPOINT (e.g. http://127.0.0.1:4566) uses an emulator that
// is already running instead of starting one; it is then never stopped.
package awstest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stepgraph/stepgraph/internal/ministack"
)

// Region, AccessKeyID and SecretAccessKey are what the emulator is addressed
// with (it enforces no IAM; any static credentials do).
const (
	Region          = ministack.Region
	AccessKeyID     = ministack.AccessKeyID
	SecretAccessKey = ministack.SecretAccessKey
)

// VenvDir is the project's MiniStack venv, relative to the module root.
const VenvDir = ministack.VenvDir

// Endpoint is a running emulator.
type Endpoint struct {
	// URL is the emulator's base address, e.g. http://127.0.0.1:40123.
	URL string
	// Config addresses every service client at URL: region us-east-1,
	// static credentials test/test and BaseEndpoint URL.
	Config aws.Config
}

var (
	mu       sync.Mutex
	started  bool // a start was attempted (once per binary)
	current  *Endpoint
	startErr error
	proc     *ministack.Process
)

// Start returns the binary's emulator, starting it on first use. It fails t
// (never skips) when the emulator is not installed or does not come up.
func Start(t testing.TB) Endpoint {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		current, startErr = start()
	}
	if startErr != nil {
		t.Fatalf("awstest: %v", startErr)
	}
	return *current
}

// Main runs the tests and then stops the emulator, if one was started; use
// it from TestMain: os.Exit(awstest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	Stop()
	return code
}

// Stop stops the emulator started by Start (a no-op when none runs). It
// waits for the process to exit. Later calls to Start fail.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	started = true
	if startErr == nil {
		startErr = errors.New("the emulator was stopped (awstest.Stop)")
	}
	if proc != nil {
		proc.Stop()
		proc = nil
	}
}

// Prefix returns a prefix for resource names that no other test shares: a
// short sanitised form of the test's name plus a random suffix, ending in
// "-". It is valid in DynamoDB table names and Secrets Manager names.
func Prefix(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, r := range t.Name() {
		if b.Len() >= 20 {
			break
		}
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String() + "-" + randomHex(4) + "-"
}

func randomHex(n int) string {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		panic(err)
	}
	return hex.EncodeToString(buf)
}

// ConfigFor returns the aws.Config addressing an emulator at url.
func ConfigFor(url string) aws.Config { return ministack.ConfigFor(url) }

func start() (*Endpoint, error) {
	if url := strings.TrimRight(os.Getenv("AWSTEST_ENDPOINT"), "/"); url != "" {
		if err := ministack.WaitHealthy(url, nil, 10*time.Second); err != nil {
			return nil, fmt.Errorf("AWSTEST_ENDPOINT=%s: %w", url, err)
		}
		return &Endpoint{URL: url, Config: ConfigFor(url)}, nil
	}
	root, err := ministack.ModuleRoot()
	if err != nil {
		return nil, fmt.Errorf("%w: cannot find %s", err, VenvDir)
	}
	return startIn(root)
}

// startIn starts the MiniStack installed in root's venv.
func startIn(root string) (*Endpoint, error) {
	p, err := ministack.Start(root, ministack.Options{})
	if err != nil {
		return nil, err
	}
	proc = p
	return &Endpoint{URL: p.URL, Config: p.Config}, nil
}

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
// Setting AWSTEST_ENDPOINT (e.g. http://127.0.0.1:4566) uses an emulator that
// is already running instead of starting one; it is then never stopped.
package awstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Region, AccessKeyID and SecretAccessKey are what the emulator is addressed
// with (it enforces no IAM; any static credentials do).
const (
	Region          = "us-east-1"
	AccessKeyID     = "test"
	SecretAccessKey = "test"
)

// VenvDir is the project's MiniStack venv, relative to the module root.
const VenvDir = ".venv-ministack"

// startTimeout bounds the wait for the emulator's health endpoint.
const startTimeout = 90 * time.Second

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
	proc     *exec.Cmd
	procDone chan struct{}
	logPath  string
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
	stopLocked()
}

func stopLocked() {
	if proc == nil || proc.Process == nil {
		return
	}
	_ = proc.Process.Signal(syscall.SIGTERM)
	select {
	case <-procDone:
	case <-time.After(10 * time.Second):
		_ = proc.Process.Kill()
		<-procDone
	}
	proc = nil
	if logPath != "" {
		_ = os.Remove(logPath)
		logPath = ""
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
func ConfigFor(url string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, "")),
		BaseEndpoint: aws.String(url),
	}
}

func start() (*Endpoint, error) {
	if url := strings.TrimRight(os.Getenv("AWSTEST_ENDPOINT"), "/"); url != "" {
		if err := waitHealthy(url, nil, 10*time.Second); err != nil {
			return nil, fmt.Errorf("AWSTEST_ENDPOINT=%s: %w", url, err)
		}
		return &Endpoint{URL: url, Config: ConfigFor(url)}, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	return startIn(root)
}

// startIn starts the MiniStack installed in root's venv.
func startIn(root string) (*Endpoint, error) {
	bin := filepath.Join(root, VenvDir, "bin", "ministack")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("MiniStack is not installed (%s is missing): run make test-deps", bin)
	}
	// A free port can be taken between probing and binding; try a few.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		ep, err := launch(bin, port)
		if err == nil {
			return ep, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func launch(bin string, port int) (*Endpoint, error) {
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	logFile, err := os.CreateTemp("", "awstest-ministack-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	cmd.Env = append(filteredEnv(),
		"BIND_HOST=127.0.0.1",
		"GATEWAY_PORT="+strconv.Itoa(port),
		"IOT_MTLS_ENABLED=0",
		"SFTP_ENABLED=0",
		"SFN_WAIT_SCALE=0",
		"PERSIST_STATE=0",
		"MINISTACK_REGION="+Region,
		"AWS_ENDPOINT_URL="+url,
		"AWS_REGION="+Region,
		"AWS_DEFAULT_REGION="+Region,
		"AWS_ACCESS_KEY_ID="+AccessKeyID,
		"AWS_SECRET_ACCESS_KEY="+SecretAccessKey,
		"LOG_LEVEL=WARNING",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		os.Remove(logFile.Name())
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	if err := waitHealthy(url, done, startTimeout); err != nil {
		_ = cmd.Process.Kill()
		<-done
		tail := logTail(logFile.Name())
		os.Remove(logFile.Name())
		return nil, fmt.Errorf("MiniStack on %s did not become healthy: %w\n--- MiniStack log (tail) ---\n%s", url, err, tail)
	}
	proc, procDone, logPath = cmd, done, logFile.Name()
	return &Endpoint{URL: url, Config: ConfigFor(url)}, nil
}

// filteredEnv is the environment without AWS settings that could point the
// emulator (or the Lambdas it runs) elsewhere.
func filteredEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "AWS_") || name == "GATEWAY_PORT" || name == "EDGE_PORT" ||
			name == "BIND_HOST" || name == "SERVICES" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// waitHealthy polls url's health endpoint until it answers 200, the process
// ends (done closes) or the timeout passes.
func waitHealthy(url string, done <-chan struct{}, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/_ministack/health", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			cancel()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("health answered %s", resp.Status)
		} else {
			cancel()
			last = err
		}
		select {
		case <-done:
			return errors.New("the process exited")
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("no healthy answer within %v (last: %v)", timeout, last)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// moduleRoot finds the directory holding go.mod, from the working directory
// (a package's directory under go test) upwards.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: cannot find " + VenvDir)
		}
		dir = parent
	}
}

func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(bytes.TrimSpace(b))
}

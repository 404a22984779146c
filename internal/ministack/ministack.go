// Package ministack starts and stops MiniStack, the AWS emulator the project
// tests against (PyPI ministack, installed by scripts/install-ministack.sh
// into the module's .venv-ministack): one process on a free 127.0.0.1 port,
// its Lambdas in the same process group, stopped with it.
//
// internal/awstest builds its per-test-binary emulator on it; tools that are
// not tests (cmd/lambda-invoke, bench/cmd/awscost) use it directly through
// internal/lambdaapp/sample.
package ministack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
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

// Options tune a started emulator. The zero value suits tests.
type Options struct {
	// RealWaits makes Step Functions Wait states wait as long as they say
	// (SFN_WAIT_SCALE=1); by default they do not wait at all.
	RealWaits bool
}

// Process is a running emulator.
type Process struct {
	// URL is the emulator's base address, e.g. http://127.0.0.1:40123.
	URL string
	// Config addresses every service client at URL.
	Config aws.Config

	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// ConfigFor returns the aws.Config addressing an emulator at url: region
// us-east-1, static test credentials, BaseEndpoint url.
//
// Every request goes on a connection of its own (see HTTPClient) and a call
// gets up to five attempts.
func ConfigFor(url string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, "")),
		BaseEndpoint: aws.String(url),
		HTTPClient:   HTTPClient(),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 5 })
		},
	}
}

// HTTPClient is the SDK's HTTP client without keep-alive: each request on a
// new loopback connection. On a loaded machine, a pooled connection can be
// closed under a request by the Go transport's own bookkeeping (the
// response then fails with "use of closed network connection", a race
// described in aws/aws-sdk-go-v2#2737); the SDK retries, and a create
// whose first attempt had already succeeded then fails with "already
// exists". Without a pool there is nothing to race, and on loopback the
// cost of a connection per request is negligible (Linux reuses loopback
// TIME_WAIT ports).
func HTTPClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.DisableKeepAlives = true
	})
}

// Start starts the MiniStack installed in root's venv and waits until it is
// healthy. Stop ends it.
func Start(root string, opts Options) (*Process, error) {
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
		p, err := launch(bin, port, opts)
		if err == nil {
			return p, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func launch(bin string, port int, opts Options) (*Process, error) {
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	logFile, err := os.CreateTemp("", "ministack-*.log")
	if err != nil {
		return nil, err
	}
	waitScale := "0"
	if opts.RealWaits {
		waitScale = "1"
	}
	cmd := exec.Command(bin)
	cmd.Env = append(filteredEnv(),
		"BIND_HOST=127.0.0.1",
		"GATEWAY_PORT="+strconv.Itoa(port),
		"IOT_MTLS_ENABLED=0",
		"SFTP_ENABLED=0",
		"SFN_WAIT_SCALE="+waitScale,
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
	p := &Process{URL: url, Config: ConfigFor(url), cmd: cmd, done: make(chan struct{}), log: logFile.Name()}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	if err := WaitHealthy(url, p.done, startTimeout); err != nil {
		tail := logTail(p.log)
		p.Stop()
		return nil, fmt.Errorf("MiniStack on %s did not become healthy: %w\n--- MiniStack log (tail) ---\n%s", url, err, tail)
	}
	return p, nil
}

// Stop ends the emulator's process group (MiniStack and the Lambda
// processes it started), waits for it and removes its log.
func (p *Process) Stop() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	_ = os.Remove(p.log)
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

// WaitHealthy polls url's health endpoint until it answers 200, the process
// ends (done closes; nil for an emulator not started here) or the timeout
// passes.
func WaitHealthy(url string, done <-chan struct{}, timeout time.Duration) error {
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

// ModuleRoot finds the directory holding go.mod, from the working directory
// (a package's directory under go test) upwards.
func ModuleRoot() (string, error) {
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
			return "", errors.New("no go.mod above the working directory")
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

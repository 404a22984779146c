//go:build unix

package sample

import (
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
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Emulator is a MiniStack process started by StartMiniStack.
type Emulator struct {
	URL    string
	Config aws.Config
	cmd    *exec.Cmd
	done   chan struct{}
	log    string
}

// StartMiniStack starts the MiniStack of root/.venv-ministack (installed by
// scripts/install-ministack.sh) on a free 127.0.0.1 port and waits until it
// is healthy. Stop it with Stop. Its output goes to a temporary log file,
// removed by Stop.
func StartMiniStack(root string) (*Emulator, error) {
	bin := filepath.Join(root, ".venv-ministack", "bin", "ministack")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("MiniStack is not installed (%s is missing): run scripts/install-ministack.sh", bin)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	logFile, err := os.CreateTemp("", "lambda-invoke-ministack-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	var env []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(name, "AWS_") && name != "GATEWAY_PORT" && name != "BIND_HOST" {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "BIND_HOST=127.0.0.1", "GATEWAY_PORT="+strconv.Itoa(port), "IOT_MTLS_ENABLED=0",
		"SFTP_ENABLED=0", "SFN_WAIT_SCALE=1", "PERSIST_STATE=0", "MINISTACK_REGION=us-east-1",
		"AWS_ENDPOINT_URL="+url, "AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "LOG_LEVEL=WARNING")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		os.Remove(logFile.Name())
		return nil, err
	}
	e := &Emulator{URL: url, cmd: cmd, done: make(chan struct{}), log: logFile.Name(), Config: EmulatorConfig(url)}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(e.done)
	}()
	if err := e.waitHealthy(90 * time.Second); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Emulator) waitHealthy(timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/_ministack/health", nil)
		resp, err := client.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-e.done:
			b, _ := os.ReadFile(e.log)
			return fmt.Errorf("MiniStack exited:\n%s", b)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("MiniStack did not become healthy in time")
}

// Stop ends the emulator's process group (MiniStack and the Lambda
// processes it started) and waits for it.
func (e *Emulator) Stop() {
	if e.cmd.Process != nil {
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
			<-e.done
		}
	}
	os.Remove(e.log)
}

// EmulatorConfig addresses every client at the emulator at url (region
// us-east-1, static test credentials: it enforces no IAM).
func EmulatorConfig(url string) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("test", "test", "")),
		BaseEndpoint: aws.String(url),
	}
}

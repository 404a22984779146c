package pyapp

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcessOptions say how to start a runtime.
type ProcessOptions struct {
	// Python is the interpreter of the app's environment (…/bin/python).
	Python string
	// RuntimeDir is the runtime package's directory (runtimes/python): it
	// goes first on PYTHONPATH (a list: the revision's site directory follows).
	RuntimeDir string
	// Config is the app's langgraph.json.
	Config string
	// Env is the app's environment (its langgraph.json env, the
	// deployment's secrets): NAME=value. The server's own environment is
	// not passed on, only PATH, HOME, LANG and TMPDIR.
	Env []string
	// Stderr receives the runtime's standard error (the graphs' prints and
	// logs); nil discards it.
	Stderr io.Writer
	// StartTimeout bounds loading the app and becoming healthy (default 2 min:
	// importing an app's dependencies can be slow).
	StartTimeout time.Duration
}

// LoadError is an app that could not be loaded: a missing or invalid
// langgraph.json, a JavaScript graph, or an import error with its traceback.
type LoadError struct {
	Type      string
	Message   string
	Traceback string
}

func (e *LoadError) Error() string {
	if e.Traceback != "" {
		return e.Type + ": " + e.Message + "\n" + e.Traceback
	}
	return e.Type + ": " + e.Message
}

// Process is a running runtime, listening on 127.0.0.1.
type Process struct {
	*Client
	Graphs []string

	cmd      *exec.Cmd
	done     chan struct{}
	stopOnce sync.Once
	exitErr  error
}

// Start starts a runtime on opts.Config and waits until it is healthy.
func Start(ctx context.Context, opts ProcessOptions) (*Process, error) {
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(tok)
	cmd := exec.Command(opts.Python, "-m", "stepgraph_runtime.server", "--config", opts.Config, "--port", "0")
	cmd.Dir = filepath.Dir(opts.Config)
	env := append(baseEnv(), "PYTHONPATH="+opts.RuntimeDir, "STEPGRAPH_RUNTIME_TOKEN="+token, "PYTHONUNBUFFERED=1")
	cmd.Env = append(env, opts.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Stop ends the runtime's children too
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if opts.Stderr != nil {
		cmd.Stderr = opts.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the LangGraph runtime (%s): %w", opts.Python, err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	first := make(chan []byte, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := readLine(r, 1<<20)
		first <- line
		_, _ = io.Copy(io.Discard, r) // nothing more: the runtime sends the graphs' prints to stderr
	}()
	go func() {
		p.exitErr = cmd.Wait()
		close(p.done)
	}()
	var line []byte
	select {
	case line = <-first:
	case <-ctx.Done():
		p.Stop()
		return nil, fmt.Errorf("the LangGraph runtime did not start within %s", timeout)
	}
	var hello struct {
		Listening string   `json:"listening"`
		Graphs    []string `json:"graphs"`
		Err       *struct {
			Type      string `json:"error"`
			Message   string `json:"message"`
			Traceback string `json:"traceback"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &hello); err != nil || (hello.Listening == "" && hello.Err == nil) {
		p.Stop()
		return nil, fmt.Errorf("the LangGraph runtime exited before it served (%v): %s", p.exitErr, strings.TrimSpace(string(line)))
	}
	if hello.Err != nil {
		p.Stop()
		return nil, &LoadError{Type: hello.Err.Type, Message: hello.Err.Message, Traceback: hello.Err.Traceback}
	}
	if !strings.HasPrefix(hello.Listening, "http://127.0.0.1:") {
		p.Stop()
		return nil, fmt.Errorf("the LangGraph runtime listens on %q, not on 127.0.0.1", hello.Listening)
	}
	p.Client = &Client{BaseURL: hello.Listening, Token: token, HTTP: &http.Client{}}
	p.Graphs = hello.Graphs
	if err := p.Client.waitHealthy(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop ends the runtime (SIGTERM to its process group, SIGKILL after 5 s)
// and waits for it.
func (p *Process) Stop() {
	p.stopOnce.Do(func() {
		pgid := p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
	})
}

// ErrNotRunning is a call to a runtime that has exited.
var ErrNotRunning = errors.New("the LangGraph runtime is not running")

// Package testserver runs `stepgraph serve` as a child process, for tests and
// for tools such as the benchmark: one reusable harness in the spirit of
// temporalio/sdk-go's testsuite/devserver.go (StartDevServer, Stop, Kill).
//
// A server listens on 127.0.0.1 only, on a free port or a given one, with
// its own data directory, extra flags and environment. Start waits until it
// is ready: it reads the address from the server's "listening" log line (or,
// on a fixed port, polls GET /ok) and, for a new data directory, the first
// API key the server prints on stdout. It never sleeps a fixed time: every
// wait ends on an event, the process's exit or a generous deadline. Stop ends
// the server with SIGTERM (SIGKILL after a bounded grace period); Kill ends it
// with SIGKILL, for crash tests. Everything the server printed stays in
// memory (Logs, Stdout, Stderr).
//
// Usage, in a test:
//
//	s := testserver.StartT(t, testserver.Options{Binary: bin, WaitKey: true, Args: []string{"-log-json"}})
//	req, _ := http.NewRequest("GET", s.URL()+"/threads", nil)
//	req.Header.Set("X-Api-Key", s.FirstKey())
//
// StartT fails the test when the server does not start and stops it at the
// test's cleanup. Start, for tools, leaves stopping to the caller; Launch and
// Ready are its two halves, for a caller that watches the process from its
// first moment (the benchmark's memory sampler).
//
// The package also holds what the test suites that drive a built server
// share: Build, RepoRoot, CheckDeps and Tail.
package testserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// DefaultStartTimeout bounds Ready unless Options.StartTimeout says
	// otherwise: generous, for a loaded machine.
	DefaultStartTimeout = 60 * time.Second
	// DefaultStopTimeout is how long Stop waits after SIGTERM before it
	// sends SIGKILL, unless Options.StopTimeout says otherwise. The server
	// itself gives requests in flight up to 30 s.
	DefaultStopTimeout = 30 * time.Second
	// drainTimeout bounds the wait for the last output once the process
	// has ended.
	drainTimeout = 5 * time.Second
)

// KeyPattern matches an API key, as the server prints the first one.
var KeyPattern = regexp.MustCompile(`sg_[A-Za-z0-9_-]{43}`)

// ErrStopTimeout is returned (wrapped) by Stop when the server did not end
// within the grace period after SIGTERM and was killed.
var ErrStopTimeout = errors.New("server did not stop after SIGTERM")

// Options say how to start a server. The command is
//
//	Binary serve -addr 127.0.0.1:Port -data DataDir Args...
//
// unless Command is set.
type Options struct {
	// Binary is the stepgraph executable (see Build).
	Binary string
	// DataDir is the server's -data directory. StartT makes a new one in
	// the test's temporary directory when it is empty; Start and Launch
	// require it.
	DataDir string
	// Port is the loopback port to listen on. 0: a free port the server
	// picks, read from its "listening" log line (at info level, as text or
	// JSON). On a fixed port the server is ready once GET /ok (ReadyPath) answers 200.
	Port int
	// Args are further flags of serve, after -addr and -data.
	Args []string
	// Command runs another server instead of `stepgraph serve` (the
	// benchmark's peers): its argv, which must make it listen on
	// 127.0.0.1:Port. Port is then required; Binary, DataDir and Args are
	// not used.
	Command []string
	// Wrap, when set, returns the argv that runs the server's argv inside
	// another program that execs it (e.g. in a private mount namespace).
	Wrap func(argv []string) []string
	// Env is the server's environment; nil: this process's.
	Env []string
	// Dir is the server's working directory; empty: this process's.
	Dir string
	// WaitKey says the data directory is new: the server prints its first
	// API key on stdout, and Ready waits for it too (FirstKey).
	WaitKey bool
	// Group runs the server in a process group of its own: Stop and Kill
	// signal the whole group, and whatever remains of the group once the
	// server ended is killed.
	Group bool
	// Output, when set, also receives every line the server prints, stdout
	// and stderr (e.g. a log file). It is written by one goroutine at a time.
	Output io.Writer
	// StartTimeout bounds Ready; 0: DefaultStartTimeout.
	StartTimeout time.Duration
	// StopTimeout is Stop's grace period after SIGTERM; 0:
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// ReadyPath is what Ready polls on a fixed port until it answers 200;
	// empty: /ok (a peer without /ok names its own health route).
	ReadyPath string
}

// argv is the command line opts describe.
func (o Options) argv() ([]string, error) {
	var argv []string
	switch {
	case len(o.Command) > 0:
		if o.Port == 0 {
			return nil, errors.New("testserver: Options.Command needs a Port")
		}
		argv = append(argv, o.Command...)
	case o.Binary == "":
		return nil, errors.New("testserver: Options.Binary is empty")
	case o.DataDir == "":
		return nil, errors.New("testserver: Options.DataDir is empty")
	default:
		argv = append([]string{o.Binary, "serve", "-addr", "127.0.0.1:" + strconv.Itoa(o.Port), "-data", o.DataDir}, o.Args...)
	}
	if o.Wrap != nil {
		argv = o.Wrap(argv)
	}
	return argv, nil
}

// Server is a started server process.
type Server struct {
	opts Options
	cmd  *exec.Cmd

	mu                  sync.Mutex
	all, stdout, stderr strings.Builder
	addr                string
	key                 string
	ready               bool

	keySeen  chan struct{} // closed when the first key was read
	addrSeen chan string   // the "listening" address, once
	exited   chan struct{} // closed when the process ended; waitErr is set
	drained  chan struct{} // closed when both outputs reached EOF
	waitErr  error
	killed   atomic.Bool
}

// Start launches a server and waits until it is ready (see Ready). When it
// does not become ready, Start stops it and returns the reason; the caller
// stops a started server with Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	s, err := Launch(opts)
	if err != nil {
		return nil, err
	}
	if err := s.Ready(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// Launch starts the server process without waiting for it to be ready.
func Launch(opts Options) (*Server, error) {
	argv, err := opts.argv()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = opts.Env, opts.Dir
	if opts.Group {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	// Pipes of our own rather than cmd.StdoutPipe: the process's end is
	// then known when it exits, even while a child it left behind still
	// holds the pipes open.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(argv[0]), err)
	}
	s := &Server{opts: opts, cmd: cmd, keySeen: make(chan struct{}), addrSeen: make(chan string, 1),
		exited: make(chan struct{}), drained: make(chan struct{})}
	if opts.Port != 0 {
		s.addr = "127.0.0.1:" + strconv.Itoa(opts.Port)
	}
	var copies sync.WaitGroup
	copies.Add(2)
	go func() {
		defer copies.Done()
		s.read(outR, &s.stdout, s.watchStdout)
	}()
	go func() {
		defer copies.Done()
		s.read(errR, &s.stderr, s.watchStderr)
	}()
	go func() {
		copies.Wait()
		close(s.drained)
	}()
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

// read copies the lines of r into own, the combined log and Output, and
// hands each to watch.
func (s *Server) read(r io.ReadCloser, own *strings.Builder, watch func(string)) {
	defer r.Close()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			line = strings.TrimSuffix(line, "\n")
			s.mu.Lock()
			own.WriteString(line + "\n")
			s.all.WriteString(line + "\n")
			if s.opts.Output != nil {
				_, _ = io.WriteString(s.opts.Output, line+"\n")
			}
			s.mu.Unlock()
			watch(line)
		}
		if err != nil {
			return
		}
	}
}

func (s *Server) watchStdout(line string) {
	k := KeyPattern.FindString(line)
	if k == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key == "" {
		s.key = k
		close(s.keySeen)
	}
}

func (s *Server) watchStderr(line string) {
	if a := listeningAddr(line); a != "" {
		select {
		case s.addrSeen <- a:
		default:
		}
	}
}

var textListening = regexp.MustCompile(`(?:^| )msg=listening addr=([^ ]+)`)

// listeningAddr is the address of the server's "listening" log line, or "".
func listeningAddr(line string) string {
	if strings.HasPrefix(line, "{") {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
			return rec.Addr
		}
		return ""
	}
	if m := textListening.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// Ready waits until the server is ready: its first API key printed (with
// Options.WaitKey), then its address known from the "listening" log line
// (port 0) or GET ReadyPath (/ok) answering 200 (a fixed port). It fails when the
// process ends first, when Options.StartTimeout passes or when ctx ends; it
// leaves the process running.
func (s *Server) Ready(ctx context.Context) error {
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if ready {
		return nil
	}
	timeout := orDefault(s.opts.StartTimeout, DefaultStartTimeout)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	if s.opts.WaitKey {
		select {
		case <-s.keySeen:
		case <-s.exited:
			return fmt.Errorf("exited before printing its API key: %v", s.exitStatus())
		case <-deadline.C:
			return errors.New("no API key on stdout")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.opts.Port == 0 {
		select {
		case a := <-s.addrSeen:
			s.mu.Lock()
			s.addr, s.ready = a, true
			s.mu.Unlock()
			return nil
		case <-s.exited:
			return fmt.Errorf("exited before it was ready: %v", s.exitStatus())
		case <-deadline.C:
			return fmt.Errorf("not ready after %s (no \"listening\" log line at info level)", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	readyPath := s.opts.ReadyPath
	if readyPath == "" {
		readyPath = "/ok"
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		if resp, err := hc.Get(s.URL() + readyPath); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.mu.Lock()
				s.ready = true
				s.mu.Unlock()
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("exited before it was ready: %v", s.exitStatus())
		case <-deadline.C:
			return fmt.Errorf("not ready after %s", timeout)
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.C:
		}
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// exitStatus describes how the ended process exited.
func (s *Server) exitStatus() string {
	if s.waitErr == nil {
		return "exit status 0"
	}
	return s.waitErr.Error()
}

// Addr is the server's host:port on 127.0.0.1 ("" before Ready found it).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// URL is the server's base URL, e.g. http://127.0.0.1:40123.
func (s *Server) URL() string { return "http://" + s.Addr() }

// FirstKey is the first API key the server printed on stdout, or "" (a
// data directory that already had one).
func (s *Server) FirstKey() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

// DataDir is the server's data directory (Options.DataDir).
func (s *Server) DataDir() string { return s.opts.DataDir }

// PID is the server process's id (with Options.Group, its process group's
// too).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// CommandLine is the argv the server was started with.
func (s *Server) CommandLine() []string { return append([]string(nil), s.cmd.Args...) }

// Logs is everything the server printed so far, stdout and stderr lines in
// the order they were read.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all.String()
}

// Stdout is what the server printed on stdout so far.
func (s *Server) Stdout() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stdout.String()
}

// Stderr is what the server printed on stderr so far (its log).
func (s *Server) Stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// Done is closed once the server process has ended.
func (s *Server) Done() <-chan struct{} { return s.exited }

// Stop sends SIGTERM and waits for the server to end, up to
// Options.StopTimeout; then it sends SIGKILL and returns an error wrapping
// ErrStopTimeout. Otherwise it returns the process's exit error: nil for a
// clean exit (status 0). On a server that already ended it only returns
// that. With Options.Group, the whole group is signalled and what remains
// of it afterwards is killed.
func (s *Server) Stop() error {
	select {
	case <-s.exited:
		s.finish()
		return s.waitErr
	default:
	}
	_ = s.signal(syscall.SIGTERM)
	timeout := orDefault(s.opts.StopTimeout, DefaultStopTimeout)
	select {
	case <-s.exited:
	case <-time.After(timeout):
		_ = s.signal(syscall.SIGKILL)
		<-s.exited
		s.finish()
		return fmt.Errorf("%w within %s; killed", ErrStopTimeout, timeout)
	}
	s.finish()
	return s.waitErr
}

// Kill ends the server with SIGKILL at once, as a crash would, and waits
// until it has ended. It fails when the server had already ended.
func (s *Server) Kill() error {
	select {
	case <-s.exited:
		return fmt.Errorf("the server had already ended: %v", s.exitStatus())
	default:
	}
	s.killed.Store(true)
	if err := s.signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	<-s.exited
	s.finish()
	return nil
}

// Killed reports whether Kill ended the server.
func (s *Server) Killed() bool { return s.killed.Load() }

func (s *Server) signal(sig syscall.Signal) error {
	if s.opts.Group {
		return syscall.Kill(-s.cmd.Process.Pid, sig)
	}
	return s.cmd.Process.Signal(sig)
}

// finish, once the process ended, kills what remains of its group and
// waits (bounded) for the last of its output.
func (s *Server) finish() {
	if s.opts.Group {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-s.drained:
	case <-time.After(drainTimeout):
	}
}

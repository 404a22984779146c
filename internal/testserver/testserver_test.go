package testserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var binary string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		root, err := RepoRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		dir, err := os.MkdirTemp("", "testserver-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "stepgraph")
		if err := Build(context.Background(), root, binary); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

func get(t *testing.T, url, key string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-Api-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// A first start prints a key that works; Stop ends the server cleanly; a
// second start on the same directory prints none.
func TestStartKeyStop(t *testing.T) {
	s := StartT(t, Options{Binary: binary, WaitKey: true, Args: []string{"-log-json"}})
	if !KeyPattern.MatchString(s.FirstKey()) {
		t.Fatalf("first key %q; stdout:\n%s", s.FirstKey(), s.Stdout())
	}
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || s.URL() != "http://"+s.Addr() {
		t.Errorf("addr %q, url %q", s.Addr(), s.URL())
	}
	if code := get(t, s.URL()+"/v2/auth/providers", s.FirstKey()); code != 200 {
		t.Errorf("the first key: %d", code)
	}
	if !strings.Contains(s.Stderr(), `"msg":"listening"`) || strings.Contains(s.Stderr(), s.FirstKey()) ||
		!strings.Contains(s.Logs(), s.FirstKey()) {
		t.Errorf("logs:\n%s", s.Logs())
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if !strings.Contains(s.Stderr(), "shutting down") {
		t.Errorf("the log lacks its last lines:\n%s", s.Stderr())
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}

	again := StartT(t, Options{Binary: binary, DataDir: s.DataDir()}) // text log
	if again.FirstKey() != "" || strings.Contains(again.Stdout(), "sg_") {
		t.Errorf("second start printed a key:\n%s", again.Stdout())
	}
	if code := get(t, again.URL()+"/v2/auth/providers", s.FirstKey()); code != 200 {
		t.Errorf("the first key after a restart: %d", code)
	}
}

// Kill ends the server at once, like a crash. (This one listens on a fixed
// port and logs nothing: it is ready once GET /ok answers.)
func TestKill(t *testing.T) {
	port := freePort(t)
	s := StartT(t, Options{Binary: binary, Port: port, Args: []string{"-log-level", "warn"}})
	if s.Addr() != "127.0.0.1:"+strconv.Itoa(port) {
		t.Errorf("addr %q, want port %d", s.Addr(), port)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Kill")
	}
	if !s.Killed() {
		t.Error("Killed is false")
	}
	if err := s.Stop(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("stop after kill: %v, want the kill", err)
	}
	if err := s.Kill(); err == nil {
		t.Error("a second kill succeeded")
	}
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Error("the killed server still accepts connections")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Another server (Command) on a fixed port, with its own environment and
// working directory, wrapped, in a process group: Output gets its lines,
// and Stop ends what it left behind in its group.
func TestCommandGroupWrap(t *testing.T) {
	port := freePort(t)
	dir := t.TempDir()
	var out lockedBuffer
	wrapped := false
	s := StartT(t, Options{Port: port, Dir: dir, Group: true, Output: &out,
		Command: []string{binary, "serve", "-addr", "127.0.0.1:" + strconv.Itoa(port), "-data", filepath.Join(dir, "data")},
		Env:     append(os.Environ(), "STEPGRAPH_LOG_LEVEL=warn"),
		Wrap: func(argv []string) []string {
			wrapped = true
			// A child left in the group, holding the output open.
			return append([]string{"sh", "-c", `sleep 300 & echo "child $! $PWD"; exec "$@"`, "sh"}, argv...)
		}})
	if !wrapped || s.CommandLine()[0] != "sh" {
		t.Errorf("not wrapped: %q", s.CommandLine())
	}
	if s.URL() != "http://127.0.0.1:"+strconv.Itoa(port) {
		t.Errorf("url %q, want port %d", s.URL(), port)
	}
	if code := get(t, s.URL()+"/ok", ""); code != 200 {
		t.Errorf("/ok: %d", code)
	}
	var child int
	var wd string
	if _, err := fmt.Sscanf(s.Stdout(), "child %d %s", &child, &wd); err != nil || wd != dir {
		t.Fatalf("stdout %q (%v), want the child's pid and %s", s.Stdout(), err, dir)
	}
	begin := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if took := time.Since(begin); took > drainTimeout {
		t.Errorf("stop took %s", took)
	}
	if err := syscall.Kill(child, 0); err == nil {
		// Gone, or a zombie waiting to be reaped by whoever adopted it.
		if stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child)); !strings.Contains(string(stat), ") Z") {
			t.Errorf("the group's child %d outlived Stop: %s", child, stat)
		}
	}
	if !strings.Contains(out.String(), "child ") || strings.Contains(s.Stderr(), "listening") {
		t.Errorf("Output got %q; stderr %q (want nothing below warn)", out.String(), s.Stderr())
	}
}

// A server that cannot start, or does not get ready in time, is reported
// and not left running.
func TestStartFails(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(context.Background(), Options{Binary: binary, DataDir: dir, Args: []string{"-no-such-flag"}})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Errorf("bad flag: %v", err)
	}
	_, err = Start(context.Background(), Options{Binary: binary, DataDir: dir, Args: []string{"-log-level", "warn"},
		StartTimeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "not ready after 2s") {
		t.Errorf("no listening line: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Start(ctx, Options{Binary: binary, DataDir: dir, WaitKey: true}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	if _, err := Start(context.Background(), Options{Command: []string{"true"}}); err == nil {
		t.Error("a Command without a Port started")
	}
}

func TestListeningAddr(t *testing.T) {
	for line, want := range map[string]string{
		`{"time":"t","level":"INFO","msg":"listening","addr":"127.0.0.1:4000","data_dir":"d"}`: "127.0.0.1:4000",
		`time=t level=INFO msg=listening addr=127.0.0.1:4001 data_dir="/a b" version=dev`:      "127.0.0.1:4001",
		`{"msg":"request","addr":"127.0.0.1:4002"}`:                                            "",
		`time=t level=INFO msg="not listening" addr=127.0.0.1:4003`:                            "",
	} {
		if got := listeningAddr(line); got != want {
			t.Errorf("listeningAddr(%s) = %q, want %q", line, got, want)
		}
	}
}

// lockedBuffer is an io.Writer safe to read while it is written.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Ready polls ReadyPath when it is set: a server that never answers 200
// there is not ready (here a path stepgraph does not serve), one that does
// is.
func TestReadyPath(t *testing.T) {
	for _, tc := range []struct {
		path    string
		ready   bool
		timeout time.Duration // the not-ready case waits it out; the ready one only has it as a safety net
	}{{"/ok", true, 2 * time.Minute}, {"/no-such-health-route", false, 3 * time.Second}} {
		t.Run(tc.path, func(t *testing.T) {
			port := freePort(t)
			dir := t.TempDir()
			s, err := Launch(Options{Port: port, Dir: dir, Group: true, ReadyPath: tc.path, StartTimeout: tc.timeout,
				Command: []string{binary, "serve", "-addr", "127.0.0.1:" + strconv.Itoa(port), "-data", filepath.Join(dir, "data")},
				Env:     append(os.Environ(), "STEPGRAPH_LOG_LEVEL=warn")})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			err = s.Ready(context.Background())
			if tc.ready && err != nil {
				t.Fatalf("not ready on %s: %v", tc.path, err)
			}
			if !tc.ready && (err == nil || !strings.Contains(err.Error(), "not ready after")) {
				t.Fatalf("ready on %s: %v, want not ready", tc.path, err)
			}
		})
	}
}

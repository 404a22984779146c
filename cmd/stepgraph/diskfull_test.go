//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stepgraph/stepgraph/internal/testserver"
)

// The tests here make the disk fail for real, also as root (for whom a
// chmod changes nothing):
//   - RLIMIT_FSIZE, lowered on the running server with prlimit(2): every
//     write that would take a file past the limit fails with EFBIG. Any
//     Linux, no privilege; the server keeps running, and raising the limit
//     again is the space coming back.
//   - a small tmpfs in a private mount namespace (unshare -m), where
//     mounting is permitted: a real ENOSPC, and EROFS after a read-only
//     remount. The mount lives and dies with the server process, so nothing
//     outlives the test; the test reaches it through /proc/PID/root.

// A start on an unusable data directory stops at once with one line naming
// the path and the system's reason: no panic, no stack, no key printed.
func TestUnwritableDataDirAtStart(t *testing.T) {
	type tc struct {
		name      string
		setup     func(t *testing.T, tmp string) (dataDir string)
		wrap      func(t *testing.T, tmp string, argv []string) []string // nil: run argv as is
		path      func(dataDir string) string                            // the path the message names
		cause     string
		serveOnly bool // keys create does not open the secrets file
	}
	dataIn := func(tmp string) string { return filepath.Join(tmp, "data") }
	same := func(d string) string { return d }
	cases := []tc{
		{name: "a file in place of the directory", cause: "not a directory", path: same,
			setup: func(t *testing.T, tmp string) string {
				writeTestFile(t, dataIn(tmp), "")
				return dataIn(tmp)
			}},
		{name: "a file in place of a parent", cause: "not a directory", path: filepath.Dir,
			setup: func(t *testing.T, tmp string) string {
				writeTestFile(t, dataIn(tmp), "")
				return filepath.Join(dataIn(tmp), "sub")
			}},
		{name: "a directory in place of the database", cause: "is a directory",
			path: func(d string) string { return filepath.Join(d, dbFile) },
			setup: func(t *testing.T, tmp string) string {
				mkdirTest(t, filepath.Join(dataIn(tmp), dbFile))
				return dataIn(tmp)
			}},
		{name: "a directory in place of the secrets key", cause: "is a directory", serveOnly: true,
			path: func(d string) string { return filepath.Join(d, "secrets.key") },
			setup: func(t *testing.T, tmp string) string {
				mkdirTest(t, filepath.Join(dataIn(tmp), "secrets.key"))
				return dataIn(tmp)
			}},
		{name: "no file may grow (RLIMIT_FSIZE 0)", cause: "file too large", path: same,
			setup: func(t *testing.T, tmp string) string { return dataIn(tmp) },
			wrap: func(t *testing.T, tmp string, argv []string) []string {
				return append([]string{"sh", "-c", `ulimit -f 0 && exec "$0" "$@"`}, argv...)
			}},
		{name: "a full disk (tmpfs)", cause: "no space left on device", path: same,
			setup: func(t *testing.T, tmp string) string { return dataIn(tmp) },
			wrap: func(t *testing.T, tmp string, argv []string) []string {
				return inTmpfs(t, tmp, 1<<20, `cat /dev/zero > "$0/fill" 2>/dev/null; true`, argv...)
			}},
		{name: "a read-only file system (tmpfs)", cause: "read-only file system", path: same,
			setup: func(t *testing.T, tmp string) string { return dataIn(tmp) },
			wrap: func(t *testing.T, tmp string, argv []string) []string {
				setup := fmt.Sprintf(`%q keys create --org a --data "$0/data" >/dev/null && mount -o remount,ro "$0"`, binary)
				return inTmpfs(t, tmp, 1<<20, setup, argv...)
			}},
	}
	if os.Geteuid() != 0 { // root writes regardless of the mode
		cases = append(cases, tc{name: "a directory without write permission", cause: "permission denied", path: same,
			setup: func(t *testing.T, tmp string) string {
				mkdirTest(t, dataIn(tmp))
				if err := os.Chmod(dataIn(tmp), 0o500); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Chmod(dataIn(tmp), 0o700) })
				return dataIn(tmp)
			}})
	}
	for _, c := range cases {
		for _, command := range [][]string{{"serve", "-addr", "127.0.0.1:0"}, {"keys", "create", "--org", "acme"}} {
			if c.serveOnly && command[0] != "serve" {
				continue
			}
			t.Run(c.name+"/"+command[0], func(t *testing.T) {
				tmp := t.TempDir()
				dataDir := c.setup(t, tmp)
				argv := append([]string{binary}, append(command, "-data", dataDir)...)
				if c.wrap != nil {
					argv = c.wrap(t, tmp, argv)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 1 {
					t.Fatalf("exit: %v, want status 1\nstdout: %s\nstderr: %s", err, &stdout, &stderr)
				}
				msg := stderr.String()
				if stdout.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "stepgraph: ") {
					t.Fatalf("want one line on stderr and nothing on stdout; stdout: %q, stderr: %q", &stdout, msg)
				}
				if want := c.path(dataDir); !strings.Contains(msg, want) || !strings.Contains(msg, c.cause) {
					t.Errorf("message %q, want it to name %s and %q", msg, want, c.cause)
				}
				t.Logf("%s", msg)
			})
		}
	}
}

// The disk fills while the server runs (RLIMIT_FSIZE): writes answer 503
// with the cause and leave nothing behind, reads go on, a run in flight
// waits, and once space returns the same server takes the same writes.
func TestDiskFullWhileServing(t *testing.T) {
	const steps = 900 // long enough to be in flight when the disk fills; history pages hold 1000
	dir := t.TempDir()
	s := startNew(t, dir, "-run-lease", "1s")
	key := s.FirstKey()
	pid := s.PID()
	c := &client{t: t, s: s, key: key}

	c.want(200, "POST", "/v2/auth/providers", providerBody("acked", "secret-acked"))
	c.want(201, "POST", "/v2/deployments", deploymentBody("acked-dep"))
	c.want(200, "POST", "/threads/"+threadID(1)+"/runs/wait", counterBody(3))
	long := c.runID(c.want(200, "POST", "/threads/"+threadID(2)+"/runs", counterBody(steps)))
	c.waitFor("/threads/"+threadID(2)+"/state", `"count":`)

	setFileSizeLimit(t, pid, 0) // the disk is full: no file can grow
	if out := c.want(200, "GET", "/threads/"+threadID(2)+"/runs/"+long, ""); strings.Contains(out, `"status":"success"`) {
		t.Fatalf("the run finished before the disk filled; the test proves nothing (raise steps)")
	}
	_, state := c.s.call("GET", "/threads/"+threadID(2)+"/state", key, "")
	t.Logf("disk full with the run at %.60s", state)
	// The secrets file is written first, and fails first.
	c.unavailable("file too large", "POST", "/v2/auth/providers", providerBody("during", "secret-during"))
	c.unavailable("file too large", "POST", "/v2/deployments", deploymentBody("during-dep"))
	c.unavailable("disk I/O error", "POST", "/v2/auth/providers", providerBody("no-secret", ""))
	c.unavailable("disk I/O error", "POST", "/threads/"+threadID(3)+"/runs/wait", counterBody(3))
	c.unavailable("disk I/O error", "POST", "/runs/wait", `{"assistant_id":"counter","input":{"steps":3}}`)
	// Reads go on, and show nothing of the failed writes.
	c.want(200, "GET", "/v2/auth/providers/acked", "")
	c.want(404, "GET", "/v2/auth/providers/during", "")
	c.want(404, "GET", "/threads/"+threadID(3), "")
	if out := c.want(200, "GET", "/v2/auth/providers", ""); strings.Count(out, `"provider_id"`) != 1 {
		t.Errorf("providers on a full disk: %s", out)
	}
	s.waitLog(t, "run failed in the store") // the run in flight met the full disk
	// A client waits on the run through the fault.
	joined := c.wait("/threads/" + threadID(2) + "/runs/" + long + "/join")

	// The small secrets file still fits, the database does not (a WAL frame
	// is more than 4 KiB): the secret is written, the record fails, and the
	// secret is taken back.
	fi, err := os.Stat(filepath.Join(dir, "secrets.json"))
	if err != nil {
		t.Fatal(err)
	}
	setFileSizeLimit(t, pid, uint64(fi.Size())+1024)
	c.unavailable("disk I/O error", "POST", "/v2/auth/providers", providerBody("half", "secret-half"))
	if refs := secretRefs(t, dir); refs["half"] != 0 {
		t.Errorf("the secret of the provider that failed is still stored (%d refs)", refs["half"])
	}
	assertNoTempFiles(t, dir)

	setFileSizeLimit(t, pid, ^uint64(0)) // space returns
	// The same writes now succeed: no conflict, so nothing of the failed
	// attempts was left.
	for _, p := range []struct{ id, secret string }{{"during", "secret-during"}, {"no-secret", ""}, {"half", "secret-half"}} {
		c.want(200, "POST", "/v2/auth/providers", providerBody(p.id, p.secret))
	}
	c.want(201, "POST", "/v2/deployments", deploymentBody("during-dep"))
	if out := c.want(200, "POST", "/threads/"+threadID(3)+"/runs/wait", counterBody(3)); !strings.Contains(out, `"count":3`) {
		t.Errorf("run after recovery: %s", out)
	}
	// The run in flight resumes from its last checkpoint and ends once; the
	// client that waited through the fault gets its output.
	select {
	case out := <-joined:
		if !strings.Contains(out, fmt.Sprintf(`"count":%d`, steps)) {
			t.Errorf("join of the run in flight when the disk filled: %s", out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the run in flight when the disk filled never ended:\n%s", s.Logs())
	}
	assertOneCheckpointPerStep(t, c, threadID(2), steps)

	// Exactly one stored secret per provider that has one: no orphans.
	want := map[string]int{"acked": 1, "during": 1, "half": 1}
	if refs := secretRefs(t, dir); fmt.Sprint(refs) != fmt.Sprint(want) {
		t.Errorf("stored provider secrets %v, want %v", refs, want)
	}
	assertNoTempFiles(t, dir)
	if err := s.Stop(); err != nil {
		t.Errorf("server did not stop cleanly (%v):\n%s", err, s.Logs())
	}
	assertCleanLogs(t, s)
	if out, err := exec.Command(binary, "db", "check", "-data", dir).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("db check after recovery: %v %s", err, out)
	}
}

// The same on a real full disk: the server's data directory is on a small
// tmpfs, filled up with a file and freed by removing it.
func TestDiskFullOnTmpfs(t *testing.T) {
	mnt := t.TempDir()
	s := start(t, testserver.Options{DataDir: filepath.Join(mnt, "data"), WaitKey: true, Args: []string{"-log-json"},
		Wrap: func(argv []string) []string { return inTmpfs(t, mnt, 8<<20, "true", argv...) }})
	c := &client{t: t, s: s, key: s.FirstKey()}
	// The tmpfs exists in the server's mount namespace only.
	root := fmt.Sprintf("/proc/%d/root%s", s.PID(), mnt)
	dataDir := filepath.Join(root, "data")
	if _, err := os.Stat(filepath.Join(dataDir, dbFile)); err != nil {
		t.Fatalf("the server's data directory is not visible: %v", err)
	}

	c.want(200, "POST", "/v2/auth/providers", providerBody("acked", "secret-acked"))
	c.want(200, "POST", "/threads/"+threadID(1)+"/runs/wait", counterBody(3))

	filler := filepath.Join(root, "filler")
	fillDisk(t, filler)
	c.unavailable("no space left on device", "POST", "/v2/auth/providers", providerBody("during", "secret-during"))
	c.unavailable("database or disk is full", "POST", "/v2/auth/providers", providerBody("no-secret", ""))
	c.unavailable("database or disk is full", "POST", "/threads/"+threadID(2)+"/runs/wait", counterBody(3))
	c.want(200, "GET", "/v2/auth/providers/acked", "")
	c.want(404, "GET", "/v2/auth/providers/during", "")
	assertNoTempFiles(t, dataDir)

	if err := os.Remove(filler); err != nil { // space returns
		t.Fatal(err)
	}
	c.want(200, "POST", "/v2/auth/providers", providerBody("during", "secret-during"))
	c.want(200, "POST", "/v2/auth/providers", providerBody("no-secret", ""))
	if out := c.want(200, "POST", "/threads/"+threadID(2)+"/runs/wait", counterBody(3)); !strings.Contains(out, `"count":3`) {
		t.Errorf("run after recovery: %s", out)
	}
	want := map[string]int{"acked": 1, "during": 1}
	if refs := secretRefs(t, dataDir); fmt.Sprint(refs) != fmt.Sprint(want) {
		t.Errorf("stored provider secrets %v, want %v", refs, want)
	}
	// Checked while the server, and so its tmpfs, still runs, from inside its
	// mount namespace: SQLite resolves the /proc/PID/root link to "/".
	nsenter := []string{"nsenter", "-t", fmt.Sprint(s.PID()), "-m"}
	if os.Geteuid() != 0 {
		nsenter = append(nsenter, "-U", "--preserve-credentials")
	}
	check := append(nsenter, binary, "db", "check", "-data", filepath.Join(mnt, "data"))
	if out, err := exec.Command(check[0], check[1:]...).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("db check after recovery: %v %s", err, out)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("server did not stop cleanly (%v):\n%s", err, s.Logs())
	}
	assertCleanLogs(t, s)
}

// fillDisk writes path until the file system is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			return
		}
	}
}

// client calls a server with one key and checks answers.
type client struct {
	t   *testing.T
	s   *server
	key string
}

// want calls and fails the test unless the status is status.
func (c *client) want(status int, method, path, body string) string {
	c.t.Helper()
	code, out := c.s.call(method, path, c.key, body)
	if code != status {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, code, out, status)
	}
	return out
}

// unavailable checks the answer of a write on a failing disk: 503,
// Retry-After, and the cause in the detail.
func (c *client) unavailable(cause, method, path, body string) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.s.URL()+path, strings.NewReader(body))
	req.Header.Set("X-Api-Key", c.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	var got struct{ Detail string }
	_ = json.Unmarshal(out, &got)
	if res.StatusCode != 503 || res.Header.Get("Retry-After") != "10" || got.Detail != "storage unavailable: "+cause {
		c.t.Errorf("%s %s on a failing disk: %d Retry-After=%q %s; want 503, Retry-After 10, storage unavailable: %s",
			method, path, res.StatusCode, res.Header.Get("Retry-After"), out, cause)
	}
}

// wait starts a request that answers 200 at once and its body later (a
// join): it returns once the server answered the status, and the channel
// gets the body.
func (c *client) wait(path string) <-chan string {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.s.URL()+path, nil)
	req.Header.Set("X-Api-Key", c.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if res.StatusCode != 200 {
		c.t.Fatalf("GET %s: %d", path, res.StatusCode)
	}
	body := make(chan string, 1)
	go func() {
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		body <- string(out)
	}()
	return body
}

func (c *client) runID(out string) string {
	var r struct {
		RunID string `json:"run_id"`
	}
	if json.Unmarshal([]byte(out), &r) != nil || r.RunID == "" {
		c.t.Fatalf("no run_id in %s", out)
	}
	return r.RunID
}

// waitFor polls path until its answer contains want.
func (c *client) waitFor(path, want string) {
	c.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, out := c.s.call("GET", path, c.key, ""); strings.Contains(out, want) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s never showed %s", path, want)
		}
	}
}

// waitLog waits until the server logged msg.
func (s *server) waitLog(t *testing.T, msg string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(s.Stderr(), msg); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server never logged %q:\n%s", msg, s.Logs())
		}
	}
}

func assertOneCheckpointPerStep(t *testing.T, c *client, thread string, steps int) {
	t.Helper()
	var hist []struct {
		Metadata struct{ Step int } `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(c.want(200, "POST", "/threads/"+thread+"/history", `{"limit":1000}`)), &hist); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, h := range hist {
		if seen[h.Metadata.Step] {
			t.Errorf("two checkpoints for step %d", h.Metadata.Step)
		}
		seen[h.Metadata.Step] = true
	}
	if len(hist) != steps+2 { // input, one per increment, and the start step
		t.Errorf("%d checkpoints, want %d", len(hist), steps+2)
	}
}

// assertCleanLogs fails on a panic or a stack trace in the server's output.
func assertCleanLogs(t *testing.T, s *server) {
	t.Helper()
	if logs := s.Logs(); strings.Contains(logs, "panic") || strings.Contains(logs, "goroutine ") {
		t.Errorf("the server panicked:\n%s", logs)
	}
}

// secretRefs counts the stored secrets of each provider, by the provider id
// in their reference (providers/<org>/<provider_id>/<random>); the values are
// never read.
func secretRefs(t *testing.T, dataDir string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dataDir, "secrets.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		t.Fatalf("secrets.json: %v", err)
	}
	refs := map[string]int{}
	for ref := range entries {
		if parts := strings.Split(ref, "/"); len(parts) == 4 && parts[0] == "providers" {
			refs[parts[2]]++
		}
	}
	return refs
}

// assertNoTempFiles fails when a failed write left a temporary file.
func assertNoTempFiles(t *testing.T, dataDir string) {
	t.Helper()
	files, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.Contains(f.Name(), ".tmp") || strings.HasPrefix(f.Name(), ".write-check") {
			t.Errorf("a failed write left %s", f.Name())
		}
	}
}

// setFileSizeLimit sets the soft RLIMIT_FSIZE of process pid with
// prlimit(2), keeping its hard limit: lowering and raising back up to it
// needs no privilege. Go ignores SIGXFSZ, so the server's writes past the
// limit fail with EFBIG instead of killing it.
func setFileSizeLimit(t *testing.T, pid int, limit uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, 0, uintptr(unsafe.Pointer(&rl)), 0, 0); e != 0 {
		t.Fatalf("prlimit: %v", e)
	}
	rl.Cur = min(limit, rl.Max)
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, uintptr(unsafe.Pointer(&rl)), 0, 0, 0); e != 0 {
		t.Fatalf("prlimit: %v", e)
	}
}

var (
	mountNSOnce sync.Once
	mountNSErr  error
)

// inTmpfs returns argv run in a private mount namespace where dir is a
// tmpfs of size bytes, after the shell commands setup ran there ($0 is
// dir). The mount lives only as long as the process. It skips the test
// where mount namespaces are not permitted (unprivileged CI without user
// namespaces).
func inTmpfs(t *testing.T, dir string, size int, setup string, argv ...string) []string {
	t.Helper()
	unshare := []string{"unshare", "-m", "--propagation", "private"}
	if os.Geteuid() != 0 {
		unshare = append(unshare, "-r") // root in a user namespace may mount
	}
	mountNSOnce.Do(func() {
		probe := append(unshare[1:], "sh", "-c", `mount -t tmpfs -o size=64k tmpfs "$0"`, t.TempDir())
		if out, err := exec.Command(unshare[0], probe...).CombinedOutput(); err != nil {
			mountNSErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if mountNSErr != nil {
		t.Skipf("no tmpfs in a mount namespace here: %v", mountNSErr)
	}
	script := fmt.Sprintf(`mount -t tmpfs -o size=%d tmpfs "$0" && { %s; } && exec "$@"`, size, setup)
	return append(append(unshare, "sh", "-c", script, dir), argv...)
}

// providerBody registers provider id with secret, or, when secret is "", a
// public client (token_endpoint_auth_method none), which has none.
func providerBody(id, secret string) string {
	s := `"token_endpoint_auth_method":"none",`
	if secret != "" {
		s = fmt.Sprintf(`"client_secret":%q,`, secret)
	}
	return fmt.Sprintf(`{"provider_id":%q,"name":"P",%s"client_id":"c","auth_url":"https://a.test/a","token_url":"https://a.test/t"}`, id, s)
}

func deploymentBody(name string) string {
	return fmt.Sprintf(`{"name":%q,"source":"external_docker","source_config":{},
		"source_revision_config":{"image_uri":"ghcr.io/acme/agent:1.0"},
		"secrets":[{"name":"TOKEN","value":"not-a-real-token"}]}`, name)
}

func counterBody(steps int) string {
	return fmt.Sprintf(`{"assistant_id":"counter","input":{"steps":%d},"config":{"recursion_limit":%d},"durability":"sync","if_not_exists":"create"}`, steps, steps+10)
}

func threadID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mkdirTest(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
}

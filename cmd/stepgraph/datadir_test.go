package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/testserver"
)

// withUmask runs a server's argv under umask mask.
func withUmask(mask string) func([]string) []string {
	return func(argv []string) []string {
		return append([]string{"sh", "-c", "umask " + mask + ` && exec "$0" "$@"`}, argv...)
	}
}

// checkModes fails the test for every file of want whose mode differs.
func checkModes(t *testing.T, dir string, want map[string]os.FileMode) {
	t.Helper()
	for name, mode := range want {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := fi.Mode().Perm(); got != mode {
			t.Errorf("%s has mode %04o, want %04o", name, got, mode)
		}
	}
}

// The database and its -wal and -shm files are private to the server's
// user whatever the umask, also when an older version left them readable
// (security review F14). They are checked while the server runs: SQLite
// removes -wal and -shm when it closes.
func TestDatabaseFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	private := map[string]os.FileMode{
		".": 0o700, dbFile: 0o600, dbFile + "-wal": 0o600, dbFile + "-shm": 0o600,
		"secrets.key": 0o600,
	}
	s := start(t, testserver.Options{DataDir: dir, WaitKey: true, Args: []string{"-log-json"}, Wrap: withUmask("000")})
	key := s.FirstKey()
	if code, out := s.call("POST", "/threads", key, `{}`); code != 200 {
		t.Fatalf("create thread: %d %s", code, out)
	}
	checkModes(t, dir, private)

	// Files left world-readable (as versions before this one made them) are
	// made private on the next start.
	for _, name := range []string{dbFile, dbFile + "-wal", dbFile + "-shm"} {
		if err := os.Chmod(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.Kill() // leaves -wal and -shm behind, as a crash does
	<-s.Done()
	again := start(t, testserver.Options{DataDir: dir, Args: []string{"-log-json"}, Wrap: withUmask("000")})
	if code, out := again.call("POST", "/threads", key, `{}`); code != 200 {
		t.Fatalf("create thread after restart: %d %s", code, out)
	}
	checkModes(t, dir, private)
}

// A data directory of the user's own that others may enter is narrowed to
// 0700, with a warning; one shared by design (sticky, or another user's) is
// refused with one line naming it, and nothing is created in it.
func TestDataDirOpenToOthers(t *testing.T) {
	type tc struct {
		name    string
		mode    os.FileMode // set with chmod; os.ModeSticky for the sticky bit
		owner   int         // chown to this uid first (as root only); -1: keep
		refused string      // "" when the directory is narrowed
	}
	cases := []tc{
		{"mkdir under umask 022", 0o755, -1, ""},
		{"group-readable", 0o750, -1, ""},
		{"searchable by others", 0o701, -1, ""},
		{"world-writable", 0o777, -1, ""},
		{"sticky like /tmp", 0o777 | os.ModeSticky, -1, "shared with other users (mode 0777, sticky)"},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, tc{"another user's", 0o755, 65534, "shared with other users (mode 0755)"})
	}
	for _, c := range cases {
		for _, command := range [][]string{{"serve", "-addr", "127.0.0.1:0", "-log-json"}, {"keys", "create", "--org", "acme"}} {
			t.Run(c.name+"/"+command[0], func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "data")
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if c.owner >= 0 {
					if err := os.Chown(dir, c.owner, c.owner); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Chmod(dir, c.mode); err != nil {
					t.Fatal(err)
				}
				if c.refused == "" && command[0] == "serve" {
					s := startNew(t, dir)
					checkModes(t, dir, map[string]os.FileMode{".": 0o700})
					if !strings.Contains(s.Stderr(), "was open to other users") {
						t.Errorf("no warning in the log:\n%s", s.Stderr())
					}
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), patience)
				defer cancel()
				cmd := exec.CommandContext(ctx, binary, append(command, "-data", dir)...)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				msg := stderr.String()
				if c.refused == "" { // keys create on a narrowed directory
					if err != nil || !testserver.KeyPattern.MatchString(stdout.String()) || !strings.Contains(msg, "was open to other users") {
						t.Fatalf("keys create: %v\nstdout: %s\nstderr: %s", err, &stdout, msg)
					}
					checkModes(t, dir, map[string]os.FileMode{".": 0o700})
					return
				}
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 1 {
					t.Fatalf("exit: %v, want status 1\nstdout: %s\nstderr: %s", err, &stdout, msg)
				}
				if stdout.Len() != 0 || strings.Count(msg, "\n") != 1 {
					t.Fatalf("want one line on stderr and nothing on stdout; stdout: %q, stderr: %q", &stdout, msg)
				}
				for _, want := range []string{dir, c.refused, "a directory of its own"} {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q does not contain %q", msg, want)
					}
				}
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Errorf("the refused directory got files: %v", entries)
				}
				if fi, err := os.Stat(dir); err != nil || fi.Mode() != c.mode|os.ModeDir {
					t.Errorf("the refused directory was changed: %v %v", fi.Mode(), err)
				}
			})
		}
	}
}

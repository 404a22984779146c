package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pgBinDir holds Debian's postgresql-15 server binaries (initdb, postgres,
// pg_isready), installed by scripts/install-bench-deps.sh; PG_BIN overrides.
const pgBinDir = "/usr/lib/postgresql/15/bin"

// pgServer is a PostgreSQL server of loadgen's own for one peer start
// (Aegra): a fresh data directory in a temporary folder, listening on
// 127.0.0.1 only (no Unix socket), password authentication with a random
// password, stopped (and its folder removed) by stop. Its processes are
// counted with the peer's: their CPU time and resident sets are the
// peer's cost as much as the peer's own.
type pgServer struct {
	dir      string // temporary folder: data/, the password file, the log
	port     int
	password string
	cmd      *exec.Cmd
	exited   chan struct{}
	version  string
}

func pgBin(name string) string {
	dir := os.Getenv("PG_BIN")
	if dir == "" {
		dir = pgBinDir
	}
	return filepath.Join(dir, name)
}

// pgCredential is who runs PostgreSQL: the postgres server refuses to run
// as root, so a root loadgen runs it as the system user "postgres" (made by
// Debian's package); anyone else runs it as themselves.
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL will not: no user postgres to run it as (%w)", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user postgres: uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// startPostgres makes a data directory with initdb and starts postgres on
// 127.0.0.1 on a free port, logging to logPath, and waits until it accepts
// connections. On error nothing is left running or on disk.
func startPostgres(ctx context.Context, logPath string, readyTimeout time.Duration) (_ *pgServer, err error) {
	for _, b := range []string{"initdb", "postgres", "pg_isready"} {
		if _, err := os.Stat(pgBin(b)); err != nil {
			return nil, fmt.Errorf("%s missing: run scripts/install-bench-deps.sh (Debian's postgresql-15)", pgBin(b))
		}
	}
	cred, err := pgCredential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "stepgraph-bench-pg-")
	if err != nil {
		return nil, err
	}
	pg := &pgServer{dir: dir, exited: make(chan struct{})}
	defer func() {
		if err != nil {
			pg.stop()
		}
	}()
	var pw [16]byte
	if _, err := rand.Read(pw[:]); err != nil {
		return nil, err
	}
	pg.password = hex.EncodeToString(pw[:])
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(pg.password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if cred != nil {
		for _, p := range []string{dir, pwFile} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	run := func(argv ...string) *exec.Cmd {
		c := exec.CommandContext(ctx, argv[0], argv[1:]...)
		c.Dir = dir
		c.Stdout, c.Stderr = logf, logf
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
		// No PG* variables of the caller's leak in.
		c.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C.UTF-8", "TZ=UTC"}
		return c
	}
	if out, err := exec.Command(pgBin("postgres"), "--version").Output(); err == nil {
		pg.version = strings.TrimSpace(string(out))
	}
	// --no-sync: the folder is thrown away after the run; the server itself
	// runs with fsync on, PostgreSQL's default, as a self-hosted one would.
	if err := run(pgBin("initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres",
		"--auth=scram-sha-256", "--pwfile="+pwFile, "-E", "UTF8", "--no-instructions", "--no-sync").Run(); err != nil {
		return nil, fmt.Errorf("initdb: %w (log: %s)", err, logPath)
	}
	if pg.port, err = freePort(); err != nil {
		return nil, err
	}
	pg.cmd = run(pgBin("postgres"), "-D", filepath.Join(dir, "data"),
		"-c", "listen_addresses=127.0.0.1", "-p", strconv.Itoa(pg.port),
		"-c", "unix_socket_directories=")
	// The server outlives ctx's cancellation only as long as stop takes:
	// stop ends it with SIGINT (fast shutdown), not exec's SIGKILL.
	pg.cmd.Cancel = func() error { return pg.cmd.Process.Signal(syscall.SIGINT) }
	if err := pg.cmd.Start(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	go func() { _ = pg.cmd.Wait(); close(pg.exited) }()
	deadline := time.Now().Add(readyTimeout)
	for {
		c := run(pgBin("pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.port), "-U", "postgres", "-t", "2")
		c.Stdout, c.Stderr = nil, nil
		if c.Run() == nil {
			return pg, nil
		}
		select {
		case <-pg.exited:
			return nil, fmt.Errorf("postgres exited before it accepted connections (log: %s)", logPath)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("postgres not ready after %v (log: %s)", readyTimeout, logPath)
		}
	}
}

// url is the connection URL of the server's postgres database for the
// peer (it holds the password: it goes to the peer's environment only,
// never to the report).
func (pg *pgServer) url() string {
	u := url.URL{Scheme: "postgresql", User: url.UserPassword("postgres", pg.password),
		Host: "127.0.0.1:" + strconv.Itoa(pg.port), Path: "/postgres"}
	return u.String()
}

// pid is the postmaster's process id (the root of the server's processes).
func (pg *pgServer) pid() int {
	if pg.cmd == nil || pg.cmd.Process == nil {
		return 0
	}
	return pg.cmd.Process.Pid
}

// stop ends the server: SIGINT (fast shutdown: sessions rolled back, a
// checkpoint, exit), SIGKILL to its process group after 15 s; then the
// folder goes. It is safe to call more than once and on a server that never
// started.
func (pg *pgServer) stop() error {
	var err error
	if pg.cmd != nil && pg.cmd.Process != nil {
		_ = pg.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-pg.exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-pg.cmd.Process.Pid, syscall.SIGKILL)
			<-pg.exited
			err = errors.New("postgres: killed after 15 s")
		}
		pg.cmd = nil
	}
	if pg.dir != "" {
		os.RemoveAll(pg.dir)
		pg.dir = ""
	}
	return err
}

package testserver

import (
	"context"
	"errors"
	"path/filepath"
)

// LogLines is how much of a server's output a failed test shows.
const LogLines = 150

// TB is the part of testing.TB that StartT uses (the package does not import
// testing: the benchmark, a command, uses it too).
type TB interface {
	Helper()
	Cleanup(func())
	TempDir() string
	Failed() bool
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// StartT starts a server for a test and waits until it is ready, failing the
// test (with the server's output) when it does not start. A DataDir left
// empty is a new directory in the test's temporary directory. At the test's
// cleanup the server is stopped if it still runs (a stop that needs SIGKILL
// fails the test), and a failed test shows the last LogLines lines of its
// output.
func StartT(t TB, opts Options) *Server {
	t.Helper()
	if opts.DataDir == "" && len(opts.Command) == 0 {
		opts.DataDir = filepath.Join(t.TempDir(), "data")
	}
	s, err := Launch(opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		switch err := s.Stop(); {
		case errors.Is(err, ErrStopTimeout):
			t.Errorf("server: %v", err)
		case err != nil && !s.Killed():
			t.Logf("server exit: %v", err)
		}
		if t.Failed() {
			t.Logf("server output (last %d lines):\n%s", LogLines, Tail(s.Logs(), LogLines))
		}
	})
	if err := s.Ready(context.Background()); err != nil {
		t.Fatalf("server %s: %v", filepath.Base(s.cmd.Args[0]), err)
	}
	return s
}

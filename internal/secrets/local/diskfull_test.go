//go:build linux

package local

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stepgraph/stepgraph/internal/fail"
)

// fsizeChildEnv names the store directory of TestFileSizeLimitChild.
const fsizeChildEnv = "STEPGRAPH_TEST_FSIZE_CHILD"

// A full disk, for real: this test binary runs TestFileSizeLimitChild in a
// child process, which lowers its own RLIMIT_FSIZE so that the kernel fails
// every file write with EFBIG (even for root, unlike a chmod), then raises
// it again. Here the directory it leaves is checked from the outside.
func TestWriteFailuresRollBackAndRecover(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFileSizeLimitChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fsizeChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFileSizeLimitChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}

	assertOnlyStoreFiles(t, dir)
	s := mustOpen(t, dir)
	var values []string
	for ref := range s.entries {
		v, err := s.Get(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, string(v))
	}
	slices.Sort(values)
	if want := []string{"kept", "written-after-recovery"}; !slices.Equal(values, want) {
		t.Errorf("values after reopen: %q, want %q", values, want)
	}
}

// TestFileSizeLimitChild is the child of TestWriteFailuresRollBackAndRecover.
func TestFileSizeLimitChild(t *testing.T) {
	dir := os.Getenv(fsizeChildEnv)
	if dir == "" {
		t.Skip("runs as a child of TestWriteFailuresRollBackAndRecover")
	}
	ctx := context.Background()
	s := mustOpen(t, dir)
	kept := create(t, s, "full", "kept")
	doomed := create(t, s, "full", "deleted-after-recovery")
	before := readFile(t, filepath.Join(dir, DataFile))

	setFileSizeLimit(t, 0) // from here no file can grow: the disk is full
	ref, err := s.Create(ctx, "full", []byte("never-stored"))
	if ref != "" || fail.KindOf(err) != fail.KindUnavailable || fail.MessageOf(err) != "storage unavailable: file too large" {
		t.Errorf("Create on a full disk: %q, %v; want no ref and storage unavailable: file too large", ref, err)
	}
	if err := s.Delete(ctx, doomed); fail.KindOf(err) != fail.KindUnavailable {
		t.Errorf("Delete on a full disk: %v, want storage unavailable", err)
	}
	if v, err := s.Get(ctx, doomed); err != nil || string(v) != "deleted-after-recovery" {
		t.Errorf("after a failed Delete, Get = %v; want the value still there", err)
	}
	if !bytes.Equal(before, readFile(t, filepath.Join(dir, DataFile))) {
		t.Errorf("failed writes changed %s", DataFile)
	}
	assertOnlyStoreFiles(t, dir)

	setFileSizeLimit(t, ^uint64(0)) // space returns
	create(t, s, "full", "written-after-recovery")
	if err := s.Delete(ctx, doomed); err != nil {
		t.Errorf("Delete after the disk recovered: %v", err)
	}
	if _, err := s.Get(ctx, kept); err != nil {
		t.Error(err)
	}
}

// A failed write classifies the file system's errors as storage
// unavailable, with the system's words and without the path.
func TestStorageErrorsAreClassified(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EROFS, syscall.EIO, syscall.EACCES} {
		s.rename = func(from, to string) error { return &os.LinkError{Op: "rename", Old: from, New: to, Err: errno} }
		_, err := s.Create(context.Background(), "classified", []byte("v"))
		if want := "storage unavailable: " + errno.Error(); fail.KindOf(err) != fail.KindUnavailable || fail.MessageOf(err) != want {
			t.Errorf("rename failing with %v: %v; want %q", errno, err, want)
		}
		if !errors.Is(err, errno) {
			t.Errorf("the cause %v is lost: %v", errno, err)
		}
	}
	s.rename = func(string, string) error { return errors.New("not a file system error") }
	if _, err := s.Create(context.Background(), "classified", []byte("v")); err == nil || fail.KindOf(err) != 0 {
		t.Errorf("an unknown failure: %v, want an unclassified error", err)
	}
}

// assertOnlyStoreFiles fails when dir holds anything but the store's own
// files, e.g. a temporary file a failed write left behind.
func assertOnlyStoreFiles(t *testing.T, dir string) {
	t.Helper()
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if n := f.Name(); n != KeyFile && n != DataFile && n != LockFile {
			t.Errorf("unexpected file %s in the store directory", n)
		}
	}
}

// setFileSizeLimit sets this process's soft RLIMIT_FSIZE (bytes). The hard
// limit stays, so raising it back needs no privilege. Go ignores SIGXFSZ,
// so a write past the limit fails with EFBIG instead of killing the process.
func setFileSizeLimit(t *testing.T, limit uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil {
		t.Fatal(err)
	}
	rl.Cur = min(limit, rl.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil {
		t.Fatal(err)
	}
}

//go:build linux

package sqlite

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// fsizeChildEnv names the database directory of TestFileSizeLimitChild.
const fsizeChildEnv = "STEPGRAPH_TEST_FSIZE_CHILD"

// A full disk, for real: this test binary runs TestFileSizeLimitChild in a
// child process, which lowers its own RLIMIT_FSIZE so that the kernel fails
// every file write with EFBIG (even for root, unlike a chmod), then raises
// it again. Here the database it leaves is checked from the outside.
func TestWriteFailuresRollBackAndRecover(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFileSizeLimitChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fsizeChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFileSizeLimitChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}

	db, err := Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	org, err := db.OrganizationByName(ctx, "org")
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.ListProviders(ctx, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range got {
		ids = append(ids, p.ProviderID)
	}
	if want := "acked-0 acked-1 acked-2 retried"; strings.Join(ids, " ") != want {
		t.Errorf("providers after reopen: %v, want %s", ids, want)
	}
	if _, err := db.Deployment(ctx, org.ID, "dep-retried"); err != nil {
		t.Errorf("deployment written after the disk recovered: %v", err)
	}
}

// TestFileSizeLimitChild is the child of TestWriteFailuresRollBackAndRecover.
func TestFileSizeLimitChild(t *testing.T) {
	dir := os.Getenv(fsizeChildEnv)
	if dir == "" {
		t.Skip("runs as a child of TestWriteFailuresRollBackAndRecover")
	}
	ctx := context.Background()
	db, err := Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	org := store.Organization{ID: uuid.NewString(), Name: "org", CreatedAt: now}
	if err := db.CreateOrganization(ctx, org); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"acked-0", "acked-1", "acked-2"} {
		if err := db.CreateProvider(ctx, testProvider(org.ID, id)); err != nil {
			t.Fatal(err)
		}
	}

	setFileSizeLimit(t, 0) // from here no file can grow: the disk is full
	dep, rev := testDeployment(org.ID, "dep-retried")
	for name, err := range map[string]error{
		"CreateProvider":   db.CreateProvider(ctx, testProvider(org.ID, "retried")),
		"CreateDeployment": db.CreateDeployment(ctx, dep, rev), // two records, one transaction
	} {
		t.Logf("%s on a full disk: %v", name, err)
		if fail.KindOf(err) != fail.KindUnavailable || fail.MessageOf(err) != "storage unavailable: disk I/O error" {
			t.Errorf("%s on a full disk: %v, want storage unavailable: disk I/O error", name, err)
		}
	}
	// Reads are served, and nothing of the failed writes shows.
	if got, err := db.ListProviders(ctx, org.ID); err != nil || len(got) != 3 {
		t.Errorf("ListProviders on a full disk: %d, %v; want the 3 acknowledged", len(got), err)
	}
	if _, err := db.Deployment(ctx, org.ID, dep.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the failed deployment: %v, want ErrNotFound", err)
	}

	setFileSizeLimit(t, ^uint64(0)) // space returns
	// The same writes succeed on the same handle; no ErrConflict, so the
	// failed attempts left nothing behind.
	if err := db.CreateProvider(ctx, testProvider(org.ID, "retried")); err != nil {
		t.Errorf("CreateProvider after the disk recovered: %v", err)
	}
	if err := db.CreateDeployment(ctx, dep, rev); err != nil {
		t.Errorf("CreateDeployment after the disk recovered: %v", err)
	}
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Error(err)
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

func testProvider(orgID, providerID string) store.Provider {
	now := time.Now()
	return store.Provider{ID: uuid.NewString(), OrgID: orgID, ProviderID: providerID, Name: providerID,
		ClientID: "client", AuthURL: "https://a.test/a", TokenURL: "https://a.test/t",
		TokenEndpointAuthMethod: "client_secret_post", CreatedAt: now, UpdatedAt: now}
}

func testDeployment(orgID, id string) (store.Deployment, store.Revision) {
	now := time.Now()
	rev := store.Revision{ID: uuid.NewString(), Status: "QUEUED", Doc: []byte(`{}`), CreatedAt: now, UpdatedAt: now}
	return store.Deployment{ID: id, OrgID: orgID, Name: id, Status: "AWAITING_DATABASE", LatestRevisionID: rev.ID,
		Doc: []byte(`{}`), CreatedAt: now, UpdatedAt: now}, rev
}

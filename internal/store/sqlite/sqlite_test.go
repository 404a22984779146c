package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/storetest"
)

func openTemp(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stepgraph.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, path
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		db, _ := openTemp(t)
		return db
	})
}

func TestThreadEventsContract(t *testing.T) {
	storetest.ThreadEventsContract(t, func(t *testing.T) storetest.EventStore {
		db, _ := openTemp(t)
		return db
	})
}

func TestEventsContract(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	storetest.EventsContract(t, func(t *testing.T) store.Events {
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	})
}

// TestContractSharedFile runs the suite with every store on one file, as two
// processes would share it.
func TestContractSharedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	storetest.Run(t, func(t *testing.T) store.Store {
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	})
	// Every write of the suite moved the usage counters as a recount from
	// the tables says (the query migration 0006 starts them with).
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	counted, recounted := usageRows(t, db, `SELECT org_id, threads, bytes FROM org_usage`), usageRows(t, db, recountQuery(t))
	if len(counted) == 0 || fmt.Sprint(counted) != fmt.Sprint(recounted) {
		t.Errorf("usage counters after the suite:\n%v\nrecounted from the tables:\n%v", counted, recounted)
	}
}

// recountQuery is the SELECT of migration 0006 that counts each
// organization's usage from its threads, runs and checkpoints.
func recountQuery(t *testing.T) string {
	b, err := migrationFiles.ReadFile("migrations/0007_org_usage.sql")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "SELECT org_id, sum(n), sum(b)")
	end := strings.Index(text[start:], ";")
	if start < 0 || end < 0 {
		t.Fatal("migration 0006 has no recount")
	}
	// A checkpoint counts its size as put (the size column) when its data
	// is stored split, a run its result's (result_size).
	q := strings.Replace(text[start:start+end], "coalesce(octet_length(data), 0)", "coalesce(size, octet_length(data), 0)", 1)
	return strings.Replace(q, "coalesce(octet_length(result), 0)", "coalesce(result_size, octet_length(result), 0)", 1)
}

// usageRows reads org → "threads/bytes" of the organizations that store
// anything.
func usageRows(t *testing.T, db *DB, query string) map[string]string {
	rows, err := db.db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var org string
		var threads, size int64
		if err := rows.Scan(&org, &threads, &size); err != nil {
			t.Fatal(err)
		}
		if threads != 0 || size != 0 {
			out[org] = fmt.Sprintf("%d/%d", threads, size)
		}
	}
	return out
}

func TestPersistence(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "stepgraph.db")
	ts := time.Date(2025, 1, 2, 3, 4, 5, 678901234, time.FixedZone("X", -7*3600))
	want := ts.Truncate(time.Microsecond).UTC()

	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	org := store.Organization{ID: uuid.NewString(), Name: "persist", CreatedAt: ts}
	key := store.APIKey{ID: uuid.NewString(), OrgID: org.ID, Hash: "abc123", CreatedAt: ts}
	prov := store.Provider{ID: uuid.NewString(), OrgID: org.ID, ProviderID: "gh", Name: "GitHub",
		ClientID: "cid", ClientSecretRef: "ref", AuthURL: "https://a", TokenURL: "https://t",
		UsesPKCE: true, CodeChallengeMethod: "S256", ProviderType: "github",
		TokenEndpointAuthMethod: "client_secret_post", CreatedAt: ts, UpdatedAt: ts.Add(time.Second)}
	dep := store.Deployment{ID: uuid.NewString(), OrgID: org.ID, Name: "web", Status: "ready",
		Doc: []byte("{\"a\":\t1}"), CreatedAt: ts, UpdatedAt: ts}
	rev := store.Revision{ID: uuid.NewString(), OrgID: org.ID, DeploymentID: dep.ID, Status: "ready",
		StatusReason: "ok", Doc: []byte(`{"source":{}}`), CreatedAt: ts, UpdatedAt: ts}
	dep.LatestRevisionID, dep.ActiveRevisionID = rev.ID, rev.ID
	for _, err := range []error{
		db.CreateOrganization(ctx, org),
		db.CreateAPIKey(ctx, key),
		db.CreateProvider(ctx, prov),
		db.CreateDeployment(ctx, dep, rev),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	idem := store.IdempotencyRecord{OrgID: org.ID, Scope: "s", Key: "k", RequestHash: "h", CreatedAt: ts}
	if _, _, err := db.ReserveIdempotencyKey(ctx, idem, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := db.CompleteIdempotencyKey(ctx, org.ID, "s", "k", 201, []byte("body")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	gotOrg, err := db.OrganizationByName(ctx, "persist")
	if err != nil || gotOrg.ID != org.ID || !gotOrg.CreatedAt.Equal(want) {
		t.Errorf("organization: %+v, %v", gotOrg, err)
	}
	gotKey, err := db.APIKeyByHash(ctx, "abc123")
	if err != nil || gotKey.ID != key.ID || gotKey.OrgID != org.ID || !gotKey.CreatedAt.Equal(want) {
		t.Errorf("api key: %+v, %v", gotKey, err)
	}
	gotProv, err := db.Provider(ctx, org.ID, "gh")
	if err != nil {
		t.Fatal(err)
	}
	wantProv := prov
	wantProv.CreatedAt, wantProv.UpdatedAt = want, want.Add(time.Second)
	if gotProv != wantProv {
		t.Errorf("provider:\n got %+v\nwant %+v", gotProv, wantProv)
	}
	gotDep, err := db.Deployment(ctx, org.ID, dep.ID)
	if err != nil || gotDep.Version != 1 || gotDep.ActiveRevisionID != rev.ID ||
		!bytes.Equal(gotDep.Doc, dep.Doc) || !gotDep.UpdatedAt.Equal(want) || gotDep.CreatedAt.Location() != time.UTC {
		t.Errorf("deployment: %+v, %v", gotDep, err)
	}
	gotRev, err := db.Revision(ctx, org.ID, dep.ID, rev.ID)
	if err != nil || gotRev.Status != "ready" || gotRev.StatusReason != "ok" || !bytes.Equal(gotRev.Doc, rev.Doc) || gotRev.Version != 1 {
		t.Errorf("revision: %+v, %v", gotRev, err)
	}
	gotIdem, fresh, err := db.ReserveIdempotencyKey(ctx, store.IdempotencyRecord{OrgID: org.ID, Scope: "s", Key: "k", RequestHash: "h2"}, time.Hour)
	if err != nil || fresh || gotIdem.Status != 201 || string(gotIdem.Body) != "body" || gotIdem.RequestHash != "h" || !gotIdem.CreatedAt.Equal(want) {
		t.Errorf("idempotency: %+v, %v, %v", gotIdem, fresh, err)
	}
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
}

func TestMigrationsApplyOnce(t *testing.T) {
	ctx := context.Background()
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 || all[0].version != 1 {
		t.Fatalf("embedded migrations: %+v", all)
	}
	path := filepath.Join(t.TempDir(), "m.db")
	for i := 0; i < 3; i++ {
		db, err := Open(path)
		if err != nil {
			t.Fatalf("open #%d: %v", i+1, err)
		}
		var n, distinct int
		if err := db.db.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&n, &distinct); err != nil {
			t.Fatal(err)
		}
		if n != len(all) || distinct != len(all) {
			t.Errorf("open #%d: %d migration rows (%d distinct), want %d", i+1, n, distinct, len(all))
		}
		if i == 0 {
			if err := db.CreateOrganization(ctx, store.Organization{ID: "o1", Name: "kept"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.OrganizationByName(ctx, "kept"); err != nil {
			t.Errorf("open #%d: data lost: %v", i+1, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMigrationsRefuseNewerSchema(t *testing.T) {
	db, path := openTemp(t)
	if _, err := db.exec(context.Background(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db2, err := Open(path); err == nil {
		db2.Close()
		t.Fatal("Open of a database with an unknown migration succeeded")
	}
}

func TestConcurrentOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			db, err := Open(path)
			if err == nil {
				err = db.Close()
			}
			errs[i] = err
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
		}
	}
}

func TestIntegrityCheck(t *testing.T) {
	db, _ := openTemp(t)
	if err := db.IntegrityCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestPragmas(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	// Hold several connections at once so the check covers more than one.
	for i := 0; i < 3; i++ {
		c, err := db.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, p := range []struct{ pragma, want string }{
			{"journal_mode", "wal"},
			{"busy_timeout", "10000"},
			{"synchronous", "2"}, // FULL
			{"foreign_keys", "1"},
			{"query_only", "1"}, // only the writer writes
		} {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+p.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != p.want {
				t.Errorf("conn %d: PRAGMA %s = %q, want %q", i, p.pragma, got, p.want)
			}
		}
	}
}

func TestPathWithURICharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir?with#odd%chars")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "x.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateOrganization(context.Background(), store.Organization{ID: "o", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at the given path: %v", err)
	}
}

func TestOpenFails(t *testing.T) {
	if _, err := Open(""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing", "dir", "x.db")); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
	notDB := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(notDB, bytes.Repeat([]byte("not a database "), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	if db, err := Open(notDB); err == nil {
		db.Close()
		t.Error("Open of a file that is not a database succeeded")
	}
}

// TestConcurrentHandles: two DB handles on one file, each with many writers,
// never fail with SQLITE_BUSY.
func TestConcurrentHandles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	var handles []*DB
	for i := 0; i < 2; i++ {
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		handles = append(handles, db)
	}
	org := uuid.NewString()
	const perHandle = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*perHandle*3)
	for h, db := range handles {
		for i := 0; i < perHandle; i++ {
			wg.Add(1)
			go func(db *DB, id string) {
				defer wg.Done()
				now := time.Now()
				p := store.Provider{ID: uuid.NewString(), OrgID: org, ProviderID: id, Name: id, CreatedAt: now, UpdatedAt: now}
				if err := db.CreateProvider(ctx, p); err != nil {
					errs <- fmt.Errorf("create %s: %w", id, err)
					return
				}
				p.Name = "renamed " + id
				if err := db.UpdateProvider(ctx, p); err != nil {
					errs <- fmt.Errorf("update %s: %w", id, err)
				}
				d := store.Deployment{ID: uuid.NewString(), OrgID: org, Name: id, Status: "pending", CreatedAt: now, UpdatedAt: now}
				r := store.Revision{ID: uuid.NewString(), Status: "pending", CreatedAt: now, UpdatedAt: now}
				if err := db.CreateDeployment(ctx, d, r); err != nil {
					errs <- fmt.Errorf("create deployment %s: %w", id, err)
				}
			}(db, fmt.Sprintf("p-%d-%d", h, i))
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, db := range handles {
		got, err := db.ListProviders(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2*perHandle {
			t.Errorf("ListProviders = %d, want %d", len(got), 2*perHandle)
		}
	}
	if err := handles[0].IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
}

// TestEqualTimestampOrder: ties in created_at list the later
// insert first (newest first) or last (oldest first).
func TestEqualTimestampOrder(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	org := uuid.NewString()
	ts := time.Now()
	var names []string
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("d%d", i)
		names = append(names, name)
		if err := db.CreateDeployment(ctx,
			store.Deployment{ID: uuid.NewString(), OrgID: org, Name: name, CreatedAt: ts, UpdatedAt: ts},
			store.Revision{ID: uuid.NewString(), CreatedAt: ts, UpdatedAt: ts}); err != nil {
			t.Fatal(err)
		}
		if err := db.CreateProvider(ctx, store.Provider{ID: uuid.NewString(), OrgID: org, ProviderID: name, CreatedAt: ts, UpdatedAt: ts}); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := db.ListDeployments(ctx, org, store.DeploymentFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if d.Name != names[len(names)-1-i] {
			t.Errorf("ListDeployments[%d] = %s, want %s", i, d.Name, names[len(names)-1-i])
		}
	}
	ps, err := db.ListProviders(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		if p.ProviderID != names[i] {
			t.Errorf("ListProviders[%d] = %s, want %s", i, p.ProviderID, names[i])
		}
	}
}

// TestCreateDeploymentIsAtomic: when the first revision cannot be stored, the
// deployment is not stored either.
func TestCreateDeploymentIsAtomic(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	org := uuid.NewString()
	now := time.Now()
	first := store.Revision{ID: uuid.NewString(), CreatedAt: now, UpdatedAt: now}
	if err := db.CreateDeployment(ctx, store.Deployment{ID: uuid.NewString(), OrgID: org, Name: "a"}, first); err != nil {
		t.Fatal(err)
	}
	d := store.Deployment{ID: uuid.NewString(), OrgID: org, Name: "b"}
	err := db.CreateDeployment(ctx, d, store.Revision{ID: first.ID}) // revision ID taken
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CreateDeployment with a taken revision ID: %v, want ErrConflict", err)
	}
	if _, err := db.Deployment(ctx, org, d.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deployment of the failed create: %v, want ErrNotFound", err)
	}
}

// TestDeleteLeavesNoRevisions: deleting a deployment leaves no revision rows behind.
func TestDeleteLeavesNoRevisions(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	org := uuid.NewString()
	d := store.Deployment{ID: uuid.NewString(), OrgID: org, Name: "a"}
	if err := db.CreateDeployment(ctx, d, store.Revision{ID: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}
	d.Version = 1
	if _, err := db.AddRevision(ctx, d, store.Revision{ID: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteDeployment(ctx, org, d.ID); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.db.QueryRowContext(ctx, `SELECT count(*) FROM revisions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d revision rows left", n)
	}
}

// TestRunsLeaveConsistentFile: after the runs contract on one shared file,
// the file passes the integrity and foreign key checks.
func TestRunsLeaveConsistentFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	storetest.RunsContract(t, func(t *testing.T) store.Store {
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	})
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.IntegrityCheck(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestItemsContract(t *testing.T) {
	path := filepath.Join(t.TempDir(), "items.db")
	storetest.ItemsContract(t, func(t *testing.T) storetest.ItemStore {
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	})
}

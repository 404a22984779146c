package sqlite

import (
	"context"
	"errors"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Every write of the process goes through the writer (writeMu, the group
// commit), never straight to a pooled connection: such a write contends
// with the writer inside SQLite, whose busy handler polls the lock every
// 100 ms, and when the writer is never free at those instants (a loaded
// machine: 64 run workers' claims committing back to back) it fails with
// SQLITE_BUSY past busy_timeout — POST /threads answering 503 "the database
// is busy" in TestStreamOnDisconnect. Here the writer is held by a
// transaction that waits until CreateThread has queued for the writer; a
// CreateThread that went to the pool instead waits in the busy handler and
// fails after busy_timeout, whatever the machine's speed.
func TestCreateThreadWaitsForTheWriter(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- db.inTx(ctx, func(tx *txn) error {
			// A write, so the transaction holds SQLite's write lock.
			if _, err := tx.ExecContext(ctx, `INSERT INTO organizations (id, name, created_at) VALUES ('o1', 'o1', 0)`); err != nil {
				return err
			}
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	created := make(chan error, 1)
	go func() {
		now := time.Now()
		created <- db.CreateThread(ctx, store.Thread{ID: "t1", OrgID: "o1", CreatedAt: now, UpdatedAt: now})
	}()
	select {
	case <-db.queued(t.Context()):
	case err := <-created:
		close(release)
		t.Fatalf("CreateThread returned while the writer was held (it did not queue for it): %v", err)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the holding transaction: %v", err)
	}
	if err := <-created; err != nil {
		t.Fatalf("CreateThread after the writer was released: %v", err)
	}
	if _, err := db.Thread(ctx, "o1", "t1"); err != nil {
		t.Fatalf("the created thread: %v", err)
	}
}

// queued is closed once a transaction waits in the group commit's queue
// (or ctx ends).
func (db *DB) queued(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for ctx.Err() == nil {
			db.txq.mu.Lock()
			n := len(db.txq.waiting)
			db.txq.mu.Unlock()
			if n > 0 {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return ch
}

// The rule above holds by construction: the pool's connections refuse to
// write (query_only), so a write that bypasses the writer fails at once in
// every test instead of only on a loaded machine. Reads on the pool and
// writes through the writer (exec, a transaction) work.
func TestPoolConnectionsOnlyRead(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if _, err := db.exec(ctx, `INSERT INTO organizations (id, name, created_at) VALUES ('o1', 'o1', 0)`); err != nil {
		t.Fatalf("exec: %v", err)
	}
	if err := db.inTx(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO organizations (id, name, created_at) VALUES ('o2', 'o2', 0)`)
		return err
	}); err != nil {
		t.Fatalf("a write transaction: %v", err)
	}
	_, err := db.db.ExecContext(ctx, `INSERT INTO organizations (id, name, created_at) VALUES ('o3', 'o3', 0)`)
	var se *sqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_READONLY {
		t.Fatalf("a write on a pooled connection: %v, want SQLITE_READONLY", err)
	}
	var n int
	if err := db.reads().QueryRowContext(ctx, `SELECT count(*) FROM organizations`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("read on the pool: %d organizations, %v; want 2", n, err)
	}
}

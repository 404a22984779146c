package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Group commit. Each write transaction of this process ends with a commit,
// and with synchronous=FULL a commit is an fsync of the WAL: under
// concurrent load the disk, not SQLite, sets the pace. Writers therefore
// queue, and one of them at a time — the leader — runs every queued
// transaction in one SQLite transaction, each inside its own SAVEPOINT,
// with one commit. Each caller still returns only after the commit that
// made its writes durable; a transaction whose function fails is rolled
// back to its savepoint without touching the others; a failed commit fails
// them all (SQLite rolled everything back). The transactions of a commit
// run one after the other, so the result is the one some sequential
// execution of them would give (all were waiting at once, none was
// acknowledged: any order of them is one their callers could have seen).
//
// A commit holds the write lock for as long as its transactions take, and
// every writer of the process waits for it, whatever its organization:
// the queue's oldest transaction always goes in, the others, oldest first,
// as long as their weight fits in maxBatch (see take). A transaction's
// weight is about the rows it writes (a batch of checkpoints: one per
// checkpoint, see inWeightedTx), so a durability "async" run's write-behind
// batches, up to 65 checkpoints each, go one or two per commit while the
// other organizations' one-row writes (a run queued, claimed, finished)
// go into the next commit, not behind every such batch that is waiting
// (the fairness figure: one organization's 16 async runs made another's
// echo wait for commits of a thousand checkpoints).
//
// A leader commits one batch — the one holding its own transaction — and
// then hands the lead to the oldest waiting writer, whose batch has been
// filling up meanwhile. Followers wait on their own channel, never on a
// lock, so a commit is never followed by a convoy of goroutines taking a
// mutex one by one only to find their work done (which left the next
// arrival committing alone, an fsync for one transaction).

// txRequest is one queued write transaction.
type txRequest struct {
	ctx  context.Context
	fn   func(tx *txn) error
	done chan error // buffered: the leader never blocks on it
	// oneStatement: fn writes with a single statement, which SQLite undoes
	// by itself when it fails, so in a shared commit fn needs no savepoint.
	oneStatement bool
	// weight is about how many rows fn writes (0 counts as 1): what it
	// takes of a commit's budget, maxBatch.
	weight int
}

func (r *txRequest) cost() int { return max(r.weight, 1) }

// errLead, sent on a waiting request's done channel, makes its caller the
// leader; its request is still queued.
var errLead = errors.New("sqlite: lead the next group commit")

// txQueue holds the transactions waiting for a commit.
type txQueue struct {
	mu      sync.Mutex
	waiting []*txRequest
	leading bool // a caller is committing; it hands over before it leaves
}

// join queues r and reports whether its caller has to lead.
func (q *txQueue) join(r *txRequest) (lead bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting = append(q.waiting, r)
	lead = !q.leading
	q.leading = true
	return lead
}

// take returns the next commit's transactions, in queue order: the oldest
// queued (the leader's own; it goes in whatever its weight, so every
// transaction is committed after at most as many commits as there are
// transactions ahead of it), then each later one whose weight still fits in
// maxBatch with the others taken after the oldest. A heavy transaction
// that does not fit waits for a later commit, and the light ones queued
// behind it do not wait with it: one commit holds the write lock for at
// most the oldest transaction and maxBatch rows more.
func (q *txQueue) take() []*txRequest {
	q.mu.Lock()
	defer q.mu.Unlock()
	var batch []*txRequest
	left := q.waiting[:0] // compacted in place: index written ≤ index read
	used := 0
	for i, r := range q.waiting {
		switch {
		case i == 0:
			batch = append(batch, r)
		case used+r.cost() <= maxBatch:
			batch = append(batch, r)
			used += r.cost()
		default:
			left = append(left, r)
		}
	}
	clear(q.waiting[len(left):]) // no references kept to taken ones
	q.waiting = left
	return batch
}

// handOver makes the oldest waiting caller the next leader, or records that
// no one leads when none waits.
func (q *txQueue) handOver() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) == 0 {
		q.leading = false
		q.waiting = nil // let the old backing array go
		return
	}
	q.waiting[0].done <- errLead
}

// maxBatch bounds the weight of the transactions that share a commit with
// the oldest one, so one commit never holds the write lock for long.
const maxBatch = 64

// inTx runs fn in a write transaction (BEGIN IMMEDIATE, see doc.go), possibly
// shared with other queued ones, and returns once it is committed (nil) or
// rolled back (fn's or the commit's error).
func (db *DB) inTx(ctx context.Context, fn func(tx *txn) error) error {
	return db.commit(&txRequest{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

// inStatementTx is inTx for a fn that writes with one statement (it may
// read before): it commits with others without the two statements of a
// savepoint, a third of the work of a one-row write.
func (db *DB) inStatementTx(ctx context.Context, fn func(tx *txn) error) error {
	return db.commit(&txRequest{ctx: ctx, fn: fn, done: make(chan error, 1), oneStatement: true})
}

// inWeightedTx is inTx for a fn that writes about weight rows (a batch of
// checkpoints): it takes that much of a commit's budget (see take).
func (db *DB) inWeightedTx(ctx context.Context, weight int, fn func(tx *txn) error) error {
	return db.commit(&txRequest{ctx: ctx, fn: fn, done: make(chan error, 1), weight: weight})
}

// commit queues req and returns its outcome once committed or rolled back.
func (db *DB) commit(req *txRequest) error {
	if !db.txq.join(req) {
		if err := <-req.done; err != errLead {
			return err
		}
	}
	// Leading. req is the oldest queued (a caller leads when the queue was
	// empty or when it is handed the lead as the oldest), so the batch
	// holds it (take always takes the oldest). Yielding first lets the goroutines that are runnable —
	// typically writers that the previous commit released and that are
	// about to queue their next transaction — join this batch instead of
	// waiting a whole commit for the next one; when none is runnable it
	// costs nothing.
	runtime.Gosched()
	batch := db.txq.take()
	db.writeMu.Lock()
	db.commitBatch(batch)
	db.writeMu.Unlock()
	db.txq.handOver()
	return <-req.done
}

// commitBatch runs the transactions of batch under one commit and tells
// each its outcome.
func (db *DB) commitBatch(batch []*txRequest) {
	if len(batch) == 1 {
		batch[0].done <- db.runOne(batch[0])
		return
	}
	// The SQLite transaction outlives any one caller's context: a caller
	// that gives up must not roll back the others.
	tx, err := db.begin(context.WithoutCancel(batch[0].ctx))
	if err != nil {
		err = storageErr(fmt.Errorf("sqlite: begin: %w", err))
		for _, r := range batch {
			r.done <- err
		}
		return
	}
	results := make([]error, len(batch))
	for i, r := range batch {
		run := runSavepoint
		if r.oneStatement {
			run = runStatement
		}
		var broken error
		if results[i], broken = run(tx, r); broken != nil {
			// The transaction may hold half of r's writes: give up on all.
			_ = tx.Rollback()
			for _, r := range batch {
				r.done <- broken
			}
			return
		}
	}
	if err := tx.Commit(); err != nil {
		// The driver rolls back a commit that failed, so nothing of the
		// batch is left.
		err = storageErr(fmt.Errorf("sqlite: commit: %w", err))
		for _, r := range batch {
			r.done <- err
		}
		return
	}
	for i, r := range batch {
		r.done <- results[i]
	}
}

// runOne runs a transaction alone, as a plain BEGIN … COMMIT.
func (db *DB) runOne(r *txRequest) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	tx, err := db.begin(r.ctx)
	if err != nil {
		return storageErr(fmt.Errorf("sqlite: begin: %w", err))
	}
	if err := r.fn(tx); err != nil {
		_ = tx.Rollback()
		return storageErr(err)
	}
	if err := tx.Commit(); err != nil {
		return storageErr(fmt.Errorf("sqlite: commit: %w", err))
	}
	return nil
}

// begin starts a write transaction on the writer connection, with the
// statement cache; the caller holds writeMu.
func (db *DB) begin(ctx context.Context) (*txn, error) {
	var tx *sql.Tx
	err := db.onWriter(ctx, func(c *sql.Conn) (err error) {
		tx, err = c.BeginTx(ctx, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &txn{Tx: tx, cache: &db.stmts}, nil
}

// onWriter runs op on the writer connection; the caller holds writeMu. The
// writer is taken from the pool on first use and allowed to write (the
// pool's connections are query_only, see pragmas); one the driver gave up
// on is replaced, and op tried once more (database/sql reports a bad
// connection only when op did not run).
func (db *DB) onWriter(ctx context.Context, op func(*sql.Conn) error) error {
	for attempt := 0; ; attempt++ {
		if db.writer == nil {
			c, err := db.db.Conn(ctx)
			if err != nil {
				return err
			}
			// Not cancelled halfway: a connection whose pragma ran but
			// reported the caller's cancellation would go back to the
			// pool writable.
			if _, err := c.ExecContext(context.WithoutCancel(ctx), "PRAGMA query_only = 0"); err != nil {
				_ = c.Close()
				return err
			}
			db.writer = c
		}
		err := op(db.writer)
		if err == nil || attempt > 0 || !(errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn)) {
			return err
		}
		_ = db.writer.Close()
		db.writer = nil
	}
}

// runSavepoint runs one transaction of a batch inside a savepoint, undoing
// exactly its writes when it fails (err). broken reports that the savepoint
// itself failed, so the batch cannot be trusted.
func runSavepoint(tx *txn, r *txRequest) (err, broken error) {
	if err := r.ctx.Err(); err != nil {
		return err, nil
	}
	ctx := context.WithoutCancel(r.ctx) // the savepoint statements must run whatever the caller does
	if _, err := tx.ExecContext(ctx, "SAVEPOINT batched"); err != nil {
		return nil, storageErr(fmt.Errorf("sqlite: savepoint: %w", err))
	}
	if err := r.fn(tx); err != nil {
		if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO batched"); rerr != nil {
			return nil, storageErr(fmt.Errorf("sqlite: rollback to savepoint: %w", rerr))
		}
		if _, rerr := tx.ExecContext(ctx, "RELEASE batched"); rerr != nil {
			return nil, storageErr(fmt.Errorf("sqlite: release savepoint: %w", rerr))
		}
		return storageErr(err), nil
	}
	if _, err := tx.ExecContext(ctx, "RELEASE batched"); err != nil {
		return nil, storageErr(fmt.Errorf("sqlite: release savepoint: %w", err))
	}
	return nil, nil
}

// runStatement runs one single-statement transaction of a batch without a
// savepoint. A constraint that refused the statement (store.ErrConflict,
// store.ErrNotFound) undid it alone; any other failure may have rolled back
// the whole SQLite transaction, so the batch cannot be trusted (broken).
func runStatement(tx *txn, r *txRequest) (err, broken error) {
	if err := r.ctx.Err(); err != nil {
		return err, nil
	}
	err = r.fn(tx)
	if err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
		return err, nil
	}
	return nil, storageErr(err)
}

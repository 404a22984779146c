package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// txn is a write transaction whose statements are prepared once per
// connection and then reused: parsing a statement is about a fifth of the
// CPU of a short transaction, and a transaction's statements are the same
// few strings every time. Queries that are not in the cache (it is bounded,
// for the few built per call) run as plain statements.
type txn struct {
	*sql.Tx
	cache *stmtCache
}

// A transaction's statements run without their caller's cancellation:
// with it, the driver starts a goroutine per statement to interrupt the
// connection (and database/sql one per result set to close it), a good
// part of the CPU of a short transaction; a write transaction's
// statements are short, and the connection is the one writer that the
// other callers of a group commit share, which one caller's interrupt
// must not stop. A caller cancelled before its turn is still refused
// (runSavepoint, runOne).
func (t *txn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = context.WithoutCancel(ctx)
	t.cache.meter.count(query, args)
	if s := t.cache.get(query); s != nil {
		return t.Tx.StmtContext(ctx, s).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

func (t *txn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = context.WithoutCancel(ctx)
	if s := t.cache.get(query); s != nil {
		return t.Tx.StmtContext(ctx, s).QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

func (t *txn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = context.WithoutCancel(ctx)
	if s := t.cache.get(query); s != nil {
		return t.Tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// maxCachedStmts bounds the cache; past it, new queries are not prepared.
const maxCachedStmts = 256

// stmtCache holds the statements prepared on the database (database/sql
// prepares each again on every connection it runs on, once, and a
// transaction reuses the one of its connection).
type stmtCache struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
	// meter counts the writes (see WriteMeter); nil: not counted.
	meter *WriteMeter
}

// get returns the prepared statement of query, preparing it on first use;
// nil when it cannot be prepared (the plain statement then reports why) or
// the cache is full.
func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.stmts[query]; ok {
		return s
	}
	if c.stmts == nil {
		c.stmts = map[string]*sql.Stmt{}
	}
	if len(c.stmts) >= maxCachedStmts {
		return nil
	}
	s, err := c.db.PrepareContext(context.Background(), query)
	if err != nil {
		return nil
	}
	c.stmts[query] = s
	return s
}

// close closes every cached statement.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.stmts {
		_ = s.Close()
	}
	c.stmts = nil
}

// reads is the database for reads outside a transaction, on the cached
// statements.
func (db *DB) reads() queryer { return cachedDB{db.db, &db.stmts} }

// cachedDB runs queries on the cached statements of cache.
type cachedDB struct {
	*sql.DB
	cache *stmtCache
}

func (c cachedDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := c.cache.get(query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return c.DB.QueryContext(ctx, query, args...)
}

func (c cachedDB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if s := c.cache.get(query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return c.DB.QueryRowContext(ctx, query, args...)
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// DB is the SQLite implementation of store.Store. It is safe for concurrent
// use, also together with other DB handles (and processes) on the same file.
type DB struct {
	db *sql.DB
	// writeMu lets one write at a time of this process ask SQLite for the
	// write lock. Without it concurrent writers of one process contend
	// inside SQLite, whose busy handler backs off by sleeping (up to 100 ms
	// a try): under load that turns into seconds of latency and, past
	// busy_timeout, SQLITE_BUSY. Other processes still wait in busy_timeout.
	writeMu sync.Mutex
	// txq holds write transactions waiting for a commit: they commit
	// together, led by one of their callers (see groupcommit.go).
	txq txQueue
	// stmts are the write transactions' prepared statements.
	stmts stmtCache
	// writer is the connection write transactions and exec run on (under
	// writeMu), taken from the pool on first use: the only one that may
	// write (the others are query_only, see pragmas and doc.go). One connection keeps its page cache
	// and prepared statements across transactions; alternating between
	// pooled connections makes each discard its cache, as another
	// connection changed the file since its last transaction.
	writer *sql.Conn
}

var _ store.Store = (*DB)(nil)

// pragmas are applied by the driver to every new connection (see doc.go).
// busy_timeout is run first by the driver whatever its position here, the
// others in lexicographic order (query_only after journal_mode, which
// writes the header of a new file).
var pragmas = []string{
	"busy_timeout(10000)",
	"journal_mode(WAL)",
	"synchronous(FULL)",
	"foreign_keys(1)",
	"query_only(1)",
	"temp_store(MEMORY)",
}

// Open opens (creating it if needed) the database file at path, applies the
// pending schema migrations and returns the store.
func Open(path string) (*DB, error) {
	dsn, err := dataSourceName(path)
	if err != nil {
		return nil, err
	}
	if err := checkWritable(path); err != nil {
		return nil, err
	}
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// Idle connections are kept (database/sql keeps 2 by default): each
	// holds its prepared statements and ran its pragmas already.
	sdb.SetMaxIdleConns(32)
	db := &DB{db: sdb}
	db.stmts.db = sdb
	if err := db.prepare(context.Background()); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// SQLite makes the -wal and -shm files with the database file's mode,
	// whatever the umask; ones left by an older version may be wider.
	for _, side := range []string{path + "-wal", path + "-shm"} {
		if err := makePrivate(side); err != nil && !errors.Is(err, fs.ErrNotExist) {
			sdb.Close()
			return nil, err
		}
	}
	return db, nil
}

// fileMode is the mode of the database and its -wal and -shm files: they
// hold every organization's threads, checkpoints and key hashes, so only the
// server's user may read them (security review F14).
const fileMode = 0o600

// makePrivate takes group and other permissions away from the file at path.
// A file already private is left alone, so a process that may not chmod it
// (not its owner) still opens a correct one.
func makePrivate(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&^fileMode == 0 {
		return nil
	}
	if err := os.Chmod(path, fileMode); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("sqlite: cannot make %s private (mode %04o, want %04o): %w", path, fi.Mode().Perm(), fileMode, err)
	}
	return nil
}

// checkWritable opens (creating) the database file for writing. SQLite falls
// back to read-only when it cannot write the file, failing only at the first
// write, and says "unable to open database file" whatever the reason; the
// system's own error here names the cause ("is a directory", "read-only
// file system", "permission denied").
//
// It is also where a new database file gets its mode: created here 0600
// (the umask can only narrow it), before SQLite, which would make it 0644.
func checkWritable(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("sqlite: cannot write the database file %s: %w", path, err)
	}
	return errors.Join(f.Close(), makePrivate(path))
}

// prepare switches to WAL and migrates. Switching the journal mode does not
// wait on SQLite's busy handler, so when several processes open a new file at
// once it is retried for a while.
func (db *DB) prepare(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for wait := 5 * time.Millisecond; ; wait *= 2 {
		err := db.checkWAL(ctx)
		if err == nil {
			err = db.migrate(ctx)
		}
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		time.Sleep(min(wait, 200*time.Millisecond))
	}
}

// dataSourceName builds the driver's file: URI for path with the pragmas and
// immediate write transactions.
func dataSourceName(path string) (string, error) {
	if path == "" {
		return "", errors.New("sqlite: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlite: %w", err)
	}
	// The path part of an SQLite URI is percent-decoded, ends at '?' or '#'.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(abs))
	if !strings.HasPrefix(esc, "/") {
		esc = "/" + esc
	}
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	return "file://" + esc + "?" + q.Encode(), nil
}

// checkWAL fails when the journal mode could not be switched to WAL (SQLite
// silently keeps the old mode, e.g. on file systems without shared memory).
func (db *DB) checkWAL(ctx context.Context) error {
	var mode string
	if err := db.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, want wal", mode)
	}
	return nil
}

// Close closes the database. It is safe to call more than once.
func (db *DB) Close() error {
	db.writeMu.Lock()
	if db.writer != nil {
		// Back in the pool until it closes: query_only again, as the others.
		_, _ = db.writer.ExecContext(context.Background(), "PRAGMA query_only = 1")
		_ = db.writer.Close()
		db.writer = nil
	}
	db.writeMu.Unlock()
	db.stmts.close()
	return db.db.Close()
}

// IntegrityCheck runs PRAGMA integrity_check and PRAGMA foreign_key_check and
// returns an error describing every problem they report.
func (db *DB) IntegrityCheck(ctx context.Context) error {
	rows, err := db.db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return fmt.Errorf("sqlite: integrity check: %w", err)
	}
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return fmt.Errorf("sqlite: integrity check: %w", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("sqlite: integrity check: %w", err)
	}
	fk, err := db.db.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		return fmt.Errorf("sqlite: foreign key check: %w", err)
	}
	for fk.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var idx int
		if err := fk.Scan(&table, &rowid, &parent, &idx); err != nil {
			fk.Close()
			return fmt.Errorf("sqlite: foreign key check: %w", err)
		}
		problems = append(problems, fmt.Sprintf("row %d of %s references a missing %s", rowid.Int64, table, parent))
	}
	if err := errors.Join(fk.Err(), fk.Close()); err != nil {
		return fmt.Errorf("sqlite: foreign key check: %w", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("sqlite: integrity check failed: %s", strings.Join(problems, "; "))
	}
	return nil
}

// exec runs one write statement outside a transaction, on the writer
// connection under writeMu.
func (db *DB) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	db.stmts.meter.count(query, args)
	var res sql.Result
	err := db.onWriter(ctx, func(c *sql.Conn) (err error) {
		res, err = c.ExecContext(ctx, query, args...)
		return err
	})
	return res, storageErr(err)
}

// storageErr classifies a failure of the files under the database (disk
// full, read-only or failing file system, file gone) and a lock held past
// busy_timeout as fail.Unavailable:
// SQLite rolled the statement or transaction back, so the same write may
// succeed once the disk recovers. Other errors are returned unchanged.
func storageErr(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) || fail.KindOf(err) != 0 {
		return err
	}
	// SQLite's own words; it does not tell which system call failed why.
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return fail.Unavailable("database or disk is full", err)
	case sqlite3.SQLITE_IOERR:
		return fail.Unavailable("disk I/O error", err)
	case sqlite3.SQLITE_READONLY:
		return fail.Unavailable("the database is read-only", err)
	case sqlite3.SQLITE_CANTOPEN:
		return fail.Unavailable("unable to open the database file", err)
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		// Another writer (another process on the file) held the lock past
		// busy_timeout: nothing was written, and a retry may succeed.
		return fail.Unavailable("the database is busy", err)
	}
	return err
}

// queryer is what both *sql.DB and *txn offer.
type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// scanner is what both *sql.Row and *sql.Rows offer.
type scanner interface {
	Scan(dest ...any) error
}

// mapErr turns driver errors into the store's sentinels: a broken uniqueness
// rule into store.ErrConflict, a missing row into store.ErrNotFound, a
// failing disk into fail.Unavailable (see storageErr). Other errors are
// wrapped with op.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) {
		return store.ErrConflict
	}
	return storageErr(fmt.Errorf("sqlite: %s: %w", op, err))
}

// isConstraint reports whether err is an SQLite error with one of codes.
func isConstraint(err error, codes ...int) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	for _, c := range codes {
		if se.Code() == c {
			return true
		}
	}
	return false
}

// micros is how times are stored: unix microseconds, UTC.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros reads a stored time.
func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// affected returns the rows a statement changed.
func affected(op string, res sql.Result) (int64, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return n, nil
}

// page resolves a filter's paging: limit 0 (or less) means 20.
func page(limit, offset int) (int, int) {
	if limit <= 0 {
		limit = 20
	}
	if offset < 0 {
		offset = 0
	}
	return limit, offset
}

// placeholders returns "?, ?, ..." for n arguments.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

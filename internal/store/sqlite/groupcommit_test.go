package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Transactions that commit together stay independent: the failing ones
// leave nothing, the others all of their writes, the cancelled ones nothing.
func TestGroupCommitKeepsTransactionsApart(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "gc.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.exec(context.Background(), `CREATE TABLE gc_test (n INTEGER PRIMARY KEY, twice INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	errOdd := errors.New("refused")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	const n = 300
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if i%10 == 5 {
				ctx = cancelled
			}
			results[i] = db.inTx(ctx, func(tx *txn) error {
				// Two writes, so a failure after the first must undo it.
				if _, err := tx.ExecContext(ctx, `INSERT INTO gc_test (n, twice) VALUES (?, 0)`, i); err != nil {
					return err
				}
				if i%3 == 0 {
					return errOdd
				}
				_, err := tx.ExecContext(ctx, `UPDATE gc_test SET twice = ? WHERE n = ?`, 2*i, i)
				return err
			})
		}()
	}
	wg.Wait()
	for i, err := range results {
		switch {
		case i%10 == 5:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("transaction %d with a cancelled context: %v", i, err)
			}
		case i%3 == 0:
			if !errors.Is(err, errOdd) {
				t.Errorf("transaction %d: error %v, want its own", i, err)
			}
		case err != nil:
			t.Errorf("transaction %d: %v", i, err)
		}
	}
	rows, err := db.db.Query(`SELECT n, twice FROM gc_test ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[int]bool{}
	for rows.Next() {
		var k, twice int
		if err := rows.Scan(&k, &twice); err != nil {
			t.Fatal(err)
		}
		seen[k] = true
		if k%3 == 0 || k%10 == 5 || twice != 2*k {
			t.Errorf("row %d (twice %d) should not be there like this", k, twice)
		}
	}
	for i := range n {
		if i%3 != 0 && i%10 != 5 && !seen[i] {
			t.Errorf("committed transaction %d lost", i)
		}
	}
}

// Single-statement transactions share commits without savepoints: one that
// a constraint refuses leaves nothing and fails alone, the others keep
// their row, and mixing them with savepoint transactions changes nothing.
func TestGroupCommitOfSingleStatements(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "gc.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.exec(context.Background(), `CREATE TABLE gc_one (n INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	const n = 300
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			// Every third one inserts the row of the one before: one of the
			// pair is refused, whichever commits second.
			k := i
			if i%3 == 2 {
				k = i - 1
			}
			insert := func(tx *txn) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO gc_one (n) VALUES (?)`, k)
				return mapErr("insert", err)
			}
			if i%2 == 0 {
				results[i] = db.inStatementTx(ctx, insert)
			} else {
				results[i] = db.inTx(ctx, insert)
			}
		}()
	}
	wg.Wait()
	var conflicts int
	for i, err := range results {
		switch {
		case errors.Is(err, store.ErrConflict):
			conflicts++
		case err != nil:
			t.Errorf("transaction %d: %v", i, err)
		}
	}
	if want := n / 3; conflicts != want {
		t.Errorf("%d refused, want %d (one of each pair)", conflicts, want)
	}
	var rows int
	if err := db.db.QueryRow(`SELECT count(*) FROM gc_one`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if want := n - n/3; rows != want {
		t.Errorf("%d rows, want %d", rows, want)
	}
}

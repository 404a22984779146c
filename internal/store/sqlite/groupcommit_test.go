package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

// Transactions that commit together stay independent: the failing ones
// leave nothing, the others all of their writes, the cancelled ones nothing.
func TestGroupCommitKeepsTransactionsApart(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "gc.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.db.Exec(`CREATE TABLE gc_test (n INTEGER PRIMARY KEY, twice INTEGER NOT NULL)`); err != nil {
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

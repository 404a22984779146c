package sqlite

import (
	"context"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// SpendCall implements store.CallBudgets in one transaction: the call's
// row, the request's (ignored when counted before), then the counters. A
// call's first request also deletes the calls that have expired.
func (db *DB) SpendCall(ctx context.Context, id, request string, size int64, expires time.Time) (store.CallSpent, error) {
	var spent store.CallSpent
	err := db.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO call_budgets (id, requests, bytes, expires_at) VALUES (?, 0, 0, ?)
			ON CONFLICT (id) DO NOTHING`, id, micros(expires))
		if err != nil {
			return mapErr("spend call", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM call_budgets WHERE expires_at < ?`, micros(time.Now())); err != nil {
				return mapErr("spend call", err)
			}
		}
		res, err = tx.ExecContext(ctx, `INSERT OR IGNORE INTO call_budget_requests (call_id, request) VALUES (?, ?)`, id, request)
		if err != nil {
			return mapErr("spend call", err)
		}
		if n, _ := res.RowsAffected(); n == 1 { // not counted before
			if _, err := tx.ExecContext(ctx, `UPDATE call_budgets SET requests = requests + 1, bytes = bytes + ? WHERE id = ?`, size, id); err != nil {
				return mapErr("spend call", err)
			}
		}
		return mapErr("spend call", tx.QueryRowContext(ctx, `SELECT requests, bytes FROM call_budgets WHERE id = ?`, id).Scan(&spent.Requests, &spent.Bytes))
	})
	return spent, err
}

package sqlite

import (
	"context"

	"github.com/stepgraph/stepgraph/internal/store"
)

// ParkRun implements store.RunParking.
func (db *DB) ParkRun(ctx context.Context, orgID, threadID, runID, token string) (bool, error) {
	parked := false
	err := db.inTx(ctx, func(tx *txn) error {
		r, err := getRun(ctx, tx, orgID, threadID, runID)
		if err != nil {
			return err
		}
		if r.Status != store.RunPending {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET wake_token = ? WHERE id = ?`, token, runID); err != nil {
			return mapErr("park run", err)
		}
		parked = true
		return nil
	})
	return parked, err
}

// ParkedRuns implements store.RunParking.
func (db *DB) ParkedRuns(ctx context.Context, orgID, threadID string) ([]store.ParkedRun, error) {
	return queryAll(ctx, db.reads(), "parked runs", `SELECT `+runSelect+`, wake_token FROM runs
		WHERE org_id = ? AND thread_id = ? AND status = '`+store.RunPending+`' AND wake_token != ''
		ORDER BY not_before, created_at, seq`, []any{orgID, threadID}, func(s scanner) (store.ParkedRun, error) {
		var p store.ParkedRun
		var token string
		r, err := runScan(ctx, db.reads())(tokenScanner{s, &token})
		p.Run, p.Token = r, token
		return p, err
	})
}

// tokenScanner scans a run's columns followed by its wake token.
type tokenScanner struct {
	scanner
	token *string
}

func (t tokenScanner) Scan(dest ...any) error { return t.scanner.Scan(append(dest, t.token)...) }

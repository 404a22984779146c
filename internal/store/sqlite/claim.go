package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// ClaimRunByID implements store.RunQueue. A pending run is claimable when its
// NotBefore has come, its thread has no running run and no pending run of
// the thread comes before it in (NotBefore, CreatedAt, insertion) order.
func (db *DB) ClaimRunByID(ctx context.Context, runID, owner string, now, leaseUntil time.Time) (store.Run, bool, error) {
	var out store.Run
	var claimed bool
	err := db.inTx(ctx, func(tx *txn) error {
		r, err := getRunByID(ctx, tx, runID)
		if err != nil {
			return err
		}
		out, claimed = r, false
		ok, err := claimable(ctx, tx, r, owner, now)
		if err != nil || !ok {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?,
			started_at = coalesce(started_at, ?), lease_owner = ?, lease_until = ?,
			attempt = attempt + 1, updated_at = ? WHERE id = ?`,
			store.RunRunning, micros(now), owner, micros(leaseUntil), micros(now), r.ID); err != nil {
			return mapErr("claim run", err)
		}
		out, err = getRunByID(ctx, tx, r.ID)
		claimed = err == nil
		return err
	})
	if err != nil {
		return store.Run{}, false, err
	}
	return out, claimed, nil
}

// claimable reports whether owner may claim r now.
func claimable(ctx context.Context, tx *txn, r store.Run, owner string, now time.Time) (bool, error) {
	switch r.Status {
	case store.RunRunning:
		return r.LeaseOwner == owner || r.LeaseUntil.IsZero() || r.LeaseUntil.Before(now), nil
	case store.RunPending:
		if r.NotBefore.After(now) {
			return false, nil
		}
		var ahead int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs AS o
			JOIN runs AS r ON r.id = ?
			WHERE o.org_id = r.org_id AND o.thread_id = r.thread_id AND o.id <> r.id AND (
				o.status = '`+store.RunRunning+`' OR (o.status = '`+store.RunPending+`' AND
				(o.not_before, o.created_at, o.seq) < (r.not_before, r.created_at, r.seq)))`,
			r.ID).Scan(&ahead)
		if err != nil {
			return false, mapErr("claim run", err)
		}
		return ahead == 0, nil
	}
	return false, nil // terminal
}

// TemporaryResult implements store.RunQueue.
func (db *DB) TemporaryResult(ctx context.Context, orgID, runID string, now time.Time) ([]byte, error) {
	var result sql.NullString
	err := db.reads().QueryRowContext(ctx, `SELECT result FROM temporary_results
		WHERE run_id = ? AND org_id = ? AND expires_at > ?`, runID, orgID, micros(now)).Scan(&result)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, mapErr("temporary result", err)
	}
	if !result.Valid {
		return []byte("null"), nil
	}
	return []byte(result.String), nil
}

// keepTemporaryResult stores a finished temporary run's result and drops
// the expired ones.
func keepTemporaryResult(ctx context.Context, tx *txn, r store.Run, result []byte, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM temporary_results WHERE expires_at <= ?`, micros(now)); err != nil {
		return mapErr("keep temporary result", err)
	}
	_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO temporary_results (run_id, org_id, result, expires_at)
		VALUES (?, ?, ?, ?)`, r.ID, r.OrgID, jsonText(result), micros(now.Add(store.TemporaryResultTTL)))
	return mapErr("keep temporary result", err)
}

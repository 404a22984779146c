package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// ClaimRunByID implements store.RunQueue. A pending run is claimable when its
// NotBefore has come, its thread has no running run, no pending run of the
// thread comes before it in (NotBefore, CreatedAt, insertion) order and its
// organization has a free slot.
func (db *DB) ClaimRunByID(ctx context.Context, runID, owner string, now, leaseUntil time.Time, perOrg int) (store.Run, bool, error) {
	var out store.Run
	var claimed bool
	err := db.inTx(ctx, func(tx *txn) error {
		r, err := getRunByID(ctx, tx, runID)
		if err != nil {
			return err
		}
		out, claimed = r, false
		ok, err := claimable(ctx, tx, r, owner, now, perOrg)
		if err != nil || !ok {
			return err
		}
		out, err = markClaimed(ctx, tx, r.ID, owner, now, leaseUntil)
		claimed = err == nil
		return err
	})
	if err != nil {
		return store.Run{}, false, err
	}
	return out, claimed, nil
}

// markClaimed marks run id running under owner's lease and returns it.
func markClaimed(ctx context.Context, tx *txn, id, owner string, now, leaseUntil time.Time) (store.Run, error) {
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?,
		started_at = coalesce(started_at, ?), lease_owner = ?, lease_until = ?,
		attempt = attempt + 1, updated_at = ? WHERE id = ?`,
		store.RunRunning, micros(now), owner, micros(leaseUntil), micros(now), id); err != nil {
		return store.Run{}, mapErr("claim run", err)
	}
	return getRunByID(ctx, tx, id)
}

// claimable reports whether owner may claim r now.
func claimable(ctx context.Context, tx *txn, r store.Run, owner string, now time.Time, perOrg int) (bool, error) {
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
		if err != nil || ahead > 0 {
			return false, mapErr("claim run", err)
		}
		return hasSlot(ctx, tx, r.OrgID, perOrg)
	}
	return false, nil // terminal
}

// hasSlot reports whether orgID runs fewer than perOrg runs (always, for
// perOrg 0). The count is of running runs, read in the claiming
// transaction: the write lock makes the count and the claim one step for
// every process on the file.
func hasSlot(ctx context.Context, tx *txn, orgID string, perOrg int) (bool, error) {
	if perOrg <= 0 {
		return true, nil
	}
	var running int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs
		WHERE status = '`+store.RunRunning+`' AND org_id = ?`, orgID).Scan(&running)
	if err != nil {
		return false, mapErr("claim run", err)
	}
	return running < perOrg, nil
}

// expiredLease returns the running run to claim again first: the oldest
// whose lease ended before now ("" when none).
func expiredLease(ctx context.Context, tx *txn, now time.Time) (string, error) {
	var id string
	err := tx.QueryRowContext(ctx, `SELECT id FROM runs
		WHERE status = '`+store.RunRunning+`' AND (lease_until IS NULL OR lease_until < ?)
		ORDER BY not_before, created_at, seq LIMIT 1`, micros(now)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, mapErr("claim run", err)
}

// anyClaimable reports whether a run might be claimable at now: a running
// run whose lease ended or a pending run whose NotBefore has come (its
// thread or organization may still hold it back). It reads outside the
// write transaction, so that the idle workers' polls and the claim each
// worker makes after a run (most find nothing) cost one read each, not a
// share of a commit. Seeing a run queued after it is the same as claiming
// before that run was queued: its enqueuer wakes a worker.
func anyClaimable(ctx context.Context, q queryer, now time.Time) (bool, error) {
	var ok bool
	err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM runs
			WHERE status = '`+store.RunRunning+`' AND (lease_until IS NULL OR lease_until < ?))
		OR EXISTS (SELECT 1 FROM runs WHERE status = '`+store.RunPending+`' AND not_before <= ?)`,
		micros(now), micros(now)).Scan(&ok)
	return ok, mapErr("claim run", err)
}

// nextInTurn returns the pending run to claim ("" when none) and records its
// organization in claim_turn. The organizations with pending runs are
// visited in org_id order after the one served last, then from the first up
// to that one (it comes last: the others go first); the first with a free
// slot and a claimable run gives its oldest claimable run. Each step of the
// walk is one seek in runs_org_claim, so a long queue of one organization
// costs the others nothing.
func nextInTurn(ctx context.Context, tx *txn, now time.Time, perOrg int) (string, error) {
	var last string
	err := tx.QueryRowContext(ctx, `SELECT last_org FROM claim_turn WHERE id = 1`).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", mapErr("claim run", err)
	}
	cur, wrapped := last, last == ""
	for {
		var org string
		err := tx.QueryRowContext(ctx, `SELECT org_id FROM runs
			WHERE status = '`+store.RunPending+`' AND org_id > ? ORDER BY org_id LIMIT 1`, cur).Scan(&org)
		if errors.Is(err, sql.ErrNoRows) {
			if wrapped {
				return "", nil
			}
			cur, wrapped = "", true
			continue
		}
		if err != nil {
			return "", mapErr("claim run", err)
		}
		if wrapped && last != "" && org > last {
			return "", nil // every organization had its turn
		}
		cur = org
		id, err := oldestClaimable(ctx, tx, org, now, perOrg)
		if err != nil {
			return "", err
		}
		if id == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO claim_turn (id, last_org) VALUES (1, ?)
			ON CONFLICT (id) DO UPDATE SET last_org = excluded.last_org`, org); err != nil {
			return "", mapErr("claim run", err)
		}
		return id, nil
	}
}

// oldestClaimable returns orgID's oldest pending run whose NotBefore has
// come on a thread without a running run ("" when none, or when orgID has
// no free slot). Being the oldest of the organization's claimable runs, it
// is also the first of its own thread's queue.
func oldestClaimable(ctx context.Context, tx *txn, orgID string, now time.Time, perOrg int) (string, error) {
	ok, err := hasSlot(ctx, tx, orgID, perOrg)
	if err != nil || !ok {
		return "", err
	}
	var id string
	err = tx.QueryRowContext(ctx, `SELECT id FROM runs AS r
		WHERE status = '`+store.RunPending+`' AND org_id = ? AND not_before <= ?
		AND NOT EXISTS (SELECT 1 FROM runs AS o WHERE o.org_id = r.org_id
			AND o.thread_id = r.thread_id AND o.status = '`+store.RunRunning+`')
		ORDER BY not_before, created_at, seq LIMIT 1`, orgID, micros(now)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, mapErr("claim run", err)
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

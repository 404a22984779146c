package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

const runColumns = `id, org_id, thread_id, assistant_id, status, metadata, kwargs,
	multitask_strategy, temporary, not_before, created_at, updated_at, started_at, ended_at,
	result, cancel_action, lease_owner, lease_until, attempt`

// inflightSQL is the list of inflight run statuses, for IN (...).
const inflightSQL = `('` + store.RunPending + `', '` + store.RunRunning + `')`

// runSelect reads runColumns and the manifest of a result stored split
// (result_manifest, migration 0021).
const runSelect = runColumns + `, result_manifest`

// runScan scans a row of runSelect, reading the values of a split result
// with q.
func runScan(ctx context.Context, q queryer) func(scanner) (store.Run, error) {
	return func(s scanner) (store.Run, error) {
		var r store.Run
		var notBefore, created, updated int64
		var started, ended, leaseUntil sql.NullInt64
		var manifest []byte
		err := s.Scan(&r.ID, &r.OrgID, &r.ThreadID, &r.AssistantID, &r.Status, &r.Metadata, &r.Kwargs,
			&r.MultitaskStrategy, &r.Temporary, &notBefore, &created, &updated, &started, &ended,
			&r.Result, &r.CancelAction, &r.LeaseOwner, &leaseUntil, &r.Attempt, &manifest)
		if err != nil {
			return store.Run{}, err
		}
		r.NotBefore, r.CreatedAt, r.UpdatedAt = fromMicros(notBefore), fromMicros(created), fromMicros(updated)
		r.StartedAt, r.EndedAt, r.LeaseUntil = fromNullMicros(started), fromNullMicros(ended), fromNullMicros(leaseUntil)
		if manifest != nil {
			if r.Result, err = decodeDoc(ctx, q, r.OrgID, r.ThreadID, r.Result, manifest); err != nil {
				return store.Run{}, err
			}
		}
		return r, nil
	}
}

// AddRun implements store.RunQueue. The run is stored as given except for the
// fields that describe its execution: Status pending, no StartedAt, EndedAt,
// Result, CancelAction or lease, Attempt 0. Nil Metadata or Kwargs are stored
// as "{}". Its CreatedAt is the time of the thread's changes (and of the
// thread itself when created, with "{}" as Config). The inflight runs are
// read, rejected against or cancelled in the transaction that stores the
// run. Run IDs are unique across organizations: a taken one is
// store.ErrConflict.
func (db *DB) AddRun(ctx context.Context, req store.NewRun) (store.Run, bool, error) {
	if err := req.CheckInflight(); err != nil {
		return store.Run{}, false, fmt.Errorf("sqlite: add run: %w", err)
	}
	r := req.Run
	now := r.CreatedAt
	var out store.Run
	var created bool
	err := db.inTx(ctx, func(tx *txn) error {
		created = false
		err := threadExists(ctx, tx, r.OrgID, r.ThreadID)
		switch {
		case errors.Is(err, store.ErrNotFound) && req.CreateThread:
			config, err := newThreadConfig(req, []byte("{}"))
			if err != nil {
				return err
			}
			err = insertThread(ctx, tx, store.Thread{ID: r.ThreadID, OrgID: r.OrgID, Status: store.ThreadBusy,
				Metadata: req.ThreadMetadata, Config: config, CreatedAt: now, UpdatedAt: now})
			if err != nil {
				return err
			}
			created = true
		case err != nil:
			return err
		default:
			if err := stampThread(ctx, tx, r.OrgID, r.ThreadID, req); err != nil {
				return err
			}
		}
		inflight, err := queryAll(ctx, tx, "inflight runs", `SELECT `+runSelect+` FROM runs
			WHERE org_id = ? AND thread_id = ? AND status IN `+inflightSQL+` ORDER BY seq`,
			[]any{r.OrgID, r.ThreadID}, runScan(ctx, tx))
		if err != nil {
			return err
		}
		switch req.IfInflight {
		case store.InflightReject:
			if len(inflight) > 0 {
				return store.ErrBusy
			}
		case store.InflightCancel:
			for i, o := range inflight {
				if inflight[i], err = cancelInflight(ctx, tx, o, req.CancelAction, now); err != nil {
					return err
				}
			}
		}
		behind := slices.ContainsFunc(inflight, func(o store.Run) bool {
			return o.Status == store.RunRunning || o.Status == store.RunPending && store.Ahead(o, r)
		})
		_, err = tx.ExecContext(ctx, `INSERT INTO runs (`+runColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, '', '', NULL, 0)`,
			r.ID, r.OrgID, r.ThreadID, r.AssistantID, store.RunPending, jsonObject(r.Metadata),
			jsonObject(r.Kwargs), r.MultitaskStrategy, r.Temporary, micros(r.NotBefore),
			micros(r.CreatedAt), micros(r.UpdatedAt))
		if err != nil {
			return mapErr("add run", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE threads SET status = ?, updated_at = ?
			WHERE org_id = ? AND id = ?`, store.ThreadBusy, micros(now), r.OrgID, r.ThreadID); err != nil {
			return mapErr("add run", err)
		}
		out, err = getRun(ctx, tx, r.OrgID, r.ThreadID, r.ID)
		out.Behind = behind
		return err
	})
	if err != nil {
		return store.Run{}, false, err
	}
	return out, created, nil
}

// stampThread merges the keys of req.StampMetadata into an existing
// thread's metadata and gives it req.ThreadConfig's config.
func stampThread(ctx context.Context, tx *txn, orgID, threadID string, req store.NewRun) error {
	if req.StampMetadata == nil && req.ThreadConfig == nil {
		return nil
	}
	var metadata, config []byte // not the values: they may be stored split
	err := tx.QueryRowContext(ctx, `SELECT metadata, config FROM threads WHERE org_id = ? AND id = ?`,
		orgID, threadID).Scan(&metadata, &config)
	if err != nil {
		return mapErr("add run", err)
	}
	if req.StampMetadata != nil {
		if metadata, err = store.MergeObjects(metadata, req.StampMetadata); err != nil {
			return fmt.Errorf("sqlite: add run: %w", err)
		}
	}
	if config, err = newThreadConfig(req, config); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE threads SET metadata = ?, config = ? WHERE org_id = ? AND id = ?`,
		string(metadata), string(config), orgID, threadID)
	return mapErr("add run", err)
}

// newThreadConfig is the config req.ThreadConfig makes of current (current
// itself when there is none).
func newThreadConfig(req store.NewRun, current []byte) ([]byte, error) {
	if req.ThreadConfig == nil {
		return current, nil
	}
	config, err := req.ThreadConfig(current)
	if err != nil {
		return nil, fmt.Errorf("sqlite: add run: thread config: %w", err)
	}
	if len(config) == 0 {
		return []byte("{}"), nil
	}
	return config, nil
}

// cancelInflight applies action to the inflight run r: a running one is
// marked for its worker, a pending one settled (interrupted, or deleted with
// its checkpoints for rollback). It returns the run as it ends up (for a
// deleted run, as it was last, interrupted, with the action).
func cancelInflight(ctx context.Context, tx *txn, r store.Run, action string, now time.Time) (store.Run, error) {
	now = fromMicros(micros(now))
	r.CancelAction, r.UpdatedAt = action, now
	if r.Status == store.RunRunning {
		_, err := tx.ExecContext(ctx, `UPDATE runs SET cancel_action = ?, updated_at = ? WHERE id = ?`,
			action, micros(now), r.ID)
		return r, mapErr("cancel run", err)
	}
	r.Status, r.EndedAt = store.RunInterrupted, now
	if action == store.CancelRollback {
		return r, deleteRun(ctx, tx, r, true)
	}
	_, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, cancel_action = ?, ended_at = ?,
		updated_at = ? WHERE id = ?`, store.RunInterrupted, action, micros(now), micros(now), r.ID)
	return r, mapErr("cancel run", err)
}

// deleteRun removes the run r, with the checkpoints it wrote when asked.
func deleteRun(ctx context.Context, tx *txn, r store.Run, checkpoints bool) error {
	if checkpoints {
		if _, err := tx.ExecContext(ctx, `DELETE FROM checkpoints
			WHERE org_id = ? AND thread_id = ? AND run_id = ?`, r.OrgID, r.ThreadID, r.ID); err != nil {
			return mapErr("delete checkpoints", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE id = ?`, r.ID); err != nil {
		return mapErr("delete run", err)
	}
	// Its checkpoints, or its result, may have been the last to reach
	// some values.
	return collectBlobs(ctx, tx, r.OrgID, r.ThreadID)
}

// Run implements store.RunQueue.
func (db *DB) Run(ctx context.Context, orgID, threadID, id string) (store.Run, error) {
	return getRun(ctx, db.reads(), orgID, threadID, id)
}

func getRun(ctx context.Context, q queryer, orgID, threadID, id string) (store.Run, error) {
	r, err := runScan(ctx, q)(q.QueryRowContext(ctx, `SELECT `+runSelect+` FROM runs
		WHERE id = ? AND org_id = ? AND thread_id = ?`, id, orgID, threadID))
	if err != nil {
		return store.Run{}, mapErr("run", err)
	}
	return r, nil
}

// ListRuns implements store.RunQueue: newest first, ties broken by insertion order
// (the later insert first); ErrNotFound when the thread does not exist.
func (db *DB) ListRuns(ctx context.Context, orgID, threadID, status string, limit, offset int) ([]store.Run, error) {
	if err := threadExists(ctx, db.reads(), orgID, threadID); err != nil {
		return nil, err
	}
	where := "org_id = ? AND thread_id = ?"
	args := []any{orgID, threadID}
	if status != "" {
		where += " AND status = ?"
		args = append(args, status)
	}
	limit, offset = pageOf(limit, offset, 20)
	args = append(args, limit, offset)
	return queryAll(ctx, db.reads(), "list runs", `SELECT `+runSelect+` FROM runs WHERE `+where+`
		ORDER BY created_at DESC, seq DESC LIMIT ? OFFSET ?`, args, runScan(ctx, db.reads()))
}

// DeleteRun implements store.RunQueue. The checkpoints the run wrote stay: they
// are the thread's history.
func (db *DB) DeleteRun(ctx context.Context, orgID, threadID, id string) error {
	return db.inTx(ctx, func(tx *txn) error {
		r, err := getRun(ctx, tx, orgID, threadID, id)
		if err != nil {
			return err
		}
		if r.Status == store.RunPending || r.Status == store.RunRunning {
			return store.ErrBusy
		}
		return deleteRun(ctx, tx, r, false)
	})
}

// CancelRun implements store.RunQueue. A pending run settled by rollback is
// returned as it was last (interrupted, with the action) and is gone. The
// thread of a settled pending run is busy when another run is inflight, idle
// otherwise. A running run already marked gets the new action.
func (db *DB) CancelRun(ctx context.Context, orgID, threadID, id, action string, now time.Time) (store.Run, error) {
	if action != store.CancelInterrupt && action != store.CancelRollback {
		return store.Run{}, fmt.Errorf("sqlite: cancel run: unknown action %q", action)
	}
	var out store.Run
	err := db.inTx(ctx, func(tx *txn) error {
		r, err := getRun(ctx, tx, orgID, threadID, id)
		if err != nil {
			return err
		}
		if r.Status != store.RunPending && r.Status != store.RunRunning {
			out = r
			return nil
		}
		pending := r.Status == store.RunPending
		if out, err = cancelInflight(ctx, tx, r, action, now); err != nil {
			return err
		}
		if pending {
			return settleThreadStatus(ctx, tx, orgID, threadID, store.ThreadIdle, now, false)
		}
		return nil
	})
	if err != nil {
		return store.Run{}, err
	}
	return out, nil
}

// ClaimRun implements store.RunQueue. A running run whose lease ended before
// now comes first, the oldest in (NotBefore, CreatedAt, insertion) order (a
// running run with an expired lease still holds its thread, so a thread
// never has two running runs). Otherwise the organizations with pending
// runs are visited in org_id order, from the one after claim_turn's round
// to claim_turn's own, and the first with a free slot and a claimable run
// gives its oldest one and becomes claim_turn's. StartedAt is set by the
// first claim only.
func (db *DB) ClaimRun(ctx context.Context, owner string, now, leaseUntil time.Time, perOrg int) (store.Run, bool, error) {
	if ok, err := anyClaimable(ctx, db.reads(), now); err != nil || !ok {
		return store.Run{}, false, err
	}
	var out store.Run
	var found bool
	err := db.inTx(ctx, func(tx *txn) error {
		found = false
		id, err := expiredLease(ctx, tx, now)
		if err == nil && id == "" {
			id, err = nextInTurn(ctx, tx, now, perOrg)
		}
		if err != nil || id == "" {
			return err
		}
		out, err = markClaimed(ctx, tx, id, owner, now, leaseUntil)
		found = err == nil
		return err
	})
	if err != nil || !found {
		return store.Run{}, false, err
	}
	return out, true, nil
}

func getRunByID(ctx context.Context, q queryer, id string) (store.Run, error) {
	r, err := runScan(ctx, q)(q.QueryRowContext(ctx, `SELECT `+runSelect+` FROM runs WHERE id = ?`, id))
	if err != nil {
		return store.Run{}, mapErr("run", err)
	}
	return r, nil
}

// RenewLease implements store.RunQueue. ErrStale also when the run no longer
// exists (its thread was deleted): owner does not hold it. An expired lease
// nobody claimed since is still owner's. ErrSuperseded: fence.go.
func (db *DB) RenewLease(ctx context.Context, runID, owner string, attempt int, until time.Time) (store.Run, error) {
	var out store.Run
	err := db.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET lease_until = ?
			WHERE id = ? AND status = ? AND lease_owner = ? AND (? <= 0 OR attempt = ?)`,
			micros(until), runID, store.RunRunning, owner, attempt, attempt)
		if err != nil {
			return mapErr("renew lease", err)
		}
		n, err := affected("renew lease", res)
		if err != nil {
			return err
		}
		if n == 0 {
			return fenceRenewal(ctx, tx, runID, attempt)
		}
		out, err = getRunByID(ctx, tx, runID)
		return err
	})
	if err != nil {
		return store.Run{}, err
	}
	return out, nil
}

// FinishRun implements store.RunQueue. ErrStale when the run is not running under
// f.LeaseOwner, including when it no longer exists; ErrSuperseded when it is
// running under another attempt than f.Attempt (> 0, fence.go). A finished run keeps its
// CancelAction; its lease is cleared. After a rollback the thread's summary is
// left as it was (the run's writes are undone) and its status is idle unless
// another run is inflight.
func (db *DB) FinishRun(ctx context.Context, f store.FinishedRun) error {
	return db.inTx(ctx, func(tx *txn) error {
		r, err := getRun(ctx, tx, f.OrgID, f.ThreadID, f.RunID)
		if errors.Is(err, store.ErrNotFound) {
			return store.ErrStale
		}
		if err != nil {
			return err
		}
		if err := fenceFinish(r, f); err != nil {
			return err
		}
		if r.Status != store.RunRunning || r.LeaseOwner != f.LeaseOwner {
			return store.ErrStale
		}
		switch {
		case r.Temporary:
			if err := keepTemporaryResult(ctx, tx, r, f.Result, f.Now); err != nil {
				return err
			}
			return deleteThread(ctx, tx, r.OrgID, r.ThreadID)
		case r.CancelAction == store.CancelRollback:
			if err := deleteRun(ctx, tx, r, true); err != nil {
				return err
			}
			return settleThreadStatus(ctx, tx, r.OrgID, r.ThreadID, store.ThreadIdle, f.Now, true)
		}
		// The result and the thread's values are the state the run's
		// last checkpoint holds: split against its manifest, they write
		// what that checkpoint did not (usually nothing but a manifest).
		latest, err := latestManifest(ctx, tx, r.OrgID, r.ThreadID)
		if err != nil {
			return err
		}
		result, resultManifest, err := putDoc(ctx, tx, r.OrgID, r.ThreadID, f.Result, latest)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, result = ?, result_manifest = ?, result_size = ?,
			ended_at = ?, updated_at = ?, lease_owner = '', lease_until = NULL WHERE id = ?`,
			f.Status, result, resultManifest, sizeOf(f.Result), micros(f.Now), micros(f.Now), r.ID); err != nil {
			return mapErr("finish run", err)
		}
		set := "interrupts = ?, error = ?"
		args := []any{jsonText(f.Interrupts), jsonText(f.Error)}
		if f.Values != nil {
			// A run that ended without an interrupt has its values as its
			// result: the same document, split the same way, is not
			// scanned and hashed twice.
			values, valuesManifest := result, resultManifest
			if f.Result == nil || !bytes.Equal(f.Values, f.Result) {
				if values, valuesManifest, err = putDoc(ctx, tx, r.OrgID, r.ThreadID, f.Values, latest); err != nil {
					return err
				}
			}
			set += ", state_values = ?, values_manifest = ?"
			args = append(args, values, valuesManifest)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE threads SET `+set+` WHERE org_id = ? AND id = ?`,
			append(args, r.OrgID, r.ThreadID)...); err != nil {
			return mapErr("finish run", err)
		}
		return settleThreadStatus(ctx, tx, r.OrgID, r.ThreadID, f.ThreadStatus, f.Now, true)
	})
}

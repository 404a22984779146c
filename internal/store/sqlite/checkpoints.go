package sqlite

import (
	"context"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
	sqlite3 "modernc.org/sqlite/lib"
)

const checkpointColumns = `thread_id, id, parent_id, run_id, created_at, data`

func scanCheckpoint(s scanner) (store.Checkpoint, error) {
	var c store.Checkpoint
	var created int64
	if err := s.Scan(&c.ThreadID, &c.ID, &c.ParentID, &c.RunID, &created, &c.Data); err != nil {
		return store.Checkpoint{}, err
	}
	c.CreatedAt = fromMicros(created)
	return c, nil
}

// PutCheckpoint implements store.Checkpoints; ErrNotFound when the thread does not
// exist in the org.
func (db *DB) PutCheckpoint(ctx context.Context, orgID string, cp store.Checkpoint) error {
	return db.inStatementTx(ctx, func(tx *txn) error { return putCheckpoint(ctx, tx, orgID, cp) })
}

// PutCheckpoints implements store.Checkpoints: one transaction for all.
func (db *DB) PutCheckpoints(ctx context.Context, orgID string, cps []store.Checkpoint) error {
	switch len(cps) {
	case 0:
		return nil
	case 1: // a sync run's step
		return db.PutCheckpoint(ctx, orgID, cps[0])
	}
	return db.inTx(ctx, func(tx *txn) error {
		for _, cp := range cps {
			if err := putCheckpoint(ctx, tx, orgID, cp); err != nil {
				return err
			}
		}
		return nil
	})
}

// putCheckpoint stores cp; the foreign key to its thread answers
// store.ErrNotFound when the thread is missing, without a query of its own.
func putCheckpoint(ctx context.Context, tx *txn, orgID string, cp store.Checkpoint) error {
	if err := fenceCheckpoint(ctx, tx, orgID, cp); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (org_id, `+checkpointColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (org_id, thread_id, id) DO UPDATE SET parent_id = excluded.parent_id,
			run_id = excluded.run_id, created_at = excluded.created_at, data = excluded.data`,
		orgID, cp.ThreadID, cp.ID, cp.ParentID, cp.RunID, micros(cp.CreatedAt), cp.Data)
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
		return store.ErrNotFound
	}
	return mapErr("put checkpoint", err)
}

// Checkpoint implements store.Checkpoints.
func (db *DB) Checkpoint(ctx context.Context, orgID, threadID, id string) (store.Checkpoint, error) {
	c, err := scanCheckpoint(db.reads().QueryRowContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints
		WHERE org_id = ? AND thread_id = ? AND id = ?`, orgID, threadID, id))
	if err != nil {
		return store.Checkpoint{}, mapErr("checkpoint", err)
	}
	return c, nil
}

// LatestCheckpoint implements store.Checkpoints.
func (db *DB) LatestCheckpoint(ctx context.Context, orgID, threadID string) (store.Checkpoint, error) {
	c, err := scanCheckpoint(db.reads().QueryRowContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints
		WHERE org_id = ? AND thread_id = ? ORDER BY id DESC LIMIT 1`, orgID, threadID))
	if err != nil {
		return store.Checkpoint{}, mapErr("latest checkpoint", err)
	}
	return c, nil
}

// ListCheckpoints implements store.Checkpoints; ErrNotFound when the thread does not
// exist. IDs compare as byte strings.
func (db *DB) ListCheckpoints(ctx context.Context, orgID, threadID, before string, limit int) ([]store.Checkpoint, error) {
	if err := threadExists(ctx, db.reads(), orgID, threadID); err != nil {
		return nil, err
	}
	where := "org_id = ? AND thread_id = ?"
	args := []any{orgID, threadID}
	if before != "" {
		where += " AND id < ?"
		args = append(args, before)
	}
	limit, _ = pageOf(limit, 0, 10)
	args = append(args, limit)
	return queryAll(ctx, db.reads(), "list checkpoints", `SELECT `+checkpointColumns+` FROM checkpoints
		WHERE `+where+` ORDER BY id DESC LIMIT ?`, args, scanCheckpoint)
}

// PruneCheckpoints implements store.Checkpoints.
func (db *DB) PruneCheckpoints(ctx context.Context, orgID, threadID string) error {
	return db.inTx(ctx, func(tx *txn) error {
		if err := threadExists(ctx, tx, orgID, threadID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM checkpoints WHERE org_id = ? AND thread_id = ?
			AND id < (SELECT MAX(id) FROM checkpoints WHERE org_id = ? AND thread_id = ?)`,
			orgID, threadID, orgID, threadID)
		return mapErr("prune checkpoints", err)
	})
}

// UpdateThreadState implements store.Checkpoints; ErrNotFound when the thread does
// not exist. Nil values leave the thread's values unchanged (as in
// FinishRun), an empty status its status; interrupts are replaced as given
// and the thread's Error is kept.
func (db *DB) UpdateThreadState(ctx context.Context, orgID string, cp store.Checkpoint, values, interrupts []byte, status string, now time.Time) error {
	return db.inTx(ctx, func(tx *txn) error {
		if err := threadExists(ctx, tx, orgID, cp.ThreadID); err != nil {
			return err
		}
		var busy int
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM runs
			WHERE org_id = ? AND thread_id = ? AND status IN `+inflightSQL+`)`,
			orgID, cp.ThreadID).Scan(&busy); err != nil {
			return mapErr("update thread state", err)
		}
		if busy != 0 {
			return store.ErrBusy
		}
		if err := putCheckpoint(ctx, tx, orgID, cp); err != nil {
			return err
		}
		set := "interrupts = ?, updated_at = ?"
		args := []any{jsonText(interrupts), micros(now)}
		if values != nil {
			set += ", state_values = ?"
			args = append(args, jsonText(values))
		}
		if status != "" {
			set += ", status = ?"
			args = append(args, status)
		}
		_, err := tx.ExecContext(ctx, `UPDATE threads SET `+set+` WHERE org_id = ? AND id = ?`,
			append(args, orgID, cp.ThreadID)...)
		return mapErr("update thread state", err)
	})
}

package sqlite

import (
	"context"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// AppendRunEvents implements store.Events: one transaction reads the run's
// highest seq and inserts after it, so concurrent appends (serialized by
// the write lock) never share a seq.
func (db *DB) AppendRunEvents(ctx context.Context, orgID, runID string, events []store.RunEvent, expires time.Time) (int64, error) {
	if len(events) == 0 {
		return 0, nil
	}
	var first int64
	err := db.inTx(ctx, func(tx *txn) error {
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq) + 1, 0) FROM run_events
			WHERE org_id = ? AND run_id = ?`, orgID, runID).Scan(&first); err != nil {
			return mapErr("append run events", err)
		}
		for i, e := range events {
			if _, err := tx.ExecContext(ctx, `INSERT INTO run_events (org_id, run_id, seq, event, data, expires_at)
				VALUES (?, ?, ?, ?, ?, ?)`, orgID, runID, first+int64(i), e.Event, e.Data, micros(expires)); err != nil {
				return mapErr("append run events", err)
			}
		}
		return nil
	})
	return first, err
}

// RunEvents implements store.Events.
func (db *DB) RunEvents(ctx context.Context, orgID, runID string, after int64, limit int, now time.Time) ([]store.RunEvent, error) {
	limit, _ = pageOf(limit, 0, 100)
	return queryAll(ctx, db.reads(), "run events", `SELECT seq, event, data FROM run_events
		WHERE org_id = ? AND run_id = ? AND seq > ? AND expires_at > ? ORDER BY seq LIMIT ?`,
		[]any{orgID, runID, after, micros(now), limit}, func(s scanner) (store.RunEvent, error) {
			var e store.RunEvent
			err := s.Scan(&e.Seq, &e.Event, &e.Data)
			return e, err
		})
}

// NextRunEventSeq implements store.Events.
func (db *DB) NextRunEventSeq(ctx context.Context, orgID, runID string, now time.Time) (int64, error) {
	var next int64
	err := db.reads().QueryRowContext(ctx, `SELECT COALESCE(MAX(seq) + 1, 0) FROM run_events
		WHERE org_id = ? AND run_id = ? AND expires_at > ?`, orgID, runID, micros(now)).Scan(&next)
	return next, mapErr("next run event", err)
}

// DeleteExpiredRunEvents implements store.Events.
func (db *DB) DeleteExpiredRunEvents(ctx context.Context, now time.Time, limit int) (int, error) {
	var n int64
	err := db.inStatementTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM run_events WHERE (org_id, run_id, seq) IN (
			SELECT org_id, run_id, seq FROM run_events WHERE expires_at <= ? LIMIT ?)`, micros(now), limit)
		if err != nil {
			return mapErr("delete expired run events", err)
		}
		if n, err = res.RowsAffected(); err != nil || n >= int64(limit) {
			return err
		}
		res, err = tx.ExecContext(ctx, `DELETE FROM thread_events WHERE (org_id, thread_id, seq) IN (
			SELECT org_id, thread_id, seq FROM thread_events WHERE expires_at <= ? LIMIT ?)`, micros(now), int64(limit)-n)
		if err != nil {
			return mapErr("delete expired thread events", err)
		}
		m, err := res.RowsAffected()
		n += m
		return err
	})
	return int(n), err
}

// AppendThreadEvents implements store.Events: one transaction checks the
// thread, reads its counter (thread_event_seqs, which never expires, so
// the numbering never goes back), inserts after it and moves it on.
func (db *DB) AppendThreadEvents(ctx context.Context, orgID, threadID string, events []store.ThreadEvent, expires time.Time) (int64, error) {
	if len(events) == 0 {
		return 0, nil
	}
	var first int64
	err := db.inTx(ctx, func(tx *txn) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE org_id = ? AND id = ?`, orgID, threadID).Scan(&one); err != nil {
			return mapErr("append thread events", err)
		}
		var last int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT last_seq FROM thread_event_seqs
			WHERE org_id = ? AND thread_id = ?), 0)`, orgID, threadID).Scan(&last); err != nil {
			return mapErr("append thread events", err)
		}
		first = last + 1
		for i, e := range events {
			if _, err := tx.ExecContext(ctx, `INSERT INTO thread_events (org_id, thread_id, seq, run_id, event, data, expires_at)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, orgID, threadID, first+int64(i), e.RunID, e.Event, e.Data, micros(expires)); err != nil {
				return mapErr("append thread events", err)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO thread_event_seqs (org_id, thread_id, last_seq) VALUES (?, ?, ?)
			ON CONFLICT (org_id, thread_id) DO UPDATE SET last_seq = excluded.last_seq`, orgID, threadID, last+int64(len(events)))
		return mapErr("append thread events", err)
	})
	return first, err
}

// ThreadEvents implements store.Events.
func (db *DB) ThreadEvents(ctx context.Context, orgID, threadID string, after int64, limit int, now time.Time) ([]store.ThreadEvent, error) {
	limit, _ = pageOf(limit, 0, 100)
	return queryAll(ctx, db.reads(), "thread events", `SELECT seq, run_id, event, data FROM thread_events
		WHERE org_id = ? AND thread_id = ? AND seq > ? AND expires_at > ? ORDER BY seq LIMIT ?`,
		[]any{orgID, threadID, after, micros(now), limit}, func(s scanner) (store.ThreadEvent, error) {
			var e store.ThreadEvent
			err := s.Scan(&e.Seq, &e.RunID, &e.Event, &e.Data)
			return e, err
		})
}

// LastThreadEventSeq implements store.Events.
func (db *DB) LastThreadEventSeq(ctx context.Context, orgID, threadID string) (int64, error) {
	var last int64
	err := db.reads().QueryRowContext(ctx, `SELECT COALESCE((SELECT last_seq FROM thread_event_seqs
		WHERE org_id = ? AND thread_id = ?), 0)`, orgID, threadID).Scan(&last)
	return last, mapErr("last thread event", err)
}

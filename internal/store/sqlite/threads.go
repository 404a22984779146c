package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

const threadColumns = `id, org_id, status, metadata, config, state_values, interrupts, error,
	created_at, updated_at, expires_at, ttl_strategy, state_updated_at`

// threadSelect reads threadColumns and the manifest of a thread's values
// stored split (values_manifest, migration 0021; see docs.go).
const threadSelect = threadColumns + `, values_manifest`

// threadScan scans a row of threadSelect, reading the values of a split
// summary with q.
func threadScan(ctx context.Context, q queryer) func(scanner) (store.Thread, error) {
	return func(s scanner) (store.Thread, error) {
		var t store.Thread
		var created, updated, stateUpdated int64
		var expires sql.NullInt64
		var manifest []byte
		err := s.Scan(&t.ID, &t.OrgID, &t.Status, &t.Metadata, &t.Config, &t.Values, &t.Interrupts,
			&t.Error, &created, &updated, &expires, &t.TTLStrategy, &stateUpdated, &manifest)
		if err != nil {
			return store.Thread{}, err
		}
		t.CreatedAt, t.UpdatedAt, t.ExpiresAt = fromMicros(created), fromMicros(updated), fromNullMicros(expires)
		t.StateUpdatedAt = fromMicros(stateUpdated)
		if manifest != nil {
			if t.Values, err = decodeDoc(ctx, q, t.OrgID, t.ID, t.Values, manifest); err != nil {
				return store.Thread{}, err
			}
		}
		return t, nil
	}
}

// CreateThread implements store.Threads. An empty Status is stored as idle; nil
// Metadata or Config as "{}".
func (db *DB) CreateThread(ctx context.Context, t store.Thread) error {
	// Through the writer, as every write: an INSERT on a pooled connection
	// would contend with it inside SQLite's busy handler and, on a loaded
	// machine where the writer is never free when it polls, fail with
	// SQLITE_BUSY after busy_timeout (doc.go, "Writes").
	return db.inTx(ctx, func(tx *txn) error { return insertThread(ctx, tx, t) })
}

func insertThread(ctx context.Context, q queryer, t store.Thread) error {
	if t.Status == "" {
		t.Status = store.ThreadIdle
	}
	if t.StateUpdatedAt.IsZero() {
		t.StateUpdatedAt = t.CreatedAt
	}
	_, err := q.ExecContext(ctx, `INSERT INTO threads (`+threadColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.OrgID, t.Status, jsonObject(t.Metadata), jsonObject(t.Config), jsonText(t.Values),
		jsonText(t.Interrupts), jsonText(t.Error), micros(t.CreatedAt), micros(t.UpdatedAt),
		nullMicros(t.ExpiresAt), t.TTLStrategy, micros(t.StateUpdatedAt))
	return mapErr("create thread", err)
}

// Thread implements store.Threads.
func (db *DB) Thread(ctx context.Context, orgID, id string) (store.Thread, error) {
	return getThread(ctx, db.reads(), orgID, id)
}

func getThread(ctx context.Context, q queryer, orgID, id string) (store.Thread, error) {
	t, err := threadScan(ctx, q)(q.QueryRowContext(ctx,
		`SELECT `+threadSelect+` FROM threads WHERE org_id = ? AND id = ?`, orgID, id))
	if err != nil {
		return store.Thread{}, mapErr("thread", err)
	}
	return t, nil
}

// threadExists returns ErrNotFound when the thread is not in the org.
func threadExists(ctx context.Context, q queryer, orgID, id string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE org_id = ? AND id = ?`, orgID, id).Scan(&one)
	return mapErr("thread", err)
}

// threadSortColumns are the columns of the thread sort keys.
var threadSortColumns = map[string]string{
	"": "created_at", store.ThreadSortCreatedAt: "created_at", store.ThreadSortUpdatedAt: "updated_at",
	store.ThreadSortStateUpdatedAt: "state_updated_at", store.ThreadSortID: "id", store.ThreadSortStatus: "status",
}

// SearchThreads implements store.Threads: in the filter's order, ties broken
// newest first, then by insertion order (the later insert first).
func (db *DB) SearchThreads(ctx context.Context, orgID string, f store.ThreadFilter) ([]store.Thread, error) {
	where, args, keep, err := threadWhere(orgID, f)
	if err != nil {
		return nil, err
	}
	column, ok := threadSortColumns[f.SortBy]
	if !ok {
		return nil, fmt.Errorf("sqlite: search threads: unknown sort key %q", f.SortBy)
	}
	dir := " DESC"
	if f.Ascending {
		dir = " ASC"
	}
	limit, offset := pageOf(f.Limit, f.Offset, 10)
	query := `SELECT ` + threadSelect + ` FROM threads WHERE ` + where +
		` ORDER BY ` + column + dir + `, created_at DESC, seq DESC`
	if keep == nil {
		query += ` LIMIT ? OFFSET ?`
		args = append(args, limit, offset)
	}
	return queryPage(ctx, db.reads(), "search threads", query, args, threadScan(ctx, db.reads()), keep, limit, offset)
}

// CountThreads implements store.Threads.
func (db *DB) CountThreads(ctx context.Context, orgID string, f store.ThreadFilter) (int, error) {
	where, args, keep, err := threadWhere(orgID, f)
	if err != nil {
		return 0, err
	}
	if keep == nil {
		var count int
		err := db.reads().QueryRowContext(ctx, `SELECT COUNT(*) FROM threads WHERE `+where, args...).Scan(&count)
		return count, mapErr("count threads", err)
	}
	// The SQL narrows by key; Matches decides (equal decoded values).
	rows, err := db.reads().QueryContext(ctx, `SELECT `+threadSelect+` FROM threads WHERE `+where, args...)
	if err != nil {
		return 0, mapErr("count threads", err)
	}
	defer rows.Close()
	count := 0
	for rows.Next() {
		t, err := threadScan(ctx, db.reads())(rows)
		if err != nil {
			return 0, mapErr("count threads", err)
		}
		if keep(t) {
			count++
		}
	}
	return count, mapErr("count threads", rows.Err())
}

// threadWhere is the condition of a thread filter, and the decision in Go
// its JSON filters need (nil when there are none).
func threadWhere(orgID string, f store.ThreadFilter) (string, []any, func(store.Thread) bool, error) {
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return "", nil, nil, err
	}
	vals, err := parseFilter("values", f.Values)
	if err != nil {
		return "", nil, nil, err
	}
	where := []string{"org_id = ?"}
	args := []any{orgID}
	if len(f.IDs) > 0 {
		where = append(where, "id IN ("+placeholders(len(f.IDs))+")")
		for _, id := range f.IDs {
			args = append(args, id)
		}
	}
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, f.Status)
	}
	for _, jf := range []struct {
		f      store.JSONFilter
		column string
	}{{meta, "metadata"}} { // values may be stored split: decided in Go (keep)
		if jf.f != nil {
			w, a := jsonWhere(jf.f, jf.column)
			where = append(where, w)
			args = append(args, a...)
		}
	}
	var keep func(store.Thread) bool
	if meta != nil || vals != nil {
		keep = func(t store.Thread) bool { return meta.Matches(t.Metadata) && vals.Matches(t.Values) }
	}
	return strings.Join(where, " AND "), args, keep, nil
}

// UpdateThreadMetadata implements store.Threads.
func (db *DB) UpdateThreadMetadata(ctx context.Context, orgID, id string, metadata []byte, now time.Time) (store.Thread, error) {
	var out store.Thread
	err := db.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE threads SET metadata = ?, updated_at = ?
			WHERE org_id = ? AND id = ?`, jsonObject(metadata), micros(now), orgID, id)
		if err != nil {
			return mapErr("update thread metadata", err)
		}
		n, err := affected("update thread metadata", res)
		if err != nil {
			return err
		}
		if n == 0 {
			return store.ErrNotFound
		}
		out, err = getThread(ctx, tx, orgID, id)
		return err
	})
	if err != nil {
		return store.Thread{}, err
	}
	return out, nil
}

// DeleteThread implements store.Threads. A running run's worker finds out when
// it next renews its lease (store.ErrStale).
func (db *DB) DeleteThread(ctx context.Context, orgID, id string) error {
	return db.inTx(ctx, func(tx *txn) error {
		return deleteThread(ctx, tx, orgID, id)
	})
}

// deleteThread removes a thread with its checkpoints and runs.
func deleteThread(ctx context.Context, tx *txn, orgID, id string) error {
	// ON DELETE CASCADE would do; deleting explicitly keeps the rule
	// independent of the foreign_keys pragma.
	if _, err := tx.ExecContext(ctx,
		`DELETE FROM checkpoints WHERE org_id = ? AND thread_id = ?`, orgID, id); err != nil {
		return mapErr("delete checkpoints", err)
	}
	if _, err := tx.ExecContext(ctx,
		`DELETE FROM checkpoint_blobs WHERE org_id = ? AND thread_id = ?`, orgID, id); err != nil {
		return mapErr("delete checkpoint blobs", err)
	}
	if _, err := tx.ExecContext(ctx,
		`DELETE FROM runs WHERE org_id = ? AND thread_id = ?`, orgID, id); err != nil {
		return mapErr("delete runs", err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM threads WHERE org_id = ? AND id = ?`, orgID, id)
	if err != nil {
		return mapErr("delete thread", err)
	}
	n, err := affected("delete thread", res)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// settleThreadStatus sets the thread's status to busy when a run is inflight
// on it and to status otherwise; stateChanged: its state changed at now too
// (store.Thread.StateUpdatedAt).
func settleThreadStatus(ctx context.Context, tx *txn, orgID, threadID, status string, now time.Time, stateChanged bool) error {
	// An UPDATE's expressions read the row as it was: the state's time is
	// given, not taken from updated_at.
	stateSet := "state_updated_at"
	if stateChanged {
		stateSet = "?"
	}
	args := []any{orgID, threadID, store.ThreadBusy, status, micros(now)}
	if stateChanged {
		args = append(args, micros(now))
	}
	_, err := tx.ExecContext(ctx, `UPDATE threads SET
		status = CASE WHEN EXISTS (SELECT 1 FROM runs WHERE org_id = ? AND thread_id = ?
			AND status IN `+inflightSQL+`) THEN ? ELSE ? END,
		updated_at = ?, state_updated_at = `+stateSet+`
		WHERE org_id = ? AND id = ?`,
		append(args, orgID, threadID)...)
	return mapErr("update thread status", err)
}

// SetThreadTTL implements store.Threads.
func (db *DB) SetThreadTTL(ctx context.Context, orgID, id string, expiresAt time.Time, strategy string) error {
	return db.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE threads SET expires_at = ?, ttl_strategy = ?
			WHERE org_id = ? AND id = ?`, nullMicros(expiresAt), strategy, orgID, id)
		if err != nil {
			return mapErr("set thread ttl", err)
		}
		n, err := affected("set thread ttl", res)
		if err == nil && n == 0 {
			err = store.ErrNotFound
		}
		return err
	})
}

// ExpiredThreads implements store.Threads.
func (db *DB) ExpiredThreads(ctx context.Context, now time.Time, limit int) ([]store.Thread, error) {
	return queryAll(ctx, db.reads(), "expired threads", `SELECT `+threadSelect+` FROM threads
		WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at LIMIT ?`,
		[]any{micros(now), limit}, threadScan(ctx, db.reads()))
}

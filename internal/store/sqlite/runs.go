package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
	sqlite3 "modernc.org/sqlite/lib"
)

const assistantColumns = `id, org_id, graph_id, name, description, config, context, metadata,
	version, created_at, updated_at`

const threadColumns = `id, org_id, status, metadata, config, state_values, interrupts, error,
	created_at, updated_at`

const runColumns = `id, org_id, thread_id, assistant_id, status, metadata, kwargs,
	multitask_strategy, temporary, not_before, created_at, updated_at, started_at, ended_at,
	result, cancel_action, lease_owner, lease_until, attempt`

const checkpointColumns = `thread_id, id, parent_id, run_id, created_at, data`

// inflightSQL is the list of inflight run statuses, for IN (...).
const inflightSQL = `('` + store.RunPending + `', '` + store.RunRunning + `')`

// jsonText binds a JSON document as TEXT, byte for byte (SQLite's json
// functions would read a BLOB as JSONB); nil is NULL.
func jsonText(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// jsonObject binds a JSON object field that is never absent: nil or empty is
// stored as "{}".
func jsonObject(b []byte) any {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}

// nullMicros stores a time that may be zero: zero is NULL.
func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return micros(t)
}

// fromNullMicros reads a time stored by nullMicros.
func fromNullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

// pageOf resolves paging with a default page size for limit 0 (or less).
func pageOf(limit, offset, def int) (int, int) {
	if limit <= 0 {
		limit = def
	}
	if offset < 0 {
		offset = 0
	}
	return limit, offset
}

func scanAssistant(s scanner) (store.Assistant, error) {
	var a store.Assistant
	var created, updated int64
	err := s.Scan(&a.ID, &a.OrgID, &a.GraphID, &a.Name, &a.Description, &a.Config, &a.Context,
		&a.Metadata, &a.Version, &created, &updated)
	if err != nil {
		return store.Assistant{}, err
	}
	a.CreatedAt, a.UpdatedAt = fromMicros(created), fromMicros(updated)
	return a, nil
}

func scanThread(s scanner) (store.Thread, error) {
	var t store.Thread
	var created, updated int64
	err := s.Scan(&t.ID, &t.OrgID, &t.Status, &t.Metadata, &t.Config, &t.Values, &t.Interrupts,
		&t.Error, &created, &updated)
	if err != nil {
		return store.Thread{}, err
	}
	t.CreatedAt, t.UpdatedAt = fromMicros(created), fromMicros(updated)
	return t, nil
}

func scanRun(s scanner) (store.Run, error) {
	var r store.Run
	var notBefore, created, updated int64
	var started, ended, leaseUntil sql.NullInt64
	err := s.Scan(&r.ID, &r.OrgID, &r.ThreadID, &r.AssistantID, &r.Status, &r.Metadata, &r.Kwargs,
		&r.MultitaskStrategy, &r.Temporary, &notBefore, &created, &updated, &started, &ended,
		&r.Result, &r.CancelAction, &r.LeaseOwner, &leaseUntil, &r.Attempt)
	if err != nil {
		return store.Run{}, err
	}
	r.NotBefore, r.CreatedAt, r.UpdatedAt = fromMicros(notBefore), fromMicros(created), fromMicros(updated)
	r.StartedAt, r.EndedAt, r.LeaseUntil = fromNullMicros(started), fromNullMicros(ended), fromNullMicros(leaseUntil)
	return r, nil
}

func scanCheckpoint(s scanner) (store.Checkpoint, error) {
	var c store.Checkpoint
	var created int64
	if err := s.Scan(&c.ThreadID, &c.ID, &c.ParentID, &c.RunID, &created, &c.Data); err != nil {
		return store.Checkpoint{}, err
	}
	c.CreatedAt = fromMicros(created)
	return c, nil
}

// queryAll runs query and scans every row.
func queryAll[T any](ctx context.Context, q queryer, op, query string, args []any, scan func(scanner) (T, error)) ([]T, error) {
	return queryPage(ctx, q, op, query, args, scan, nil, 0, 0)
}

// queryPage runs query and scans its rows. Without keep, query must already
// be paged (or be wanted whole: limit 0). With keep, rows are filtered by it
// and paged here: offset kept rows are skipped, at most limit returned.
func queryPage[T any](ctx context.Context, q queryer, op, query string, args []any,
	scan func(scanner) (T, error), keep func(T) bool, limit, offset int) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	out := []T{}
	skipped := 0
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, mapErr(op, err)
		}
		if keep != nil {
			if !keep(v) {
				continue
			}
			if skipped < offset {
				skipped++
				continue
			}
		}
		out = append(out, v)
		if keep != nil && len(out) == limit {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// ---- JSON containment filters ---------------------------------------------

// parseFilter reads a metadata or values filter (store.JSONFilter).
func parseFilter(what string, raw []byte) (store.JSONFilter, error) {
	f, err := store.ParseJSONFilter(what, raw)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return f, nil
}

// jsonWhere narrows the query on column in SQL: each key is present with a value
// of the right JSON type, and scalars are equal. matches has the last word.
func jsonWhere(f store.JSONFilter, column string) (string, []any) {
	var conds []string
	var args []any
	for _, k := range f.Keys() {
		cond := "j.key = ?"
		args = append(args, k)
		switch v := f[k].(type) {
		case string:
			cond += " AND j.type = 'text' AND j.atom = ?"
			args = append(args, v)
		case float64:
			cond += " AND j.type IN ('integer', 'real') AND j.atom = ?"
			args = append(args, v)
		case bool:
			if v {
				cond += " AND j.type = 'true'"
			} else {
				cond += " AND j.type = 'false'"
			}
		case nil:
			cond += " AND j.type = 'null'"
		case []any:
			cond += " AND j.type = 'array'"
		case map[string]any:
			cond += " AND j.type = 'object'"
		}
		conds = append(conds, `EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(`+column+`) THEN `+
			column+` END) AS j WHERE `+cond+`)`)
	}
	return strings.Join(conds, " AND "), args
}

// ---- assistants ------------------------------------------------------------

// CreateAssistant implements store.Runs. Nil JSON fields are stored as "{}".
func (db *DB) CreateAssistant(ctx context.Context, a store.Assistant) error {
	_, err := db.db.ExecContext(ctx, `INSERT INTO assistants (`+assistantColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.OrgID, a.GraphID, a.Name, a.Description, jsonObject(a.Config), jsonObject(a.Context),
		jsonObject(a.Metadata), a.Version, micros(a.CreatedAt), micros(a.UpdatedAt))
	return mapErr("create assistant", err)
}

// Assistant implements store.Runs.
func (db *DB) Assistant(ctx context.Context, orgID, id string) (store.Assistant, error) {
	a, err := scanAssistant(db.reads().QueryRowContext(ctx,
		`SELECT `+assistantColumns+` FROM assistants WHERE org_id = ? AND id = ?`, orgID, id))
	if err != nil {
		return store.Assistant{}, mapErr("assistant", err)
	}
	return a, nil
}

// SearchAssistants implements store.Runs: newest first, ties broken by
// insertion order (the later insert first). NameContains is case-sensitive.
func (db *DB) SearchAssistants(ctx context.Context, orgID string, f store.AssistantFilter) ([]store.Assistant, error) {
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return nil, err
	}
	where := []string{"org_id = ?"}
	args := []any{orgID}
	if f.GraphID != "" {
		where = append(where, "graph_id = ?")
		args = append(args, f.GraphID)
	}
	if f.NameContains != "" {
		where = append(where, "instr(name, ?) > 0")
		args = append(args, f.NameContains)
	}
	var keep func(store.Assistant) bool
	if meta != nil {
		w, a := jsonWhere(meta, "metadata")
		where = append(where, w)
		args = append(args, a...)
		keep = func(a store.Assistant) bool { return meta.Matches(a.Metadata) }
	}
	limit, offset := pageOf(f.Limit, f.Offset, 10)
	query := `SELECT ` + assistantColumns + ` FROM assistants WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY created_at DESC, seq DESC`
	if keep == nil {
		query += ` LIMIT ? OFFSET ?`
		args = append(args, limit, offset)
	}
	return queryPage(ctx, db.reads(), "search assistants", query, args, scanAssistant, keep, limit, offset)
}

// DeleteAssistant implements store.Runs. Runs that name the assistant stay.
func (db *DB) DeleteAssistant(ctx context.Context, orgID, id string) error {
	res, err := db.db.ExecContext(ctx, `DELETE FROM assistants WHERE org_id = ? AND id = ?`, orgID, id)
	if err != nil {
		return mapErr("delete assistant", err)
	}
	n, err := affected("delete assistant", res)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// ---- threads ---------------------------------------------------------------

// CreateThread implements store.Runs. An empty Status is stored as idle; nil
// Metadata or Config as "{}".
func (db *DB) CreateThread(ctx context.Context, t store.Thread) error {
	return insertThread(ctx, db.db, t)
}

func insertThread(ctx context.Context, q queryer, t store.Thread) error {
	if t.Status == "" {
		t.Status = store.ThreadIdle
	}
	_, err := q.ExecContext(ctx, `INSERT INTO threads (`+threadColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.OrgID, t.Status, jsonObject(t.Metadata), jsonObject(t.Config), jsonText(t.Values),
		jsonText(t.Interrupts), jsonText(t.Error), micros(t.CreatedAt), micros(t.UpdatedAt))
	return mapErr("create thread", err)
}

// Thread implements store.Runs.
func (db *DB) Thread(ctx context.Context, orgID, id string) (store.Thread, error) {
	return getThread(ctx, db.reads(), orgID, id)
}

func getThread(ctx context.Context, q queryer, orgID, id string) (store.Thread, error) {
	t, err := scanThread(q.QueryRowContext(ctx,
		`SELECT `+threadColumns+` FROM threads WHERE org_id = ? AND id = ?`, orgID, id))
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

// SearchThreads implements store.Runs: newest first, ties broken by insertion
// order (the later insert first).
func (db *DB) SearchThreads(ctx context.Context, orgID string, f store.ThreadFilter) ([]store.Thread, error) {
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return nil, err
	}
	vals, err := parseFilter("values", f.Values)
	if err != nil {
		return nil, err
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
	}{{meta, "metadata"}, {vals, "state_values"}} {
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
	limit, offset := pageOf(f.Limit, f.Offset, 10)
	query := `SELECT ` + threadColumns + ` FROM threads WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY created_at DESC, seq DESC`
	if keep == nil {
		query += ` LIMIT ? OFFSET ?`
		args = append(args, limit, offset)
	}
	return queryPage(ctx, db.reads(), "search threads", query, args, scanThread, keep, limit, offset)
}

// UpdateThreadMetadata implements store.Runs.
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

// DeleteThread implements store.Runs. A running run's worker finds out when
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
// on it and to status otherwise.
func settleThreadStatus(ctx context.Context, tx *txn, orgID, threadID, status string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE threads SET
		status = CASE WHEN EXISTS (SELECT 1 FROM runs WHERE org_id = ? AND thread_id = ?
			AND status IN `+inflightSQL+`) THEN ? ELSE ? END,
		updated_at = ?
		WHERE org_id = ? AND id = ?`,
		orgID, threadID, store.ThreadBusy, status, micros(now), orgID, threadID)
	return mapErr("update thread status", err)
}

// ---- runs --------------------------------------------------------------------

// AddRun implements store.Runs. The run is stored as given except for the
// fields that describe its execution: Status pending, no StartedAt, EndedAt,
// Result, CancelAction or lease, Attempt 0. Nil Metadata or Kwargs are stored
// as "{}". Its CreatedAt is the time of the thread's changes (and of the
// thread itself when created, with "{}" as Config). A strategy other than
// reject, interrupt and rollback behaves as enqueue. Run IDs are unique
// across organizations: a taken one is store.ErrConflict.
func (db *DB) AddRun(ctx context.Context, req store.NewRun) (store.Run, bool, error) {
	r := req.Run
	now := r.CreatedAt
	var out store.Run
	var created bool
	err := db.inTx(ctx, func(tx *txn) error {
		created = false
		err := threadExists(ctx, tx, r.OrgID, r.ThreadID)
		switch {
		case errors.Is(err, store.ErrNotFound) && req.CreateThread:
			err = insertThread(ctx, tx, store.Thread{ID: r.ThreadID, OrgID: r.OrgID, Status: store.ThreadBusy,
				Metadata: req.ThreadMetadata, CreatedAt: now, UpdatedAt: now})
			if err != nil {
				return err
			}
			created = true
		case err != nil:
			return err
		}
		inflight, err := queryAll(ctx, tx, "inflight runs", `SELECT `+runColumns+` FROM runs
			WHERE org_id = ? AND thread_id = ? AND status IN `+inflightSQL+` ORDER BY seq`,
			[]any{r.OrgID, r.ThreadID}, scanRun)
		if err != nil {
			return err
		}
		switch r.MultitaskStrategy {
		case store.MultitaskReject:
			if len(inflight) > 0 {
				return store.ErrBusy
			}
		case store.MultitaskInterrupt, store.MultitaskRollback:
			action := store.CancelInterrupt
			if r.MultitaskStrategy == store.MultitaskRollback {
				action = store.CancelRollback
			}
			for _, o := range inflight {
				if _, err := cancelInflight(ctx, tx, o, action, now); err != nil {
					return err
				}
			}
		}
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
		return err
	})
	if err != nil {
		return store.Run{}, false, err
	}
	return out, created, nil
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
	_, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE id = ?`, r.ID)
	return mapErr("delete run", err)
}

// Run implements store.Runs.
func (db *DB) Run(ctx context.Context, orgID, threadID, id string) (store.Run, error) {
	return getRun(ctx, db.reads(), orgID, threadID, id)
}

func getRun(ctx context.Context, q queryer, orgID, threadID, id string) (store.Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs
		WHERE id = ? AND org_id = ? AND thread_id = ?`, id, orgID, threadID))
	if err != nil {
		return store.Run{}, mapErr("run", err)
	}
	return r, nil
}

// ListRuns implements store.Runs: newest first, ties broken by insertion order
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
	return queryAll(ctx, db.reads(), "list runs", `SELECT `+runColumns+` FROM runs WHERE `+where+`
		ORDER BY created_at DESC, seq DESC LIMIT ? OFFSET ?`, args, scanRun)
}

// DeleteRun implements store.Runs. The checkpoints the run wrote stay: they
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

// CancelRun implements store.Runs. A pending run settled by rollback is
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
			return settleThreadStatus(ctx, tx, orgID, threadID, store.ThreadIdle, now)
		}
		return nil
	})
	if err != nil {
		return store.Run{}, err
	}
	return out, nil
}

// ClaimRun implements store.Runs. Candidates are pending runs whose NotBefore
// is not after now on threads without a running run (a running run with an
// expired lease still holds its thread, so a thread never has two running
// runs) and running runs whose lease ended before now. The first in
// (NotBefore, CreatedAt, insertion) order is claimed, across organizations.
// StartedAt is set by the first claim only.
func (db *DB) ClaimRun(ctx context.Context, owner string, now, leaseUntil time.Time) (store.Run, bool, error) {
	var out store.Run
	var found bool
	err := db.inTx(ctx, func(tx *txn) error {
		found = false
		type candidate struct {
			id                      string
			notBefore, created, seq int64
		}
		var best *candidate
		for _, query := range []string{
			`SELECT id, not_before, created_at, seq FROM runs AS r
			WHERE status = '` + store.RunPending + `' AND not_before <= ?
			AND NOT EXISTS (SELECT 1 FROM runs AS o WHERE o.org_id = r.org_id
				AND o.thread_id = r.thread_id AND o.status = '` + store.RunRunning + `')
			ORDER BY not_before, created_at, seq LIMIT 1`,
			`SELECT id, not_before, created_at, seq FROM runs
			WHERE status = '` + store.RunRunning + `' AND (lease_until IS NULL OR lease_until < ?)
			ORDER BY not_before, created_at, seq LIMIT 1`,
		} {
			var c candidate
			err := tx.QueryRowContext(ctx, query, micros(now)).Scan(&c.id, &c.notBefore, &c.created, &c.seq)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return mapErr("claim run", err)
			}
			if best == nil || c.notBefore < best.notBefore ||
				(c.notBefore == best.notBefore && (c.created < best.created ||
					(c.created == best.created && c.seq < best.seq))) {
				best = &c
			}
		}
		if best == nil {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?,
			started_at = coalesce(started_at, ?), lease_owner = ?, lease_until = ?,
			attempt = attempt + 1, updated_at = ? WHERE id = ?`,
			store.RunRunning, micros(now), owner, micros(leaseUntil), micros(now), best.id); err != nil {
			return mapErr("claim run", err)
		}
		var err error
		out, err = getRunByID(ctx, tx, best.id)
		found = err == nil
		return err
	})
	if err != nil || !found {
		return store.Run{}, false, err
	}
	return out, true, nil
}

func getRunByID(ctx context.Context, q queryer, id string) (store.Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if err != nil {
		return store.Run{}, mapErr("run", err)
	}
	return r, nil
}

// RenewLease implements store.Runs. ErrStale also when the run no longer
// exists (its thread was deleted): owner does not hold it. An expired lease
// nobody claimed since is still owner's.
func (db *DB) RenewLease(ctx context.Context, runID, owner string, until time.Time) (store.Run, error) {
	var out store.Run
	err := db.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET lease_until = ?
			WHERE id = ? AND status = ? AND lease_owner = ?`,
			micros(until), runID, store.RunRunning, owner)
		if err != nil {
			return mapErr("renew lease", err)
		}
		n, err := affected("renew lease", res)
		if err != nil {
			return err
		}
		if n == 0 {
			return store.ErrStale
		}
		out, err = getRunByID(ctx, tx, runID)
		return err
	})
	if err != nil {
		return store.Run{}, err
	}
	return out, nil
}

// FinishRun implements store.Runs. ErrStale when the run is not running under
// f.LeaseOwner, including when it no longer exists. A finished run keeps its
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
			return settleThreadStatus(ctx, tx, r.OrgID, r.ThreadID, store.ThreadIdle, f.Now)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, result = ?, ended_at = ?,
			updated_at = ?, lease_owner = '', lease_until = NULL WHERE id = ?`,
			f.Status, jsonText(f.Result), micros(f.Now), micros(f.Now), r.ID); err != nil {
			return mapErr("finish run", err)
		}
		set := "interrupts = ?, error = ?"
		args := []any{jsonText(f.Interrupts), jsonText(f.Error)}
		if f.Values != nil {
			set += ", state_values = ?"
			args = append(args, jsonText(f.Values))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE threads SET `+set+` WHERE org_id = ? AND id = ?`,
			append(args, r.OrgID, r.ThreadID)...); err != nil {
			return mapErr("finish run", err)
		}
		return settleThreadStatus(ctx, tx, r.OrgID, r.ThreadID, f.ThreadStatus, f.Now)
	})
}

// ---- checkpoints -------------------------------------------------------------

// PutCheckpoint implements store.Runs; ErrNotFound when the thread does not
// exist in the org.
func (db *DB) PutCheckpoint(ctx context.Context, orgID string, cp store.Checkpoint) error {
	return db.inStatementTx(ctx, func(tx *txn) error { return putCheckpoint(ctx, tx, orgID, cp) })
}

// PutCheckpoints implements store.Runs: one transaction for all.
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

// Checkpoint implements store.Runs.
func (db *DB) Checkpoint(ctx context.Context, orgID, threadID, id string) (store.Checkpoint, error) {
	c, err := scanCheckpoint(db.reads().QueryRowContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints
		WHERE org_id = ? AND thread_id = ? AND id = ?`, orgID, threadID, id))
	if err != nil {
		return store.Checkpoint{}, mapErr("checkpoint", err)
	}
	return c, nil
}

// LatestCheckpoint implements store.Runs.
func (db *DB) LatestCheckpoint(ctx context.Context, orgID, threadID string) (store.Checkpoint, error) {
	c, err := scanCheckpoint(db.reads().QueryRowContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints
		WHERE org_id = ? AND thread_id = ? ORDER BY id DESC LIMIT 1`, orgID, threadID))
	if err != nil {
		return store.Checkpoint{}, mapErr("latest checkpoint", err)
	}
	return c, nil
}

// ListCheckpoints implements store.Runs; ErrNotFound when the thread does not
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

// UpdateThreadState implements store.Runs; ErrNotFound when the thread does
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

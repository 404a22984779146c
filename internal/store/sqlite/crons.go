package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

const cronColumns = `id, org_id, assistant_id, thread_id, user_id, schedule, timezone, end_time,
	on_run_completed, enabled, payload, metadata, next_run_date, version, created_at, updated_at`

func scanCron(s scanner) (store.Cron, error) {
	var c store.Cron
	var end, next sql.NullInt64
	var created, updated int64
	var payload, metadata string
	err := s.Scan(&c.ID, &c.OrgID, &c.AssistantID, &c.ThreadID, &c.UserID, &c.Schedule, &c.Timezone, &end,
		&c.OnRunCompleted, &c.Enabled, &payload, &metadata, &next, &c.Version, &created, &updated)
	if err != nil {
		return store.Cron{}, err
	}
	c.Payload, c.Metadata = []byte(payload), []byte(metadata)
	c.EndTime, c.NextRunDate = fromNullMicros(end), fromNullMicros(next)
	c.CreatedAt, c.UpdatedAt = fromMicros(created), fromMicros(updated)
	return c, nil
}

// CreateCron implements store.Crons: the organization's count and the
// insert are in one write transaction.
func (db *DB) CreateCron(ctx context.Context, c store.Cron, maxPerOrg int) error {
	return db.inTx(ctx, func(tx *txn) error {
		if maxPerOrg > 0 {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM crons WHERE org_id = ?`, c.OrgID).Scan(&n); err != nil {
				return mapErr("count crons", err)
			}
			if n >= maxPerOrg {
				return store.ErrLimit
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO crons (`+cronColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
			c.ID, c.OrgID, c.AssistantID, c.ThreadID, c.UserID, c.Schedule, c.Timezone, nullMicros(c.EndTime),
			c.OnRunCompleted, c.Enabled, jsonObject(c.Payload), jsonObject(c.Metadata), nullMicros(c.NextRunDate),
			micros(c.CreatedAt), micros(c.UpdatedAt))
		return mapErr("create cron", err)
	})
}

// Cron implements store.Crons.
func (db *DB) Cron(ctx context.Context, orgID, id string) (store.Cron, error) {
	return getCron(ctx, db.reads(), orgID, id)
}

func getCron(ctx context.Context, q queryer, orgID, id string) (store.Cron, error) {
	c, err := scanCron(q.QueryRowContext(ctx, `SELECT `+cronColumns+` FROM crons WHERE org_id = ? AND id = ?`, orgID, id))
	if err != nil {
		return store.Cron{}, mapErr("cron", err)
	}
	return c, nil
}

// cronSortColumns maps the store's sort keys to columns.
var cronSortColumns = map[string]string{
	"": "created_at", store.CronSortCreatedAt: "created_at", store.CronSortUpdatedAt: "updated_at",
	store.CronSortNextRunDate: "next_run_date", store.CronSortEndTime: "end_time", store.CronSortID: "id",
	store.CronSortAssistantID: "assistant_id", store.CronSortThreadID: "thread_id",
}

// cronWhere is the WHERE clause of f and the filter the rows must also
// pass (nil: none).
func cronWhere(orgID string, f store.CronFilter) (string, []any, func(store.Cron) bool, error) {
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return "", nil, nil, err
	}
	where := []string{"org_id = ?"}
	args := []any{orgID}
	if f.AssistantID != "" {
		where = append(where, "assistant_id = ?")
		args = append(args, f.AssistantID)
	}
	if f.ThreadID != "" {
		where = append(where, "thread_id = ?")
		args = append(args, f.ThreadID)
	}
	if f.Enabled != nil {
		where = append(where, "enabled = ?")
		args = append(args, *f.Enabled)
	}
	var keep func(store.Cron) bool
	if meta != nil {
		w, a := jsonWhere(meta, "metadata")
		where = append(where, w)
		args = append(args, a...)
		keep = func(c store.Cron) bool { return meta.Matches(c.Metadata) }
	}
	return strings.Join(where, " AND "), args, keep, nil
}

// SearchCrons implements store.Crons. A missing end_time or next_run_date
// sorts before every time (first ascending, last descending).
func (db *DB) SearchCrons(ctx context.Context, orgID string, f store.CronFilter) ([]store.Cron, error) {
	col, ok := cronSortColumns[f.SortBy]
	if !ok {
		return nil, fmt.Errorf("sqlite: unknown cron sort key %q", f.SortBy)
	}
	where, args, keep, err := cronWhere(orgID, f)
	if err != nil {
		return nil, err
	}
	dir := "DESC"
	if f.Ascending {
		dir = "ASC"
	}
	limit, offset := pageOf(f.Limit, f.Offset, 10)
	query := `SELECT ` + cronColumns + ` FROM crons WHERE ` + where +
		` ORDER BY ` + col + ` IS NOT NULL ` + dir + `, ` + col + ` ` + dir + `, id ` + dir
	if keep == nil {
		query += ` LIMIT ? OFFSET ?`
		args = append(args, limit, offset)
	}
	return queryPage(ctx, db.reads(), "search crons", query, args, scanCron, keep, limit, offset)
}

// CountCrons implements store.Crons.
func (db *DB) CountCrons(ctx context.Context, orgID string, f store.CronFilter) (int, error) {
	where, args, keep, err := cronWhere(orgID, f)
	if err != nil {
		return 0, err
	}
	if keep == nil {
		var n int
		err := db.reads().QueryRowContext(ctx, `SELECT COUNT(*) FROM crons WHERE `+where, args...).Scan(&n)
		return n, mapErr("count crons", err)
	}
	all, err := queryAll(ctx, db.reads(), "count crons", `SELECT `+cronColumns+` FROM crons WHERE `+where, args, scanCron)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range all {
		if keep(c) {
			n++
		}
	}
	return n, nil
}

// UpdateCron implements store.Crons.
func (db *DB) UpdateCron(ctx context.Context, c store.Cron) (store.Cron, error) {
	var out store.Cron
	err := db.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE crons SET assistant_id = ?, thread_id = ?, user_id = ?, schedule = ?,
			timezone = ?, end_time = ?, on_run_completed = ?, enabled = ?, payload = ?, metadata = ?,
			next_run_date = ?, version = version + 1, updated_at = ?
			WHERE org_id = ? AND id = ? AND version = ?`,
			c.AssistantID, c.ThreadID, c.UserID, c.Schedule, c.Timezone, nullMicros(c.EndTime), c.OnRunCompleted,
			c.Enabled, jsonObject(c.Payload), jsonObject(c.Metadata), nullMicros(c.NextRunDate), micros(c.UpdatedAt),
			c.OrgID, c.ID, c.Version)
		if err != nil {
			return mapErr("update cron", err)
		}
		if err := staleOrMissing(ctx, tx, res, c.OrgID, c.ID); err != nil {
			return err
		}
		out, err = getCron(ctx, tx, c.OrgID, c.ID)
		return err
	})
	if err != nil {
		return store.Cron{}, err
	}
	return out, nil
}

// staleOrMissing tells why a conditional write of a cron changed nothing:
// ErrNotFound when it is gone, ErrStale when its condition failed.
func staleOrMissing(ctx context.Context, tx *txn, res sql.Result, orgID, id string) error {
	n, err := affected("cron", res)
	if err != nil || n > 0 {
		return err
	}
	if _, err := getCron(ctx, tx, orgID, id); err != nil {
		return err
	}
	return store.ErrStale
}

// DeleteCron implements store.Crons.
func (db *DB) DeleteCron(ctx context.Context, orgID, id string) error {
	res, err := db.exec(ctx, `DELETE FROM crons WHERE org_id = ? AND id = ?`, orgID, id)
	if err != nil {
		return mapErr("delete cron", err)
	}
	n, err := affected("delete cron", res)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// DueCrons implements store.Crons, by the crons_due index.
func (db *DB) DueCrons(ctx context.Context, now time.Time, limit int) ([]store.Cron, error) {
	if limit <= 0 {
		return nil, errors.New("sqlite: DueCrons needs a positive limit")
	}
	t := micros(now)
	return queryAll(ctx, db.reads(), "due crons", `SELECT `+cronColumns+` FROM crons
		WHERE enabled = 1 AND next_run_date IS NOT NULL AND next_run_date <= ?
		AND (end_time IS NULL OR end_time >= ?)
		ORDER BY next_run_date, org_id, id LIMIT ?`, []any{t, t, limit}, scanCron)
}

// ClaimCronFiring implements store.Crons: one conditional UPDATE.
func (db *DB) ClaimCronFiring(ctx context.Context, orgID, id string, slot, next time.Time) (store.Cron, error) {
	var out store.Cron
	err := db.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE crons SET next_run_date = ?, version = version + 1
			WHERE org_id = ? AND id = ? AND next_run_date = ?`, nullMicros(next), orgID, id, micros(slot))
		if err != nil {
			return mapErr("claim cron firing", err)
		}
		if err := staleOrMissing(ctx, tx, res, orgID, id); err != nil {
			return err
		}
		out, err = getCron(ctx, tx, orgID, id)
		return err
	})
	if err != nil {
		return store.Cron{}, err
	}
	return out, nil
}

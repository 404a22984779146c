package sqlite

import (
	"context"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

const assistantColumns = `id, org_id, graph_id, name, description, config, context, metadata,
	version, created_at, updated_at`

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

// CreateAssistant implements store.Assistants. Nil JSON fields are stored as "{}".
func (db *DB) CreateAssistant(ctx context.Context, a store.Assistant) error {
	return db.inTx(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO assistants (`+assistantColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.OrgID, a.GraphID, a.Name, a.Description, jsonObject(a.Config), jsonObject(a.Context),
			jsonObject(a.Metadata), a.Version, micros(a.CreatedAt), micros(a.UpdatedAt))
		if err != nil {
			return mapErr("create assistant", err)
		}
		return insertVersion(ctx, tx, a, a.CreatedAt)
	})
}

// insertVersion records a as its version a.Version, made at.
func insertVersion(ctx context.Context, tx *txn, a store.Assistant, at time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO assistant_versions (org_id, assistant_id, version, graph_id,
		name, description, config, context, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.OrgID, a.ID, a.Version, a.GraphID, a.Name, a.Description, jsonObject(a.Config),
		jsonObject(a.Context), jsonObject(a.Metadata), micros(at))
	return mapErr("add assistant version", err)
}

const versionColumns = `assistant_id, org_id, graph_id, name, description, config, context, metadata,
	version, created_at, created_at`

// UpdateAssistant implements store.Assistants.
func (db *DB) UpdateAssistant(ctx context.Context, a store.Assistant) (store.Assistant, error) {
	var out store.Assistant
	err := db.inTx(ctx, func(tx *txn) error {
		var high int
		err := tx.QueryRowContext(ctx, `SELECT coalesce(max(v.version), a.version) FROM assistants a
			LEFT JOIN assistant_versions v ON v.org_id = a.org_id AND v.assistant_id = a.id
			WHERE a.org_id = ? AND a.id = ? GROUP BY a.id`, a.OrgID, a.ID).Scan(&high)
		if err != nil {
			return mapErr("update assistant", err)
		}
		a.Version = high + 1
		if _, err := tx.ExecContext(ctx, `UPDATE assistants SET graph_id = ?, name = ?, description = ?,
			config = ?, context = ?, metadata = ?, version = ?, updated_at = ? WHERE org_id = ? AND id = ?`,
			a.GraphID, a.Name, a.Description, jsonObject(a.Config), jsonObject(a.Context), jsonObject(a.Metadata),
			a.Version, micros(a.UpdatedAt), a.OrgID, a.ID); err != nil {
			return mapErr("update assistant", err)
		}
		if err := insertVersion(ctx, tx, a, a.UpdatedAt); err != nil {
			return err
		}
		out, err = scanAssistant(tx.QueryRowContext(ctx,
			`SELECT `+assistantColumns+` FROM assistants WHERE org_id = ? AND id = ?`, a.OrgID, a.ID))
		return mapErr("update assistant", err)
	})
	return out, err
}

// AssistantVersions implements store.Assistants.
func (db *DB) AssistantVersions(ctx context.Context, orgID, id string, f store.AssistantVersionFilter) ([]store.Assistant, error) {
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return nil, err
	}
	if _, err := db.Assistant(ctx, orgID, id); err != nil {
		return nil, err
	}
	var keep func(store.Assistant) bool
	if meta != nil {
		keep = func(a store.Assistant) bool { return meta.Matches(a.Metadata) }
	}
	limit, offset := pageOf(f.Limit, f.Offset, 10)
	query := `SELECT ` + versionColumns + ` FROM assistant_versions WHERE org_id = ? AND assistant_id = ?
		ORDER BY version DESC`
	args := []any{orgID, id}
	if keep == nil {
		query += ` LIMIT ? OFFSET ?`
		args = append(args, limit, offset)
	}
	return queryPage(ctx, db.reads(), "assistant versions", query, args, scanAssistant, keep, limit, offset)
}

// SetAssistantVersion implements store.Assistants.
func (db *DB) SetAssistantVersion(ctx context.Context, orgID, id string, version int, now time.Time) (store.Assistant, error) {
	var out store.Assistant
	err := db.inTx(ctx, func(tx *txn) error {
		v, err := scanAssistant(tx.QueryRowContext(ctx, `SELECT `+versionColumns+` FROM assistant_versions
			WHERE org_id = ? AND assistant_id = ? AND version = ?`, orgID, id, version))
		if err != nil {
			return mapErr("set assistant version", err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE assistants SET graph_id = ?, name = ?, description = ?,
			config = ?, context = ?, metadata = ?, version = ?, updated_at = ? WHERE org_id = ? AND id = ?`,
			v.GraphID, v.Name, v.Description, v.Config, v.Context, v.Metadata, v.Version, micros(now), orgID, id)
		if err != nil {
			return mapErr("set assistant version", err)
		}
		if n, err := affected("set assistant version", res); err != nil || n == 0 {
			if err == nil {
				err = store.ErrNotFound
			}
			return err
		}
		out, err = scanAssistant(tx.QueryRowContext(ctx,
			`SELECT `+assistantColumns+` FROM assistants WHERE org_id = ? AND id = ?`, orgID, id))
		return mapErr("set assistant version", err)
	})
	return out, err
}

// Assistant implements store.Assistants.
func (db *DB) Assistant(ctx context.Context, orgID, id string) (store.Assistant, error) {
	a, err := scanAssistant(db.reads().QueryRowContext(ctx,
		`SELECT `+assistantColumns+` FROM assistants WHERE org_id = ? AND id = ?`, orgID, id))
	if err != nil {
		return store.Assistant{}, mapErr("assistant", err)
	}
	return a, nil
}

// SearchAssistants implements store.Assistants: newest first, ties broken by
// insertion order (the later insert first). NameContains is case-sensitive.
func (db *DB) SearchAssistants(ctx context.Context, orgID string, f store.AssistantFilter) ([]store.Assistant, error) {
	where, args, keep, err := assistantWhere(orgID, f)
	if err != nil {
		return nil, err
	}
	limit, offset := pageOf(f.Limit, f.Offset, 10)
	query := `SELECT ` + assistantColumns + ` FROM assistants WHERE ` + where + ` ORDER BY created_at DESC, seq DESC`
	if keep == nil {
		query += ` LIMIT ? OFFSET ?`
		args = append(args, limit, offset)
	}
	return queryPage(ctx, db.reads(), "search assistants", query, args, scanAssistant, keep, limit, offset)
}

// CountAssistants implements store.Assistants.
func (db *DB) CountAssistants(ctx context.Context, orgID string, f store.AssistantFilter) (int, error) {
	where, args, keep, err := assistantWhere(orgID, f)
	if err != nil {
		return 0, err
	}
	if keep == nil {
		var n int
		err := db.reads().QueryRowContext(ctx, `SELECT COUNT(*) FROM assistants WHERE `+where, args...).Scan(&n)
		return n, mapErr("count assistants", err)
	}
	list, err := queryAll(ctx, db.reads(), "count assistants", `SELECT `+assistantColumns+` FROM assistants WHERE `+where, args, scanAssistant)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range list {
		if keep(a) {
			n++
		}
	}
	return n, nil
}

func assistantWhere(orgID string, f store.AssistantFilter) (string, []any, func(store.Assistant) bool, error) {
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return "", nil, nil, err
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
	return strings.Join(where, " AND "), args, keep, nil
}

// DeleteAssistant implements store.Assistants. Runs that name the assistant stay.
func (db *DB) DeleteAssistant(ctx context.Context, orgID, id string) error {
	return db.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM assistants WHERE org_id = ? AND id = ?`, orgID, id)
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
		_, err = tx.ExecContext(ctx, `DELETE FROM assistant_versions WHERE org_id = ? AND assistant_id = ?`, orgID, id)
		return mapErr("delete assistant", err)
	})
}

package sqlite

import (
	"context"
	"strings"

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
	_, err := db.exec(ctx, `INSERT INTO assistants (`+assistantColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.OrgID, a.GraphID, a.Name, a.Description, jsonObject(a.Config), jsonObject(a.Context),
		jsonObject(a.Metadata), a.Version, micros(a.CreatedAt), micros(a.UpdatedAt))
	return mapErr("create assistant", err)
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

// DeleteAssistant implements store.Assistants. Runs that name the assistant stay.
func (db *DB) DeleteAssistant(ctx context.Context, orgID, id string) error {
	res, err := db.exec(ctx, `DELETE FROM assistants WHERE org_id = ? AND id = ?`, orgID, id)
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

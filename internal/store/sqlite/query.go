package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

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

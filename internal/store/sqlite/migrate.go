package sqlite

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one embedded schema step, named NNNN_what.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// migrate applies, in one write transaction, every embedded migration not yet
// recorded in schema_migrations. Concurrent openers serialize on the
// transaction's lock; the second one finds everything applied.
func (db *DB) migrate(ctx context.Context) error {
	all, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return db.inTx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER NOT NULL PRIMARY KEY,
			name       TEXT    NOT NULL,
			applied_at INTEGER NOT NULL
		)`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		applied := map[int]bool{}
		rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return fmt.Errorf("migrate: %w", err)
			}
			applied[v] = true
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		known := map[int]bool{}
		for _, m := range all {
			known[m.version] = true
		}
		for v := range applied {
			if !known[v] {
				return fmt.Errorf("migrate: the database has schema migration %d, unknown to this program (written by a newer version?)", v)
			}
		}
		for _, m := range all {
			if applied[m.version] {
				continue
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("migrate %s: %w", m.name, err)
			}
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, micros(time.Now())); err != nil {
				return fmt.Errorf("migrate %s: %w", m.name, err)
			}
		}
		return nil
	})
}

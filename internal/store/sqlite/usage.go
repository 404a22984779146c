package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Usage implements store.Accounting: the counters the triggers of migration
// 0006 keep in the transactions of the writes.
func (db *DB) Usage(ctx context.Context, orgID string) (store.Usage, error) {
	var u store.Usage
	err := db.reads().QueryRowContext(ctx, `SELECT threads, bytes FROM org_usage WHERE org_id = ?`, orgID).
		Scan(&u.Threads, &u.Bytes)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Usage{}, nil
	}
	if err != nil {
		return store.Usage{}, mapErr("usage", err)
	}
	return u, nil
}

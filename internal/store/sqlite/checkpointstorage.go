package sqlite

import (
	"context"

	"github.com/stepgraph/stepgraph/internal/store"
)

// ThreadStorage implements store.CheckpointStorage: a checkpoint's row holds
// its channel values and the writes of its step, so everything is counted
// under Checkpoints (the bytes of the rows' data). One statement: the
// thread's existence and its rows are read from one snapshot.
func (db *DB) ThreadStorage(ctx context.Context, orgID, threadID string) (store.ThreadStorage, error) {
	out := store.ThreadStorage{ByChannel: map[string]store.Sized{}}
	var exists int
	err := db.reads().QueryRowContext(ctx, `SELECT
			EXISTS (SELECT 1 FROM threads WHERE org_id = ? AND id = ?),
			COUNT(*), COALESCE(SUM(LENGTH(data)), 0)
		FROM checkpoints WHERE org_id = ? AND thread_id = ?`, orgID, threadID, orgID, threadID).
		Scan(&exists, &out.Checkpoints.Count, &out.Checkpoints.Bytes)
	if err != nil {
		return store.ThreadStorage{}, mapErr("thread storage", err)
	}
	if exists == 0 {
		return store.ThreadStorage{}, store.ErrNotFound
	}
	return out, nil
}

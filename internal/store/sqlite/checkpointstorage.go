package sqlite

import (
	"context"

	"github.com/stepgraph/stepgraph/internal/store"
)

// ThreadStorage implements store.CheckpointStorage: everything is counted
// under Checkpoints, at each checkpoint's size as put (the size column; the
// data's length for rows older than it), as DynamoDB's adapter and the
// usage count it: the split format's blobs are shared between checkpoints,
// so what one checkpoint stores alone is not a sum of rows. One statement:
// the thread's existence and its rows are read from one snapshot.
func (db *DB) ThreadStorage(ctx context.Context, orgID, threadID string) (store.ThreadStorage, error) {
	out := store.ThreadStorage{ByChannel: map[string]store.Sized{}}
	var exists int
	err := db.reads().QueryRowContext(ctx, `SELECT
			EXISTS (SELECT 1 FROM threads WHERE org_id = ? AND id = ?),
			COUNT(*), COALESCE(SUM(COALESCE(size, LENGTH(data))), 0)
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

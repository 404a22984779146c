package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/cpcodec"
	sqlite3 "modernc.org/sqlite/lib"
)

// Checkpoints are stored in the cpcodec format (migration 0021): the row
// holds the head and the manifest, checkpoint_blobs the channels' values,
// one row per version. Rows without a manifest hold the whole data.
const checkpointColumns = `thread_id, id, parent_id, run_id, created_at, data, manifest`

// storedCheckpoint is a row as read: its data is the head when manifest
// is set.
type storedCheckpoint struct {
	cp       store.Checkpoint
	manifest []byte
}

func scanCheckpoint(s scanner) (storedCheckpoint, error) {
	var c storedCheckpoint
	var created int64
	if err := s.Scan(&c.cp.ThreadID, &c.cp.ID, &c.cp.ParentID, &c.cp.RunID, &created, &c.cp.Data, &c.manifest); err != nil {
		return storedCheckpoint{}, err
	}
	c.cp.CreatedAt = fromMicros(created)
	return c, nil
}

// chainQuery reads the chain of a value: the blob and its bases, newest
// first, in one statement (at most cpcodec.MaxDepth links are written; the
// bound here only stops a corrupt chain).
const chainQuery = `WITH RECURSIVE chain(id, base, data, n) AS (
		SELECT id, base, data, 0 FROM checkpoint_blobs WHERE org_id = ? AND thread_id = ? AND id = ?
		UNION ALL
		SELECT b.id, b.base, b.data, chain.n + 1 FROM chain JOIN checkpoint_blobs b
			ON b.org_id = ? AND b.thread_id = ? AND b.id = chain.base
		WHERE chain.base != '' AND chain.n < 4096)
	SELECT id, base, data FROM chain ORDER BY n`

// blobValues materializes values of one thread in q, each chain read in
// one statement, each value once per reader.
func blobValues(ctx context.Context, q queryer, orgID, threadID string) func(id string) ([]byte, error) {
	memo := map[string][]byte{}
	return func(id string) ([]byte, error) {
		if v, ok := memo[id]; ok {
			return v, nil
		}
		chain, err := queryAll(ctx, q, "checkpoint values", chainQuery,
			[]any{orgID, threadID, id, orgID, threadID}, func(s scanner) (cpcodec.Blob, error) {
				var b cpcodec.Blob
				return b, s.Scan(&b.ID, &b.Base, &b.Data)
			})
		if err != nil {
			return nil, err
		}
		v, err := cpcodec.Materialize(chain)
		if err != nil {
			return nil, fmt.Errorf("thread %s, value %s: %w", threadID, id, err)
		}
		memo[id] = v
		return v, nil
	}
}

// decodeCheckpoints gives back the checkpoints as they were put, reading
// the values of split ones in q (the snapshot the rows were read in).
// Values shared by several checkpoints are read once.
func decodeCheckpoints(ctx context.Context, q queryer, orgID string, rows []storedCheckpoint) ([]store.Checkpoint, error) {
	out := make([]store.Checkpoint, len(rows))
	var value func(string) ([]byte, error)
	for i, r := range rows {
		out[i] = r.cp
		if r.manifest == nil {
			continue
		}
		m, err := cpcodec.ParseManifest(r.manifest)
		if err != nil {
			return nil, err
		}
		if value == nil { // the rows are of one thread
			value = blobValues(ctx, q, orgID, r.cp.ThreadID)
		}
		if out[i].Data, err = cpcodec.Decode(r.cp.Data, m, value); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// decodeDoc gives back a document stored split (a thread's values, a run's
// result) from its head and manifest.
func decodeDoc(ctx context.Context, q queryer, orgID, threadID string, head, manifest []byte) ([]byte, error) {
	m, err := cpcodec.ParseManifest(manifest)
	if err != nil {
		return nil, err
	}
	return cpcodec.Decode(head, m, blobValues(ctx, q, orgID, threadID))
}

// latestManifest is the manifest of the thread's latest checkpoint (nil
// when it has none or it is stored whole).
func latestManifest(ctx context.Context, tx *txn, orgID, threadID string) (*cpcodec.Manifest, error) {
	var man []byte
	err := tx.QueryRowContext(ctx, `SELECT manifest FROM checkpoints WHERE org_id = ? AND thread_id = ?
		ORDER BY id DESC LIMIT 1`, orgID, threadID).Scan(&man)
	if errors.Is(err, sql.ErrNoRows) || man == nil {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr("latest checkpoint", err)
	}
	m, err := cpcodec.ParseManifest(man)
	if err != nil {
		return nil, nil // the document is stored whole
	}
	return m, nil
}

// putDoc splits a thread's values or a run's result against parent,
// inserts the values it introduces, and returns what the document's
// columns hold: its head (NULL when split, as a values object leaves
// none) and its manifest (NULL when stored whole). A nil doc stays NULL.
func putDoc(ctx context.Context, tx *txn, orgID, threadID string, doc []byte, parent *cpcodec.Manifest) (head, manifest any, err error) {
	if doc == nil {
		return nil, nil, nil
	}
	enc := cpcodec.EncodeObject(doc, parent)
	if enc.M == nil {
		return string(doc), nil, nil
	}
	if err := putBlobs(ctx, tx, orgID, threadID, enc.Blobs); err != nil {
		return nil, nil, err
	}
	return nil, string(enc.Manifest), nil
}

// sizeOf is what a document counts in the usage: its length as put.
func sizeOf(doc []byte) any {
	if doc == nil {
		return nil
	}
	return len(doc)
}

// putBlobs inserts values not stored yet (same ID: same content).
func putBlobs(ctx context.Context, tx *txn, orgID, threadID string, blobs []cpcodec.Blob) error {
	for _, b := range blobs {
		_, err := tx.ExecContext(ctx, `INSERT INTO checkpoint_blobs (org_id, thread_id, id, base, data)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (org_id, thread_id, id) DO NOTHING`,
			orgID, threadID, b.ID, b.Base, b.Data)
		if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
			return store.ErrNotFound
		}
		if err != nil {
			return mapErr("put checkpoint values", err)
		}
	}
	return nil
}

// readCheckpoints runs a checkpoint query and decodes its rows in one read
// transaction, so that a prune between the row and its values cannot be
// seen half.
func (db *DB) readCheckpoints(ctx context.Context, op string, pre func(q queryer) error, query string, args ...any) ([]store.Checkpoint, error) {
	tx, err := db.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer func() { _ = tx.Rollback() }()
	if pre != nil {
		if err := pre(tx); err != nil {
			return nil, err
		}
	}
	rows, err := queryAll(ctx, tx, op, query, args, scanCheckpoint)
	if err != nil {
		return nil, err
	}
	out, err := decodeCheckpoints(ctx, tx, orgID(args), rows)
	return out, mapErr(op, err)
}

// orgID is the first argument of every checkpoint query.
func orgID(args []any) string { s, _ := args[0].(string); return s }

// PutCheckpoint implements store.Checkpoints; ErrNotFound when the thread does not
// exist in the org.
func (db *DB) PutCheckpoint(ctx context.Context, orgID string, cp store.Checkpoint) error {
	return db.inTx(ctx, func(tx *txn) error {
		_, err := putCheckpoint(ctx, tx, orgID, cp, nil)
		return err
	})
}

// PutCheckpoints implements store.Checkpoints: one transaction for all. A
// checkpoint whose parent is the one before it in the batch is encoded
// against it without reading it back.
func (db *DB) PutCheckpoints(ctx context.Context, orgID string, cps []store.Checkpoint) error {
	if len(cps) == 0 {
		return nil
	}
	// Weighted: an async run's write-behind batch takes its share of a
	// commit, so the one-row writes of others are not queued behind it.
	return db.inWeightedTx(ctx, len(cps), func(tx *txn) error {
		var prev *cpcodec.Manifest
		for i, cp := range cps {
			if i == 0 || cp.ParentID != cps[i-1].ID || cp.ThreadID != cps[i-1].ThreadID {
				prev = nil
			}
			// A batch is usually one run's steps: its attempt is checked
			// once, as nothing else writes the run inside this transaction.
			if i == 0 || !sameFence(cp, cps[i-1]) {
				if err := fenceCheckpoint(ctx, tx, orgID, cp); err != nil {
					return err
				}
			}
			m, err := writeCheckpoint(ctx, tx, orgID, cp, prev)
			if err != nil {
				return err
			}
			prev = m
		}
		return nil
	})
}

// putCheckpoint stores cp encoded against its parent's manifest (parent,
// or read from the parent's row when nil) and returns its manifest (nil
// when stored whole). The blobs go first; the foreign key to the thread
// answers store.ErrNotFound when the thread is missing, without a query of
// its own.
//
// This is the one write path of a checkpoint (PutCheckpoint(s) and
// UpdateThreadState): the run-attempt fence is checked first, in tx.
func putCheckpoint(ctx context.Context, tx *txn, orgID string, cp store.Checkpoint, parent *cpcodec.Manifest) (*cpcodec.Manifest, error) {
	if err := fenceCheckpoint(ctx, tx, orgID, cp); err != nil {
		return nil, err
	}
	return writeCheckpoint(ctx, tx, orgID, cp, parent)
}

// sameFence reports whether a and b are fenced by the same run attempt on
// the same thread (fenceCheckpoint would read the same row for both).
func sameFence(a, b store.Checkpoint) bool {
	return a.RunID == b.RunID && a.RunAttempt == b.RunAttempt && a.ThreadID == b.ThreadID
}

// writeCheckpoint is putCheckpoint after the fence.
func writeCheckpoint(ctx context.Context, tx *txn, orgID string, cp store.Checkpoint, parent *cpcodec.Manifest) (*cpcodec.Manifest, error) {
	if parent == nil && cp.ParentID != "" {
		var man []byte
		err := tx.QueryRowContext(ctx, `SELECT manifest FROM checkpoints WHERE org_id = ? AND thread_id = ? AND id = ?`,
			orgID, cp.ThreadID, cp.ParentID).Scan(&man)
		switch {
		case err == nil && man != nil:
			// A manifest that does not parse only means this one is written whole.
			parent, _ = cpcodec.ParseManifest(man)
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return nil, mapErr("put checkpoint", err)
		}
	}
	enc := cpcodec.Encode(cp.Data, parent)
	if err := putBlobs(ctx, tx, orgID, cp.ThreadID, enc.Blobs); err != nil {
		return nil, err
	}
	var manifest any // NULL: stored whole
	if enc.Manifest != nil {
		manifest = string(enc.Manifest) // TEXT, for json_each in collectBlobs
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (org_id, `+checkpointColumns+`, size)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (org_id, thread_id, id) DO UPDATE SET parent_id = excluded.parent_id,
			run_id = excluded.run_id, created_at = excluded.created_at, data = excluded.data,
			manifest = excluded.manifest, size = excluded.size`,
		orgID, cp.ThreadID, cp.ID, cp.ParentID, cp.RunID, micros(cp.CreatedAt), enc.Head, manifest, len(cp.Data))
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
		return nil, store.ErrNotFound
	}
	return enc.M, mapErr("put checkpoint", err)
}

// collectBlobs deletes the thread's blobs nothing reaches any more (from
// the manifests of its checkpoints, of its values and of its runs'
// results, then through the bases of what they reach): after a prune, a
// rollback or the deletion of a run, in the same transaction.
func collectBlobs(ctx context.Context, tx *txn, orgID, threadID string) error {
	_, err := tx.ExecContext(ctx, `WITH RECURSIVE roots(m) AS (
			SELECT manifest FROM checkpoints WHERE org_id = ? AND thread_id = ? AND manifest IS NOT NULL
			UNION ALL
			SELECT values_manifest FROM threads WHERE org_id = ? AND id = ? AND values_manifest IS NOT NULL
			UNION ALL
			SELECT result_manifest FROM runs WHERE org_id = ? AND thread_id = ? AND result_manifest IS NOT NULL),
		live(id) AS (
			SELECT json_extract(e.value, '$.id') FROM roots, json_each(roots.m, '$.ch') e
				WHERE json_extract(e.value, '$.id') IS NOT NULL
			UNION
			SELECT b.base FROM live JOIN checkpoint_blobs b
				ON b.org_id = ? AND b.thread_id = ? AND b.id = live.id
			WHERE b.base != '')
		DELETE FROM checkpoint_blobs WHERE org_id = ? AND thread_id = ? AND id NOT IN (SELECT id FROM live)`,
		orgID, threadID, orgID, threadID, orgID, threadID, orgID, threadID, orgID, threadID)
	return mapErr("collect checkpoint blobs", err)
}

// Checkpoint implements store.Checkpoints.
func (db *DB) Checkpoint(ctx context.Context, orgID, threadID, id string) (store.Checkpoint, error) {
	return db.oneCheckpoint(ctx, "checkpoint", `SELECT `+checkpointColumns+` FROM checkpoints
		WHERE org_id = ? AND thread_id = ? AND id = ?`, orgID, threadID, id)
}

func (db *DB) oneCheckpoint(ctx context.Context, op, query string, args ...any) (store.Checkpoint, error) {
	list, err := db.readCheckpoints(ctx, op, nil, query, args...)
	if err != nil {
		return store.Checkpoint{}, err
	}
	if len(list) == 0 {
		return store.Checkpoint{}, store.ErrNotFound
	}
	return list[0], nil
}

// LatestCheckpoint implements store.Checkpoints.
func (db *DB) LatestCheckpoint(ctx context.Context, orgID, threadID string) (store.Checkpoint, error) {
	return db.oneCheckpoint(ctx, "latest checkpoint", `SELECT `+checkpointColumns+` FROM checkpoints
		WHERE org_id = ? AND thread_id = ? ORDER BY id DESC LIMIT 1`, orgID, threadID)
}

// LatestCheckpointIfNot is LatestCheckpoint for a caller that holds the
// bytes, known, of what it expects the latest checkpoint to be (the runs
// service's cache of what it stored last): when the stored checkpoint is
// exactly known, its values are not read (a long conversation's chain of
// appends) and same is true, Data being known.
func (db *DB) LatestCheckpointIfNot(ctx context.Context, orgID, threadID string, known []byte) (cp store.Checkpoint, same bool, err error) {
	const op = "latest checkpoint"
	tx, err := db.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.Checkpoint{}, false, mapErr(op, err)
	}
	defer func() { _ = tx.Rollback() }()
	args := []any{orgID, threadID}
	rows, err := queryAll(ctx, tx, op, `SELECT `+checkpointColumns+` FROM checkpoints
		WHERE org_id = ? AND thread_id = ? ORDER BY id DESC LIMIT 1`, args, scanCheckpoint)
	switch {
	case err != nil:
		return store.Checkpoint{}, false, err
	case len(rows) == 0:
		return store.Checkpoint{}, false, store.ErrNotFound
	}
	if r := rows[0]; r.manifest != nil {
		m, err := cpcodec.ParseManifest(r.manifest)
		if err != nil {
			return store.Checkpoint{}, false, mapErr(op, err)
		}
		if cpcodec.SameValues(known, r.cp.Data, m) {
			r.cp.Data = known
			return r.cp, true, nil
		}
	}
	out, err := decodeCheckpoints(ctx, tx, orgID, rows)
	if err != nil {
		return store.Checkpoint{}, false, mapErr(op, err)
	}
	return out[0], bytes.Equal(out[0].Data, known), nil
}

// ListCheckpoints implements store.Checkpoints; ErrNotFound when the thread does not
// exist. IDs compare as byte strings.
func (db *DB) ListCheckpoints(ctx context.Context, orgID, threadID, before string, limit int) ([]store.Checkpoint, error) {
	where := "org_id = ? AND thread_id = ?"
	args := []any{orgID, threadID}
	if before != "" {
		where += " AND id < ?"
		args = append(args, before)
	}
	limit, _ = pageOf(limit, 0, 10)
	args = append(args, limit)
	exists := func(q queryer) error { return threadExists(ctx, q, orgID, threadID) }
	return db.readCheckpoints(ctx, "list checkpoints", exists, `SELECT `+checkpointColumns+` FROM checkpoints
		WHERE `+where+` ORDER BY id DESC LIMIT ?`, args...)
}

// PruneCheckpoints implements store.Checkpoints.
func (db *DB) PruneCheckpoints(ctx context.Context, orgID, threadID string) error {
	return db.inTx(ctx, func(tx *txn) error {
		if err := threadExists(ctx, tx, orgID, threadID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM checkpoints WHERE org_id = ? AND thread_id = ?
			AND id < (SELECT MAX(id) FROM checkpoints WHERE org_id = ? AND thread_id = ?)`,
			orgID, threadID, orgID, threadID)
		if err != nil {
			return mapErr("prune checkpoints", err)
		}
		return collectBlobs(ctx, tx, orgID, threadID)
	})
}

// UpdateThreadState implements store.Checkpoints; ErrNotFound when the thread does
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
		m, err := putCheckpoint(ctx, tx, orgID, cp, nil)
		if err != nil {
			return err
		}
		set := "interrupts = ?, updated_at = ?, state_updated_at = ?"
		args := []any{jsonText(interrupts), micros(now), micros(now)}
		if values != nil {
			head, manifest, err := putDoc(ctx, tx, orgID, cp.ThreadID, values, m)
			if err != nil {
				return err
			}
			set += ", state_values = ?, values_manifest = ?"
			args = append(args, head, manifest)
		}
		if status != "" {
			set += ", status = ?"
			args = append(args, status)
		}
		_, err = tx.ExecContext(ctx, `UPDATE threads SET `+set+` WHERE org_id = ? AND id = ?`,
			append(args, orgID, cp.ThreadID)...)
		return mapErr("update thread state", err)
	})
}

// CheckpointBlobs reports the thread's stored values (storetest.CheckpointBlobs).
func (db *DB) CheckpointBlobs(ctx context.Context, orgID, threadID string) (int, int64, error) {
	var n, size int64
	err := db.reads().QueryRowContext(ctx, `SELECT count(*), coalesce(sum(octet_length(data)), 0)
		FROM checkpoint_blobs WHERE org_id = ? AND thread_id = ?`, orgID, threadID).Scan(&n, &size)
	return int(n), size, mapErr("checkpoint blobs", err)
}

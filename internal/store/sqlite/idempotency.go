package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// ReserveIdempotencyKey implements store.Idempotency. The record is stored
// with Status 0 and no Body. A stored in-progress record is stale when it was
// created more than staleAfter before rec.CreatedAt (the caller's clock; the
// adapter's clock when rec.CreatedAt is zero, which is then also stored).
func (db *DB) ReserveIdempotencyKey(ctx context.Context, rec store.IdempotencyRecord, staleAfter time.Duration) (store.IdempotencyRecord, bool, error) {
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = time.Now()
	}
	rec.CreatedAt = fromMicros(micros(rec.CreatedAt)) // as it will read back
	rec.Status, rec.Body = 0, nil
	var out store.IdempotencyRecord
	var fresh bool
	err := db.inTx(ctx, func(tx *txn) error {
		stored := store.IdempotencyRecord{OrgID: rec.OrgID, Scope: rec.Scope, Key: rec.Key}
		var created int64
		err := tx.QueryRowContext(ctx, `SELECT request_hash, status, body, created_at
			FROM idempotency_keys WHERE org_id = ? AND scope = ? AND key = ?`,
			rec.OrgID, rec.Scope, rec.Key).
			Scan(&stored.RequestHash, &stored.Status, &stored.Body, &created)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, `INSERT INTO idempotency_keys
				(org_id, scope, key, request_hash, status, body, created_at)
				VALUES (?, ?, ?, ?, 0, NULL, ?)`,
				rec.OrgID, rec.Scope, rec.Key, rec.RequestHash, micros(rec.CreatedAt))
			if err != nil {
				return mapErr("reserve idempotency key", err)
			}
			out, fresh = rec, true
			return nil
		case err != nil:
			return mapErr("reserve idempotency key", err)
		}
		stored.CreatedAt = fromMicros(created)
		if stored.Status == 0 && rec.CreatedAt.Sub(stored.CreatedAt) > staleAfter {
			_, err = tx.ExecContext(ctx, `UPDATE idempotency_keys
				SET request_hash = ?, status = 0, body = NULL, created_at = ?
				WHERE org_id = ? AND scope = ? AND key = ?`,
				rec.RequestHash, micros(rec.CreatedAt), rec.OrgID, rec.Scope, rec.Key)
			if err != nil {
				return mapErr("reserve idempotency key", err)
			}
			out, fresh = rec, true
			return nil
		}
		out = stored
		return nil
	})
	if err != nil {
		return store.IdempotencyRecord{}, false, err
	}
	return out, fresh, nil
}

// CompleteIdempotencyKey implements store.Idempotency; ErrNotFound when the
// key is not reserved.
func (db *DB) CompleteIdempotencyKey(ctx context.Context, orgID, scope, key string, status int, body []byte) error {
	res, err := db.exec(ctx, `UPDATE idempotency_keys SET status = ?, body = ?
		WHERE org_id = ? AND scope = ? AND key = ?`, status, body, orgID, scope, key)
	if err != nil {
		return mapErr("complete idempotency key", err)
	}
	n, err := affected("complete idempotency key", res)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// ReleaseIdempotencyKey implements store.Idempotency; releasing an unknown key
// is not an error.
func (db *DB) ReleaseIdempotencyKey(ctx context.Context, orgID, scope, key string) error {
	_, err := db.exec(ctx,
		`DELETE FROM idempotency_keys WHERE org_id = ? AND scope = ? AND key = ?`, orgID, scope, key)
	return mapErr("release idempotency key", err)
}

package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// The long-term memory items (store.Items) are rows of store_items
// (migration 0014); org_usage moves with them by its triggers.

const itemColumns = `ns, key, value, vectors, created_at, updated_at, ttl_us, expires_at`

func scanItem(orgID string) func(scanner) (store.Item, error) {
	return func(s scanner) (store.Item, error) {
		var (
			it      store.Item
			ns      string
			created int64
			updated int64
			ttl     int64
			expires sql.NullInt64
		)
		if err := s.Scan(&ns, &it.Key, &it.Value, &it.Vectors, &created, &updated, &ttl, &expires); err != nil {
			return it, err
		}
		it.OrgID, it.Namespace = orgID, store.DecodeNamespace(ns)
		it.CreatedAt, it.UpdatedAt = fromMicros(created), fromMicros(updated)
		it.TTL, it.ExpiresAt = time.Duration(ttl)*time.Microsecond, fromNullMicros(expires)
		return it, nil
	}
}

// nsRange is the range of encoded namespaces under prefix: [lo, hi).
// Every encoded prefix ends with 0x1E, so hi swaps it for 0x1F; the empty
// prefix is every namespace.
func nsRange(prefix []string) (lo, hi string) {
	lo = store.EncodeNamespace(prefix)
	if lo == "" {
		return "", "\U0010FFFF"
	}
	return lo, lo[:len(lo)-1] + "\x1f"
}

// liveAt is the condition of an item not expired at now (argument).
const liveAt = `(expires_at IS NULL OR expires_at > ?)`

// PutItem implements store.Items.
func (db *DB) PutItem(ctx context.Context, it store.Item) error {
	var expires any
	if it.TTL > 0 {
		expires = micros(it.ExpiresAt)
	}
	vectors := any(nil)
	if it.Vectors != nil {
		vectors = it.Vectors
	}
	return db.inTx(ctx, func(tx *txn) error {
		// An expired item is replaced as new: its creation time goes too.
		if _, err := tx.ExecContext(ctx, `DELETE FROM store_items WHERE org_id = ? AND ns = ? AND key = ?
			AND expires_at IS NOT NULL AND expires_at <= ?`,
			it.OrgID, store.EncodeNamespace(it.Namespace), it.Key, micros(it.UpdatedAt)); err != nil {
			return mapErr("put item", err)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO store_items (org_id, `+itemColumns+`, depth)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (org_id, ns, key) DO UPDATE SET value = excluded.value, vectors = excluded.vectors,
				updated_at = excluded.updated_at, ttl_us = excluded.ttl_us, expires_at = excluded.expires_at`,
			it.OrgID, store.EncodeNamespace(it.Namespace), it.Key, it.Value, vectors,
			micros(it.CreatedAt), micros(it.UpdatedAt), it.TTL.Microseconds(), expires, len(it.Namespace))
		return mapErr("put item", err)
	})
}

// Item implements store.Items. A refreshing read is a write (the new
// expiry) followed by the read, in one transaction.
func (db *DB) Item(ctx context.Context, orgID string, namespace []string, key string, now time.Time, refresh bool) (store.Item, error) {
	ns := store.EncodeNamespace(namespace)
	read := func(q queryer) (store.Item, error) {
		items, err := queryAll(ctx, q, "item", `SELECT `+itemColumns+` FROM store_items
			WHERE org_id = ? AND ns = ? AND key = ? AND `+liveAt, []any{orgID, ns, key, micros(now)}, scanItem(orgID))
		if err != nil {
			return store.Item{}, err
		}
		if len(items) == 0 {
			return store.Item{}, store.ErrNotFound
		}
		return items[0], nil
	}
	if !refresh {
		return read(db.reads())
	}
	var it store.Item
	err := db.inTx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `UPDATE store_items SET expires_at = ? + ttl_us
			WHERE org_id = ? AND ns = ? AND key = ? AND ttl_us > 0 AND expires_at > ?`,
			micros(now), orgID, ns, key, micros(now)); err != nil {
			return mapErr("refresh item", err)
		}
		var err error
		it, err = read(tx)
		return err
	})
	return it, err
}

// DeleteItem implements store.Items.
func (db *DB) DeleteItem(ctx context.Context, orgID string, namespace []string, key string) error {
	return db.inStatementTx(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM store_items WHERE org_id = ? AND ns = ? AND key = ?`,
			orgID, store.EncodeNamespace(namespace), key)
		return mapErr("delete item", err)
	})
}

// ListItems implements store.Items.
func (db *DB) ListItems(ctx context.Context, orgID string, prefix []string, now time.Time, limit int) ([]store.Item, error) {
	lo, hi := nsRange(prefix)
	return queryAll(ctx, db.reads(), "list items", `SELECT `+itemColumns+` FROM store_items
		WHERE org_id = ? AND ns >= ? AND ns < ? AND `+liveAt+`
		ORDER BY updated_at DESC, ns, key LIMIT ?`,
		[]any{orgID, lo, hi, micros(now), limit}, scanItem(orgID))
}

// RefreshItems implements store.Items.
func (db *DB) RefreshItems(ctx context.Context, orgID string, keys []store.ItemKey, now time.Time) error {
	if len(keys) == 0 {
		return nil
	}
	return db.inTx(ctx, func(tx *txn) error {
		for _, k := range keys {
			if _, err := tx.ExecContext(ctx, `UPDATE store_items SET expires_at = ? + ttl_us
				WHERE org_id = ? AND ns = ? AND key = ? AND ttl_us > 0 AND expires_at > ?`,
				micros(now), orgID, store.EncodeNamespace(k.Namespace), k.Key, micros(now)); err != nil {
				return mapErr("refresh items", err)
			}
		}
		return nil
	})
}

// ItemNamespaces implements store.Items.
func (db *DB) ItemNamespaces(ctx context.Context, orgID string, prefix []string, now time.Time, limit int) ([][]string, error) {
	lo, hi := nsRange(prefix)
	return queryAll(ctx, db.reads(), "item namespaces", `SELECT DISTINCT ns FROM store_items
		WHERE org_id = ? AND ns >= ? AND ns < ? AND `+liveAt+` ORDER BY ns LIMIT ?`,
		[]any{orgID, lo, hi, micros(now), limit}, func(s scanner) ([]string, error) {
			var ns string
			err := s.Scan(&ns)
			return store.DecodeNamespace(ns), err
		})
}

// DeleteExpiredItems implements store.Items.
func (db *DB) DeleteExpiredItems(ctx context.Context, now time.Time, limit int) (int, error) {
	var n int64
	err := db.inStatementTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM store_items WHERE (org_id, ns, key) IN (
			SELECT org_id, ns, key FROM store_items WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT ?)`,
			micros(now), limit)
		if err != nil {
			return mapErr("delete expired items", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

package store

import (
	"context"
	"strings"
	"time"
)

// Item is one document of the long-term memory store (the Agent Server's
// /store API): a JSON object under a namespace (a path of labels) and a key,
// in one organization. Its rules (what a label may be, sizes, TTLs) are the
// storeapi package's; the store keys, orders, expires and counts items.
type Item struct {
	OrgID     string
	Namespace []string
	Key       string
	Value     []byte // a JSON object, kept byte for byte
	// Vectors are the item's embeddings in the storeapi package's encoding
	// (opaque here); nil when the item is not indexed.
	Vectors   []byte
	CreatedAt time.Time
	UpdatedAt time.Time
	// TTL is how long the item lives after its last write or refreshing
	// read; 0: it never expires (ExpiresAt zero).
	TTL       time.Duration
	ExpiresAt time.Time
}

// Bytes is what an item counts toward its organization's stored bytes
// (Usage.Bytes): its key, namespace labels, value and vectors.
func (it Item) Bytes() int64 {
	n := len(it.Key) + len(it.Value) + len(it.Vectors)
	for _, l := range it.Namespace {
		n += len(l)
	}
	return int64(n)
}

// ItemKey names an item in an organization.
type ItemKey struct {
	Namespace []string
	Key       string
}

// Items stores the long-term memory items, scoped to an organization: another
// organization's items are never read, listed, refreshed or deleted. An item
// whose ExpiresAt is at or before the caller's now is expired: it is reported
// as missing and never listed, and a put over it creates a new item.
//
// Namespace labels are non-empty and contain no ASCII control characters
// (storeapi refuses others), so adapters may use those characters as
// separators.
type Items interface {
	// PutItem writes it (an upsert by namespace and key). A stored item
	// that is not expired at it.UpdatedAt keeps its CreatedAt (it.CreatedAt
	// is then ignored). The organization's Usage.Bytes moves by the
	// difference of the items' Bytes in the same transaction.
	PutItem(ctx context.Context, it Item) error
	// Item returns the item, ErrNotFound when there is none or it is
	// expired at now. With refresh, an item with a TTL gets ExpiresAt
	// now+TTL (as stored and as returned).
	Item(ctx context.Context, orgID string, namespace []string, key string, now time.Time, refresh bool) (Item, error)
	// DeleteItem removes the item; deleting a missing item is no error.
	// Usage.Bytes moves with it.
	DeleteItem(ctx context.Context, orgID string, namespace []string, key string) error
	// ListItems returns the items whose namespace starts with prefix (all
	// of the organization's for an empty prefix) and that are not expired
	// at now, most recently updated first (ties by namespace and key), at
	// most limit (which must be positive).
	ListItems(ctx context.Context, orgID string, prefix []string, now time.Time, limit int) ([]Item, error)
	// RefreshItems sets ExpiresAt to now+TTL on the named items that have a
	// TTL and are not expired at now; others are left as they are.
	RefreshItems(ctx context.Context, orgID string, keys []ItemKey, now time.Time) error
	// ItemNamespaces returns the distinct namespaces of the organization's
	// items not expired at now, whose namespace starts with prefix, at most
	// limit (positive), in no particular order.
	ItemNamespaces(ctx context.Context, orgID string, prefix []string, now time.Time, limit int) ([][]string, error)
	// DeleteExpiredItems removes up to limit items expired at now, across
	// organizations (Usage.Bytes moves with them), and returns how many it
	// removed.
	DeleteExpiredItems(ctx context.Context, now time.Time, limit int) (int, error)
}

// EncodeNamespace is the encoding of a namespace the adapters key items by:
// each label followed by the record separator (0x1E), so that the encoding
// of a prefix is a string prefix of the encodings of the namespaces under it,
// and only of those.
func EncodeNamespace(ns []string) string {
	var b strings.Builder
	for _, l := range ns {
		b.WriteString(l)
		b.WriteByte(0x1E)
	}
	return b.String()
}

// DecodeNamespace reverses EncodeNamespace.
func DecodeNamespace(enc string) []string {
	parts := strings.Split(enc, "\x1e")
	return parts[:len(parts)-1]
}

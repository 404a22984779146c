package dynamo

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// The long-term memory items (store.Items), in the threads table (where the
// organization's usage counters are, so that an item's write moves them in
// its own transaction), one partition per organization:
//
//	pk ITEMS#<org>  sk <namespace>\x1f<key>   an item
//
// The namespace is store.EncodeNamespace's (each label and 0x1E), so the
// items under a namespace prefix are a begins_with of the sort key, read
// strongly consistently. Attributes: value and vectors (binary), created,
// updated and exp (unix microseconds; exp absent without a TTL), ttlus (the
// TTL), bytes (what the item counts, store.Item.Bytes) and ver (increased by
// every write that changes bytes: puts and deletes are compare-and-set on
// it, so the counters move by exactly the bytes replaced).
//
// Items with a TTL are also in the "lease" index under lpk IEXP, lsk
// <exp>#<org>#<sk>: DeleteExpiredItems reads the expired ones across
// organizations there (an index partition of its own; the run leases are
// under lpk L). A refreshing read moves exp and lsk together. DynamoDB's
// own TTL is not used: its deletions would not move the counters.
//
// ListItems orders by last update: it reads the sort keys and update times
// under the prefix (a projection), sorts them, and reads the first limit
// items (GetItem, a few at a time). Its cost grows with the items under the prefix, which
// the storeapi package bounds by the results it asks for.

const (
	itemsPK     = "ITEMS#"
	itemsExpPK  = "IEXP"
	itemKeySep  = "\x1f"
	itemAttrExp = "exp"
)

func itemSK(namespace []string, key string) string {
	return store.EncodeNamespace(namespace) + itemKeySep + key
}

func itemFrom(orgID string, it item) store.Item {
	sk := it.str("sk")
	ns, key, _ := strings.Cut(sk, itemKeySep)
	out := store.Item{
		OrgID: orgID, Namespace: store.DecodeNamespace(ns), Key: key,
		Value: it.bytes("value"), CreatedAt: it.time("created"), UpdatedAt: it.time("updated"),
		TTL: time.Duration(it.num("ttlus")) * time.Microsecond, ExpiresAt: it.time(itemAttrExp),
	}
	if it.has("vectors") {
		out.Vectors = it.bytes("vectors")
	}
	return out
}

// liveItem reports whether a stored item exists and is not expired at now.
func liveItem(it item, now time.Time) bool {
	return it != nil && (!it.has(itemAttrExp) || it.num(itemAttrExp) > micros(now))
}

func expIndexKey(exp time.Time, orgID, sk string) string {
	return sortTime(exp) + "#" + orgID + "#" + sk
}

// PutItem implements store.Items.
func (db *DB) PutItem(ctx context.Context, it store.Item) error {
	if it.OrgID == "" {
		return errEmptyID
	}
	pk, sk := itemsPK+it.OrgID, itemSK(it.Namespace, it.Key)
	return retry(ctx, "put item", func() error {
		old, err := db.get(ctx, db.tables.threads, key(pk, sk))
		if err != nil {
			return err
		}
		created := it.CreatedAt
		if liveItem(old, it.UpdatedAt) {
			created = old.time("created")
		}
		rec := item(key(pk, sk))
		rec["value"], rec["bytes"], rec["ver"] = b(it.Value), n(it.Bytes()), n(old.num("ver")+1)
		if it.Vectors != nil {
			rec["vectors"] = b(it.Vectors)
		}
		setTime(rec, "created", created)
		setTime(rec, "updated", it.UpdatedAt)
		rec["ttlus"] = n(it.TTL.Microseconds())
		if it.TTL > 0 {
			setTime(rec, itemAttrExp, it.ExpiresAt)
			rec["lpk"], rec["lsk"] = s(itemsExpPK), s(expIndexKey(it.ExpiresAt, it.OrgID, sk))
		}
		guard := newUpd()
		if old == nil {
			guard.cond("pk", "attribute_not_exists($)", nil)
		} else {
			guard.cond("ver", "$ = ?", n(old.num("ver")))
		}
		reasons, err := db.transact(ctx, []types.TransactWriteItem{
			guard.put(db.tables.threads, rec),
			db.usageAdd(it.OrgID, sk, 0, it.Bytes()-old.num("bytes")),
		})
		if err != nil {
			return err
		}
		if txFailedAt(reasons, 0) {
			return errRetry
		}
		if reasons != nil {
			return txErr("put item", reasons)
		}
		return nil
	})
}

// refreshItem moves a live item's expiry to now+TTL (compare-and-set on
// the version it read) and returns it as stored; nil when it is missing
// or expired.
func (db *DB) refreshItem(ctx context.Context, orgID, sk string, now time.Time, refresh bool) (item, error) {
	var got item
	err := retry(ctx, "read item", func() error {
		it, err := db.get(ctx, db.tables.threads, key(itemsPK+orgID, sk))
		if err != nil {
			return err
		}
		if !liveItem(it, now) {
			got = nil
			return nil
		}
		ttl := time.Duration(it.num("ttlus")) * time.Microsecond
		if !refresh || ttl <= 0 {
			got = it
			return nil
		}
		exp := now.Add(ttl)
		u := newUpd().set(itemAttrExp, n(micros(exp))).set("lsk", s(expIndexKey(exp, orgID, sk))).
			cond("ver", "$ = ?", n(it.num("ver")))
		failed, _, err := db.write1(ctx, u.update(db.tables.threads, key(itemsPK+orgID, sk)))
		if err != nil {
			return err
		}
		if failed {
			return errRetry
		}
		it[itemAttrExp] = n(micros(exp))
		got = it
		return nil
	})
	return got, err
}

// Item implements store.Items.
func (db *DB) Item(ctx context.Context, orgID string, namespace []string, key string, now time.Time, refresh bool) (store.Item, error) {
	if orgID == "" {
		return store.Item{}, store.ErrNotFound
	}
	it, err := db.refreshItem(ctx, orgID, itemSK(namespace, key), now, refresh)
	if err != nil {
		return store.Item{}, wrap("item", err)
	}
	if it == nil {
		return store.Item{}, store.ErrNotFound
	}
	return itemFrom(orgID, it), nil
}

// DeleteItem implements store.Items.
func (db *DB) DeleteItem(ctx context.Context, orgID string, namespace []string, k string) error {
	if orgID == "" {
		return nil
	}
	pk, sk := itemsPK+orgID, itemSK(namespace, k)
	return retry(ctx, "delete item", func() error {
		old, err := db.get(ctx, db.tables.threads, key(pk, sk))
		if err != nil || old == nil {
			return err
		}
		return db.deleteItemAt(ctx, orgID, sk, old, "ver", n(old.num("ver")))
	})
}

// deleteItemAt deletes the item read as old on condition attr = v, moving
// the counters; errRetry when the condition failed.
func (db *DB) deleteItemAt(ctx context.Context, orgID, sk string, old item, attr string, v types.AttributeValue) error {
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		newUpd().cond(attr, "$ = ?", v).del(db.tables.threads, key(itemsPK+orgID, sk)),
		db.usageAdd(orgID, sk, 0, -old.num("bytes")),
	})
	if err != nil {
		return err
	}
	if txFailedAt(reasons, 0) {
		return errRetry
	}
	if reasons != nil {
		return txErr("delete item", reasons)
	}
	return nil
}

// itemHeads reads the sort key, update and expiry of the organization's
// items under prefix.
func (db *DB) itemHeads(ctx context.Context, orgID string, prefix []string) ([]item, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(db.tables.threads),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ProjectionExpression:      aws.String("sk, updated, #e"),
		ExpressionAttributeNames:  map[string]string{"#e": itemAttrExp},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(itemsPK + orgID)},
	}
	if p := store.EncodeNamespace(prefix); p != "" {
		in.KeyConditionExpression = aws.String("pk = :pk AND begins_with(sk, :p)")
		in.ExpressionAttributeValues[":p"] = s(p)
	}
	return db.queryAll(ctx, in)
}

// ListItems implements store.Items.
func (db *DB) ListItems(ctx context.Context, orgID string, prefix []string, now time.Time, limit int) ([]store.Item, error) {
	if orgID == "" || limit <= 0 {
		return []store.Item{}, nil
	}
	heads, err := db.itemHeads(ctx, orgID, prefix)
	if err != nil {
		return nil, wrap("list items", err)
	}
	live := heads[:0]
	for _, h := range heads {
		if liveItem(h, now) {
			live = append(live, h)
		}
	}
	sort.Slice(live, func(i, j int) bool {
		if a, b := live[i].num("updated"), live[j].num("updated"); a != b {
			return a > b
		}
		return live[i].str("sk") < live[j].str("sk")
	})
	live = live[:min(len(live), limit)]
	got, err := db.getItems(ctx, orgID, live)
	if err != nil {
		return nil, wrap("list items", err)
	}
	bySK := map[string]item{}
	for _, it := range got {
		if it != nil {
			bySK[it.str("sk")] = it
		}
	}
	out := []store.Item{}
	for _, h := range live {
		// Deleted or expired since the heads were read: left out.
		if it, ok := bySK[h.str("sk")]; ok && liveItem(it, now) {
			out = append(out, itemFrom(orgID, it))
		}
	}
	return out, nil
}

// getItemsConcurrency bounds the reads of one ListItems in flight.
const getItemsConcurrency = 16

// getItems reads the items of heads with strongly consistent GetItem
// calls, a few at a time (the functions are granted no BatchGetItem; see
// infra/stack); a missing item is nil.
func (db *DB) getItems(ctx context.Context, orgID string, heads []item) ([]item, error) {
	out := make([]item, len(heads))
	errs := make([]error, len(heads))
	sem := make(chan struct{}, getItemsConcurrency)
	var wg sync.WaitGroup
	for i, h := range heads {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = db.get(ctx, db.tables.threads, key(itemsPK+orgID, h.str("sk")))
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// RefreshItems implements store.Items.
func (db *DB) RefreshItems(ctx context.Context, orgID string, keys []store.ItemKey, now time.Time) error {
	if orgID == "" {
		return nil
	}
	for _, k := range keys {
		if _, err := db.refreshItem(ctx, orgID, itemSK(k.Namespace, k.Key), now, true); err != nil {
			return wrap("refresh items", err)
		}
	}
	return nil
}

// ItemNamespaces implements store.Items.
func (db *DB) ItemNamespaces(ctx context.Context, orgID string, prefix []string, now time.Time, limit int) ([][]string, error) {
	out := [][]string{}
	if orgID == "" || limit <= 0 {
		return out, nil
	}
	heads, err := db.itemHeads(ctx, orgID, prefix)
	if err != nil {
		return nil, wrap("item namespaces", err)
	}
	seen := map[string]bool{}
	for _, h := range heads {
		ns, _, _ := strings.Cut(h.str("sk"), itemKeySep)
		if !liveItem(h, now) || seen[ns] {
			continue
		}
		seen[ns] = true
		out = append(out, store.DecodeNamespace(ns))
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// DeleteExpiredItems implements store.Items: the expired entries of the
// expiry index, each deleted on condition that its expiry is still the
// one the index showed (a refresh since keeps it).
func (db *DB) DeleteExpiredItems(ctx context.Context, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	res, err := db.client.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(db.tables.threads), IndexName: aws.String(indexLease),
		KeyConditionExpression: aws.String("lpk = :l AND lsk < :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":l": s(itemsExpPK), ":now": s(sortTime(now.Add(time.Microsecond))),
		},
		Limit: aws.Int32(int32(min(limit, 1000))),
	})
	if err != nil {
		return 0, wrap("delete expired items", err)
	}
	deleted := 0
	for _, entry := range res.Items {
		it := item(entry)
		orgID := strings.TrimPrefix(it.str("pk"), itemsPK)
		sk := it.str("sk")
		if !it.has(itemAttrExp) || it.num(itemAttrExp) > micros(now) {
			continue
		}
		err := db.deleteItemAt(ctx, orgID, sk, it, itemAttrExp, n(it.num(itemAttrExp)))
		switch {
		case err == errRetry: // refreshed or replaced since: not expired any more
		case err != nil:
			return deleted, wrap("delete expired items", err)
		default:
			deleted++
		}
	}
	return deleted, nil
}

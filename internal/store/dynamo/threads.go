package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Keys of the threads table.
const skThread = "THREAD"

func threadPK(orgID, id string) string { return "T#" + orgID + "#" + id }
func threadKey(orgID, id string) map[string]types.AttributeValue {
	return key(threadPK(orgID, id), skThread)
}
func runSK(id string) string { return "RUN#" + id }
func runMarkerKey(id string) map[string]types.AttributeValue {
	return key("RUNID#"+id, "RUNID")
}

// valuesBase is the blob base of a thread's values.
const valuesBase = "TVAL"

// threadRec is a thread item as read, with what the run bookkeeping needs.
type threadRec struct {
	it      item
	orgID   string
	id      string
	pk      string
	ver     int64
	nseq    int64
	running string            // ID of the running run, "" when none
	pending map[string]string // pending run ID → its order key
}

func (t *threadRec) inflight() bool { return t.running != "" || len(t.pending) > 0 }

// head is the pending run that starts next ("" when none): the least order
// key (NotBefore, CreatedAt, insertion).
func head(pending map[string]string) string {
	best, bestKey := "", ""
	for id, k := range pending {
		if best == "" || k < bestKey || (k == bestKey && id < best) {
			best, bestKey = id, k
		}
	}
	return best
}

// loadThread reads a thread for a write; ErrNotFound when it does not exist
// (or is being deleted).
func (db *DB) loadThread(ctx context.Context, orgID, id string) (*threadRec, error) {
	if orgID == "" || id == "" {
		return nil, store.ErrNotFound
	}
	it, err := db.get(ctx, db.tables.threads, threadKey(orgID, id))
	if err != nil {
		return nil, err
	}
	if it == nil || it.boolean("deleting") {
		return nil, store.ErrNotFound
	}
	return &threadRec{
		it: it, orgID: orgID, id: id, pk: threadPK(orgID, id),
		ver: it.num("ver"), nseq: it.num("nseq"), running: it.str("running"),
		pending: it.stringMap("pending"),
	}, nil
}

// threadCond is an update of thread t on condition that it has not changed
// since it was read; it increments the version.
func threadCond(t *threadRec) *upd {
	u := newUpd()
	u.cond("ver", "$ = ?", n(t.ver))
	u.set("ver", n(t.ver+1))
	return u
}

// threadFrom is the record of a thread item, without values kept in a blob.
func threadFrom(it item) store.Thread {
	t := store.Thread{
		ID: it.str("id"), OrgID: it.str("org"), Status: it.str("status"),
		Metadata: it.bytes("metadata"), Config: it.bytes("config"), Values: it.bytes("values"),
		Interrupts: it.bytes("interrupts"), Error: it.bytes("error"),
		CreatedAt: it.time("created"), UpdatedAt: it.time("updated"), TTLStrategy: it.str("ttls"),
		StateUpdatedAt: it.time("supd"),
	}
	if t.StateUpdatedAt.IsZero() { // a thread stored before it was kept
		t.StateUpdatedAt = t.UpdatedAt
	}
	if it.num("expires") != 0 {
		t.ExpiresAt = it.time("expires")
	}
	return t
}

// expiryPK is the partition of the lease index that holds the threads with
// an expiry (sort key: the expiry), apart from the running runs' leases
// (leasePK): one sparse index serves both, so no table changes shape.
const expiryPK = "X"

// setExpiry records a thread's expiry on an update (clears it when zero).
func setExpiry(u *upd, expiresAt time.Time, strategy string) {
	if expiresAt.IsZero() {
		u.remove("expires").remove("ttls").remove("lpk").remove("lsk")
		return
	}
	u.set("expires", n(micros(expiresAt))).set("ttls", s(strategy)).
		set("lpk", s(expiryPK)).set("lsk", s(sortTime(expiresAt)))
}

// fullThread is the record of a thread item, its values read from their blob
// when they are kept in one.
func (db *DB) fullThread(ctx context.Context, it item) (store.Thread, error) {
	t := threadFrom(it)
	if man := it.bytes("values_manifest"); man != nil {
		data, err := db.values(it.str("pk")).decode(ctx, nil, man)
		if err != nil {
			return store.Thread{}, err
		}
		t.Values = data
		return t, nil
	}
	ref := blobOf(it, "values")
	if ref.none() {
		return t, nil
	}
	for attempt := 0; attempt < 5; attempt++ {
		data, ok, err := db.readBlob(ctx, it.str("pk"), valuesBase, ref)
		if err != nil {
			return store.Thread{}, err
		}
		if ok {
			t.Values = data
			return t, nil
		}
		// Replaced meanwhile: read the thread again.
		fresh, err := db.get(ctx, db.tables.threads, key(it.str("pk"), skThread))
		if err != nil {
			return store.Thread{}, err
		}
		if fresh == nil {
			return store.Thread{}, store.ErrNotFound
		}
		t, ref = threadFrom(fresh), blobOf(fresh, "values")
		if ref.none() {
			return t, nil
		}
	}
	return store.Thread{}, errRetry
}

// newThreadItem is the item of a new thread (values inline or in ref).
func newThreadItem(t store.Thread, values blobRef, runs map[string]string, running string, nseq int64) map[string]types.AttributeValue {
	if t.Status == "" {
		t.Status = store.ThreadIdle
	}
	if t.StateUpdatedAt.IsZero() {
		t.StateUpdatedAt = t.CreatedAt
	}
	ins := insStamp()
	it := with(threadKey(t.OrgID, t.ID), map[string]types.AttributeValue{
		"id": s(t.ID), "org": s(t.OrgID), "status": s(t.Status),
		"metadata": b(jsonObject(t.Metadata)), "config": b(jsonObject(t.Config)),
		"created": n(micros(t.CreatedAt)), "updated": n(micros(t.UpdatedAt)), "supd": n(micros(t.StateUpdatedAt)), "ins": s(ins),
		"ver": n(1), "nseq": n(nseq),
		"gpk": s("ORG#" + t.OrgID), "gsk": s(sortTime(t.CreatedAt) + "#" + ins),
	})
	pending := map[string]types.AttributeValue{}
	for id, k := range runs {
		pending[id] = s(k)
	}
	it["pending"] = &types.AttributeValueMemberM{Value: pending}
	if running != "" {
		it["running"] = s(running)
	}
	if values.none() {
		setBytes(it, "values", t.Values)
	} else {
		it["values_gen"], it["values_chunks"] = s(values.gen), n(int64(values.chunks))
	}
	setBytes(it, "interrupts", t.Interrupts)
	setBytes(it, "error", t.Error)
	if !t.ExpiresAt.IsZero() {
		it["expires"], it["ttls"] = n(micros(t.ExpiresAt)), s(t.TTLStrategy)
		it["lpk"], it["lsk"] = s(expiryPK), s(sortTime(t.ExpiresAt))
	}
	return it
}

// putValues stores a thread's new values: nothing to do for nil (unchanged)
// or inline ones; a blob for large ones. It returns the blob (none when
// inline) and whether values change.
func (db *DB) putValues(ctx context.Context, pk string, values []byte) (blobRef, error) {
	if len(values) <= db.inlineLimit(valuesInlineMax) {
		return blobRef{}, nil
	}
	return db.writeBlob(ctx, pk, valuesBase, values)
}

// setValues records new values on a thread update: inline, or the blob ref.
func setValues(u *upd, values []byte, ref blobRef) {
	if values == nil {
		return
	}
	if ref.none() {
		u.set("values", b(values))
		removeBlob(u, "values")
		return
	}
	u.remove("values")
	setBlob(u, "values", ref)
}

// CreateThread implements store.Threads. An empty Status is stored as idle; nil
// Metadata or Config as "{}".
func (db *DB) CreateThread(ctx context.Context, t store.Thread) error {
	if t.OrgID == "" || t.ID == "" {
		return wrap("create thread", errEmptyID)
	}
	pk := threadPK(t.OrgID, t.ID)
	ref, err := db.putValues(ctx, pk, t.Values)
	if err != nil {
		return wrap("create thread", err)
	}
	it := newThreadItem(t, ref, nil, "", 0)
	size := int64(len(jsonObject(t.Metadata)))
	it["bytes"] = n(size)
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		newUpd().cond("", notExists, nil).put(db.tables.threads, it),
		db.usageAdd(t.OrgID, t.ID, 1, size),
	})
	if err != nil || reasons != nil {
		_ = db.deleteBlob(ctx, pk, valuesBase, ref)
		if reasons != nil {
			if txFailedAt(reasons, 0) {
				return store.ErrConflict
			}
			return wrap("create thread", txErr("create thread", reasons))
		}
	}
	return wrap("create thread", err)
}

// Thread implements store.Threads.
func (db *DB) Thread(ctx context.Context, orgID, id string) (store.Thread, error) {
	if orgID == "" || id == "" {
		return store.Thread{}, store.ErrNotFound
	}
	it, err := db.get(ctx, db.tables.threads, threadKey(orgID, id))
	if err != nil {
		return store.Thread{}, wrap("thread", err)
	}
	if it == nil || it.boolean("deleting") {
		return store.Thread{}, store.ErrNotFound
	}
	t, err := db.fullThread(ctx, it)
	return t, wrap("thread", err)
}

// SearchThreads implements store.Threads: newest first, ties broken by insertion
// order (the later insert first). With IDs the threads are read directly;
// otherwise through the org index (eventually consistent on AWS: a thread
// created a moment ago may be missing from a search).
func (db *DB) SearchThreads(ctx context.Context, orgID string, f store.ThreadFilter) ([]store.Thread, error) {
	out := []store.Thread{}
	limit, offset := f.Limit, f.Offset
	if limit <= 0 {
		limit = 10
	}
	if f.SortBy != "" && (f.SortBy != store.ThreadSortCreatedAt || f.Ascending) {
		list, err := db.sortedThreads(ctx, orgID, f, max(offset, 0), limit)
		return list, wrap("search threads", err)
	}
	err := db.matchThreads(ctx, orgID, f, max(offset, 0), limit, false, func(t store.Thread) bool {
		out = append(out, t)
		return len(out) < limit
	})
	if err != nil {
		return nil, wrap("search threads", err)
	}
	return out, nil
}

// CountThreads implements store.Threads (as SearchThreads, through the org
// index). Without a filter it counts the index's keys (Select COUNT): no
// thread is read.
func (db *DB) CountThreads(ctx context.Context, orgID string, f store.ThreadFilter) (int, error) {
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return 0, wrap("count threads", err)
	}
	vals, err := parseFilter("values", f.Values)
	if err != nil {
		return 0, wrap("count threads", err)
	}
	if f.Status == "" && len(f.IDs) == 0 && meta == nil && vals == nil && orgID != "" {
		count, err := db.countQuery(ctx, db.orgIndexQuery(orgID))
		return count, wrap("count threads", err)
	}
	count := 0
	err = db.matchThreads(ctx, orgID, f, 0, 0, true, func(store.Thread) bool { count++; return true })
	return count, wrap("count threads", err)
}

// orgIndexQuery reads an organization's threads from the org index (keys
// only), newest first.
func (db *DB) orgIndexQuery(orgID string) *dynamodb.QueryInput {
	return &dynamodb.QueryInput{
		TableName: aws.String(db.tables.threads), IndexName: aws.String(indexOrg),
		KeyConditionExpression:    aws.String("gpk = :g"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":g": s("ORG#" + orgID)},
		ScanIndexForward:          aws.Bool(false),
	}
}

// Bounds of a page of the org index (keys only: ~100 bytes an entry).
const (
	searchPageMin = 50
	searchPageMax = 1000
)

// searchPage is the Limit of the next page of index entries: all that is
// still wanted (skip + want, less what was visited) when nothing filters
// entries out, at least searchPageMin when a filter may pass some over,
// and at most searchPageMax; without a want, the largest page.
func searchPage(want, skip, visited int, filtered bool) int32 {
	page := searchPageMax
	if want > 0 {
		page = skip + want - visited
		if filtered {
			page = max(page, searchPageMin)
		}
		page = min(page, searchPageMax)
	}
	return int32(page)
}

// countQuery counts the items in, a Select COUNT query, matches, page by
// page (a COUNT page stops at 1 MB of items read, like any other).
func (db *DB) countQuery(ctx context.Context, in *dynamodb.QueryInput) (int, error) {
	in.Select = types.SelectCount
	count := 0
	p := dynamodb.NewQueryPaginator(db.client, in)
	for p.HasMorePages() {
		pg, err := p.NextPage(ctx)
		if err != nil {
			return 0, err
		}
		count += int(pg.Count)
	}
	return count, nil
}

// threadSortKeys compare two threads by a thread sort key (store.ThreadSort*).
var threadSortKeys = map[string]func(a, b store.Thread) int{
	store.ThreadSortCreatedAt:      func(a, b store.Thread) int { return a.CreatedAt.Compare(b.CreatedAt) },
	store.ThreadSortUpdatedAt:      func(a, b store.Thread) int { return a.UpdatedAt.Compare(b.UpdatedAt) },
	store.ThreadSortStateUpdatedAt: func(a, b store.Thread) int { return a.StateUpdatedAt.Compare(b.StateUpdatedAt) },
	store.ThreadSortID:             func(a, b store.Thread) int { return strings.Compare(a.ID, b.ID) },
	store.ThreadSortStatus:         func(a, b store.Thread) int { return strings.Compare(a.Status, b.Status) },
}

// sortedThreads is SearchThreads in an order the org index does not keep:
// every match is read (without its values), sorted in memory (a stable sort
// of the index's newest-first order, which breaks ties) and the page's
// threads are then read whole. It reads all the organization's threads,
// as a filtered count does.
func (db *DB) sortedThreads(ctx context.Context, orgID string, f store.ThreadFilter, offset, limit int) ([]store.Thread, error) {
	cmp, ok := threadSortKeys[f.SortBy]
	if !ok {
		return nil, fmt.Errorf("unknown thread sort key %q", f.SortBy)
	}
	var all []store.Thread
	err := db.matchThreads(ctx, orgID, f, 0, 0, true, func(t store.Thread) bool { all = append(all, t); return true })
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(all, func(a, b store.Thread) int {
		if f.Ascending {
			return cmp(a, b)
		}
		return cmp(b, a)
	})
	out := []store.Thread{}
	for _, t := range all[min(offset, len(all)):min(offset+limit, len(all))] {
		full, err := db.Thread(ctx, orgID, t.ID)
		if errors.Is(err, store.ErrNotFound) { // deleted since
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, full)
	}
	return out, nil
}

// matchThreads calls visit with each thread that f matches, newest first,
// after passing over the first skip matches, until visit returns false;
// want is how many visit takes at most (0: unknown); light: the visited
// threads' values need not be read (they are when a values filter needs
// them). The org index is read
// a page at a time and only as far as needed (review #10): without a
// filter, the skipped threads are passed over by their index keys alone
// (a thread being deleted leaves the index when it is marked), and each
// thread of the page is then read by key; with a filter, each thread is
// read until enough match, and the values of a skipped match are not
// read (unless a values filter needs them).
func (db *DB) matchThreads(ctx context.Context, orgID string, f store.ThreadFilter, skip, want int, light bool, visit func(store.Thread) bool) error {
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return err
	}
	vals, err := parseFilter("values", f.Values)
	if err != nil {
		return err
	}
	if orgID == "" {
		return nil
	}
	// match reports whether thread item it matches f (nil: it does not),
	// reading its values only when they are needed.
	match := func(it item, skipping bool) (*store.Thread, error) {
		if it.boolean("deleting") || (f.Status != "" && it.str("status") != f.Status) || !meta.Matches(it.bytes("metadata")) {
			return nil, nil
		}
		t := threadFrom(it)
		if vals == nil && (skipping || light || (blobOf(it, "values").none() && !it.has("values_manifest"))) {
			return &t, nil
		}
		t, err := db.fullThread(ctx, it)
		if err != nil {
			return nil, err
		}
		if !vals.Matches(t.Values) {
			return nil, nil
		}
		return &t, nil
	}
	if len(f.IDs) > 0 {
		var items []item
		seen := map[string]bool{}
		for _, id := range f.IDs {
			if seen[id] || id == "" {
				continue
			}
			seen[id] = true
			it, err := db.get(ctx, db.tables.threads, threadKey(orgID, id))
			if err != nil {
				return err
			}
			if it != nil {
				items = append(items, it)
			}
		}
		sort.SliceStable(items, func(i, j int) bool { return items[i].str("gsk") > items[j].str("gsk") })
		for _, it := range items {
			t, err := match(it, skip > 0)
			if err != nil {
				return err
			}
			if t == nil {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			if !visit(*t) {
				return nil
			}
		}
		return nil
	}
	filtered := f.Status != "" || meta != nil || vals != nil
	in := db.orgIndexQuery(orgID)
	visited := 0
	for {
		in.Limit = aws.Int32(searchPage(want, skip, visited, filtered))
		pg, err := db.client.Query(ctx, in)
		if err != nil {
			return err
		}
		for _, k := range pg.Items {
			if !filtered && skip > 0 {
				skip--
				continue
			}
			// Only the threads a page reaches are read, strongly
			// consistent; one deleted since the query is skipped.
			it, err := db.get(ctx, db.tables.threads, key(item(k).str("pk"), item(k).str("sk")))
			if err != nil {
				return err
			}
			if it == nil {
				continue
			}
			t, err := match(it, skip > 0)
			if err != nil {
				return err
			}
			if t == nil {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			visited++
			if !visit(*t) {
				return nil
			}
		}
		if len(pg.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = pg.LastEvaluatedKey
	}
}

// UpdateThreadMetadata implements store.Threads: one transaction on the
// thread's version, which also counts the new metadata's size.
func (db *DB) UpdateThreadMetadata(ctx context.Context, orgID, id string, metadata []byte, now time.Time) (store.Thread, error) {
	var out store.Thread
	err := retry(ctx, "update thread metadata", func() error {
		t, err := db.loadThread(ctx, orgID, id)
		if err != nil {
			return err
		}
		meta := jsonObject(metadata)
		delta := int64(len(meta) - len(t.it.bytes("metadata")))
		tx := []types.TransactWriteItem{threadCond(t).set("metadata", b(meta)).set("updated", n(micros(now))).
			add("bytes", delta).update(db.tables.threads, threadKey(orgID, id))}
		if delta != 0 {
			tx = append(tx, db.usageAdd(orgID, id, 0, delta))
		}
		reasons, err := db.transact(ctx, tx)
		if err != nil {
			return err
		}
		if reasons != nil {
			return errRetry
		}
		it, err := db.get(ctx, db.tables.threads, threadKey(orgID, id))
		if err != nil {
			return err
		}
		if it == nil || it.boolean("deleting") {
			return store.ErrNotFound
		}
		out, err = db.fullThread(ctx, it)
		return err
	})
	if err != nil {
		return store.Thread{}, err
	}
	return out, nil
}

// DeleteThread implements store.Threads. A running run's worker finds out when
// it next renews its lease (store.ErrStale).
func (db *DB) DeleteThread(ctx context.Context, orgID, id string) error {
	return retry(ctx, "delete thread", func() error {
		if orgID == "" || id == "" {
			return store.ErrNotFound
		}
		it, err := db.get(ctx, db.tables.threads, threadKey(orgID, id))
		if err != nil {
			return err
		}
		if it == nil {
			return store.ErrNotFound
		}
		t := &threadRec{it: it, orgID: orgID, id: id, pk: threadPK(orgID, id), ver: it.num("ver"),
			running: it.str("running"), pending: it.stringMap("pending")}
		if it.boolean("deleting") {
			// A deletion that did not finish (its process died): finish it.
			return db.sweepThread(ctx, t)
		}
		return db.deleteThread(ctx, t, nil)
	})
}

// deleteThread deletes thread t with every item of its partition and the
// markers of its runs, on condition that t is unchanged (errRetry
// otherwise) and that extra (a condition check or delete) holds. When
// everything fits one transaction, it is one; otherwise the thread is first
// marked deleting (and so invisible, and closed to writes), then its items
// are deleted, then the thread.
func (db *DB) deleteThread(ctx context.Context, t *threadRec, extra *types.TransactWriteItem) error {
	table := db.tables.threads
	items, err := db.partitionKeys(ctx, table, t.pk)
	if err != nil {
		return err
	}
	var keys []map[string]types.AttributeValue
	var extraKey string
	if extra != nil && extra.Delete != nil {
		extraKey = extra.Delete.Key["sk"].(*types.AttributeValueMemberS).Value
	}
	for _, it := range items {
		sk := it.str("sk")
		if sk == skThread {
			continue
		}
		if sk != extraKey {
			keys = append(keys, key(t.pk, sk))
		}
		if len(sk) > 4 && sk[:4] == "RUN#" {
			keys = append(keys, runMarkerKey(sk[4:]))
		}
	}
	cond := threadCond(t)
	// A running run leaves its organization's slot, and the thread's
	// counted bytes leave the organization's counters, in the transaction
	// that deletes it (or marks it deleting).
	var slot []types.TransactWriteItem
	if t.running != "" {
		slot = append(slot, db.freeSlot(t.orgID, t.running))
	}
	uncount := db.usageAdd(t.orgID, t.id, -1, -t.it.num("bytes"))
	if len(keys)+len(slot)+3 <= maxTxItems {
		tx := append([]types.TransactWriteItem{cond.del(table, threadKey(t.orgID, t.id)), uncount}, slot...)
		if extra != nil {
			tx = append(tx, *extra)
		}
		for _, k := range keys {
			tx = append(tx, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: k}})
		}
		reasons, err := db.transact(ctx, tx)
		if err != nil {
			return err
		}
		if reasons != nil {
			return errRetry
		}
		db.dropPartitionPayloads(ctx, table, t.pk, t.it)
		return nil
	}
	// Too many items: mark, sweep, delete.
	// Marked, it also leaves the org index: searches pass over the index's
	// keys without reading the threads they skip (matchThreads).
	cond.set("deleting", boolean(true)).remove("pending").remove("running").remove("gpk").remove("gsk")
	tx := append([]types.TransactWriteItem{cond.update(table, threadKey(t.orgID, t.id)), uncount}, slot...)
	if extra != nil {
		tx = append(tx, *extra)
		if strings.HasPrefix(extraKey, "RUN#") {
			tx = append(tx, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: runMarkerKey(extraKey[4:])}})
		}
	}
	if h := head(t.pending); h != "" && t.running == "" {
		tx = append(tx, newUpd().remove("qpk").remove("qsk").cond("", exists, nil).update(table, key(t.pk, runSK(h))))
	}
	reasons, err := db.transact(ctx, tx)
	if err != nil {
		return err
	}
	if reasons != nil {
		return errRetry
	}
	return db.sweepThread(ctx, t)
}

// sweepThread deletes everything of a thread marked deleting, then the
// thread.
func (db *DB) sweepThread(ctx context.Context, t *threadRec) error {
	table := db.tables.threads
	items, err := db.partitionKeys(ctx, table, t.pk)
	if err != nil {
		return err
	}
	var keys []map[string]types.AttributeValue
	for _, it := range items {
		sk := it.str("sk")
		if sk == skThread {
			continue
		}
		keys = append(keys, key(t.pk, sk))
		if len(sk) > 4 && sk[:4] == "RUN#" {
			keys = append(keys, runMarkerKey(sk[4:]))
		}
	}
	if err := db.batchWrite(ctx, table, deletes(keys)); err != nil {
		return err
	}
	_, err = db.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: threadKey(t.orgID, t.id)})
	if err == nil {
		db.dropPartitionPayloads(ctx, table, t.pk, t.it)
	}
	return err
}

// SetThreadTTL implements store.Threads: on the thread's version.
func (db *DB) SetThreadTTL(ctx context.Context, orgID, id string, expiresAt time.Time, strategy string) error {
	return retry(ctx, "set thread ttl", func() error {
		t, err := db.loadThread(ctx, orgID, id)
		if err != nil {
			return err
		}
		u := threadCond(t)
		setExpiry(u, expiresAt, strategy)
		reasons, err := db.transact(ctx, []types.TransactWriteItem{u.update(db.tables.threads, threadKey(orgID, id))})
		if err != nil {
			return err
		}
		if reasons != nil {
			return errRetry
		}
		return nil
	})
}

// ExpiredThreads implements store.Threads, through the expiry partition of
// the lease index (eventually consistent on AWS: a thread may be listed
// a moment after its expiry changed; the caller re-reads it).
func (db *DB) ExpiredThreads(ctx context.Context, now time.Time, limit int) ([]store.Thread, error) {
	out := []store.Thread{}
	var start map[string]types.AttributeValue
	for len(out) < limit {
		page, err := db.client.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(db.tables.threads), IndexName: aws.String(indexLease),
			KeyConditionExpression: aws.String("lpk = :x AND lsk <= :now"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":x": s(expiryPK), ":now": s(sortTime(now)),
			},
			Limit: aws.Int32(int32(limit - len(out))), ExclusiveStartKey: start,
		})
		if err != nil {
			return nil, wrap("expired threads", err)
		}
		for _, raw := range page.Items {
			it := item(raw)
			if it.boolean("deleting") {
				continue
			}
			out = append(out, threadFrom(it))
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		start = page.LastEvaluatedKey
	}
	return out, nil
}

// partitionKeys returns the keys of every item of partition pk (strongly
// consistent), projected to the keys: deleting a thread needs nothing else
// (its payload objects go by prefix), so a thread of large checkpoints is
// not read whole to be deleted (review #10). DynamoDB still bills the
// items' sizes; what is saved is the transfer and the function's memory.
func (db *DB) partitionKeys(ctx context.Context, table, pk string) ([]item, error) {
	return db.queryAll(withoutPayloads(ctx), &dynamodb.QueryInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": "pk", "#sk": "sk"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk)},
		ProjectionExpression:      aws.String("#pk, #sk"),
	})
}

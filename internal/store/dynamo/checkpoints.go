package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/cpcodec"
)

// Checkpoint items: sort key CP#<id> (IDs are time-ordered, so the sort key
// orders checkpoints); data inline up to inlineMax bytes, else a blob with
// base CPD#<id> (chunk sort keys CPD#<id>#<gen>#<n>, which sort after every
// CP#... key, outside checkpoint queries).
const cpPrefix = "CP#"

func cpSK(id string) string       { return cpPrefix + id }
func cpBlobBase(id string) string { return "CPD#" + id }

// cpItem is the item of cp encoded as enc (cpvalues.go), its head inline
// or in ref. "bytes" is the length of the data as put: what the usage
// counts, whatever the format stores.
func cpItem(pk string, cp store.Checkpoint, enc cpcodec.Encoded, ref blobRef) map[string]types.AttributeValue {
	it := with(key(pk, cpSK(cp.ID)), map[string]types.AttributeValue{
		"thread": s(cp.ThreadID), "id": s(cp.ID), "parent": s(cp.ParentID), "run": s(cp.RunID),
		"created": n(micros(cp.CreatedAt)), "bytes": n(int64(len(cp.Data))),
	})
	if ref.none() {
		it["data"] = b(enc.Head)
	} else {
		it["data_gen"], it["data_chunks"] = s(ref.gen), n(int64(ref.chunks))
	}
	if enc.Manifest != nil {
		it["manifest"] = b(enc.Manifest)
	}
	return it
}

// encodeCheckpoint encodes cp against its parent's manifest (parent, or
// read from the parent's item when nil) and writes its new value items;
// then its head in a blob when it is too large to be inline (ref none
// otherwise). This is the start of every checkpoint write (PutCheckpoint,
// PutCheckpoints, UpdateThreadState): what it writes is only reachable once
// the checkpoint item's transaction commits, where a condition on the
// writer (a fence on the run attempt) belongs.
func (db *DB) encodeCheckpoint(ctx context.Context, pk string, cp store.Checkpoint, parent *cpcodec.Manifest) (cpcodec.Encoded, blobRef, error) {
	if parent == nil {
		var err error
		if parent, err = db.parentManifest(ctx, pk, cp.ParentID); err != nil {
			return cpcodec.Encoded{}, blobRef{}, err
		}
	}
	enc := cpcodec.Encode(cp.Data, parent)
	if err := db.putValueItems(ctx, pk, enc.Blobs); err != nil {
		return cpcodec.Encoded{}, blobRef{}, err
	}
	if len(enc.Head) <= db.inlineLimit(inlineMax) {
		return enc, blobRef{}, nil
	}
	ref, err := db.writeBlob(ctx, pk, cpBlobBase(cp.ID), enc.Head)
	return enc, ref, err
}

// fullCheckpoint reads a checkpoint item with its data; ok false when its
// blob was replaced meanwhile.
func (db *DB) fullCheckpoint(ctx context.Context, pk string, it item, vals *valueReader) (store.Checkpoint, bool, error) {
	cp := store.Checkpoint{
		ThreadID: it.str("thread"), ID: it.str("id"), ParentID: it.str("parent"), RunID: it.str("run"),
		CreatedAt: it.time("created"), Data: it.bytes("data"),
	}
	if ref := blobOf(it, "data"); !ref.none() {
		data, ok, err := db.readBlob(ctx, pk, cpBlobBase(cp.ID), ref)
		if err != nil || !ok {
			return store.Checkpoint{}, false, err
		}
		cp.Data = data
	}
	if man := it.bytes("manifest"); man != nil {
		if vals == nil {
			vals = db.values(pk)
		}
		data, err := vals.decode(ctx, cp.Data, man)
		if errors.Is(err, cpcodec.ErrBroken) {
			return store.Checkpoint{}, false, nil // collected under the read: read again
		}
		if err != nil {
			return store.Checkpoint{}, false, err
		}
		cp.Data = data
	}
	return cp, true, nil
}

// readCheckpoint reads checkpoint id of partition pk with its data, again
// when its data changed under the read.
func (db *DB) readCheckpoint(ctx context.Context, pk, id string) (store.Checkpoint, error) {
	for attempt := 0; attempt < 5; attempt++ {
		it, err := db.get(ctx, db.tables.threads, key(pk, cpSK(id)))
		if err != nil {
			return store.Checkpoint{}, err
		}
		if it == nil {
			return store.Checkpoint{}, store.ErrNotFound
		}
		cp, ok, err := db.fullCheckpoint(ctx, pk, it, nil)
		if err != nil || ok {
			return cp, err
		}
	}
	return store.Checkpoint{}, errRetry
}

// writeCheckpoint stores cp (and its blob) in one transaction with the
// thread write tu (which carries the thread's condition), then deletes the
// blob of the checkpoint it replaced. It returns errRetry when the thread
// changed.
func (db *DB) writeCheckpoint(ctx context.Context, t *threadRec, cp store.Checkpoint, tu *upd, after func()) error {
	if err := fenceCheckpoint(t, cp); err != nil {
		return err
	}
	table := db.tables.threads
	old, err := db.get(ctx, table, key(t.pk, cpSK(cp.ID)))
	if err != nil {
		return err
	}
	enc, ref, err := db.encodeCheckpoint(ctx, t.pk, cp, nil)
	if err != nil {
		return err
	}
	delta := int64(len(cp.Data))
	if old != nil {
		delta -= old.num("bytes")
	}
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		tu.add("bytes", delta).update(table, threadKey(t.orgID, t.id)),
		{Put: &types.Put{TableName: aws.String(table), Item: cpItem(t.pk, cp, enc, ref)}},
		db.usageAdd(t.orgID, t.id, 0, delta),
	})
	if err != nil || reasons != nil {
		_ = db.deleteBlob(ctx, t.pk, cpBlobBase(cp.ID), ref)
		if err != nil {
			return err
		}
		return errRetry
	}
	if old != nil {
		_ = db.deleteBlob(ctx, t.pk, cpBlobBase(cp.ID), blobOf(old, "data"))
	}
	if after != nil {
		after()
	}
	return nil
}

// PutCheckpoint implements store.Checkpoints; ErrNotFound when the thread does not
// exist in the org. The checkpoint is written in one transaction with an
// increment of the thread's version (nothing else of the thread changes), so
// that it cannot slip in while DeleteThread collects the thread's items.
func (db *DB) PutCheckpoint(ctx context.Context, orgID string, cp store.Checkpoint) error {
	return retry(ctx, "put checkpoint", func() error {
		t, err := db.loadThread(ctx, orgID, cp.ThreadID)
		if err != nil {
			return err
		}
		return db.writeCheckpoint(ctx, t, cp, threadCond(t), nil)
	})
}

// Checkpoint implements store.Checkpoints.
func (db *DB) Checkpoint(ctx context.Context, orgID, threadID, id string) (store.Checkpoint, error) {
	if orgID == "" || threadID == "" || id == "" {
		return store.Checkpoint{}, store.ErrNotFound
	}
	cp, err := db.readCheckpoint(ctx, threadPK(orgID, threadID), id)
	return cp, wrap("checkpoint", err)
}

// LatestCheckpoint implements store.Checkpoints.
func (db *DB) LatestCheckpoint(ctx context.Context, orgID, threadID string) (store.Checkpoint, error) {
	if orgID == "" || threadID == "" {
		return store.Checkpoint{}, store.ErrNotFound
	}
	pk := threadPK(orgID, threadID)
	for attempt := 0; attempt < 5; attempt++ {
		out, err := db.client.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(db.tables.threads), ConsistentRead: aws.Bool(true),
			KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": s(pk), ":p": s(cpPrefix),
			},
			ScanIndexForward: aws.Bool(false), Limit: aws.Int32(1),
		})
		if err != nil {
			return store.Checkpoint{}, wrap("latest checkpoint", err)
		}
		if len(out.Items) == 0 {
			return store.Checkpoint{}, store.ErrNotFound
		}
		cp, ok, err := db.fullCheckpoint(ctx, pk, item(out.Items[0]), nil)
		if err != nil {
			return store.Checkpoint{}, wrap("latest checkpoint", err)
		}
		if ok {
			return cp, nil
		}
	}
	return store.Checkpoint{}, wrap("latest checkpoint", errRetry)
}

// ListCheckpoints implements store.Checkpoints; ErrNotFound when the thread does not
// exist. IDs compare as byte strings.
func (db *DB) ListCheckpoints(ctx context.Context, orgID, threadID, before string, limit int) ([]store.Checkpoint, error) {
	t, err := db.loadThread(ctx, orgID, threadID)
	if err != nil {
		return nil, wrap("list checkpoints", err)
	}
	if limit <= 0 {
		limit = 10
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(db.tables.threads), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": s(t.pk), ":p": s(cpPrefix),
		},
		ScanIndexForward: aws.Bool(false),
	}
	if before != "" {
		in.KeyConditionExpression = aws.String("pk = :pk AND sk BETWEEN :lo AND :hi")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":pk": s(t.pk), ":lo": s(cpPrefix), ":hi": s(cpSK(before)),
		}
	}
	out := []store.Checkpoint{}
	vals := db.values(t.pk) // values shared by the page's checkpoints are read once
	p := dynamodb.NewQueryPaginator(db.client, in)
	for p.HasMorePages() && len(out) < limit {
		pg, err := p.NextPage(ctx)
		if err != nil {
			return nil, wrap("list checkpoints", err)
		}
		for _, raw := range pg.Items {
			it := item(raw)
			if !strings.HasPrefix(it.str("sk"), cpPrefix) || it.str("id") == before && before != "" {
				continue
			}
			cp, ok, err := db.fullCheckpoint(ctx, t.pk, it, vals)
			if err != nil {
				return nil, wrap("list checkpoints", err)
			}
			if !ok {
				if cp, err = db.readCheckpoint(ctx, t.pk, it.str("id")); err != nil {
					return nil, wrap("list checkpoints", err)
				}
			}
			out = append(out, cp)
			if len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

// UpdateThreadState implements store.Checkpoints; ErrNotFound when the thread does
// not exist. Nil values leave the thread's values unchanged (as in
// FinishRun), an empty status its status; interrupts are replaced as given
// and the thread's Error is kept.
func (db *DB) UpdateThreadState(ctx context.Context, orgID string, cp store.Checkpoint, values, interrupts []byte, status string, now time.Time) error {
	return retry(ctx, "update thread state", func() error {
		t, err := db.loadThread(ctx, orgID, cp.ThreadID)
		if err != nil {
			return err
		}
		if t.inflight() {
			return store.ErrBusy
		}
		// The values are the state cp holds: split against cp's manifest
		// they reach the value items writeCheckpoint writes for cp.
		parent, err := db.parentManifest(ctx, t.pk, cp.ParentID)
		if err != nil {
			return err
		}
		vals := cpcodec.Encoded{Head: values}
		if own := cpcodec.Encode(cp.Data, parent).M; own != nil && values != nil {
			vals = cpcodec.EncodeObject(values, own)
			if err := db.putValueItems(ctx, t.pk, vals.Blobs); err != nil {
				return err
			}
		}
		var ref blobRef
		u := threadCond(t).setOrRemove("interrupts", interrupts).set("updated", n(micros(now))).set("supd", n(micros(now)))
		if vals.M != nil {
			setSplitValues(u, vals.Manifest)
		} else {
			if ref, err = db.putValues(ctx, t.pk, values); err != nil {
				return err
			}
			setValues(u, values, ref)
			if values != nil {
				u.remove("values_manifest")
			}
		}
		if status != "" {
			u.set("status", s(status))
		}
		err = db.writeCheckpoint(ctx, t, cp, u, func() {
			if values != nil {
				_ = db.deleteBlob(ctx, t.pk, valuesBase, blobOf(t.it, "values"))
			}
		})
		if err != nil {
			_ = db.deleteBlob(ctx, t.pk, valuesBase, ref)
		}
		return err
	})
}

// deleteRunCheckpoints deletes the checkpoints run runID wrote on a thread,
// with their blobs, and reports whether it deleted any. The items leave the
// counters in the transactions that delete them, on the thread's version
// (see deleteThread), up to maxTxItems-2 at a time; their blob chunks are
// deleted after (a crash in between leaves chunks to the thread's
// deletion). A thread being deleted is left to its deletion.
func (db *DB) deleteRunCheckpoints(ctx context.Context, orgID, threadID, runID string) (bool, error) {
	table := db.tables.threads
	pk := threadPK(orgID, threadID)
	items, err := db.queryAll(ctx, &dynamodb.QueryInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:   aws.String("pk = :pk AND begins_with(sk, :p)"),
		FilterExpression:         aws.String("#run = :run"),
		ExpressionAttributeNames: map[string]string{"#run": "run"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": s(pk), ":p": s(cpPrefix), ":run": s(runID),
		},
	})
	if err != nil || len(items) == 0 {
		return false, err
	}
	deleted, err := db.deleteCheckpointItems(ctx, orgID, threadID, items)
	if err != nil || !deleted {
		return deleted, err
	}
	return true, db.collectValues(ctx, orgID, threadID)
}

// PruneCheckpoints implements store.Checkpoints: the thread's checkpoints
// but the latest are deleted in transactions of the partition's items
// (each also uncounting their bytes), then their blobs.
func (db *DB) PruneCheckpoints(ctx context.Context, orgID, threadID string) error {
	if _, err := db.loadThread(ctx, orgID, threadID); err != nil {
		return wrap("prune checkpoints", err)
	}
	items, err := db.queryAll(ctx, &dynamodb.QueryInput{
		TableName: aws.String(db.tables.threads), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": s(threadPK(orgID, threadID)), ":p": s(cpPrefix),
		},
	})
	if err != nil {
		return wrap("prune checkpoints", err)
	}
	latest := ""
	for _, it := range items {
		if id := it.str("id"); id > latest {
			latest = id
		}
	}
	older := items[:0]
	for _, it := range items {
		if it.str("id") != latest {
			older = append(older, it)
		}
	}
	if len(older) == 0 {
		return nil
	}
	if _, err = db.deleteCheckpointItems(ctx, orgID, threadID, older); err != nil {
		return wrap("prune checkpoints", err)
	}
	return wrap("prune checkpoints", db.collectValues(ctx, orgID, threadID))
}

// deleteCheckpointItems deletes checkpoint items of one thread with their
// blobs; false when the thread went away meanwhile.
func (db *DB) deleteCheckpointItems(ctx context.Context, orgID, threadID string, items []item) (bool, error) {
	table := db.tables.threads
	pk := threadPK(orgID, threadID)
	for len(items) > 0 {
		chunk := items[:min(len(items), maxTxItems-2)]
		items = items[len(chunk):]
		err := retry(ctx, "delete checkpoints", func() error {
			t, err := db.loadThread(ctx, orgID, threadID)
			if err != nil {
				return err
			}
			var size int64
			tx := make([]types.TransactWriteItem, 0, len(chunk)+2)
			for _, it := range chunk {
				size += it.num("bytes")
				tx = append(tx, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: key(pk, it.str("sk"))}})
			}
			tx = append(tx, threadCond(t).add("bytes", -size).update(table, threadKey(orgID, threadID)),
				db.usageAdd(orgID, threadID, 0, -size))
			reasons, err := db.transact(ctx, tx)
			if err != nil {
				return err
			}
			if reasons != nil {
				return errRetry
			}
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		var chunks []map[string]types.AttributeValue
		for _, it := range chunk {
			ref := blobOf(it, "data")
			for i := 0; i < ref.chunks; i++ {
				chunks = append(chunks, key(pk, chunkSK(cpBlobBase(it.str("id")), ref.gen, i)))
			}
		}
		if err := db.batchWrite(ctx, table, deletes(chunks)); err != nil {
			return true, err
		}
	}
	return true, nil
}

// PutCheckpoints implements store.Checkpoints: each checkpoint as PutCheckpoint
// writes it (a large one spans several items, so the batch cannot be one
// transaction), in order.
func (db *DB) PutCheckpoints(ctx context.Context, orgID string, cps []store.Checkpoint) error {
	cps = lastOfEach(cps)
	for len(cps) > 0 {
		n := batchLen(cps)
		if err := db.putNewCheckpoints(ctx, orgID, cps[:n]); err != nil {
			return err
		}
		cps = cps[n:]
	}
	return nil
}

// lastOfEach keeps the last version of each checkpoint ID (a transaction
// may not write an item twice), in the order of those last versions.
func lastOfEach(cps []store.Checkpoint) []store.Checkpoint {
	last := make(map[string]int, len(cps))
	for i, cp := range cps {
		last[cp.ID] = i
	}
	if len(last) == len(cps) {
		return cps
	}
	out := make([]store.Checkpoint, 0, len(last))
	for i, cp := range cps {
		if last[cp.ID] == i {
			out = append(out, cp)
		}
	}
	return out
}

// A transaction holds at most 100 items and 4 MB: a batch of checkpoints
// stays below both, with the thread's item and its usage shard's.
const (
	maxBatchItems = 98
	maxBatchBytes = 3 << 20
)

// batchLen is how many of cps (at least one) go in one transaction. Data
// sizes are counted as put: the heads stored are smaller.
func batchLen(cps []store.Checkpoint) int {
	size := 0
	for i, cp := range cps {
		if len(cp.Data) <= inlineMax {
			size += len(cp.Data) + 512
		} else {
			size += 4096 // a manifest and blob references
		}
		if i > 0 && (i == maxBatchItems || size > maxBatchBytes) {
			return i
		}
	}
	return len(cps)
}

// putNewCheckpoints writes a batch of one thread's checkpoints in one
// transaction with one increment of the thread's version, on the
// expectation that they are new: each put requires that no checkpoint has
// its ID. A batch with one that replaces an earlier copy (its blob must be
// deleted after) goes one by one through PutCheckpoint instead. A batch
// costs one read and 2×(n+1) write units instead of n reads and 4n.
func (db *DB) putNewCheckpoints(ctx context.Context, orgID string, cps []store.Checkpoint) error {
	table := db.tables.threads
	replaces := false
	err := retry(ctx, "put checkpoints", func() error {
		t, err := db.loadThread(ctx, orgID, cps[0].ThreadID)
		if err != nil {
			return err
		}
		if err := fenceCheckpoints(t, cps); err != nil {
			return err
		}
		var size int64
		for _, cp := range cps {
			size += int64(len(cp.Data))
		}
		items := []types.TransactWriteItem{threadCond(t).add("bytes", size).update(table, threadKey(orgID, t.id)),
			db.usageAdd(orgID, t.id, 0, size)}
		refs := make([]blobRef, 0, len(cps))
		undo := func() {
			for i, ref := range refs {
				_ = db.deleteBlob(ctx, t.pk, cpBlobBase(cps[i].ID), ref)
			}
		}
		var prev *cpcodec.Manifest
		for i, cp := range cps {
			if cp.ThreadID != t.id {
				undo()
				return fmt.Errorf("checkpoints of threads %s and %s in one batch", t.id, cp.ThreadID)
			}
			if i == 0 || cp.ParentID != cps[i-1].ID {
				prev = nil // read from the parent's item
			}
			enc, ref, err := db.encodeCheckpoint(ctx, t.pk, cp, prev)
			if err != nil {
				undo()
				return err
			}
			prev = enc.M
			refs = append(refs, ref)
			items = append(items, types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(table), Item: cpItem(t.pk, cp, enc, ref),
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			}})
		}
		reasons, err := db.transact(ctx, items)
		if err != nil || reasons != nil {
			undo()
			if err != nil {
				return err
			}
			if reasons[0] == "ConditionalCheckFailed" {
				return errRetry // the thread changed
			}
			replaces = true
			return nil
		}
		return nil
	})
	if err != nil || !replaces {
		return err
	}
	for _, cp := range cps {
		if err := db.PutCheckpoint(ctx, orgID, cp); err != nil {
			return err
		}
	}
	return nil
}

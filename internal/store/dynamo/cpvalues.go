package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/cpcodec"
)

// Checkpoint values (the cpcodec format, shared with the SQLite adapter):
// a checkpoint item holds its head (data, inline or a blob as before) and
// its manifest; the values of its channels are value items in the
// thread's partition, one per version, keyed by their chain:
//
//	CPV#<root>#<depth, 5 digits>#<id>
//
// root being the whole value its chain starts from, so that one Query
// (sk between CPV#<root>#00000 and CPV#<root>#<depth>#~) reads a chain:
// at most cpcodec.MaxDepth+1 small items, not one GetItem per link. A value
// item holds its data inline up to the inline limit, else as a blob (base
// CPVD#<id>: chunk items, or one payload object with a payload store), so
// that no item exceeds 400 KB. Value items are written before the
// transaction of their checkpoint, each only if absent (same key, same
// content); a write that does not commit leaves items the next collection
// deletes. Collections (prune, a rollback's deletion) delete the value
// items no remaining checkpoint reaches, in transactions conditioned on
// the thread's version, so a checkpoint written meanwhile (which may
// reach them) makes the collection start over rather than lose its values.
const cpvPrefix = "CPV#"

func cpvSK(root string, depth int, id string) string {
	return fmt.Sprintf("%s%s#%05d#%s", cpvPrefix, root, depth, id)
}

func cpvBlobBase(id string) string { return "CPVD#" + id }

// putValueItems writes the value items of enc's blobs that are not stored yet.
func (db *DB) putValueItems(ctx context.Context, pk string, blobs []cpcodec.Blob) error {
	for _, bl := range blobs {
		it := map[string]types.AttributeValue{"pk": s(pk), "sk": s(cpvSK(bl.Root, bl.Depth, bl.ID)),
			"id": s(bl.ID), "base": s(bl.Base)}
		var ref blobRef
		if len(bl.Data) <= db.inlineLimit(inlineMax) {
			it["data"] = b(bl.Data)
		} else {
			var err error
			if ref, err = db.writeBlob(ctx, pk, cpvBlobBase(bl.ID), bl.Data); err != nil {
				return err
			}
			it["data_gen"], it["data_chunks"] = s(ref.gen), n(int64(ref.chunks))
		}
		_, err := db.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(db.tables.threads), Item: it,
			ConditionExpression: aws.String("attribute_not_exists(pk)")})
		if isCondFailed(err) { // stored already: the same content
			// Unless the item stored is this very write (its answer was
			// lost and the SDK's retry found it), this blob is not needed.
			if !ref.none() {
				stored, gerr := db.get(ctx, db.tables.threads, key(pk, cpvSK(bl.Root, bl.Depth, bl.ID)))
				if gerr == nil && stored != nil && blobOf(stored, "data").gen != ref.gen {
					_ = db.deleteBlob(ctx, pk, cpvBlobBase(bl.ID), ref)
				}
			}
			continue
		}
		if err != nil {
			_ = db.deleteBlob(ctx, pk, cpvBlobBase(bl.ID), ref)
			return err
		}
	}
	return nil
}

// parentManifest reads the manifest of checkpoint id (nil when it has
// none, or there is no such checkpoint: the child is then stored whole).
func (db *DB) parentManifest(ctx context.Context, pk, id string) (*cpcodec.Manifest, error) {
	if id == "" {
		return nil, nil
	}
	out, err := db.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(db.tables.threads),
		Key: key(pk, cpSK(id)), ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("manifest")})
	if err != nil {
		return nil, err
	}
	man := item(out.Item).bytes("manifest")
	if out.Item == nil || man == nil {
		return nil, nil
	}
	m, err := cpcodec.ParseManifest(man)
	if err != nil {
		return nil, nil // written whole instead
	}
	return m, nil
}

// valueReader materializes values of partition pk, reading each chain
// once per reader.
type valueReader struct {
	db    *DB
	pk    string
	memo  map[string][]byte
	roots map[string]map[string]item // root → id → item, as read
}

func (db *DB) values(pk string) *valueReader {
	return &valueReader{db: db, pk: pk, memo: map[string][]byte{}, roots: map[string]map[string]item{}}
}

// decode gives back the data of a checkpoint item whose head is head.
func (r *valueReader) decode(ctx context.Context, head, manifest []byte) ([]byte, error) {
	m, err := cpcodec.ParseManifest(manifest)
	if err != nil {
		return nil, err
	}
	byID := map[string]cpcodec.Entry{}
	for _, e := range m.Ch {
		byID[e.ID] = e
	}
	return cpcodec.Decode(head, m, func(id string) ([]byte, error) { return r.value(ctx, byID[id]) })
}

func (r *valueReader) value(ctx context.Context, e cpcodec.Entry) ([]byte, error) {
	if v, ok := r.memo[e.ID]; ok {
		return v, nil
	}
	root := e.Root()
	items := r.roots[root]
	if _, ok := items[e.ID]; !ok {
		list, err := r.db.queryAll(ctx, &dynamodb.QueryInput{
			TableName: aws.String(r.db.tables.threads), ConsistentRead: aws.Bool(true),
			KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": s(r.pk), ":lo": s(cpvSK(root, 0, "")), ":hi": s(cpvSK(root, e.D, "~")),
			},
		})
		if err != nil {
			return nil, err
		}
		items = make(map[string]item, len(list))
		for _, it := range list {
			items[it.str("id")] = it
		}
		r.roots[root] = items
	}
	var chain []cpcodec.Blob
	for id := e.ID; id != ""; {
		it, ok := items[id]
		if !ok || len(chain) > 4*cpcodec.MaxDepth {
			return nil, cpcodec.ErrBroken
		}
		data := it.bytes("data")
		if ref := blobOf(it, "data"); !ref.none() {
			var found bool
			var err error
			if data, found, err = r.db.readBlob(ctx, r.pk, cpvBlobBase(id), ref); err != nil {
				return nil, err
			} else if !found {
				return nil, cpcodec.ErrBroken
			}
		}
		chain = append(chain, cpcodec.Blob{ID: id, Base: it.str("base"), Data: data})
		id = it.str("base")
	}
	v, err := cpcodec.Materialize(chain)
	if err != nil {
		return nil, err
	}
	r.memo[e.ID] = v
	return v, nil
}

// collectValues deletes the value items of partition pk that no
// checkpoint of the thread reaches, in transactions conditioned on the
// thread's version (retried from the start when a write came between),
// then their blobs.
func (db *DB) collectValues(ctx context.Context, orgID, threadID string) error {
	pk := threadPK(orgID, threadID)
	table := db.tables.threads
	var dead []item
	err := retry(ctx, "collect checkpoint values", func() error {
		t, err := db.loadThread(ctx, orgID, threadID)
		if err != nil {
			return err
		}
		// Manifests are read whole (a large one may be a payload); the
		// value items' keys only.
		cps, err := db.queryAll(ctx, &dynamodb.QueryInput{
			TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk), ":p": s(cpPrefix)},
			ProjectionExpression:      aws.String("manifest"),
		})
		if err != nil {
			return err
		}
		vals, err := db.queryPartition(withoutPayloads(ctx), table, pk, cpvPrefix)
		if err != nil || len(vals) == 0 {
			return err
		}
		byID := make(map[string]item, len(vals))
		for _, it := range vals {
			byID[it.str("id")] = it
		}
		runs, err := db.queryAll(ctx, &dynamodb.QueryInput{
			TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk), ":p": s("RUN#")},
			ProjectionExpression:      aws.String("result_manifest"),
		})
		if err != nil {
			return err
		}
		var manifests [][]byte
		for _, it := range cps {
			manifests = append(manifests, it.bytes("manifest"))
		}
		for _, it := range runs {
			manifests = append(manifests, it.bytes("result_manifest"))
		}
		manifests = append(manifests, t.it.bytes("values_manifest"))
		live := map[string]bool{}
		for _, man := range manifests {
			if man == nil {
				continue
			}
			m, err := cpcodec.ParseManifest(man)
			if err != nil {
				continue
			}
			for _, id := range m.Refs() {
				for id != "" && !live[id] {
					live[id] = true
					id = byID[id].str("base")
				}
			}
		}
		dead = dead[:0]
		for _, it := range vals {
			if !live[it.str("id")] {
				dead = append(dead, it)
			}
		}
		for len(dead) > 0 {
			chunk := dead[:min(len(dead), maxTxItems-1)]
			tx := []types.TransactWriteItem{threadCond(t).update(table, threadKey(orgID, threadID))}
			for _, it := range chunk {
				tx = append(tx, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: key(pk, it.str("sk"))}})
			}
			reasons, err := db.transact(ctx, tx)
			if err != nil {
				return err
			}
			if reasons != nil {
				return errRetry
			}
			for _, it := range chunk {
				_ = db.deleteBlob(ctx, pk, cpvBlobBase(it.str("id")), blobOf(it, "data"))
			}
			dead = dead[len(chunk):]
			if t, err = db.loadThread(ctx, orgID, threadID); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) { // the thread went away: so did its items
		return nil
	}
	return err
}

// CheckpointBlobs reports the thread's value items (storetest.CheckpointBlobs):
// their number and the bytes of their values.
func (db *DB) CheckpointBlobs(ctx context.Context, orgID, threadID string) (int, int64, error) {
	pk := threadPK(orgID, threadID)
	vals, err := db.queryPartition(ctx, db.tables.threads, pk, cpvPrefix)
	if err != nil {
		return 0, 0, err
	}
	var size int64
	for _, it := range vals {
		data := it.bytes("data")
		if ref := blobOf(it, "data"); !ref.none() {
			var ok bool
			if data, ok, err = db.readBlob(ctx, pk, cpvBlobBase(it.str("id")), ref); err != nil || !ok {
				return 0, 0, fmt.Errorf("value %s: blob missing: %v", it.str("id"), err)
			}
		}
		size += int64(len(data))
	}
	return len(vals), size, nil
}

// A thread's values and a run's result are the state a checkpoint holds:
// with the manifest of the thread's latest checkpoint they are split the
// same way (values_manifest on the thread item, result_manifest on the run
// item, reaching the same value items), so a run's end writes manifests,
// not the state again. Without a manifest they are stored whole as before.

// latestManifest is the manifest of the latest checkpoint of partition pk
// (nil when none, or stored whole).
func (db *DB) latestManifest(ctx context.Context, pk string) (*cpcodec.Manifest, error) {
	out, err := db.client.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(db.tables.threads), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk), ":p": s(cpPrefix)},
		ProjectionExpression:      aws.String("manifest"),
		ScanIndexForward:          aws.Bool(false), Limit: aws.Int32(1),
	})
	if err != nil || len(out.Items) == 0 {
		return nil, err
	}
	man := item(out.Items[0]).bytes("manifest")
	if man == nil {
		return nil, nil
	}
	m, err := cpcodec.ParseManifest(man)
	if err != nil {
		return nil, nil // the document is stored whole
	}
	return m, nil
}

// encodeDoc splits doc against parent and writes the value items it
// introduces; nil Manifest: store doc whole.
func (db *DB) encodeDoc(ctx context.Context, pk string, doc []byte, parent *cpcodec.Manifest) (cpcodec.Encoded, error) {
	if doc == nil || parent == nil {
		return cpcodec.Encoded{Head: doc}, nil
	}
	enc := cpcodec.EncodeObject(doc, parent)
	if enc.M == nil {
		return enc, nil
	}
	return enc, db.putValueItems(ctx, pk, enc.Blobs)
}

// setSplitValues records a thread's values split (the manifest replaces
// the inline or blob values).
func setSplitValues(u *upd, manifest []byte) {
	u.remove("values").set("values_manifest", b(manifest))
	removeBlob(u, "values")
}

// fullRun is the record of a run item, its result read from the values
// when it is stored split.
func (db *DB) fullRun(ctx context.Context, it item) (store.Run, error) {
	r := runFrom(it)
	if man := it.bytes("result_manifest"); man != nil {
		data, err := db.values(it.str("pk")).decode(ctx, nil, man)
		if err != nil {
			return store.Run{}, err
		}
		r.Result = data
	}
	return r, nil
}

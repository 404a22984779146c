package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/payloads"
)

// Items are limited to 400 KB. Documents that may be larger (checkpoint data,
// a thread's values) are stored inline up to inlineMax bytes and otherwise
// as a blob: chunk items of at most chunkSize bytes in the same partition,
// with sort keys base#<gen>#<index>. The record holding the document keeps
// the generation and the chunk count; a new version of the document gets a
// new generation, written before the record is switched to it, so a reader
// never sees a mix of two versions. The old generation is deleted after the
// switch.
const (
	inlineMax       = 350_000 // checkpoint data
	valuesInlineMax = 100_000 // a thread's values: the thread item holds more
	chunkSize       = 350_000
)

// blobRef locates a blob: its generation and number of chunks.
type blobRef struct {
	gen    string
	chunks int
}

func (r blobRef) none() bool { return r.gen == "" }

func chunkSK(base, gen string, i int) string { return fmt.Sprintf("%s#%s#%05d", base, gen, i) }

func newGen() string {
	buf := make([]byte, 8)
	if _, err := rand.Read(buf); err != nil {
		panic(err)
	}
	return hex.EncodeToString(buf)
}

// With a payload store, a blob is one object per generation (chunks 0,
// see blobKey) and documents above PayloadThreshold are blobs.

// inlineLimit is the size up to which a document of the kind whose inline
// maximum is max stays in its record.
func (db *DB) inlineLimit(max int) int {
	if db.payloads != nil {
		return min(max, PayloadThreshold)
	}
	return max
}

// writeBlob stores data as a new generation of blob base in partition pk.
func (db *DB) writeBlob(ctx context.Context, pk, base string, data []byte) (blobRef, error) {
	ref := blobRef{gen: newGen()}
	if db.payloads != nil {
		if db.off != nil {
			if err := db.off.markThread(ctx, db.tables.threads, pk); err != nil {
				return blobRef{}, err
			}
		}
		if err := db.payloads.Put(ctx, db.blobKey(pk, base, ref.gen), data); err != nil {
			return blobRef{}, err
		}
		return ref, nil
	}
	var items []map[string]types.AttributeValue
	for off := 0; off < len(data) || off == 0; off += chunkSize {
		end := min(off+chunkSize, len(data))
		items = append(items, map[string]types.AttributeValue{
			"pk": s(pk), "sk": s(chunkSK(base, ref.gen, ref.chunks)), "data": b(data[off:end]),
		})
		ref.chunks++
		if end == len(data) {
			break
		}
	}
	if err := db.batchWrite(ctx, db.tables.threads, puts(items)); err != nil {
		_ = db.deleteBlob(ctx, pk, base, ref)
		return blobRef{}, err
	}
	return ref, nil
}

// readBlob reads blob base of partition pk; ok false when a chunk is missing
// (the blob was replaced or deleted meanwhile).
func (db *DB) readBlob(ctx context.Context, pk, base string, ref blobRef) (data []byte, ok bool, err error) {
	if ref.chunks == 0 && db.payloads != nil {
		data, err := db.payloads.Get(ctx, db.blobKey(pk, base, ref.gen))
		if errors.Is(err, payloads.ErrNotFound) {
			return nil, false, nil
		}
		return data, err == nil, err
	}
	items, err := db.queryPartition(ctx, db.tables.threads, pk, base+"#"+ref.gen+"#")
	if err != nil {
		return nil, false, err
	}
	if len(items) != ref.chunks {
		return nil, false, nil
	}
	for i, it := range items { // sorted by sort key: chunk order
		if it.str("sk") != chunkSK(base, ref.gen, i) {
			return nil, false, nil
		}
		data = append(data, it.bytes("data")...)
	}
	return data, true, nil
}

// deleteBlob deletes the chunks of a blob (a no-op for none).
func (db *DB) deleteBlob(ctx context.Context, pk, base string, ref blobRef) error {
	if ref.none() {
		return nil
	}
	if ref.chunks == 0 && db.payloads != nil {
		return db.payloads.Delete(ctx, db.blobKey(pk, base, ref.gen))
	}
	var keys []map[string]types.AttributeValue
	for i := 0; i < ref.chunks; i++ {
		keys = append(keys, key(pk, chunkSK(base, ref.gen, i)))
	}
	return db.batchWrite(ctx, db.tables.threads, deletes(keys))
}

// blobAttrs are the attributes recording ref under name.
func blobOf(it item, name string) blobRef {
	if !it.has(name + "_gen") {
		return blobRef{}
	}
	return blobRef{gen: it.str(name + "_gen"), chunks: int(it.num(name + "_chunks"))}
}

func setBlob(u *upd, name string, ref blobRef) {
	u.set(name+"_gen", s(ref.gen)).set(name+"_chunks", n(int64(ref.chunks)))
}

func removeBlob(u *upd, name string) {
	u.remove(name + "_gen").remove(name + "_chunks")
}

package dynamo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/stepgraph/stepgraph/internal/payloads"
)

// Payloads: with Options.Payloads, no item this adapter writes exceeds
// DynamoDB's 400 KB, whatever the size of the documents it holds. One
// middleware on the DynamoDB client (so every call of the adapter goes
// through it, transactions and batches included) does it:
//
//   - on the way out, every string or binary attribute value over
//     PayloadThreshold — of a PutItem, an UpdateItem's SET values, each Put
//     and Update of a TransactWriteItems, each put of a BatchWriteItem — is
//     written to the payload store first and replaced by a pointer, a map
//     {"_p": key, "_n": size, "_t": "B"|"S"}; when an item (or a whole
//     transaction) is still over its budget (itemBudget, txBudget), its
//     largest remaining values follow. Values named in a ConditionExpression
//     stay inline (a pointer would change the comparison);
//   - on the way back, every pointer in the items of GetItem, Query, Scan,
//     BatchGetItem, the old items of a write and the items of a cancelled
//     transaction's reasons is replaced by the value it points to, so the
//     rest of the adapter never sees one.
//
// Keys are content-addressed within the item that owns the value:
// <class>/<table>/<hash of pk>/<hash of sk>/<sha-256 of the value>. The
// object is written before the item, so a reader never finds a pointer
// without its object; a retried write (the SDK's, or a transaction retried
// after a conflict) writes the same key; a write that does not commit
// leaves an object nothing points to, which is harmless and goes with its
// item's or partition's cleanup (below). Class "x" holds the values of
// items that carry a TTL within expiringHorizon (temporary results, the
// event logs): the bucket's lifecycle rule expires "x/" after
// ExpiringPrefixDays, after the items themselves; class "p" holds the rest.
//
// Cleanup: deleting a thread deletes the payloads of its whole partition
// (by prefix); deleting an item of another table deletes that item's
// payloads (by prefix) once the delete succeeded. A value replaced by an
// update stays in the store until its item (or thread) is deleted.
//
// Documents that change on every step — a thread's values and checkpoint
// data — do not go through the middleware: above PayloadThreshold they are
// blobs (blob.go) kept as one payload object per generation, deleted when
// the record moves to the next one.

// PayloadThreshold is the size above which a value leaves its item. The
// price decides it: a value rewritten in a transaction costs 2 WRU per KB
// ($1.25 per million KB), an S3 PUT $0.005 per 1,000, so past about 4 KB a
// value written once is cheaper in S3; but each object is an S3 round trip
// (a PUT when written, a GET when read: tens of milliseconds on AWS for
// small objects) where DynamoDB's is already paid. 16 KiB measured the
// same as 4 KiB on issue 14's workloads (the chat turn of three nodes and
// 50 KB of state, the 20-turn conversation; bench/results/
// 2026-11-26-3-aws-cost.md) and a third of 64 KiB's cost, while values of
// 4 to 16 KB keep their item's round trip. Five documents of a thread item
// (values, metadata, config, interrupts, error) of 16 KiB fit easily.
const PayloadThreshold = 16 << 10

// ExpiringPrefixDays is the age at which the bucket's lifecycle rule
// deletes objects under "x/" (see infra/stack). expiringHorizon, the TTL
// below which a value is stored there, leaves a day's margin.
const (
	ExpiringPrefix     = "x/"
	DurablePrefix      = "p/"
	ExpiringPrefixDays = 2
	expiringHorizon    = 24 * time.Hour
)

// MaxItemBytes is DynamoDB's item limit (attribute names and values).
const MaxItemBytes = 400 << 10

const (
	itemBudget   = 300 << 10 // an item written stays below this
	txBudget     = 3 << 20   // a transaction's items (DynamoDB: 4 MB)
	minOffloaded = 1 << 10   // values smaller than this never move
)

// pointer is the attribute that stands for a value kept in the payload store.
func pointer(key string, v types.AttributeValue) types.AttributeValue {
	t, size := "B", 0
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		t, size = "S", len(v.Value)
	case *types.AttributeValueMemberB:
		size = len(v.Value)
	}
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"_p": s(key), "_n": n(int64(size)), "_t": s(t),
	}}
}

// pointerOf returns the key, size and type of a pointer; ok false for any
// other value (documents are binary values, so a map with these exact
// attributes is never a document).
func pointerOf(v types.AttributeValue) (key string, size int64, typ string, ok bool) {
	m, isMap := v.(*types.AttributeValueMemberM)
	if !isMap || len(m.Value) != 3 {
		return "", 0, "", false
	}
	k, ok1 := m.Value["_p"].(*types.AttributeValueMemberS)
	sz, ok2 := m.Value["_n"].(*types.AttributeValueMemberN)
	ty, ok3 := m.Value["_t"].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 || !ok3 {
		return "", 0, "", false
	}
	size, _ = strconv.ParseInt(sz.Value, 10, 64)
	return k.Value, size, ty.Value, true
}

func rawBytes(v types.AttributeValue) ([]byte, bool) {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return []byte(v.Value), true
	case *types.AttributeValueMemberB:
		return v.Value, true
	}
	return nil, false
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:16])
}

// itemPrefix is the prefix of the payloads of item (pk, sk) of table in
// class (DurablePrefix or ExpiringPrefix); partitionPrefix of a partition.
func partitionPrefix(class, table, pk string) string {
	return class + table + "/" + hash(pk) + "/"
}

func itemPrefix(class, table, pk, sk string) string {
	return partitionPrefix(class, table, pk) + hash(sk) + "/"
}

// offloader is the middleware (see above).
type offloader struct {
	store payloads.Store
	now   func() time.Time
	// client is the adapter's client (through this middleware), for the
	// thread flag's update; nil in tests that only resolve.
	client *dynamodb.Client
	flags  threadFlags
}

// payloadFlag is the thread item's attribute saying that objects may exist
// under the thread's prefix: set (true, never removed) before the first
// object of the thread's partition is written, read when the thread is
// deleted, so a thread that never stored one (a stateless run's temporary
// thread, most chat threads at small sizes) is deleted without listing its
// prefix. Objects of a thread's partition are written only through the
// offloader (its values) and writeBlob (checkpoint and values blobs), and
// both mark the thread first (markThread).
const payloadFlag = "pl"

// maxFlagsRemembered bounds the threads a process remembers as marked (or
// to be marked when created): past it the sets start over, which only
// costs a repeated flag update.
const maxFlagsRemembered = 10_000

// threadFlags remembers, per process, the thread partitions whose flag is
// set (marked: no update needed again) and those whose objects were
// written before their thread item exists (pending: the Put that creates
// the thread item carries the flag).
type threadFlags struct {
	mu      sync.Mutex
	marked  map[string]bool
	pending map[string]bool
}

func (f *threadFlags) has(set *map[string]bool, pk string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return (*set)[pk]
}

func (f *threadFlags) add(set *map[string]bool, pk string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *set == nil || len(*set) >= maxFlagsRemembered {
		*set = map[string]bool{}
	}
	(*set)[pk] = true
}

// isThreadPartition reports whether pk of table is a thread's partition
// (the prefix deleteThread removes).
func isThreadPartition(table, pk string) bool {
	return strings.HasSuffix(table, TableThreads) && strings.HasPrefix(pk, "T#")
}

// markThread sets the payload flag on the thread item of partition pk of
// table before an object of that partition is written. A thread item that
// does not exist yet (a thread created with its documents) is remembered:
// the Put that creates it carries the flag (write.item). It costs one
// small update per thread and process.
func (o *offloader) markThread(ctx context.Context, table, pk string) error {
	if o.client == nil || o.flags.has(&o.flags.marked, pk) {
		return nil
	}
	_, err := o.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key(pk, skThread),
		UpdateExpression:          aws.String("SET #f = :t"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames:  map[string]string{"#f": payloadFlag},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": boolean(true)},
	})
	if isCondFailed(err) {
		o.flags.add(&o.flags.pending, pk)
		return nil
	}
	if err != nil {
		return fmt.Errorf("dynamo: flag the thread's payloads: %w", err)
	}
	o.flags.add(&o.flags.marked, pk)
	return nil
}

func (*offloader) ID() string { return "stepgraph.dynamo.payloads" }

type noResolveKey struct{}

// withoutPayloads marks reads whose callers need keys only (deleting a
// thread): pointers are not resolved.
func withoutPayloads(ctx context.Context) context.Context {
	return context.WithValue(ctx, noResolveKey{}, true)
}

func (o *offloader) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	var deleted []itemRef
	switch p := in.Parameters.(type) {
	case *dynamodb.PutItemInput:
		cp := *p
		w := o.newWrite()
		cp.Item = w.item(aws.ToString(p.TableName), p.Item, cp.ConditionExpression)
		if err := w.flush(ctx); err != nil {
			return middleware.InitializeOutput{}, middleware.Metadata{}, err
		}
		in.Parameters = &cp
	case *dynamodb.UpdateItemInput:
		cp := *p
		w := o.newWrite()
		cp.ExpressionAttributeValues = w.update(aws.ToString(p.TableName), p.Key, aws.ToString(p.UpdateExpression), aws.ToString(p.ConditionExpression), p.ExpressionAttributeNames, p.ExpressionAttributeValues)
		if err := w.flush(ctx); err != nil {
			return middleware.InitializeOutput{}, middleware.Metadata{}, err
		}
		in.Parameters = &cp
	case *dynamodb.TransactWriteItemsInput:
		cp := *p
		cp.TransactItems = slices.Clone(p.TransactItems)
		w := o.newWrite()
		for i, ti := range cp.TransactItems {
			switch {
			case ti.Put != nil:
				put := *ti.Put
				put.Item = w.item(aws.ToString(put.TableName), put.Item, put.ConditionExpression)
				cp.TransactItems[i].Put = &put
			case ti.Update != nil:
				u := *ti.Update
				u.ExpressionAttributeValues = w.update(aws.ToString(u.TableName), u.Key, aws.ToString(u.UpdateExpression), aws.ToString(u.ConditionExpression), u.ExpressionAttributeNames, u.ExpressionAttributeValues)
				cp.TransactItems[i].Update = &u
			case ti.Delete != nil:
				deleted = append(deleted, refOf(aws.ToString(ti.Delete.TableName), ti.Delete.Key))
			}
		}
		w.fitTransaction()
		if err := w.flush(ctx); err != nil {
			return middleware.InitializeOutput{}, middleware.Metadata{}, err
		}
		in.Parameters = &cp
	case *dynamodb.BatchWriteItemInput:
		cp := *p
		cp.RequestItems = make(map[string][]types.WriteRequest, len(p.RequestItems))
		w := o.newWrite()
		for table, reqs := range p.RequestItems {
			out := slices.Clone(reqs)
			for i, r := range out {
				if r.PutRequest != nil {
					out[i].PutRequest = &types.PutRequest{Item: w.item(table, r.PutRequest.Item, nil)}
				}
				if r.DeleteRequest != nil {
					deleted = append(deleted, refOf(table, r.DeleteRequest.Key))
				}
			}
			cp.RequestItems[table] = out
		}
		if err := w.flush(ctx); err != nil {
			return middleware.InitializeOutput{}, middleware.Metadata{}, err
		}
		in.Parameters = &cp
	case *dynamodb.DeleteItemInput:
		deleted = append(deleted, refOf(aws.ToString(p.TableName), p.Key))
	}

	out, md, err := next.HandleInitialize(ctx, in)
	resolve := ctx.Value(noResolveKey{}) == nil
	if err != nil {
		if resolve {
			var tc *types.TransactionCanceledException
			if errors.As(err, &tc) {
				for _, r := range tc.CancellationReasons {
					if rerr := o.resolveItem(ctx, r.Item); rerr != nil {
						return out, md, rerr
					}
				}
			}
			var cf *types.ConditionalCheckFailedException
			if errors.As(err, &cf) {
				if rerr := o.resolveItem(ctx, cf.Item); rerr != nil {
					return out, md, rerr
				}
			}
		}
		return out, md, err
	}
	if un, ok := out.Result.(*dynamodb.BatchWriteItemOutput); ok && len(un.UnprocessedItems) > 0 {
		deleted = nil // the caller retries them; clean up once they go
	}
	o.dropItems(ctx, deleted)
	if !resolve {
		return out, md, nil
	}
	var items []map[string]types.AttributeValue
	switch r := out.Result.(type) {
	case *dynamodb.GetItemOutput:
		items = append(items, r.Item)
	case *dynamodb.QueryOutput:
		items = r.Items
	case *dynamodb.ScanOutput:
		items = r.Items
	case *dynamodb.BatchGetItemOutput:
		for _, its := range r.Responses {
			items = append(items, its...)
		}
	case *dynamodb.UpdateItemOutput:
		items = append(items, r.Attributes)
	case *dynamodb.PutItemOutput:
		items = append(items, r.Attributes)
	case *dynamodb.DeleteItemOutput:
		items = append(items, r.Attributes)
	case *dynamodb.TransactGetItemsOutput:
		for _, ir := range r.Responses {
			items = append(items, ir.Item)
		}
	}
	for _, it := range items {
		if err := o.resolveItem(ctx, it); err != nil {
			return out, md, err
		}
	}
	return out, md, nil
}

type itemRef struct{ table, pk, sk string }

func refOf(table string, k map[string]types.AttributeValue) itemRef {
	return itemRef{table: table, pk: item(k).str("pk"), sk: item(k).str("sk")}
}

// dropItems deletes the payloads of deleted items. Threads are cleaned by
// partition when the thread goes (deleteThread), so their items are left
// alone here. A failure leaves objects nothing points to; it does not fail
// the delete, which has happened.
func (o *offloader) dropItems(ctx context.Context, refs []itemRef) {
	for _, r := range refs {
		if r.pk == "" || strings.HasSuffix(r.table, TableThreads) {
			continue
		}
		for _, class := range []string{DurablePrefix, ExpiringPrefix} {
			_ = o.store.DeletePrefix(ctx, itemPrefix(class, r.table, r.pk, r.sk))
		}
	}
}

// write collects the objects of one request, written by flush before the
// request is sent.
type write struct {
	o       *offloader
	objects map[string][]byte
	// threads are the thread partitions (pk → table) this write puts
	// objects in; threadPuts the thread items it puts, by pk.
	threads    map[string]string
	threadPuts map[string]map[string]types.AttributeValue
	// part is the partition of the item being handled (set by item and
	// update), "" when not a thread's.
	part, partTable string
	// candidates are the values left inline, for fitTransaction.
	candidates []candidate
	total      int
}

type candidate struct {
	m               map[string]types.AttributeValue
	name            string
	prefix          string
	size            int
	part, partTable string
}

func (o *offloader) newWrite() *write {
	return &write{o: o, objects: map[string][]byte{}, threads: map[string]string{},
		threadPuts: map[string]map[string]types.AttributeValue{}}
}

// move replaces m[name] by a pointer to an object under prefix.
func (w *write) move(m map[string]types.AttributeValue, name, prefix string) {
	raw, ok := rawBytes(m[name])
	if !ok {
		return
	}
	if w.part != "" {
		w.threads[w.part] = w.partTable
	}
	sum := sha256.Sum256(raw)
	k := prefix + hex.EncodeToString(sum[:])
	w.objects[k] = raw
	m[name] = pointer(k, m[name])
}

// item returns it with its large values replaced by pointers (a copy when
// anything moves). Attributes named in cond (by name or placeholder) stay.
func (w *write) item(table string, it map[string]types.AttributeValue, cond *string) map[string]types.AttributeValue {
	out := maps(it)
	pk := item(it).str("pk")
	prefix := itemPrefix(w.o.class(it[ttlAttribute]), table, pk, item(it).str("sk"))
	w.setPart(table, pk)
	if w.part != "" && item(it).str("sk") == skThread {
		w.threadPuts[pk] = out
	}
	keep := func(name string) bool {
		return name == "pk" || name == "sk" || (cond != nil && strings.Contains(*cond, name))
	}
	var rest []candidate
	for name, v := range out {
		if keep(name) {
			continue
		}
		if valueSize(v) > PayloadThreshold {
			w.move(out, name, prefix)
		} else if valueSize(v) >= minOffloaded {
			if _, ok := rawBytes(v); ok {
				rest = append(rest, candidate{m: out, name: name, prefix: prefix, size: valueSize(v), part: w.part, partTable: w.partTable})
			}
		}
	}
	w.fit(out, rest, ItemSize(out), itemBudget)
	w.total += ItemSize(out)
	return out
}

// fit moves the largest of cands until size is below budget; the others
// stay candidates of the transaction.
func (w *write) fit(m map[string]types.AttributeValue, cands []candidate, size, budget int) {
	slices.SortFunc(cands, func(a, b candidate) int { return b.size - a.size })
	for len(cands) > 0 && size > budget {
		c := cands[0]
		cands = cands[1:]
		before := valueSize(c.m[c.name])
		w.part, w.partTable = c.part, c.partTable
		w.move(c.m, c.name, c.prefix)
		size -= before - valueSize(c.m[c.name])
	}
	w.candidates = append(w.candidates, cands...)
}

// update returns an update's values with large SET values replaced by
// pointers (a copy when anything moves). Values used in the condition stay.
func (w *write) update(table string, k map[string]types.AttributeValue, expr, cond string, names map[string]string, values map[string]types.AttributeValue) map[string]types.AttributeValue {
	out := maps(values)
	class := DurablePrefix
	if ttl := assignedValue(expr, names, ttlAttribute, values); ttl != nil {
		class = w.o.class(ttl)
	}
	prefix := itemPrefix(class, table, item(k).str("pk"), item(k).str("sk"))
	w.setPart(table, item(k).str("pk"))
	var rest []candidate
	for ph, v := range out {
		if strings.Contains(cond, ph) || !setsValue(expr, ph) {
			continue
		}
		if valueSize(v) > PayloadThreshold {
			w.move(out, ph, prefix)
		} else if valueSize(v) >= minOffloaded {
			if _, ok := rawBytes(v); ok {
				rest = append(rest, candidate{m: out, name: ph, prefix: prefix, size: valueSize(v), part: w.part, partTable: w.partTable})
			}
		}
	}
	w.fit(out, rest, ItemSize(out), itemBudget)
	w.total += ItemSize(out)
	return out
}

// fitTransaction moves the largest remaining values of a transaction until
// its items are below txBudget.
func (w *write) fitTransaction() {
	slices.SortFunc(w.candidates, func(a, b candidate) int { return b.size - a.size })
	for _, c := range w.candidates {
		if w.total <= txBudget {
			break
		}
		if _, ok := rawBytes(c.m[c.name]); !ok {
			continue // moved already
		}
		before := valueSize(c.m[c.name])
		w.part, w.partTable = c.part, c.partTable
		w.move(c.m, c.name, c.prefix)
		w.total -= before - valueSize(c.m[c.name])
	}
}

// setPart sets the partition of the item being handled.
func (w *write) setPart(table, pk string) {
	w.part, w.partTable = "", ""
	if isThreadPartition(table, pk) {
		w.part, w.partTable = pk, table
	}
}

// flush flags the threads whose partitions get objects (payloadFlag): on
// the thread item this request puts, or before it; then writes the
// objects, before the request that points to them.
func (w *write) flush(ctx context.Context) error {
	for pk, it := range w.threadPuts {
		if _, ok := w.threads[pk]; ok || w.o.flags.has(&w.o.flags.pending, pk) {
			it[payloadFlag] = boolean(true)
			delete(w.threads, pk)
		}
	}
	for pk, table := range w.threads {
		if err := w.o.markThread(ctx, table, pk); err != nil {
			return err
		}
	}
	for k, data := range w.objects {
		if err := w.o.store.Put(ctx, k, data); err != nil {
			return fmt.Errorf("dynamo: payload store: %w", err)
		}
	}
	return nil
}

// class is where the values of an item with TTL attribute ttl go.
func (o *offloader) class(ttl types.AttributeValue) string {
	nv, ok := ttl.(*types.AttributeValueMemberN)
	if !ok {
		return DurablePrefix
	}
	sec, err := strconv.ParseInt(nv.Value, 10, 64)
	if err != nil || time.Unix(sec, 0).After(o.now().Add(expiringHorizon)) {
		return DurablePrefix
	}
	return ExpiringPrefix
}

var setClause = regexp.MustCompile(`([#\w]+)\s*=\s*(:\w+)`)

// assignedValue is the value an update expression assigns to attribute
// attr ("#n = :v" or "attr = :v"), or nil.
func assignedValue(expr string, names map[string]string, attr string, values map[string]types.AttributeValue) types.AttributeValue {
	for _, m := range setClause.FindAllStringSubmatch(expr, -1) {
		lhs := m[1]
		if n, ok := names[lhs]; ok {
			lhs = n
		}
		if lhs == attr {
			return values[m[2]]
		}
	}
	return nil
}

// setsValue reports whether placeholder ph is used by the update expression
// (a SET or an expression of one), not only by the condition.
func setsValue(expr, ph string) bool {
	for i := 0; ; {
		j := strings.Index(expr[i:], ph)
		if j < 0 {
			return false
		}
		end := i + j + len(ph)
		if end == len(expr) || !isWordByte(expr[end]) {
			return true
		}
		i = end
	}
}

func isWordByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// maps is a shallow copy of m.
func maps(m map[string]types.AttributeValue) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// resolveItem replaces the pointers of it (in place; the SDK's output is
// the caller's own) by their values. A pointer whose object is gone on an
// item whose TTL has passed (the bucket's lifecycle can beat DynamoDB's
// TTL) reads as an absent attribute: the adapter skips expired items.
func (o *offloader) resolveItem(ctx context.Context, it map[string]types.AttributeValue) error {
	for name, v := range it {
		k, size, typ, ok := pointerOf(v)
		if !ok {
			continue
		}
		data, err := o.store.Get(ctx, k)
		if errors.Is(err, payloads.ErrNotFound) && o.expired(it) {
			delete(it, name)
			continue
		}
		if err != nil {
			return fmt.Errorf("dynamo: payload of attribute %s: %w", name, err)
		}
		if int64(len(data)) != size {
			return fmt.Errorf("dynamo: payload of attribute %s: %d bytes, the pointer says %d", name, len(data), size)
		}
		if typ == "S" {
			it[name] = s(string(data))
		} else {
			it[name] = b(data)
		}
	}
	return nil
}

func (o *offloader) expired(it map[string]types.AttributeValue) bool {
	nv, ok := it[ttlAttribute].(*types.AttributeValueMemberN)
	if !ok {
		return false
	}
	sec, err := strconv.ParseInt(nv.Value, 10, 64)
	return err == nil && time.Unix(sec, 0).Before(o.now())
}

// dropPartitionPayloads deletes the payloads of a partition of table (a
// deleted thread whose item is it): only when the thread's payload flag is
// set, so a thread that never stored an object costs no listing. Failures
// leave objects nothing points to.
func (db *DB) dropPartitionPayloads(ctx context.Context, table, pk string, it item) {
	if db.payloads == nil || !it.boolean(payloadFlag) {
		return
	}
	for _, class := range []string{DurablePrefix, ExpiringPrefix} {
		_ = db.payloads.DeletePrefix(ctx, partitionPrefix(class, table, pk))
	}
}

// blobKey is the payload object of generation gen of blob base.
func (db *DB) blobKey(pk, base, gen string) string {
	return partitionPrefix(DurablePrefix, db.tables.threads, pk) + "blob/" + hash(base) + "-" + gen
}

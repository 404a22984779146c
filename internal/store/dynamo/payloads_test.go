package dynamo

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/payloads"
	payloadslocal "github.com/stepgraph/stepgraph/internal/payloads/local"
	payloadss3 "github.com/stepgraph/stepgraph/internal/payloads/s3"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/storetest"
)

// The deployed shape: the adapter with an S3 payload store on MiniStack,
// and a meter on its DynamoDB client that measures every item it writes.
// MiniStack does not enforce DynamoDB's 400 KB on transactional updates
// (see docs/aws.md, "Sizes"), so the meter does: for every put it measures
// the item sent, and after every update (plain or in a transaction) it
// reads the stored item back and measures it, by DynamoDB's size rules
// (attribute names plus values), with its own arithmetic (itemBytes below),
// not the adapter's.

var (
	meterOnce   sync.Once
	meterBucket string
	meterErr    error
	theMeter    = &sizeMeter{}
)

type sizeMeter struct {
	mu       sync.Mutex
	measured int      // items measured
	largest  int      // the largest item measured
	pointers int      // items that held a pointer
	over     []string // items over the limit
	bytes    int64    // the sizes of every item measured, summed
}

func (m *sizeMeter) record(what string, it map[string]types.AttributeValue) {
	size := itemBytes(it)
	ptr := false
	for _, v := range it {
		if _, _, _, ok := pointerOf(v); ok {
			ptr = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.measured++
	m.bytes += int64(size)
	m.largest = max(m.largest, size)
	if ptr {
		m.pointers++
	}
	if size > 400*1024 {
		m.over = append(m.over, fmt.Sprintf("%s: %s/%s is %d bytes", what, item(it).str("pk"), item(it).str("sk"), size))
	}
}

// itemBytes is an item's size by DynamoDB's documented rules
// (CapacityUnitCalculations): names plus values; numbers at most 21 bytes.
func itemBytes(it map[string]types.AttributeValue) int {
	total := 0
	for name, v := range it {
		total += len(name) + avBytes(v)
	}
	return total
}

func avBytes(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return 21
	case *types.AttributeValueMemberM:
		t := 3
		for k, e := range v.Value {
			t += len(k) + avBytes(e) + 1
		}
		return t
	case *types.AttributeValueMemberL:
		t := 3
		for _, e := range v.Value {
			t += avBytes(e) + 1
		}
		return t
	case *types.AttributeValueMemberSS:
		t := 0
		for _, e := range v.Value {
			t += len(e)
		}
		return t
	default:
		return 1
	}
}

// sizeMetered is a client of cfg with m on it, m reading items back
// through a client of its own.
func sizeMetered(cfg aws.Config, m *sizeMeter) *dynamodb.Client {
	raw := dynamodb.NewFromConfig(cfg)
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, meterMiddleware(m, raw))
	})
}

// meterMiddleware runs after the adapter's own middleware (Serialize comes
// after Initialize), so it sees exactly what is sent. raw reads items back
// without any middleware.
func meterMiddleware(m *sizeMeter, raw *dynamodb.Client) func(*middleware.Stack) error {
	readBack := func(ctx context.Context, table string, k map[string]types.AttributeValue, what string) {
		out, err := raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: k, ConsistentRead: aws.Bool(true)})
		if err == nil && out.Item != nil {
			m.record(what, out.Item)
		}
	}
	mw := middleware.SerializeMiddlewareFunc("sizeMeter", func(ctx context.Context, in middleware.SerializeInput, next middleware.SerializeHandler) (middleware.SerializeOutput, middleware.Metadata, error) {
		var after []func()
		switch p := in.Parameters.(type) {
		case *dynamodb.PutItemInput:
			m.record("PutItem", p.Item)
		case *dynamodb.UpdateItemInput:
			after = append(after, func() { readBack(ctx, aws.ToString(p.TableName), p.Key, "UpdateItem") })
		case *dynamodb.BatchWriteItemInput:
			for _, reqs := range p.RequestItems {
				for _, r := range reqs {
					if r.PutRequest != nil {
						m.record("BatchWriteItem", r.PutRequest.Item)
					}
				}
			}
		case *dynamodb.TransactWriteItemsInput:
			total := 0
			for _, ti := range p.TransactItems {
				switch {
				case ti.Put != nil:
					m.record("TransactWriteItems Put", ti.Put.Item)
					total += itemBytes(ti.Put.Item)
				case ti.Update != nil:
					u := ti.Update
					after = append(after, func() { readBack(ctx, aws.ToString(u.TableName), u.Key, "TransactWriteItems Update") })
				}
			}
			if total > 4<<20 {
				m.mu.Lock()
				m.over = append(m.over, fmt.Sprintf("a transaction of %d bytes of puts (4 MB limit)", total))
				m.mu.Unlock()
			}
		}
		out, md, err := next.HandleSerialize(ctx, in)
		if err == nil {
			for _, f := range after {
				f()
			}
		}
		return out, md, err
	})
	return func(st *middleware.Stack) error { return st.Serialize.Add(mw, middleware.Before) }
}

// openPayloads opens the adapter as deployed: shared tables, an S3 bucket
// on the emulator, the meter on the client.
func openPayloads(t *testing.T) *DB {
	t.Helper()
	ep := awstest.Start(t)
	openShared(t) // the tables
	bucket := sharedBucket(t)
	metered := sizeMetered(ep.Config, theMeter)
	db := NewFromClient(metered, Options{TablePrefix: sharedPrefix, Payloads: payloadss3.New(ep.Config, bucket, true)})
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// sharedBucket is the payload bucket of the test binary, made once.
func sharedBucket(t *testing.T) string {
	t.Helper()
	ep := awstest.Start(t)
	meterOnce.Do(func() {
		meterBucket = payloadss3.BucketName(awstest.Prefix(t))
		meterErr = payloadss3.New(ep.Config, meterBucket, true).CreateBucket(context.Background())
	})
	if meterErr != nil {
		t.Fatalf("CreateBucket: %v", meterErr)
	}
	return meterBucket
}

// checkMeter fails t when any item measured so far was over 400 KB, or
// when nothing was measured or offloaded (the meter would prove nothing).
func checkMeter(t *testing.T) {
	t.Helper()
	theMeter.mu.Lock()
	defer theMeter.mu.Unlock()
	if theMeter.measured == 0 || theMeter.pointers == 0 {
		t.Fatalf("the meter measured %d items, %d with a payload pointer: it proves nothing", theMeter.measured, theMeter.pointers)
	}
	if len(theMeter.over) > 0 {
		t.Fatalf("%d items over DynamoDB's 400 KB:\n%s", len(theMeter.over), strings.Join(theMeter.over, "\n"))
	}
	t.Logf("meter: %d items measured, %d with pointers, largest %d bytes", theMeter.measured, theMeter.pointers, theMeter.largest)
}

// TestContractWithPayloads runs the contract suites on the deployed shape
// and then asserts that no item the adapter wrote exceeded 400 KB.
func TestContractWithPayloads(t *testing.T) {
	t.Run("Store", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return openPayloads(t) })
	})
	t.Run("Events", func(t *testing.T) {
		storetest.EventsContract(t, func(t *testing.T) store.Events { return openPayloads(t) })
	})
	t.Run("ThreadEvents", func(t *testing.T) {
		storetest.ThreadEventsContract(t, func(t *testing.T) storetest.EventStore { return openPayloads(t) })
	})
	checkMeter(t)
}

// TestMeterCatchesOversizeItems: the meter does fail on an item over
// 400 KB that the emulator accepts (a transactional update growing an
// item), so TestContractWithPayloads can fail.
func TestMeterCatchesOversizeItems(t *testing.T) {
	ep := awstest.Start(t)
	openShared(t)
	m := &sizeMeter{}
	metered := sizeMetered(ep.Config, m)
	db := NewFromClient(metered, Options{TablePrefix: sharedPrefix}) // no payload store
	k := key("meter-probe", t.Name())
	for i := range 2 {
		_, err := db.transact(ctxT(), []types.TransactWriteItem{{Update: &types.Update{
			TableName: aws.String(db.tables.threads), Key: k,
			UpdateExpression:          aws.String(fmt.Sprintf("SET d%d = :v", i)),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": b(bigDoc(300_000, byte(i)))},
		}}})
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if len(m.over) == 0 {
		t.Fatalf("a 600 KB item went unnoticed by the meter (largest measured: %d bytes)", m.largest)
	}
}

// TestPayloadsStayOutOfItems: documents over the threshold leave their
// items (held by pointers), read back whole, and go with their thread.
func TestPayloadsStayOutOfItems(t *testing.T) {
	db := openPayloads(t)
	org, th := newOrgAndThread(t, db)
	pk := threadPK(org, th.ID)
	big := bigDoc(900_000, 9)
	_, err := db.UpdateThreadMetadata(ctxT(), org, th.ID, big, time.Now())
	must(t, "UpdateThreadMetadata", err)
	raw, err2 := db.get(withoutPayloads(ctxT()), db.tables.threads, threadKey(org, th.ID))
	must(t, "get", err2)
	if _, _, _, ok := pointerOf(raw["metadata"]); !ok {
		t.Fatalf("a 900 KB metadata is not a pointer in the thread item")
	}
	got, err := db.Thread(ctxT(), org, th.ID)
	must(t, "Thread", err)
	if string(got.Metadata) != string(big) {
		t.Fatalf("metadata read back: %d bytes, want %d", len(got.Metadata), len(big))
	}
	k, _, _, _ := pointerOf(raw["metadata"])
	if !strings.HasPrefix(k, partitionPrefix(DurablePrefix, db.tables.threads, pk)) {
		t.Fatalf("payload key %s is not under its thread's prefix", k)
	}
	must(t, "DeleteThread", db.DeleteThread(ctxT(), org, th.ID))
	if _, err := db.payloads.Get(ctxT(), k); err != payloads.ErrNotFound {
		t.Fatalf("the payload of a deleted thread: %v, want ErrNotFound", err)
	}
	checkMeter(t)
}

// Payload classes: values of items expiring within a day (a temporary
// result) go under the lifecycle rule's prefix, the others under the
// durable one; an expired item whose object the lifecycle rule already
// removed reads as expired, not as an error. The payload store here is the
// in-memory adapter (the S3 one is TestContractWithPayloads').
func TestPayloadClasses(t *testing.T) {
	ep := awstest.Start(t)
	openShared(t)
	mem := payloadslocal.NewMemory()
	db := New(ep.Config, Options{TablePrefix: sharedPrefix, Payloads: mem})
	org, th := newOrgAndThread(t, db)

	now := time.Now()
	_, err := db.UpdateThreadMetadata(ctxT(), org, th.ID, bigDoc(200_000, 4), now)
	must(t, "UpdateThreadMetadata", err)
	raw, err := db.get(withoutPayloads(ctxT()), db.tables.threads, threadKey(org, th.ID))
	must(t, "get thread", err)
	if k, _, _, ok := pointerOf(raw["metadata"]); !ok || !strings.HasPrefix(k, DurablePrefix) {
		t.Fatalf("thread metadata: pointer %q (%v), want one under %s", k, ok, DurablePrefix)
	}

	r := store.Run{ID: cpID(t), OrgID: org, ThreadID: cpID(t), AssistantID: "a", Status: store.RunPending,
		CreatedAt: now, UpdatedAt: now, Temporary: true, Kwargs: []byte(`{}`), Metadata: []byte(`{}`)}
	_, _, err = db.AddRun(ctxT(), store.NewRun{Run: r, CreateThread: true})
	must(t, "AddRun", err)
	_, ok, err := db.ClaimRunByID(ctxT(), r.ID, "w", now, now.Add(time.Minute), 0)
	if err != nil || !ok {
		t.Fatalf("ClaimRunByID: %v %v", ok, err)
	}
	result := bigDoc(150_000, 5)
	must(t, "FinishRun", db.FinishRun(ctxT(), store.FinishedRun{OrgID: org, ThreadID: r.ThreadID, RunID: r.ID,
		LeaseOwner: "w", Status: store.RunSuccess, Result: result, Values: []byte(`{}`), ThreadStatus: store.ThreadIdle, Now: now}))
	tres, err := db.get(withoutPayloads(ctxT()), db.tables.threads, temporaryResultKey(r.ID))
	must(t, "get temporary result", err)
	k, _, _, ok := pointerOf(tres["result"])
	if !ok || !strings.HasPrefix(k, ExpiringPrefix) {
		t.Fatalf("temporary result: pointer %q (%v), want one under %s", k, ok, ExpiringPrefix)
	}
	got, err := db.TemporaryResult(ctxT(), org, r.ID, now)
	if err != nil || string(got) != string(result) {
		t.Fatalf("TemporaryResult: %d bytes, %v", len(got), err)
	}

	// The lifecycle rule removed the object of an item whose TTL passed
	// (DynamoDB's TTL deletes late): it reads as expired.
	must(t, "Delete", mem.Delete(ctxT(), k))
	off := &offloader{store: mem, now: func() time.Time { return now.Add(store.TemporaryResultTTL + time.Minute) }}
	expired := NewFromClient(dynamodb.NewFromConfig(ep.Config), Options{TablePrefix: sharedPrefix})
	expired.client = dynamodb.New(expired.client.Options(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error { return st.Initialize.Add(off, middleware.After) })
	})
	expired.payloads = mem
	if _, err := expired.TemporaryResult(ctxT(), org, r.ID, now.Add(store.TemporaryResultTTL+time.Minute)); err != store.ErrNotFound {
		t.Fatalf("TemporaryResult of an expired item whose object is gone: %v, want ErrNotFound", err)
	}
	// Before its TTL, a missing object is an error, never an empty value.
	if _, err := db.TemporaryResult(ctxT(), org, r.ID, now); err == nil || err == store.ErrNotFound {
		t.Fatalf("TemporaryResult of a live item whose object is gone: %v, want an error", err)
	}
}

// s3Counter counts the requests an S3 client sends, by operation.
type s3Counter struct {
	mu  sync.Mutex
	ops map[string]int
}

func (c *s3Counter) total() (int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	out := map[string]int{}
	for op, k := range c.ops {
		n += k
		out[op] = k
	}
	return n, out
}

// openCountingPayloads opens the deployed shape (S3 on the emulator)
// with a counter of the S3 requests the adapter makes.
func openCountingPayloads(t *testing.T) (*DB, *s3Counter) {
	t.Helper()
	ep := awstest.Start(t)
	openShared(t)
	bucket := sharedBucket(t)
	c := &s3Counter{ops: map[string]int{}}
	client := s3.NewFromConfig(ep.Config, func(o *s3.Options) {
		o.UsePathStyle = true
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("s3Counter",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					c.mu.Lock()
					c.ops[fmt.Sprintf("%T", in.Parameters)]++
					c.mu.Unlock()
					return next.HandleInitialize(ctx, in)
				}), middleware.Before)
		})
	})
	db := New(ep.Config, Options{TablePrefix: sharedPrefix, Payloads: payloadss3.NewFromClient(client, bucket)})
	return db, c
}

// statelessRun runs a stateless run's store calls: its temporary thread
// and run, a checkpoint, the claim and the finish (which deletes the
// temporary thread), with input as the run's kwargs.
func statelessRun(t *testing.T, db *DB, org string, input []byte) (threadID string) {
	t.Helper()
	now := time.Now()
	r := store.Run{ID: cpID(t), OrgID: org, ThreadID: cpID(t), AssistantID: "a", Status: store.RunPending,
		CreatedAt: now, UpdatedAt: now, Temporary: true, Kwargs: input, Metadata: []byte(`{}`)}
	_, _, err := db.AddRun(ctxT(), store.NewRun{Run: r, CreateThread: true})
	must(t, "AddRun", err)
	_, ok, err := db.ClaimRunByID(ctxT(), r.ID, "w", now, now.Add(time.Minute), 0)
	if err != nil || !ok {
		t.Fatalf("ClaimRunByID: %v %v", ok, err)
	}
	must(t, "FinishRun", db.FinishRun(ctxT(), store.FinishedRun{OrgID: org, ThreadID: r.ThreadID, RunID: r.ID,
		LeaseOwner: "w", Status: store.RunSuccess, Result: []byte(`{"messages":[]}`), Values: []byte(`{"messages":[]}`),
		ThreadStatus: store.ThreadIdle, Now: now}))
	if _, err := db.Thread(ctxT(), org, r.ThreadID); err != store.ErrNotFound {
		t.Fatalf("the temporary thread after its run: %v, want ErrNotFound", err)
	}
	return r.ThreadID
}

// A stateless run whose documents all fit their items (an echo run) makes
// no S3 request at all: its temporary thread never stored an object, so
// its deletion does not list the thread's prefix. One whose input went to
// S3 flags its thread, and the deletion removes the object.
func TestStatelessRunWithoutPayloadsMakesNoS3Request(t *testing.T) {
	db, c := openCountingPayloads(t)
	org, _ := newOrgAndThread(t, db)
	base, _ := c.total()
	statelessRun(t, db, org, []byte(`{"input":{"messages":[{"role":"user","content":"hi"}]}}`))
	if n, ops := c.total(); n != base {
		t.Fatalf("a stateless run without large documents made %d S3 requests: %v", n-base, ops)
	}

	big := bigDoc(PayloadThreshold+1000, 7)
	tid := statelessRun(t, db, org, big)
	if _, ops := c.total(); ops["*s3.ListObjectsV2Input"] == 0 || ops["*s3.PutObjectInput"] == 0 {
		t.Fatalf("a stateless run with a %d-byte input: S3 requests %v, want a put and the deletion's listing", len(big), ops)
	}
	raw := s3.NewFromConfig(awstest.Start(t).Config, func(o *s3.Options) { o.UsePathStyle = true })
	left, err := raw.ListObjectsV2(ctxT(), &s3.ListObjectsV2Input{Bucket: aws.String(sharedBucket(t)),
		Prefix: aws.String(partitionPrefix(DurablePrefix, db.tables.threads, threadPK(org, tid)))})
	must(t, "ListObjectsV2", err)
	if len(left.Contents) != 0 {
		t.Fatalf("%d objects of the deleted temporary thread remain", len(left.Contents))
	}
}

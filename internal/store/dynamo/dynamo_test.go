package dynamo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/awstest"
	payloadss3 "github.com/stepgraph/stepgraph/internal/payloads/s3"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// sharedTables: the contract suite shares one set of tables between the
// stores it opens (it never assumes an empty store), as Lambdas share the
// deployed tables; the tables are created once per test binary under a
// unique prefix.
var (
	sharedOnce   sync.Once
	sharedPrefix string
	sharedErr    error
)

func openShared(t *testing.T) *DB {
	t.Helper()
	ep := awstest.Start(t)
	sharedOnce.Do(func() {
		sharedPrefix = awstest.Prefix(t)
		sharedErr = New(ep.Config, Options{TablePrefix: sharedPrefix}).CreateTables(context.Background())
	})
	if sharedErr != nil {
		t.Fatalf("CreateTables: %v", sharedErr)
	}
	db := New(ep.Config, Options{TablePrefix: sharedPrefix})
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// The contract suites run on the deployed shape, with a payload store:
// TestContractWithPayloads (payloads_test.go). Without one the adapter
// cannot hold a document near 400 KB (the Sizes cases); the tests below
// cover that shape's own mechanisms (chunk blobs).

func TestItemsContract(t *testing.T) {
	storetest.ItemsContract(t, func(t *testing.T) storetest.ItemStore { return openShared(t) })
}

// ---- adapter-specific tests ------------------------------------------------------

func ctxT() context.Context { return context.Background() }

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// bigDoc is a JSON document of about size bytes that does not compress to
// anything shorter in DynamoDB's eyes (it is stored byte for byte).
func bigDoc(size int, seed byte) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"blob":"`)
	for i := 0; buf.Len() < size-2; i++ {
		buf.WriteByte('a' + byte((i*7+int(seed))%26))
	}
	buf.WriteString(`"}`)
	return buf.Bytes()
}

func newOrgAndThread(t *testing.T, db *DB) (string, store.Thread) {
	t.Helper()
	org := store.Organization{ID: uuid.NewString(), Name: "org-" + uuid.NewString(), CreatedAt: time.Now()}
	must(t, "CreateOrganization", db.CreateOrganization(ctxT(), org))
	th := store.Thread{ID: uuid.NewString(), OrgID: org.ID, Status: store.ThreadIdle, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	must(t, "CreateThread", db.CreateThread(ctxT(), th))
	return org.ID, th
}

func cpID(t *testing.T) string {
	t.Helper()
	u, err := uuid.NewV7()
	must(t, "uuid", err)
	return u.String()
}

// TestItemLimitIsEnforced makes sure the emulator rejects an item over 400 KB,
// so that the large-document tests below can fail.
func TestItemLimitIsEnforced(t *testing.T) {
	db := openShared(t)
	_, err := db.client.PutItem(ctxT(), &dynamodb.PutItemInput{
		TableName: aws.String(db.tables.threads),
		Item:      map[string]types.AttributeValue{"pk": s("limit-probe"), "sk": s("x"), "data": b(bigDoc(500_000, 1))},
	})
	if err == nil {
		t.Fatal("a 500 KB item was accepted: the emulator does not enforce DynamoDB's item limit, so the chunking tests prove nothing")
	}
}

func TestLargeCheckpoints(t *testing.T) {
	db := openShared(t)
	org, th := newOrgAndThread(t, db)
	big := bigDoc(1<<20, 3) // ~1 MB: three chunks
	ids := []string{cpID(t), cpID(t), cpID(t)}
	small := store.Checkpoint{ThreadID: th.ID, ID: ids[0], CreatedAt: time.Now(), Data: []byte(`{"small":true}`)}
	large := store.Checkpoint{ThreadID: th.ID, ID: ids[1], ParentID: ids[0], RunID: "run-1", CreatedAt: time.Now(), Data: big}
	must(t, "PutCheckpoint small", db.PutCheckpoint(ctxT(), org, small))
	must(t, "PutCheckpoint 1 MB", db.PutCheckpoint(ctxT(), org, large))

	got, err := db.Checkpoint(ctxT(), org, th.ID, ids[1])
	must(t, "Checkpoint", err)
	if !bytes.Equal(got.Data, big) || got.ParentID != ids[0] || got.RunID != "run-1" {
		t.Fatalf("Checkpoint: %d bytes (want %d), parent %q run %q", len(got.Data), len(big), got.ParentID, got.RunID)
	}
	latest, err := db.LatestCheckpoint(ctxT(), org, th.ID)
	must(t, "LatestCheckpoint", err)
	if latest.ID != ids[1] || !bytes.Equal(latest.Data, big) {
		t.Fatalf("LatestCheckpoint: %s with %d bytes", latest.ID, len(latest.Data))
	}
	list, err := db.ListCheckpoints(ctxT(), org, th.ID, "", 0)
	must(t, "ListCheckpoints", err)
	if len(list) != 2 || list[0].ID != ids[1] || !bytes.Equal(list[0].Data, big) || list[1].ID != ids[0] {
		t.Fatalf("ListCheckpoints: %d checkpoints", len(list))
	}
	chunks := func() int {
		t.Helper()
		items, err := db.queryPartition(ctxT(), db.tables.threads, threadPK(org, th.ID), "CPD#")
		must(t, "query chunks", err)
		return len(items)
	}
	if c := chunks(); c != 3 {
		t.Fatalf("%d chunk items for a 1 MB checkpoint, want 3", c)
	}

	// Replacing it with a small one drops the chunks; a large one again
	// writes a new generation and drops the old one.
	must(t, "PutCheckpoint replace small", db.PutCheckpoint(ctxT(), org, store.Checkpoint{ThreadID: th.ID, ID: ids[1], CreatedAt: time.Now(), Data: []byte(`{}`)}))
	if c := chunks(); c != 0 {
		t.Errorf("%d chunk items after replacing with a small checkpoint, want 0", c)
	}
	big2 := bigDoc(800_000, 5)
	must(t, "PutCheckpoint replace large", db.PutCheckpoint(ctxT(), org, store.Checkpoint{ThreadID: th.ID, ID: ids[1], CreatedAt: time.Now(), Data: big2}))
	must(t, "PutCheckpoint replace large again", db.PutCheckpoint(ctxT(), org, store.Checkpoint{ThreadID: th.ID, ID: ids[1], CreatedAt: time.Now(), Data: big}))
	if c := chunks(); c != 3 {
		t.Errorf("%d chunk items after two large replacements, want 3 (old generation deleted)", c)
	}
	got, err = db.Checkpoint(ctxT(), org, th.ID, ids[1])
	must(t, "Checkpoint", err)
	if !bytes.Equal(got.Data, big) {
		t.Fatalf("Checkpoint after replacements: %d bytes, want %d", len(got.Data), len(big))
	}

	// State updates with large values and a large checkpoint.
	values := bigDoc(900_000, 7)
	cp := store.Checkpoint{ThreadID: th.ID, ID: ids[2], ParentID: ids[1], CreatedAt: time.Now(), Data: big}
	must(t, "UpdateThreadState 1 MB", db.UpdateThreadState(ctxT(), org, cp, values, nil, store.ThreadIdle, time.Now()))
	gotTh, err := db.Thread(ctxT(), org, th.ID)
	must(t, "Thread", err)
	if !bytes.Equal(gotTh.Values, values) {
		t.Fatalf("thread Values: %d bytes, want %d", len(gotTh.Values), len(values))
	}
	found, err := db.SearchThreads(ctxT(), org, store.ThreadFilter{IDs: []string{th.ID}})
	must(t, "SearchThreads", err)
	if len(found) != 1 || !bytes.Equal(found[0].Values, values) {
		t.Fatalf("SearchThreads: %d threads", len(found))
	}
	// A run finishing with large values replaces the blob.
	r := store.Run{ID: uuid.NewString(), OrgID: org, ThreadID: th.ID, MultitaskStrategy: "enqueue",
		NotBefore: time.Unix(1, 0), CreatedAt: time.Unix(1, 0), UpdatedAt: time.Unix(1, 0)}
	_, _, err = db.AddRun(ctxT(), store.NewRun{Run: r})
	must(t, "AddRun", err)
	// Claim exactly this run: its NotBefore is earlier than any other test's.
	claimed, ok, err := db.ClaimRun(ctxT(), "big-worker", time.Unix(2, 0), time.Unix(3, 0), 0)
	must(t, "ClaimRun", err)
	if !ok || claimed.ID != r.ID {
		t.Fatalf("ClaimRun = %v %v, want %s", claimed.ID, ok, r.ID)
	}
	values2 := bigDoc(700_000, 9)
	must(t, "FinishRun", db.FinishRun(ctxT(), store.FinishedRun{OrgID: org, ThreadID: th.ID, RunID: r.ID,
		LeaseOwner: "big-worker", Status: store.RunSuccess, ThreadStatus: store.ThreadIdle, Values: values2, Now: time.Now()}))
	gotTh, err = db.Thread(ctxT(), org, th.ID)
	must(t, "Thread", err)
	if !bytes.Equal(gotTh.Values, values2) {
		t.Fatalf("thread Values after FinishRun: %d bytes, want %d", len(gotTh.Values), len(values2))
	}
	vals, err := db.queryPartition(ctxT(), db.tables.threads, threadPK(org, th.ID), valuesBase+"#")
	must(t, "query value chunks", err)
	if len(vals) != 2 {
		t.Errorf("%d value chunks, want 2 (the old generation deleted)", len(vals))
	}

	must(t, "DeleteThread", db.DeleteThread(ctxT(), org, th.ID))
	left, err := db.queryPartition(ctxT(), db.tables.threads, threadPK(org, th.ID), "")
	must(t, "query partition", err)
	if len(left) != 0 {
		t.Errorf("%d items left after DeleteThread", len(left))
	}
}

// TestDeleteLargeThread: a thread with more items than one transaction takes
// is deleted in steps, completely.
func TestDeleteLargeThread(t *testing.T) {
	db := openShared(t)
	org, th := newOrgAndThread(t, db)
	var runs []string
	for i := 0; i < 60; i++ {
		r := store.Run{ID: uuid.NewString(), OrgID: org, ThreadID: th.ID, MultitaskStrategy: "enqueue",
			NotBefore: parkAfter, CreatedAt: time.Now(), UpdatedAt: time.Now()}
		_, _, err := db.AddRun(ctxT(), store.NewRun{Run: r})
		must(t, "AddRun", err)
		runs = append(runs, r.ID)
	}
	for i := 0; i < 50; i++ {
		must(t, "PutCheckpoint", db.PutCheckpoint(ctxT(), org, store.Checkpoint{ThreadID: th.ID, ID: cpID(t), CreatedAt: time.Now(), Data: []byte(`{}`)}))
	}
	u, err := db.Usage(ctxT(), org)
	if err != nil || u != (store.Usage{Threads: 1, Bytes: 2 + 60*4 + 50*2}) {
		t.Fatalf("usage before the delete: %+v %v", u, err)
	}
	must(t, "DeleteThread", db.DeleteThread(ctxT(), org, th.ID))
	if u, err := db.Usage(ctxT(), org); err != nil || u != (store.Usage{}) {
		t.Errorf("usage after deleting a thread in steps: %+v %v", u, err)
	}
	if _, err := db.Thread(ctxT(), org, th.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Thread after delete: %v", err)
	}
	left, err := db.queryPartition(ctxT(), db.tables.threads, threadPK(org, th.ID), "")
	must(t, "query partition", err)
	if len(left) != 0 {
		t.Errorf("%d items left after DeleteThread", len(left))
	}
	for _, id := range runs {
		if m, err := db.get(ctxT(), db.tables.threads, runMarkerKey(id)); err != nil || m != nil {
			t.Fatalf("run marker %s left after DeleteThread (%v)", id, err)
		}
	}
	if err := db.DeleteThread(ctxT(), org, th.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteThread again: %v, want ErrNotFound", err)
	}
}

// TestRollbackOfManyCheckpointsIsCounted: a rolled back run's checkpoints,
// more than one transaction takes, leave the counters as they are deleted.
func TestRollbackOfManyCheckpointsIsCounted(t *testing.T) {
	db := openShared(t)
	org, th := newOrgAndThread(t, db)
	r := store.Run{ID: uuid.NewString(), OrgID: org, ThreadID: th.ID, MultitaskStrategy: "enqueue",
		NotBefore: time.Now().Add(-time.Second), CreatedAt: time.Now(), UpdatedAt: time.Now()}
	_, _, err := db.AddRun(ctxT(), store.NewRun{Run: r})
	must(t, "AddRun", err)
	if _, ok, err := db.ClaimRunByID(ctxT(), r.ID, "owner", time.Now(), time.Now().Add(time.Minute), 0); err != nil || !ok {
		t.Fatalf("ClaimRunByID: %v %v", ok, err)
	}
	var cps []store.Checkpoint
	for i := 0; i < 130; i++ {
		cps = append(cps, store.Checkpoint{ThreadID: th.ID, ID: cpID(t), RunID: r.ID, CreatedAt: time.Now(), Data: []byte(`{"step": 1}`)})
	}
	must(t, "PutCheckpoints", db.PutCheckpoints(ctxT(), org, cps))
	if u, err := db.Usage(ctxT(), org); err != nil || u != (store.Usage{Threads: 1, Bytes: 2 + 4 + 130*11}) {
		t.Fatalf("usage: %+v %v", u, err)
	}
	_, err = db.CancelRun(ctxT(), org, th.ID, r.ID, store.CancelRollback, time.Now())
	must(t, "CancelRun", err)
	must(t, "FinishRun", db.FinishRun(ctxT(), store.FinishedRun{OrgID: org, ThreadID: th.ID, RunID: r.ID, LeaseOwner: "owner",
		Status: store.RunInterrupted, ThreadStatus: store.ThreadIdle, Now: time.Now()}))
	if u, err := db.Usage(ctxT(), org); err != nil || u != (store.Usage{Threads: 1, Bytes: 2}) {
		t.Errorf("usage after the rollback: %+v %v", u, err)
	}
	left, err := db.queryPartition(ctxT(), db.tables.threads, threadPK(org, th.ID), cpPrefix)
	must(t, "query partition", err)
	if len(left) != 0 {
		t.Errorf("%d checkpoints left after the rollback", len(left))
	}
}

// parkAfter is a NotBefore no claim in the tests reaches.
var parkAfter = time.Date(9500, 1, 1, 0, 0, 0, 0, time.UTC)

// TestDeleteDeploymentWithManyRevisions: more revisions than one transaction
// takes.
func TestDeleteDeploymentWithManyRevisions(t *testing.T) {
	db := openShared(t)
	org := uuid.NewString()
	now := time.Now()
	d := store.Deployment{ID: uuid.NewString(), OrgID: org, Name: "many", Status: "ready", CreatedAt: now, UpdatedAt: now}
	first := store.Revision{ID: uuid.NewString(), Status: "ready", CreatedAt: now, UpdatedAt: now}
	d.LatestRevisionID = first.ID
	must(t, "CreateDeployment", db.CreateDeployment(ctxT(), d, first))
	d.Version = 1
	for i := 0; i < 110; i++ {
		r := store.Revision{ID: uuid.NewString(), Status: "ready", CreatedAt: now.Add(time.Duration(i) * time.Second), UpdatedAt: now}
		d.LatestRevisionID = r.ID
		var err error
		d, err = db.AddRevision(ctxT(), d, r)
		must(t, "AddRevision", err)
	}
	must(t, "DeleteDeployment", db.DeleteDeployment(ctxT(), org, d.ID))
	left, err := db.queryPartition(ctxT(), db.tables.deployments, revisionPK(org, d.ID), "")
	must(t, "query revisions", err)
	if len(left) != 0 {
		t.Errorf("%d revisions left", len(left))
	}
	if _, err := db.Deployment(ctxT(), org, d.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Deployment after delete: %v", err)
	}
	// The name is free again.
	d2 := d
	d2.ID = uuid.NewString()
	must(t, "CreateDeployment same name", db.CreateDeployment(ctxT(), d2, store.Revision{ID: uuid.NewString(), CreatedAt: now, UpdatedAt: now}))
}

func TestIdempotencyTTL(t *testing.T) {
	shared := openShared(t)
	db := NewFromClient(shared.client, Options{TablePrefix: sharedPrefix, IdempotencyTTL: time.Hour})
	created := time.Now()
	rec := store.IdempotencyRecord{OrgID: uuid.NewString(), Scope: "createDeployment", Key: "k", RequestHash: "h", CreatedAt: created}
	_, fresh, err := db.ReserveIdempotencyKey(ctxT(), rec, time.Minute)
	must(t, "Reserve", err)
	if !fresh {
		t.Fatal("fresh = false")
	}
	it, err := db.get(ctxT(), db.tables.idempotency, idempotencyKey(rec.OrgID, rec.Scope, rec.Key))
	must(t, "get", err)
	if got, want := it.num(ttlAttribute), created.Add(time.Hour).Unix(); got != want {
		t.Errorf("ttl = %d, want %d", got, want)
	}
	out, err := db.client.DescribeTimeToLive(ctxT(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(db.tables.idempotency)})
	must(t, "DescribeTimeToLive", err)
	if d := out.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != ttlAttribute || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
		t.Errorf("TTL of the idempotency table: %+v", d)
	}
}

func TestCreateTablesIsIdempotentAndTablesArePrefixed(t *testing.T) {
	db := openShared(t)
	must(t, "CreateTables again", db.CreateTables(ctxT()))
	for _, in := range TableDefinitions(sharedPrefix) {
		if _, err := db.client.DescribeTable(ctxT(), &dynamodb.DescribeTableInput{TableName: in.TableName}); err != nil {
			t.Errorf("DescribeTable %s: %v", aws.ToString(in.TableName), err)
		}
	}
	// Another prefix is another set of tables.
	other := New(awstest.Start(t).Config, Options{TablePrefix: awstest.Prefix(t)})
	must(t, "CreateTables other prefix", other.CreateTables(ctxT()))
	t.Cleanup(func() { _ = other.DeleteTables(context.Background()) })
	org := store.Organization{ID: uuid.NewString(), Name: "isolated-" + uuid.NewString(), CreatedAt: time.Now()}
	must(t, "CreateOrganization", other.CreateOrganization(ctxT(), org))
	if _, err := db.OrganizationByName(ctxT(), org.Name); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an organization of other tables is visible: %v", err)
	}
}

// TestContractWithLostAnswers runs the contract suite with the answer to the
// first attempt of every write lost after DynamoDB applied it (the SDK then
// retries, as after a dropped connection): conditional writes must not
// mistake their own first attempt for a conflicting write.
func TestContractWithLostAnswers(t *testing.T) {
	openShared(t) // the tables
	cfg := awstest.DropFirstAnswers(awstest.Start(t).Config,
		"DynamoDB_20120810.TransactWriteItems", "DynamoDB_20120810.PutItem", "DynamoDB_20120810.UpdateItem",
		"DynamoDB_20120810.DeleteItem", "DynamoDB_20120810.BatchWriteItem")
	// The deployed shape, with its payload store (whose calls are not the
	// ones dropped here).
	bucket := sharedBucket(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		db := New(cfg, Options{TablePrefix: sharedPrefix, Payloads: payloadss3.New(awstest.Start(t).Config, bucket, true)})
		t.Cleanup(func() { _ = db.Close() })
		return db
	})
	if awstest.Dropped(cfg) == 0 {
		t.Fatal("no answer was dropped: the test proves nothing")
	}
}

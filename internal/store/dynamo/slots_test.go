package dynamo

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/store"
)

// addRunOnNewThread adds a pending run, NotBefore nb, on a new thread of org.
func addRunOnNewThread(t *testing.T, db *DB, org string, nb time.Time) store.Run {
	t.Helper()
	r := store.Run{ID: uuid.NewString(), OrgID: org, ThreadID: uuid.NewString(), MultitaskStrategy: "enqueue",
		NotBefore: nb, CreatedAt: nb, UpdatedAt: nb}
	got, _, err := db.AddRun(ctxT(), store.NewRun{Run: r, CreateThread: true})
	must(t, "AddRun", err)
	return got
}

func slotsOf(t *testing.T, db *DB, org string) []string {
	t.Helper()
	it, err := db.get(ctxT(), db.tables.threads, slotsKey(org))
	must(t, "read slots", err)
	ids := it.stringSet(slotsAttr)
	slices.Sort(ids)
	return ids
}

// TestLeakedSlotsAreReclaimed: a slot held by a run that is not running
// (nothing leaves one behind, but an organization must never lose its
// slots for good) is freed by the next claim that finds no free slot; a
// slot of a running run is not.
func TestLeakedSlotsAreReclaimed(t *testing.T) {
	db := openShared(t)
	org, _ := newOrgAndThread(t, db)
	now := time.Unix(100, 0)
	done := addRunOnNewThread(t, db, org, now)
	_, ok, err := db.ClaimRunByID(ctxT(), done.ID, "exec-done", now, now.Add(time.Minute), 1)
	must(t, "ClaimRunByID", err)
	if !ok {
		t.Fatal("the first run of the organization was not claimed")
	}
	must(t, "FinishRun", db.FinishRun(ctxT(), store.FinishedRun{OrgID: org, ThreadID: done.ThreadID, RunID: done.ID,
		LeaseOwner: "exec-done", Status: store.RunSuccess, ThreadStatus: store.ThreadIdle, Now: now}))
	// Leak two slots: a finished run's and one of a run that never existed.
	ghost := uuid.NewString()
	_, err = db.client.UpdateItem(ctxT(), &dynamodb.UpdateItemInput{
		TableName: aws.String(db.tables.threads), Key: slotsKey(org),
		UpdateExpression:          aws.String("ADD #r :ids"),
		ExpressionAttributeNames:  map[string]string{"#r": slotsAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":ids": stringSet(done.ID, ghost)},
	})
	must(t, "leak slots", err)

	r1, r2 := addRunOnNewThread(t, db, org, now), addRunOnNewThread(t, db, org, now)
	_, ok, err = db.ClaimRunByID(ctxT(), r1.ID, "exec-1", now, now.Add(time.Minute), 1)
	must(t, "ClaimRunByID", err)
	if !ok {
		t.Fatal("with only leaked slots taken, the run was not claimed")
	}
	if got := slotsOf(t, db, org); !slices.Equal(got, []string{r1.ID}) {
		t.Errorf("slots after the claim: %v, want only the running run %s", got, r1.ID)
	}
	got, ok, err := db.ClaimRunByID(ctxT(), r2.ID, "exec-2", now, now.Add(time.Minute), 1)
	must(t, "ClaimRunByID", err)
	if ok || got.Status != store.RunPending {
		t.Fatalf("with the slot of a running run taken: claimed %v, status %q; want pending", ok, got.Status)
	}
	if got := slotsOf(t, db, org); !slices.Equal(got, []string{r1.ID}) {
		t.Errorf("slots: %v, want %s kept", got, r1.ID)
	}
}

// TestQueueEntryWithoutOrganization: a queue entry written before the queue
// index was keyed by organization (its key starts with the time) is still
// claimed by ClaimRun.
func TestQueueEntryWithoutOrganization(t *testing.T) {
	db := openShared(t)
	org, _ := newOrgAndThread(t, db)
	nb := time.Unix(3, 0) // before any other test's runs: the only run ready at 4
	r := addRunOnNewThread(t, db, org, nb)
	k := key(threadPK(org, r.ThreadID), runSK(r.ID))
	it, err := db.get(ctxT(), db.tables.threads, k)
	must(t, "read run", err)
	_, err = db.client.UpdateItem(ctxT(), &dynamodb.UpdateItemInput{
		TableName: aws.String(db.tables.threads), Key: k,
		UpdateExpression:          aws.String("SET qsk = :old"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":old": s(timeOrder(it.str("pkey")))},
	})
	must(t, "write the old queue key", err)
	got, ok, err := db.ClaimRun(ctxT(), "w", time.Unix(4, 0), time.Unix(5, 0), 1)
	must(t, "ClaimRun", err)
	if !ok || got.ID != r.ID {
		t.Fatalf("ClaimRun = %q %v, want %s", got.ID, ok, r.ID)
	}
}

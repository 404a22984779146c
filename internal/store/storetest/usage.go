package storetest

import (
	"bytes"
	"sync"
	"testing"

	"github.com/stepgraph/stepgraph/internal/store"
)

// wantUsage checks an organization's counters exactly.
func wantUsage(t *testing.T, s store.Store, what, org string, threads, size int64) {
	t.Helper()
	u, err := s.Usage(ctx(), org)
	must(t, "Usage", err)
	if u != (store.Usage{Threads: threads, Bytes: size}) {
		t.Fatalf("%s: usage %+v, want %d threads, %d bytes", what, u, threads, size)
	}
}

// runBytes is what a stored run counts: its metadata, kwargs and result.
func runBytes(r store.Run) int64 { return int64(len(r.Metadata) + len(r.Kwargs) + len(r.Result)) }

// testUsage: every write that changes what an organization stores moves
// its counters exactly, in both directions, whichever method writes; other
// organizations' counters do not move.
func testUsage(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	wantUsage(t, s, "a new organization", org, 0, 0)
	bystander := createThread(t, s, other, 0)
	otherBytes := int64(len(bystander.Metadata))

	// Threads: their metadata, as stored ("{}" for none).
	th := createThread(t, s, org, 0)
	bare := store.Thread{ID: newID(), OrgID: org, CreatedAt: at(0), UpdatedAt: at(0)}
	must(t, "CreateThread without metadata", s.CreateThread(ctx(), bare))
	total := int64(len(th.Metadata) + 2)
	wantUsage(t, s, "two threads", org, 2, total)
	meta := []byte(`{"a much longer metadata object": [1, 2, 3]}`)
	_, err := s.UpdateThreadMetadata(ctx(), org, th.ID, meta, at(1))
	must(t, "UpdateThreadMetadata", err)
	total += int64(len(meta) - len(th.Metadata))
	wantUsage(t, s, "metadata replaced", org, 2, total)

	// Runs: metadata and kwargs when added, their result when finished.
	r := newRun(org, th.ID, 1)
	addRun(t, s, r)
	total += runBytes(r)
	wantUsage(t, s, "a run added", org, 2, total)
	got, ok, err := s.ClaimRunByID(ctx(), r.ID, "usage-owner", at(2), at(3), 0)
	if err != nil || !ok {
		t.Fatalf("ClaimRunByID: %v %v", ok, err)
	}
	// Checkpoints: their data, exactly, also replaced, also large ones.
	ids := checkpointIDs(t, 5)
	cp := newCheckpoint(th.ID, ids[0], "", got.ID, 2)
	must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, cp))
	total += int64(len(cp.Data))
	wantUsage(t, s, "a checkpoint", org, 2, total)
	replaced := cp
	replaced.Data = bytes.Repeat([]byte("r"), 1000)
	must(t, "PutCheckpoint replacing", s.PutCheckpoint(ctx(), org, replaced))
	total += int64(len(replaced.Data) - len(cp.Data))
	wantUsage(t, s, "a checkpoint replaced", org, 2, total)
	large := newCheckpoint(th.ID, ids[1], ids[0], got.ID, 3)
	large.Data = bytes.Repeat([]byte("L"), 900_000) // past an item of DynamoDB: a blob
	batch := []store.Checkpoint{large, newCheckpoint(th.ID, ids[2], ids[1], got.ID, 4), newCheckpoint(th.ID, ids[3], ids[2], got.ID, 5)}
	must(t, "PutCheckpoints", s.PutCheckpoints(ctx(), org, batch))
	for _, c := range batch {
		total += int64(len(c.Data))
	}
	wantUsage(t, s, "a batch of checkpoints", org, 2, total)
	f := finish(org, th.ID, r.ID, "usage-owner", store.RunSuccess, store.ThreadIdle, at(4))
	f.Values = []byte(`{"values": "not counted: a copy of the latest checkpoint's"}`)
	must(t, "FinishRun", s.FinishRun(ctx(), f))
	total += int64(len(f.Result))
	wantUsage(t, s, "a run finished", org, 2, total)
	must(t, "DeleteRun", s.DeleteRun(ctx(), org, th.ID, r.ID))
	total -= runBytes(r) + int64(len(f.Result))
	wantUsage(t, s, "a run deleted (its checkpoints stay)", org, 2, total)

	// A state update writes a checkpoint.
	st := newCheckpoint(bare.ID, ids[4], "", "", 6)
	must(t, "UpdateThreadState", s.UpdateThreadState(ctx(), org, st, []byte(`{"v": 1}`), nil, store.ThreadIdle, at(6)))
	total += int64(len(st.Data))
	wantUsage(t, s, "a state update", org, 2, total)

	// Rolled back: a running run with its checkpoints, pending runs
	// cancelled by a new one.
	rb := newRun(org, bare.ID, 7)
	addRun(t, s, rb)
	if _, ok, err := s.ClaimRunByID(ctx(), rb.ID, "usage-owner", at(8), at(9), 0); err != nil || !ok {
		t.Fatalf("ClaimRunByID: %v %v", ok, err)
	}
	rbCP := newCheckpoint(bare.ID, checkpointIDs(t, 1)[0], ids[4], rb.ID, 8)
	must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, rbCP))
	_, err = s.CancelRun(ctx(), org, bare.ID, rb.ID, store.CancelRollback, at(8))
	must(t, "CancelRun", err)
	must(t, "FinishRun of a rolled back run", s.FinishRun(ctx(), finish(org, bare.ID, rb.ID, "usage-owner", store.RunInterrupted, store.ThreadIdle, at(9))))
	wantUsage(t, s, "a running run rolled back with its checkpoints", org, 2, total)
	p1, p2 := newRun(org, bare.ID, 10), newRun(org, bare.ID, 11)
	addRun(t, s, p1)
	addRun(t, s, p2)
	total += runBytes(p1) + runBytes(p2)
	wantUsage(t, s, "two pending runs", org, 2, total)
	_, err = s.CancelRun(ctx(), org, bare.ID, p1.ID, store.CancelRollback, at(12))
	must(t, "CancelRun of a pending run", err)
	total -= runBytes(p1)
	wantUsage(t, s, "a pending run rolled back", org, 2, total)
	p3 := newRun(org, bare.ID, 13)
	addRunWith(t, s, store.NewRun{Run: p3, IfInflight: store.InflightCancel, CancelAction: store.CancelRollback})
	total += runBytes(p3) - runBytes(p2)
	wantUsage(t, s, "a pending run rolled back by a new one", org, 2, total)

	// A new thread with its first run; a temporary one, gone once finished.
	tmp := newRun(org, newID(), 14)
	tmp.Temporary = true
	tmpMeta := []byte(`{"temporary": true}`)
	if _, created, err := s.AddRun(ctx(), store.NewRun{Run: tmp, CreateThread: true, ThreadMetadata: tmpMeta}); err != nil || !created {
		t.Fatalf("AddRun creating a thread: %v %v", created, err)
	}
	wantUsage(t, s, "a thread created by a run", org, 3, total+runBytes(tmp)+int64(len(tmpMeta)))
	if _, ok, err := s.ClaimRunByID(ctx(), tmp.ID, "usage-owner", at(15), at(16), 0); err != nil || !ok {
		t.Fatalf("ClaimRunByID: %v %v", ok, err)
	}
	tmpCP := newCheckpoint(tmp.ThreadID, checkpointIDs(t, 1)[0], "", tmp.ID, 15)
	must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, tmpCP))
	must(t, "FinishRun of a temporary run", s.FinishRun(ctx(), finish(org, tmp.ThreadID, tmp.ID, "usage-owner", store.RunSuccess, store.ThreadIdle, at(16))))
	wantUsage(t, s, "a temporary run finished", org, 2, total)

	// Deleting a thread takes everything it held.
	must(t, "DeleteThread", s.DeleteThread(ctx(), org, th.ID))
	total -= int64(len(meta)) + int64(len(replaced.Data)) + int64(len(large.Data)) + int64(len(batch[1].Data)+len(batch[2].Data))
	wantUsage(t, s, "a thread deleted", org, 1, total)
	must(t, "DeleteThread", s.DeleteThread(ctx(), org, bare.ID))
	wantUsage(t, s, "every thread deleted", org, 0, 0)
	wantUsage(t, s, "the other organization", other, 1, otherBytes)
}

// testUsageConcurrency: concurrent writes to many threads of one
// organization all count (no lost update of the shared counters).
func testUsageConcurrency(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	const threads, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, threads*(each+1))
	for i := 0; i < threads; i++ {
		ids := checkpointIDs(t, each)
		wg.Add(1)
		go func() {
			defer wg.Done()
			th := store.Thread{ID: newID(), OrgID: org, Metadata: []byte(`{"m": 1}`), CreatedAt: at(0), UpdatedAt: at(0)}
			if err := s.CreateThread(ctx(), th); err != nil {
				errs <- err
				return
			}
			for _, id := range ids {
				cp := store.Checkpoint{ThreadID: th.ID, ID: id, CreatedAt: at(1), Data: bytes.Repeat([]byte("c"), 100)}
				if err := s.PutCheckpoint(ctx(), org, cp); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent writes: %v", err)
	}
	wantUsage(t, s, "after concurrent writes", org, threads, threads*(8+each*100))
}

package storetest

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/store"
)

func eqCheckpoint(t *testing.T, got, want store.Checkpoint) {
	t.Helper()
	checkTime(t, "checkpoint CreatedAt", got.CreatedAt, want.CreatedAt)
	checkBytes(t, "checkpoint Data", got.Data, want.Data)
	got.CreatedAt, want.CreatedAt, got.Data, want.Data = time.Time{}, time.Time{}, nil, nil
	checkRest(t, "checkpoint", got, want)
}

// checkpointIDs returns n time-ordered (UUIDv7) IDs, oldest first.
func checkpointIDs(t *testing.T, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		u, err := uuid.NewV7()
		must(t, "uuid.NewV7", err)
		ids[i] = u.String()
	}
	sort.Strings(ids)
	return ids
}

func newCheckpoint(thread, id, parent, run string, off int) store.Checkpoint {
	return store.Checkpoint{ThreadID: thread, ID: id, ParentID: parent, RunID: run,
		CreatedAt: at(off), Data: doc("checkpoint-" + id)}
}

func testCheckpoints(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	th := createThread(t, s, org, 0)
	otherTh := createThread(t, s, org, 0)

	_, err := s.LatestCheckpoint(ctx(), org, th.ID)
	wantErr(t, "LatestCheckpoint of a thread without checkpoints", err, store.ErrNotFound)
	empty, err := s.ListCheckpoints(ctx(), org, th.ID, "", 0)
	must(t, "ListCheckpoints of a thread without checkpoints", err)
	checkRest(t, "ListCheckpoints empty", idsOf(empty), []string{})

	ids := checkpointIDs(t, 12)
	cps := make(map[string]store.Checkpoint)
	// Stored out of order: the order is the IDs'.
	for _, i := range []int{3, 0, 11, 5, 1, 2, 9, 4, 6, 8, 7, 10} {
		parent := ""
		if i > 0 {
			parent = ids[i-1]
		}
		cp := newCheckpoint(th.ID, ids[i], parent, "run-"+fmt.Sprint(i%3), 20-i)
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, cp))
		cps[cp.ID] = cp
	}
	must(t, "PutCheckpoint on another thread", s.PutCheckpoint(ctx(), org, newCheckpoint(otherTh.ID, checkpointIDs(t, 1)[0], "", "", 0)))

	got, err := s.Checkpoint(ctx(), org, th.ID, ids[4])
	must(t, "Checkpoint", err)
	eqCheckpoint(t, got, cps[ids[4]])
	latest, err := s.LatestCheckpoint(ctx(), org, th.ID)
	must(t, "LatestCheckpoint", err)
	eqCheckpoint(t, latest, cps[ids[11]])

	rev := func(from, to int) []string { // ids[to..from] newest first
		var out []string
		for i := from; i >= to; i-- {
			out = append(out, ids[i])
		}
		return out
	}
	tests := []struct {
		name   string
		before string
		limit  int
		want   []string
	}{
		{"default limit 10", "", 0, rev(11, 2)},
		{"limit", "", 3, rev(11, 9)},
		{"before", ids[5], 0, rev(4, 0)},
		{"before and limit", ids[9], 2, rev(8, 7)},
		{"before the oldest", ids[0], 0, nil},
		{"page after page", ids[2], 10, rev(1, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListCheckpoints(ctx(), org, th.ID, tc.before, tc.limit)
			must(t, "ListCheckpoints", err)
			want := tc.want
			if want == nil {
				want = []string{}
			}
			checkRest(t, "ListCheckpoints", idsOf(got), want)
			for _, c := range got {
				eqCheckpoint(t, c, cps[c.ID])
			}
		})
	}

	t.Run("ReplaceSameID", func(t *testing.T) {
		repl := store.Checkpoint{ThreadID: th.ID, ID: ids[4], ParentID: "p", RunID: "", CreatedAt: at(99), Data: doc("replaced")}
		must(t, "PutCheckpoint replacing", s.PutCheckpoint(ctx(), org, repl))
		got, err := s.Checkpoint(ctx(), org, th.ID, ids[4])
		must(t, "Checkpoint", err)
		eqCheckpoint(t, got, repl)
		list, err := s.ListCheckpoints(ctx(), org, th.ID, "", 100)
		must(t, "ListCheckpoints", err)
		checkRest(t, "ListCheckpoints after replace", idsOf(list), rev(11, 0))
	})

	t.Run("Isolation", func(t *testing.T) {
		wantErr(t, "PutCheckpoint on a missing thread",
			s.PutCheckpoint(ctx(), org, newCheckpoint(newID(), checkpointIDs(t, 1)[0], "", "", 0)), store.ErrNotFound)
		wantErr(t, "PutCheckpoint on another org's thread",
			s.PutCheckpoint(ctx(), other, newCheckpoint(th.ID, checkpointIDs(t, 1)[0], "", "", 0)), store.ErrNotFound)
		_, err := s.Checkpoint(ctx(), other, th.ID, ids[4])
		wantErr(t, "Checkpoint from another org", err, store.ErrNotFound)
		_, err = s.Checkpoint(ctx(), org, otherTh.ID, ids[4])
		wantErr(t, "Checkpoint on another thread", err, store.ErrNotFound)
		_, err = s.Checkpoint(ctx(), org, th.ID, checkpointIDs(t, 1)[0])
		wantErr(t, "Checkpoint missing", err, store.ErrNotFound)
		_, err = s.LatestCheckpoint(ctx(), other, th.ID)
		wantErr(t, "LatestCheckpoint from another org", err, store.ErrNotFound)
		_, err = s.ListCheckpoints(ctx(), other, th.ID, "", 0)
		wantErr(t, "ListCheckpoints from another org", err, store.ErrNotFound)
		_, err = s.ListCheckpoints(ctx(), org, newID(), "", 0)
		wantErr(t, "ListCheckpoints of a missing thread", err, store.ErrNotFound)
	})
}

func testUpdateThreadState(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	th := createThread(t, s, org, 0)
	ids := checkpointIDs(t, 3)

	cp := newCheckpoint(th.ID, ids[0], "", "", 1)
	values, interrupts := doc("state"), []byte(`{"t": [{"id": "i", "value": "ask"}]}`)
	must(t, "UpdateThreadState", s.UpdateThreadState(ctx(), org, cp, values, interrupts, store.ThreadInterrupted, at(2)))
	got, err := s.LatestCheckpoint(ctx(), org, th.ID)
	must(t, "LatestCheckpoint", err)
	eqCheckpoint(t, got, cp)
	want := th
	want.Status, want.Values, want.Interrupts, want.UpdatedAt = store.ThreadInterrupted, values, interrupts, at(2)
	want.StateUpdatedAt = at(2)
	eqThread(t, getThread(t, s, org, th.ID), want)

	cp2 := newCheckpoint(th.ID, ids[1], ids[0], "", 3)
	must(t, "UpdateThreadState", s.UpdateThreadState(ctx(), org, cp2, []byte(`{"v": 2}`), nil, store.ThreadIdle, at(4)))
	want.Status, want.Values, want.Interrupts, want.UpdatedAt = store.ThreadIdle, []byte(`{"v": 2}`), nil, at(4)
	want.StateUpdatedAt = at(4)
	eqThread(t, getThread(t, s, org, th.ID), want)

	cp3 := newCheckpoint(th.ID, ids[2], ids[1], "", 5)
	wantErr(t, "UpdateThreadState from another org",
		s.UpdateThreadState(ctx(), other, cp3, values, nil, store.ThreadIdle, at(6)), store.ErrNotFound)
	missing := newCheckpoint(newID(), ids[2], "", "", 5)
	wantErr(t, "UpdateThreadState of a missing thread",
		s.UpdateThreadState(ctx(), org, missing, values, nil, store.ThreadIdle, at(6)), store.ErrNotFound)

	for _, running := range []bool{false, true} {
		t.Run(fmt.Sprintf("busy (running %v)", running), func(t *testing.T) {
			park(t, s)
			th := createThread(t, s, org, 10)
			r := addRun(t, s, newRun(org, th.ID, 10))
			if running {
				claimWant(t, s, "w", at(11), at(90), r.ID)
			}
			cp := newCheckpoint(th.ID, checkpointIDs(t, 1)[0], "", "", 12)
			wantErr(t, "UpdateThreadState with an inflight run",
				s.UpdateThreadState(ctx(), org, cp, []byte(`{"x": 1}`), nil, store.ThreadIdle, at(12)), store.ErrBusy)
			_, err := s.LatestCheckpoint(ctx(), org, th.ID)
			wantErr(t, "checkpoint of the refused update", err, store.ErrNotFound)
			got := getThread(t, s, org, th.ID)
			eqSummary(t, got, store.Thread{Status: store.ThreadBusy})
		})
	}
}

// testPruneCheckpoints: only the latest checkpoint stays (with a large one
// among those removed), other threads keep theirs, the thread's usage
// shrinks by what was removed, another organization's thread is not found.
func testPruneCheckpoints(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	th := createThread(t, s, org, 0)
	keep := createThread(t, s, org, 0)
	ids := checkpointIDs(t, 5)
	for i, id := range ids {
		cp := newCheckpoint(th.ID, id, "", "", i)
		if i == 1 {
			cp.Data = []byte(`{"big": "` + strings.Repeat("x", 600<<10) + `"}`)
		}
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, cp))
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(keep.ID, id, "", "", i)))
	}
	before, err := s.Usage(ctx(), org)
	must(t, "Usage", err)
	wantErr(t, "PruneCheckpoints of another organization's thread", s.PruneCheckpoints(ctx(), newOrg(t, s), th.ID), store.ErrNotFound)
	wantErr(t, "PruneCheckpoints of a missing thread", s.PruneCheckpoints(ctx(), org, newID()), store.ErrNotFound)
	must(t, "PruneCheckpoints", s.PruneCheckpoints(ctx(), org, th.ID))
	left, err := s.ListCheckpoints(ctx(), org, th.ID, "", 100)
	must(t, "ListCheckpoints", err)
	checkRest(t, "checkpoints after a prune", idsOf(left), []string{ids[4]})
	others, err := s.ListCheckpoints(ctx(), org, keep.ID, "", 100)
	must(t, "ListCheckpoints", err)
	if len(others) != 5 {
		t.Errorf("another thread has %d checkpoints after a prune, want 5", len(others))
	}
	after, err := s.Usage(ctx(), org)
	must(t, "Usage", err)
	if after.Bytes >= before.Bytes-600<<10 {
		t.Errorf("usage %d bytes after pruning a 600 KiB checkpoint, was %d", after.Bytes, before.Bytes)
	}
	must(t, "PruneCheckpoints again", s.PruneCheckpoints(ctx(), org, th.ID))
	must(t, "PruneCheckpoints of a thread without checkpoints", s.PruneCheckpoints(ctx(), org, createThread(t, s, org, 1).ID))
}

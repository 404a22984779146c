package storetest

import (
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

func eqThread(t *testing.T, got, want store.Thread) {
	t.Helper()
	checkTime(t, "thread CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, "thread UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	checkBytes(t, "thread Metadata", got.Metadata, want.Metadata)
	checkBytes(t, "thread Config", got.Config, want.Config)
	eqSummary(t, got, want)
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	got.UpdatedAt, want.UpdatedAt = time.Time{}, time.Time{}
	got.Metadata, want.Metadata, got.Config, want.Config = nil, nil, nil, nil
	got.Values, want.Values, got.Interrupts, want.Interrupts, got.Error, want.Error = nil, nil, nil, nil, nil, nil
	checkRest(t, "thread", got, want)
}

// eqSummary compares a thread's status and summary of its latest state.
func eqSummary(t *testing.T, got, want store.Thread) {
	t.Helper()
	if got.Status != want.Status {
		t.Errorf("thread Status %q, want %q", got.Status, want.Status)
	}
	checkBytes(t, "thread Values", got.Values, want.Values)
	checkBytes(t, "thread Interrupts", got.Interrupts, want.Interrupts)
	checkBytes(t, "thread Error", got.Error, want.Error)
	if (got.Values == nil) != (want.Values == nil) {
		t.Errorf("thread Values %q, want %q (nil means none)", got.Values, want.Values)
	}
	if (got.Interrupts == nil) != (want.Interrupts == nil) {
		t.Errorf("thread Interrupts %q, want %q (nil means none)", got.Interrupts, want.Interrupts)
	}
	if (got.Error == nil) != (want.Error == nil) {
		t.Errorf("thread Error %q, want %q (nil means none)", got.Error, want.Error)
	}
}

// createThread stores a new idle thread created at at(off) and returns it.
func createThread(t *testing.T, s store.Store, org string, off int) store.Thread {
	t.Helper()
	th := store.Thread{
		ID:        newID(),
		OrgID:     org,
		Status:    store.ThreadIdle,
		Metadata:  []byte(`{"kind": "test", "n": 1}`),
		Config:    doc("thread-config"),
		CreatedAt: at(off),
		UpdatedAt: at(off),
	}
	must(t, "CreateThread", s.CreateThread(ctx(), th))
	return th
}

func getThread(t *testing.T, s store.Store, org, id string) store.Thread {
	t.Helper()
	got, err := s.Thread(ctx(), org, id)
	must(t, "Thread", err)
	return got
}

func wantThreadStatus(t *testing.T, s store.Store, org, id, want string) {
	t.Helper()
	if got := getThread(t, s, org, id); got.Status != want {
		t.Errorf("thread status %q, want %q", got.Status, want)
	}
}

func testThreads(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	th := createThread(t, s, org, 0)
	eqThread(t, getThread(t, s, org, th.ID), th)

	full := store.Thread{ID: newID(), OrgID: org, Status: store.ThreadInterrupted,
		Metadata: []byte(`{"a": 1}`), Config: []byte(`{}`), Values: doc("values"),
		Interrupts: []byte(`{"task": [{"id": "i1", "value": "?"}]}`), Error: []byte(`{"error": "E", "message": "m"}`),
		CreatedAt: at(1), UpdatedAt: at(2)}
	must(t, "CreateThread with a summary", s.CreateThread(ctx(), full))
	eqThread(t, getThread(t, s, org, full.ID), full)

	dup := th
	dup.Metadata = []byte(`{"dup": true}`)
	wantErr(t, "CreateThread with a taken ID", s.CreateThread(ctx(), dup), store.ErrConflict)
	eqThread(t, getThread(t, s, org, th.ID), th)

	inOther := th
	inOther.OrgID = other
	inOther.Metadata = []byte(`{"org": "other"}`)
	must(t, "CreateThread with the same ID in another org", s.CreateThread(ctx(), inOther))
	eqThread(t, getThread(t, s, other, th.ID), inOther)

	_, err := s.Thread(ctx(), org, newID())
	wantErr(t, "Thread missing", err, store.ErrNotFound)
	_, err = s.Thread(ctx(), newID(), th.ID)
	wantErr(t, "Thread from a third org", err, store.ErrNotFound)

	t.Run("UpdateThreadMetadata", func(t *testing.T) {
		meta := []byte(`{"kind": "test", "n": 2, "new": ["x"]}`)
		got, err := s.UpdateThreadMetadata(ctx(), org, th.ID, meta, at(5))
		must(t, "UpdateThreadMetadata", err)
		want := th
		want.Metadata, want.UpdatedAt = meta, at(5)
		eqThread(t, got, want)
		eqThread(t, getThread(t, s, org, th.ID), want)
		eqThread(t, getThread(t, s, other, th.ID), inOther)

		_, err = s.UpdateThreadMetadata(ctx(), org, newID(), meta, at(6))
		wantErr(t, "UpdateThreadMetadata missing", err, store.ErrNotFound)
		_, err = s.UpdateThreadMetadata(ctx(), newID(), th.ID, meta, at(6))
		wantErr(t, "UpdateThreadMetadata from a third org", err, store.ErrNotFound)
	})

	t.Run("DeleteThread", func(t *testing.T) {
		park(t, s)
		victim := createThread(t, s, org, 10)
		keep := createThread(t, s, org, 11)
		r1 := addRun(t, s, newRun(org, victim.ID, 10))
		r2 := addRun(t, s, newRun(org, victim.ID, 11))
		kept := addRun(t, s, newRun(org, keep.ID, 12))
		claimWant(t, s, "w", at(20), at(80), r1.ID)
		ids := checkpointIDs(t, 2)
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(victim.ID, ids[0], "", r1.ID, 12)))
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(keep.ID, ids[1], "", "", 12)))

		wantErr(t, "DeleteThread from another org", s.DeleteThread(ctx(), other, victim.ID), store.ErrNotFound)
		must(t, "DeleteThread", s.DeleteThread(ctx(), org, victim.ID))
		_, err := s.Thread(ctx(), org, victim.ID)
		wantErr(t, "Thread after delete", err, store.ErrNotFound)
		for _, r := range []store.Run{r1, r2} {
			_, err := s.Run(ctx(), org, victim.ID, r.ID)
			wantErr(t, "Run of a deleted thread", err, store.ErrNotFound)
		}
		_, err = s.Checkpoint(ctx(), org, victim.ID, ids[0])
		wantErr(t, "Checkpoint of a deleted thread", err, store.ErrNotFound)
		_, err = s.RenewLease(ctx(), r1.ID, "w", 0, at(90))
		wantErr(t, "RenewLease of a run deleted with its thread", err, store.ErrStale)
		wantErr(t, "FinishRun of a run deleted with its thread",
			s.FinishRun(ctx(), finish(org, victim.ID, r1.ID, "w", store.RunSuccess, store.ThreadIdle, at(30))), store.ErrStale)
		wantErr(t, "DeleteThread again", s.DeleteThread(ctx(), org, victim.ID), store.ErrNotFound)

		// The other thread keeps its run and checkpoint; the deleted one's
		// pending run is not claimable any more.
		eqRun(t, getRun(t, s, kept), kept)
		_, err = s.Checkpoint(ctx(), org, keep.ID, ids[1])
		must(t, "Checkpoint of the kept thread", err)
		claimWant(t, s, "w", at(20), at(80), kept.ID)
		claimWant(t, s, "w", at(20), at(80), "")
	})
}

func testThreadSearch(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	mk := func(off int, status, metadata, values string) store.Thread {
		th := store.Thread{ID: newID(), OrgID: org, Status: status, Metadata: []byte(metadata),
			Config: []byte(`{}`), CreatedAt: at(off), UpdatedAt: at(off)}
		if values != "" {
			th.Values = []byte(values)
		}
		must(t, "CreateThread", s.CreateThread(ctx(), th))
		return th
	}
	t1 := mk(0, store.ThreadIdle, `{"user": "ann", "tags": ["a"]}`, `{"messages": [], "step": 1}`)
	t2 := mk(1, store.ThreadError, `{"user": "bob"}`, `{"step": 2}`)
	t3 := mk(2, store.ThreadIdle, `{"user": "ann", "tags": ["a", "b"]}`, "")
	t4 := mk(2, store.ThreadInterrupted, `{"tags": ["a"], "user": "ann"}`, `{"step": 1.0, "messages": []}`)
	foreign := store.Thread{ID: newID(), OrgID: newOrg(t, s), Status: store.ThreadIdle,
		Metadata: []byte(`{"user": "ann"}`), Config: []byte(`{}`), CreatedAt: at(3), UpdatedAt: at(3)}
	must(t, "CreateThread in another org", s.CreateThread(ctx(), foreign))

	tests := []struct {
		name string
		f    store.ThreadFilter
		want []string
	}{
		{"all, newest first", store.ThreadFilter{}, []string{t4.ID, t3.ID, t2.ID, t1.ID}},
		{"ids", store.ThreadFilter{IDs: []string{t1.ID, t3.ID, foreign.ID, newID()}}, []string{t3.ID, t1.ID}},
		{"status", store.ThreadFilter{Status: store.ThreadIdle}, []string{t3.ID, t1.ID}},
		{"metadata", store.ThreadFilter{Metadata: []byte(`{"user": "ann"}`)}, []string{t4.ID, t3.ID, t1.ID}},
		{"metadata array", store.ThreadFilter{Metadata: []byte(`{"tags": ["a"]}`)}, []string{t4.ID, t1.ID}},
		{"values", store.ThreadFilter{Values: []byte(`{"step": 1}`)}, []string{t4.ID, t1.ID}},
		{"values empty array", store.ThreadFilter{Values: []byte(`{"messages": []}`)}, []string{t4.ID, t1.ID}},
		{"values and metadata", store.ThreadFilter{Values: []byte(`{"step": 1}`), Metadata: []byte(`{"tags": ["a"], "user": "ann"}`)}, []string{t4.ID, t1.ID}},
		{"values and status", store.ThreadFilter{Values: []byte(`{"step": 1}`), Status: store.ThreadIdle}, []string{t1.ID}},
		{"values of a thread without values", store.ThreadFilter{Values: []byte(`{"step": 2}`), IDs: []string{t3.ID}}, nil},
		{"metadata paged", store.ThreadFilter{Metadata: []byte(`{"user": "ann"}`), Limit: 2, Offset: 1}, []string{t3.ID, t1.ID}},
		{"paged", store.ThreadFilter{Limit: 1, Offset: 2}, []string{t2.ID}},
		{"no match", store.ThreadFilter{Metadata: []byte(`{"user": "zed"}`)}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.SearchThreads(ctx(), org, tc.f)
			must(t, "SearchThreads", err)
			want := tc.want
			if want == nil {
				want = []string{}
			}
			checkRest(t, "SearchThreads", idsOf(got), want)
			if tc.f.Limit == 0 && tc.f.Offset == 0 {
				n, err := s.CountThreads(ctx(), org, tc.f)
				must(t, "CountThreads", err)
				if n != len(want) {
					t.Errorf("CountThreads = %d, want %d (what SearchThreads finds)", n, len(want))
				}
			}
		})
	}
	if n, err := s.CountThreads(ctx(), newOrg(t, s), store.ThreadFilter{}); err != nil || n != 0 {
		t.Errorf("CountThreads of an organization without threads = %d, %v; want 0", n, err)
	}
	got, err := s.SearchThreads(ctx(), org, store.ThreadFilter{IDs: []string{t2.ID}})
	must(t, "SearchThreads", err)
	if len(got) == 1 {
		eqThread(t, got[0], t2)
	}

	t.Run("default limit 10", func(t *testing.T) {
		org := newOrg(t, s)
		var ids []string
		for i := 0; i < 12; i++ {
			ids = append(ids, createThread(t, s, org, 100+i).ID)
		}
		for _, f := range []store.ThreadFilter{{}, {Metadata: []byte(`{"kind": "test"}`)}} {
			got, err := s.SearchThreads(ctx(), org, f)
			must(t, "SearchThreads", err)
			if len(got) != 10 || got[0].ID != ids[11] {
				t.Errorf("SearchThreads(%s) with Limit 0 = %d threads, want the 10 newest", f.Metadata, len(got))
			}
		}
	})
}

// testThreadTTL: an expiry given at creation or set later is read back;
// ExpiredThreads lists, across organizations and oldest expiry first, the
// threads whose expiry has passed; clearing it takes the thread off.
func testThreadTTL(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	// Far in the past, so that threads of other tests (which expire
	// around now or never) come after this test's in the oldest-first
	// list; only this test's threads are looked at.
	base := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(org string, expires time.Time, strategy string) store.Thread {
		th := store.Thread{ID: newID(), OrgID: org, Status: store.ThreadIdle, Metadata: []byte(`{}`), Config: []byte(`{}`),
			CreatedAt: at(0), UpdatedAt: at(0), ExpiresAt: expires, TTLStrategy: strategy}
		must(t, "CreateThread", s.CreateThread(ctx(), th))
		return th
	}
	a := mk(org, base.Add(2*time.Second), "delete")
	b := mk(other, base.Add(time.Second), "keep_latest")
	never := mk(org, time.Time{}, "")
	later := mk(org, base.Add(time.Hour), "delete")
	mine := map[string]bool{a.ID: true, b.ID: true, never.ID: true, later.ID: true}

	got := getThread(t, s, org, a.ID)
	checkTime(t, "ExpiresAt", got.ExpiresAt, a.ExpiresAt)
	if got.TTLStrategy != "delete" {
		t.Errorf("TTLStrategy %q, want delete", got.TTLStrategy)
	}
	if g := getThread(t, s, org, never.ID); !g.ExpiresAt.IsZero() || g.TTLStrategy != "" {
		t.Errorf("a thread without expiry reads back %v %q", g.ExpiresAt, g.TTLStrategy)
	}

	// expired lists this test's expired threads at now; DynamoDB's index
	// may lag behind a write, so it reads again (as a safety net only)
	// until it has want of them.
	expired := func(now time.Time, want int) []string {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			list, err := s.ExpiredThreads(ctx(), now, 10)
			must(t, "ExpiredThreads", err)
			var ids []string
			for _, th := range list {
				if mine[th.ID] { // not another test's thread
					ids = append(ids, th.ID)
				}
			}
			if len(ids) == want || time.Now().After(deadline) {
				return ids
			}
		}
	}
	checkRest(t, "ExpiredThreads at +2s", expired(base.Add(2*time.Second), 2), []string{b.ID, a.ID})
	if ids := expired(base, 0); len(ids) != 0 {
		t.Errorf("ExpiredThreads before any expiry: %v", ids)
	}

	must(t, "SetThreadTTL clear", s.SetThreadTTL(ctx(), other, b.ID, time.Time{}, ""))
	must(t, "SetThreadTTL later", s.SetThreadTTL(ctx(), org, a.ID, base.Add(2*time.Hour), "keep_latest"))
	must(t, "SetThreadTTL sooner", s.SetThreadTTL(ctx(), org, later.ID, base.Add(3*time.Second), "delete"))
	if g := getThread(t, s, org, a.ID); g.TTLStrategy != "keep_latest" {
		t.Errorf("TTLStrategy after SetThreadTTL %q", g.TTLStrategy)
	}
	wantErr(t, "SetThreadTTL of another organization's thread", s.SetThreadTTL(ctx(), other, a.ID, base, "delete"), store.ErrNotFound)
	checkRest(t, "ExpiredThreads after SetThreadTTL", expired(base.Add(time.Minute), 1), []string{later.ID})
	must(t, "DeleteThread", s.DeleteThread(ctx(), org, later.ID))
	if ids := expired(base.Add(time.Minute), 0); len(ids) != 0 {
		t.Errorf("ExpiredThreads lists a deleted thread: %v", ids)
	}
}

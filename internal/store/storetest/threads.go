package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

func eqThread(t *testing.T, got, want store.Thread) {
	t.Helper()
	checkTime(t, "thread CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, "thread UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	wantState := want.StateUpdatedAt
	if wantState.IsZero() { // CreateThread's default
		wantState = want.CreatedAt
	}
	checkTime(t, "thread StateUpdatedAt", got.StateUpdatedAt, wantState)
	checkBytes(t, "thread Metadata", got.Metadata, want.Metadata)
	checkBytes(t, "thread Config", got.Config, want.Config)
	eqSummary(t, got, want)
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	got.UpdatedAt, want.UpdatedAt = time.Time{}, time.Time{}
	got.StateUpdatedAt, want.StateUpdatedAt = time.Time{}, time.Time{}
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

// testThreadSort: SearchThreads in each sort key's order, both directions,
// ties in the default order (newest first), with a filter and paged.
func testThreadSort(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	mk := func(created, updated, state int, status string) store.Thread {
		th := store.Thread{ID: newID(), OrgID: org, Status: status, Metadata: []byte(`{"k": 1}`),
			CreatedAt: at(created), UpdatedAt: at(updated), StateUpdatedAt: at(state), Values: []byte(`{"n": 1}`)}
		must(t, "CreateThread", s.CreateThread(ctx(), th))
		return th
	}
	a := mk(0, 9, 5, store.ThreadIdle)
	b := mk(1, 7, 8, store.ThreadError)
	c := mk(2, 8, 6, store.ThreadIdle)
	d := mk(3, 6, 7, store.ThreadBusy)
	byID := sorted([]string{a.ID, b.ID, c.ID, d.ID})
	tests := []struct {
		name string
		f    store.ThreadFilter
		want []string
	}{
		{"created_at desc", store.ThreadFilter{SortBy: store.ThreadSortCreatedAt}, []string{d.ID, c.ID, b.ID, a.ID}},
		{"created_at asc", store.ThreadFilter{SortBy: store.ThreadSortCreatedAt, Ascending: true}, []string{a.ID, b.ID, c.ID, d.ID}},
		{"updated_at desc", store.ThreadFilter{SortBy: store.ThreadSortUpdatedAt}, []string{a.ID, c.ID, b.ID, d.ID}},
		{"updated_at asc", store.ThreadFilter{SortBy: store.ThreadSortUpdatedAt, Ascending: true}, []string{d.ID, b.ID, c.ID, a.ID}},
		{"state_updated_at desc", store.ThreadFilter{SortBy: store.ThreadSortStateUpdatedAt}, []string{b.ID, d.ID, c.ID, a.ID}},
		{"state_updated_at asc", store.ThreadFilter{SortBy: store.ThreadSortStateUpdatedAt, Ascending: true}, []string{a.ID, c.ID, d.ID, b.ID}},
		{"thread_id asc", store.ThreadFilter{SortBy: store.ThreadSortID, Ascending: true}, byID},
		{"thread_id desc", store.ThreadFilter{SortBy: store.ThreadSortID}, []string{byID[3], byID[2], byID[1], byID[0]}},
		// Ties (a and c are idle) stay newest first in both directions.
		{"status asc", store.ThreadFilter{SortBy: store.ThreadSortStatus, Ascending: true}, []string{d.ID, b.ID, c.ID, a.ID}},
		{"status desc", store.ThreadFilter{SortBy: store.ThreadSortStatus}, []string{c.ID, a.ID, b.ID, d.ID}},
		{"state_updated_at paged", store.ThreadFilter{SortBy: store.ThreadSortStateUpdatedAt, Limit: 2, Offset: 1}, []string{d.ID, c.ID}},
		{"state_updated_at filtered", store.ThreadFilter{SortBy: store.ThreadSortStateUpdatedAt, Status: store.ThreadIdle,
			Values: []byte(`{"n": 1}`)}, []string{c.ID, a.ID}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.SearchThreads(ctx(), org, tc.f)
			must(t, "SearchThreads", err)
			checkRest(t, "SearchThreads", idsOf(got), tc.want)
			if len(got) > 0 && len(got[0].Values) == 0 {
				t.Errorf("a sorted search answers threads without their values")
			}
		})
	}
}

// testStateUpdatedAt: which writes move a thread's StateUpdatedAt (its
// state: FinishRun, UpdateThreadState) and which do not (metadata, adding
// or cancelling a run); a thread AddRun creates starts with its CreatedAt.
func testStateUpdatedAt(t *testing.T, s store.Store) {
	park(t, s)
	org := newOrg(t, s)
	th := createThread(t, s, org, 0)
	checkState := func(what string, want time.Time) {
		t.Helper()
		checkTime(t, what, getThread(t, s, org, th.ID).StateUpdatedAt, want)
	}
	checkState("StateUpdatedAt of a new thread", at(0))

	_, err := s.UpdateThreadMetadata(ctx(), org, th.ID, []byte(`{"x": 1}`), at(1))
	must(t, "UpdateThreadMetadata", err)
	checkState("StateUpdatedAt after a metadata update", at(0))

	r := addRun(t, s, newRun(org, th.ID, 2))
	checkState("StateUpdatedAt after AddRun", at(0))
	claimWant(t, s, "w", at(3), at(50), r.ID)
	must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r.ID, "w", store.RunSuccess, store.ThreadIdle, at(4))))
	checkState("StateUpdatedAt after FinishRun", at(4))

	r2 := addRun(t, s, newRun(org, th.ID, 5))
	_, err = s.CancelRun(ctx(), org, th.ID, r2.ID, store.CancelInterrupt, at(6))
	must(t, "CancelRun", err)
	checkState("StateUpdatedAt after cancelling a pending run", at(4))

	cp := newCheckpoint(th.ID, checkpointIDs(t, 1)[0], "", "", 7)
	must(t, "UpdateThreadState", s.UpdateThreadState(ctx(), org, cp, []byte(`{"v": 1}`), nil, store.ThreadIdle, at(8)))
	checkState("StateUpdatedAt after UpdateThreadState", at(8))

	given := store.Thread{ID: newID(), OrgID: org, CreatedAt: at(9), UpdatedAt: at(9), StateUpdatedAt: at(10)}
	must(t, "CreateThread", s.CreateThread(ctx(), given))
	checkTime(t, "StateUpdatedAt given to CreateThread", getThread(t, s, org, given.ID).StateUpdatedAt, at(10))

	fresh := newRun(org, newID(), 11)
	_, _, err = s.AddRun(ctx(), store.NewRun{Run: fresh, CreateThread: true})
	must(t, "AddRun creating its thread", err)
	checkTime(t, "StateUpdatedAt of a thread AddRun created", getThread(t, s, org, fresh.ThreadID).StateUpdatedAt, at(11))
}

// testThreadConfig: AddRun gives the thread the config ThreadConfig makes
// of its current one ("{}" for a thread it creates); an error from it
// fails AddRun and writes nothing.
func testThreadConfig(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	th := createThread(t, s, org, 0)
	var seen []byte
	wrapIn := func(current []byte) ([]byte, error) {
		seen = append([]byte(nil), current...)
		return []byte(`{"configurable": {"n": 1}, "tags": ["t"]}`), nil
	}
	addRunWith(t, s, store.NewRun{Run: newRun(org, th.ID, 1), ThreadConfig: wrapIn})
	checkBytes(t, "ThreadConfig's argument", seen, th.Config)
	checkJSONObject(t, "thread config after AddRun", getThread(t, s, org, th.ID).Config,
		[]byte(`{"configurable": {"n": 1}, "tags": ["t"]}`))

	fresh := newRun(org, newID(), 2)
	_, _, err := s.AddRun(ctx(), store.NewRun{Run: fresh, CreateThread: true, ThreadConfig: wrapIn})
	must(t, "AddRun creating its thread", err)
	checkJSONObject(t, "ThreadConfig's argument for a new thread", seen, []byte(`{}`))
	checkJSONObject(t, "config of a thread AddRun created", getThread(t, s, org, fresh.ThreadID).Config,
		[]byte(`{"configurable": {"n": 1}, "tags": ["t"]}`))

	refused := newRun(org, th.ID, 3)
	_, _, err = s.AddRun(ctx(), store.NewRun{Run: refused, ThreadConfig: func([]byte) ([]byte, error) {
		return nil, errors.New("no")
	}})
	if err == nil {
		t.Fatalf("AddRun with a failing ThreadConfig succeeded")
	}
	_, err = s.Run(ctx(), org, th.ID, refused.ID)
	wantErr(t, "the run of a refused AddRun", err, store.ErrNotFound)
	checkJSONObject(t, "thread config after a refused AddRun", getThread(t, s, org, th.ID).Config,
		[]byte(`{"configurable": {"n": 1}, "tags": ["t"]}`))
}

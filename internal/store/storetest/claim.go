package storetest

import (
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// parkNow and parkLease are after every time the suite uses.
var (
	parkNow   = time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)
	parkLease = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

// park claims every run claimable now or later (left by other tests sharing
// the store) and holds it beyond any time the suite uses, so that ClaimRun
// only finds the calling test's runs afterwards.
func park(t *testing.T, s store.Store) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		_, ok, err := s.ClaimRun(ctx(), "storetest-parked", parkNow, parkLease, 0)
		must(t, "ClaimRun (parking runs of other tests)", err)
		if !ok {
			return
		}
	}
	t.Fatal("ClaimRun never ran out of runs to park")
}

// claimed is r as ClaimRun by owner at now must leave it.
func claimed(r store.Run, owner string, now, until time.Time) store.Run {
	r.Status = store.RunRunning
	if r.StartedAt.IsZero() {
		r.StartedAt = now
	}
	r.LeaseOwner, r.LeaseUntil = owner, until
	r.Attempt++
	return r
}

// claimWant claims a run as owner and checks it is want (ID "" means none).
func claimWant(t *testing.T, s store.Store, owner string, now, until time.Time, want string) store.Run {
	t.Helper()
	got, ok, err := s.ClaimRun(ctx(), owner, now, until, 0)
	must(t, "ClaimRun", err)
	switch {
	case want == "" && ok:
		t.Fatalf("ClaimRun at %v: got run %s (thread %s, status before claim unknown), want none", now, got.ID, got.ThreadID)
	case want != "" && !ok:
		t.Fatalf("ClaimRun at %v: no run, want %s", now, want)
	case want != "" && got.ID != want:
		t.Fatalf("ClaimRun at %v: run %s, want %s", now, got.ID, want)
	}
	return got
}

func finish(org, thread, run, owner, status, threadStatus string, now time.Time) store.FinishedRun {
	return store.FinishedRun{OrgID: org, ThreadID: thread, RunID: run, LeaseOwner: owner,
		Status: status, Result: []byte(`{"ok": true}`), ThreadStatus: threadStatus, Now: now}
}

func testClaimOrder(t *testing.T, s store.Store) {
	org := newOrg(t, s)

	t.Run("FIFOPerThread", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 0)
		var want []string
		for i := 0; i < 4; i++ {
			off := 1
			if i == 3 {
				off = 2
			}
			// Three runs share NotBefore and CreatedAt: insertion order decides.
			want = append(want, addRun(t, s, newRun(org, th.ID, off)).ID)
		}
		var got []string
		for i := range want {
			now := at(10 + i)
			r := claimWant(t, s, "w", now, now.Add(time.Minute), want[i])
			got = append(got, r.ID)
			// The next run of the thread waits for this one.
			claimWant(t, s, "w", now, now.Add(time.Minute), "")
			must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r.ID, "w", store.RunSuccess, store.ThreadIdle, now)))
		}
		checkRest(t, "claim order", got, want)
		wantThreadStatus(t, s, org, th.ID, store.ThreadIdle)
	})

	t.Run("NotBeforeFirst", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 0)
		late := newRun(org, th.ID, 1)
		late.NotBefore = at(30)
		addRun(t, s, late)
		early := newRun(org, th.ID, 2)
		early.NotBefore = at(20)
		addRun(t, s, early)
		claimWant(t, s, "w", at(15), at(100), "")
		r := claimWant(t, s, "w", at(25), at(100), early.ID)
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r.ID, "w", store.RunSuccess, store.ThreadIdle, at(26))))
		claimWant(t, s, "w", at(29), at(100), "")
		claimWant(t, s, "w", at(30), at(100), late.ID) // NotBefore itself has passed
	})

	t.Run("ThreadsInParallel", func(t *testing.T) {
		park(t, s)
		a, b := createThread(t, s, org, 0), createThread(t, s, org, 0)
		a1 := addRun(t, s, newRun(org, a.ID, 1))
		a2 := addRun(t, s, newRun(org, a.ID, 2))
		b1 := addRun(t, s, newRun(org, b.ID, 3))
		now, until := at(10), at(100)
		got := claimWant(t, s, "w1", now, until, a1.ID)
		want := claimed(a1, "w1", now, until)
		want.UpdatedAt = got.UpdatedAt
		eqRun(t, got, want)
		eqRun(t, getRun(t, s, a1), got)
		got = claimWant(t, s, "w2", now, until, b1.ID)
		want = claimed(b1, "w2", now, until)
		want.UpdatedAt = got.UpdatedAt
		eqRun(t, got, want)
		claimWant(t, s, "w3", now, until, "")
		eqRun(t, getRun(t, s, a2), a2)
		wantThreadStatus(t, s, org, a.ID, store.ThreadBusy)
		wantThreadStatus(t, s, org, b.ID, store.ThreadBusy)
	})

	// Within an organization, the oldest first; across organizations, in
	// turn (fairness.go).
	t.Run("OldestAcrossThreads", func(t *testing.T) {
		park(t, s)
		var want []string
		threads := []store.Thread{createThread(t, s, org, 0), createThread(t, s, org, 0), createThread(t, s, org, 0)}
		for i, off := range []int{3, 1, 2} {
			r := newRun(threads[i].OrgID, threads[i].ID, off)
			addRun(t, s, r)
			want = append(want, r.ID)
		}
		want = []string{want[1], want[2], want[0]}
		for _, id := range want {
			claimWant(t, s, "w", at(10), at(100), id)
		}
	})

	t.Run("NothingToClaim", func(t *testing.T) {
		park(t, s)
		claimWant(t, s, "w", at(0), at(1), "")
	})
}

func testLeases(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	park(t, s)
	th := createThread(t, s, org, 0)
	r1 := addRun(t, s, newRun(org, th.ID, 1))

	got := claimWant(t, s, "w1", at(10), at(20), r1.ID)
	want := claimed(r1, "w1", at(10), at(20))
	want.UpdatedAt = got.UpdatedAt
	eqRun(t, got, want)

	// A run enqueued later, but to start earlier: it still waits for r1.
	r2 := newRun(org, th.ID, 2)
	r2.NotBefore = at(0)
	addRun(t, s, r2)

	_, err := s.RenewLease(ctx(), r1.ID, "w2", 0, at(40))
	wantErr(t, "RenewLease by a stranger", err, store.ErrStale)
	_, err = s.RenewLease(ctx(), newID(), "w1", 0, at(40))
	wantErr(t, "RenewLease of a missing run", err, store.ErrStale)
	renewed, err := s.RenewLease(ctx(), r1.ID, "w1", 0, at(30))
	must(t, "RenewLease", err)
	want.LeaseUntil = at(30)
	want.UpdatedAt = renewed.UpdatedAt
	eqRun(t, renewed, want)
	eqRun(t, getRun(t, s, r1), renewed)

	claimWant(t, s, "w2", at(25), at(60), "") // lease renewed past 25

	// The lease expires: r1 is claimed again, before r2.
	got = claimWant(t, s, "w2", at(31), at(60), r1.ID)
	want = claimed(renewed, "w2", at(31), at(60))
	want.UpdatedAt = got.UpdatedAt
	eqRun(t, got, want)
	if got.Attempt != 2 {
		t.Errorf("Attempt after a second claim = %d, want 2", got.Attempt)
	}
	claimWant(t, s, "w3", at(32), at(60), "")

	// The first worker lost the run.
	_, err = s.RenewLease(ctx(), r1.ID, "w1", 0, at(90))
	wantErr(t, "RenewLease by the previous owner", err, store.ErrStale)
	wantErr(t, "FinishRun by the previous owner",
		s.FinishRun(ctx(), finish(org, th.ID, r1.ID, "w1", store.RunSuccess, store.ThreadIdle, at(33))), store.ErrStale)
	eqRun(t, getRun(t, s, r1), got)
	wantThreadStatus(t, s, org, th.ID, store.ThreadBusy)

	must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r1.ID, "w2", store.RunSuccess, store.ThreadIdle, at(34))))
	_, err = s.RenewLease(ctx(), r1.ID, "w2", 0, at(90))
	wantErr(t, "RenewLease of a finished run", err, store.ErrStale)
	wantErr(t, "FinishRun twice",
		s.FinishRun(ctx(), finish(org, th.ID, r1.ID, "w2", store.RunError, store.ThreadError, at(35))), store.ErrStale)
	if got := getRun(t, s, r1); got.Status != store.RunSuccess {
		t.Errorf("status after a second FinishRun: %q, want success", got.Status)
	}
	wantErr(t, "FinishRun of a pending run",
		s.FinishRun(ctx(), finish(org, th.ID, r2.ID, "", store.RunSuccess, store.ThreadIdle, at(35))), store.ErrStale)
	claimWant(t, s, "w3", at(36), at(60), r2.ID)
}

func testFinishRun(t *testing.T, s store.Store) {
	org := newOrg(t, s)

	t.Run("SettlesRunAndThread", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 0)
		r := addRun(t, s, newRun(org, th.ID, 1))
		c := claimWant(t, s, "w", at(2), at(50), r.ID)
		f := finish(org, th.ID, r.ID, "w", store.RunSuccess, store.ThreadInterrupted, at(3))
		f.Result = doc("result")
		f.Values = doc("values")
		f.Interrupts = []byte(`{"t1": [{"id": "i", "value": 1}]}`)
		f.Error = []byte(`{"error": "Oops", "message": "x"}`)
		must(t, "FinishRun", s.FinishRun(ctx(), f))

		want := c
		want.Status, want.Result, want.EndedAt, want.UpdatedAt = store.RunSuccess, f.Result, at(3), at(3)
		want.LeaseOwner, want.LeaseUntil = "", time.Time{}
		eqRun(t, getRun(t, s, r), want)
		gotThread := getThread(t, s, org, th.ID)
		eqSummary(t, gotThread, store.Thread{Status: store.ThreadInterrupted, Values: f.Values,
			Interrupts: f.Interrupts, Error: f.Error})
		checkBytes(t, "thread Metadata", gotThread.Metadata, th.Metadata)

		// nil Values leave the values; nil Interrupts and Error clear theirs.
		r2 := addRun(t, s, newRun(org, th.ID, 4))
		wantThreadStatus(t, s, org, th.ID, store.ThreadBusy)
		claimWant(t, s, "w", at(5), at(50), r2.ID)
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r2.ID, "w", store.RunError, store.ThreadError, at(6))))
		eqSummary(t, getThread(t, s, org, th.ID), store.Thread{Status: store.ThreadError, Values: f.Values})
		if got := getRun(t, s, r2); got.Status != store.RunError || got.CancelAction != "" {
			t.Errorf("run after FinishRun: status %q cancel %q, want error and none", got.Status, got.CancelAction)
		}
	})

	t.Run("BusyWhileAnotherRunIsInflight", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 0)
		r1 := addRun(t, s, newRun(org, th.ID, 1))
		r2 := addRun(t, s, newRun(org, th.ID, 2))
		claimWant(t, s, "w", at(3), at(50), r1.ID)
		f := finish(org, th.ID, r1.ID, "w", store.RunSuccess, store.ThreadIdle, at(4))
		f.Values = []byte(`{"step": 1}`)
		must(t, "FinishRun", s.FinishRun(ctx(), f))
		eqSummary(t, getThread(t, s, org, th.ID), store.Thread{Status: store.ThreadBusy, Values: f.Values})
		claimWant(t, s, "w", at(5), at(50), r2.ID)
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r2.ID, "w", store.RunTimeout, store.ThreadError, at(6))))
		eqSummary(t, getThread(t, s, org, th.ID), store.Thread{Status: store.ThreadError, Values: f.Values})
	})

	t.Run("Rollback", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 0)
		cps := checkpointIDs(t, 3)
		state := store.Checkpoint{ThreadID: th.ID, ID: cps[0], CreatedAt: at(0), Data: []byte(`{}`)}
		must(t, "UpdateThreadState", s.UpdateThreadState(ctx(), org, state, []byte(`{"before": true}`), nil, store.ThreadIdle, at(0)))
		r := addRun(t, s, newRun(org, th.ID, 1))
		claimWant(t, s, "w", at(2), at(50), r.ID)
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(th.ID, cps[1], cps[0], r.ID, 3)))
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(th.ID, cps[2], cps[1], r.ID, 4)))
		cancelled, err := s.CancelRun(ctx(), org, th.ID, r.ID, store.CancelRollback, at(5))
		must(t, "CancelRun rollback", err)
		if cancelled.Status != store.RunRunning || cancelled.CancelAction != store.CancelRollback {
			t.Errorf("CancelRun of a running run: status %q cancel %q, want running, rollback", cancelled.Status, cancelled.CancelAction)
		}
		f := finish(org, th.ID, r.ID, "w", store.RunInterrupted, store.ThreadIdle, at(6))
		f.Values = []byte(`{"after": true}`)
		must(t, "FinishRun", s.FinishRun(ctx(), f))
		_, err = s.Run(ctx(), org, th.ID, r.ID)
		wantErr(t, "Run after a rolled back finish", err, store.ErrNotFound)
		latest, err := s.LatestCheckpoint(ctx(), org, th.ID)
		must(t, "LatestCheckpoint", err)
		eqCheckpoint(t, latest, state)
		list, err := s.ListCheckpoints(ctx(), org, th.ID, "", 0)
		must(t, "ListCheckpoints", err)
		checkRest(t, "checkpoints after rollback", idsOf(list), []string{cps[0]})
		gotThread := getThread(t, s, org, th.ID)
		if gotThread.Status != store.ThreadIdle {
			t.Errorf("thread status after rollback %q, want idle", gotThread.Status)
		}
	})

	t.Run("Temporary", func(t *testing.T) {
		park(t, s)
		r := newRun(org, newID(), 0)
		r.Temporary = true
		_, created, err := s.AddRun(ctx(), store.NewRun{Run: r, CreateThread: true})
		must(t, "AddRun", err)
		if !created {
			t.Error("AddRun of a temporary run: created = false")
		}
		claimWant(t, s, "w", at(1), at(50), r.ID)
		cp := checkpointIDs(t, 1)[0]
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(r.ThreadID, cp, "", r.ID, 2)))
		wantErr(t, "FinishRun of a temporary run by a stranger",
			s.FinishRun(ctx(), finish(org, r.ThreadID, r.ID, "x", store.RunSuccess, store.ThreadIdle, at(3))), store.ErrStale)
		getThread(t, s, org, r.ThreadID)
		f := finish(org, r.ThreadID, r.ID, "w", store.RunSuccess, store.ThreadIdle, at(3))
		f.Values = []byte(`{}`)
		must(t, "FinishRun", s.FinishRun(ctx(), f))
		_, err = s.Thread(ctx(), org, r.ThreadID)
		wantErr(t, "Thread of a finished temporary run", err, store.ErrNotFound)
		_, err = s.Run(ctx(), org, r.ThreadID, r.ID)
		wantErr(t, "finished temporary run", err, store.ErrNotFound)
		_, err = s.Checkpoint(ctx(), org, r.ThreadID, cp)
		wantErr(t, "Checkpoint of a finished temporary run", err, store.ErrNotFound)

		res, err := s.TemporaryResult(ctx(), org, r.ID, at(4))
		must(t, "TemporaryResult", err)
		checkBytes(t, "TemporaryResult", res, f.Result)
		_, err = s.TemporaryResult(ctx(), newOrg(t, s), r.ID, at(4))
		wantErr(t, "TemporaryResult of another organization's run", err, store.ErrNotFound)
		_, err = s.TemporaryResult(ctx(), org, r.ID, at(3).Add(store.TemporaryResultTTL+time.Second))
		wantErr(t, "TemporaryResult after its TTL", err, store.ErrNotFound)
		_, err = s.TemporaryResult(ctx(), org, newID(), at(4))
		wantErr(t, "TemporaryResult of an unknown run", err, store.ErrNotFound)
	})
}

// testClaimRunByID: the claim of one given run, as a per-run execution does.
func testClaimRunByID(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	claimByID := func(t *testing.T, r store.Run, owner string, now time.Time, wantOK bool) store.Run {
		t.Helper()
		got, ok, err := s.ClaimRunByID(ctx(), r.ID, owner, now, now.Add(time.Minute), 0)
		must(t, "ClaimRunByID", err)
		if ok != wantOK || got.ID != r.ID {
			t.Fatalf("ClaimRunByID(%s) at %v = run %q claimed %v, want claimed %v", r.ID, now, got.ID, ok, wantOK)
		}
		return got
	}

	t.Run("InTurn", func(t *testing.T) {
		th := createThread(t, s, org, 0)
		first := addRun(t, s, newRun(org, th.ID, 1))
		second := addRun(t, s, newRun(org, th.ID, 2))
		late := newRun(org, th.ID, 3)
		late.NotBefore = at(60)
		addRun(t, s, late)

		got := claimByID(t, second, "exec-2", at(10), false) // first comes first
		if got.Status != store.RunPending {
			t.Errorf("unclaimed run status %q, want pending", got.Status)
		}
		got = claimByID(t, first, "exec-1", at(10), true)
		want := claimed(first, "exec-1", at(10), at(10).Add(time.Minute))
		want.UpdatedAt = got.UpdatedAt
		eqRun(t, got, want)
		claimByID(t, second, "exec-2", at(11), false) // the thread has a running run
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, first.ID, "exec-1", store.RunSuccess, store.ThreadIdle, at(12))))

		got = claimByID(t, first, "exec-1", at(13), false) // terminal
		if got.Status != store.RunSuccess {
			t.Errorf("finished run status %q, want success", got.Status)
		}
		claimByID(t, late, "exec-3", at(13), false) // NotBefore has not come
		claimByID(t, second, "exec-2", at(13), true)
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, second.ID, "exec-2", store.RunSuccess, store.ThreadIdle, at(14))))
		claimByID(t, late, "exec-3", at(60), true)
	})

	t.Run("Leases", func(t *testing.T) {
		th := createThread(t, s, org, 0)
		r := addRun(t, s, newRun(org, th.ID, 1))
		claimByID(t, r, "exec", at(10), true)
		// A retried step of the same execution takes the run back at once.
		got := claimByID(t, r, "exec", at(11), true)
		if got.Attempt != 2 || got.LeaseOwner != "exec" {
			t.Errorf("reclaim by the owner: attempt %d owner %q, want 2 exec", got.Attempt, got.LeaseOwner)
		}
		claimByID(t, r, "other", at(12), false) // leased to exec until at(71)
		got = claimByID(t, r, "other", at(72), true)
		if got.LeaseOwner != "other" || got.Attempt != 3 {
			t.Errorf("claim after the lease expired: owner %q attempt %d, want other 3", got.LeaseOwner, got.Attempt)
		}
		wantErr(t, "FinishRun by the former owner",
			s.FinishRun(ctx(), finish(org, th.ID, r.ID, "exec", store.RunSuccess, store.ThreadIdle, at(73))), store.ErrStale)
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r.ID, "other", store.RunSuccess, store.ThreadIdle, at(73))))
	})

	t.Run("Gone", func(t *testing.T) {
		_, _, err := s.ClaimRunByID(ctx(), newID(), "exec", at(1), at(2), 0)
		wantErr(t, "ClaimRunByID of an unknown run", err, store.ErrNotFound)
		th := createThread(t, s, org, 0)
		r := addRun(t, s, newRun(org, th.ID, 1))
		must(t, "DeleteThread", s.DeleteThread(ctx(), org, th.ID))
		_, _, err = s.ClaimRunByID(ctx(), r.ID, "exec", at(10), at(20), 0)
		wantErr(t, "ClaimRunByID of a run whose thread was deleted", err, store.ErrNotFound)
	})
}

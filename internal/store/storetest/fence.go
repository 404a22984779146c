package storetest

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// testCheckpointFence: checkpoint writes carrying a run attempt
// (store.Checkpoint.RunAttempt) are written only while the run is running
// under that attempt. An attempt superseded by a later claim (a retried step
// of the same execution, or another owner after the lease expired), or whose
// run is no longer running, gets ErrSuperseded and writes nothing.
func testCheckpointFence(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	claim := func(t *testing.T, r store.Run, owner string, now time.Time) store.Run {
		t.Helper()
		got, ok, err := s.ClaimRunByID(ctx(), r.ID, owner, now, now.Add(time.Minute), 0)
		must(t, "ClaimRunByID", err)
		if !ok {
			t.Fatalf("ClaimRunByID(%s) at %v: not claimed (status %s)", r.ID, now, got.Status)
		}
		return got
	}
	fenced := func(th string, run store.Run, attempt, off int) store.Checkpoint {
		cp := newCheckpoint(th, checkpointIDs(t, 1)[0], "", run.ID, off)
		cp.RunAttempt = attempt
		return cp
	}
	// refused checks that the write of cps fails as superseded and that none
	// of them is stored.
	refused := func(t *testing.T, what, th string, cps ...store.Checkpoint) {
		t.Helper()
		var err error
		if len(cps) == 1 {
			err = s.PutCheckpoint(ctx(), org, cps[0])
		} else {
			err = s.PutCheckpoints(ctx(), org, cps)
		}
		wantErr(t, what, err, store.ErrSuperseded)
		for _, cp := range cps {
			_, err := s.Checkpoint(ctx(), org, th, cp.ID)
			wantErr(t, what+": the refused checkpoint reads back", err, store.ErrNotFound)
		}
	}

	t.Run("RetriedStepSupersedes", func(t *testing.T) {
		th := createThread(t, s, org, 0)
		run := addRun(t, s, newRun(org, th.ID, 1))
		first := claim(t, run, "exec", at(10))
		a1 := fenced(th.ID, run, first.Attempt, 11)
		must(t, "PutCheckpoint of the current attempt", s.PutCheckpoint(ctx(), org, a1))

		// The same owner claims it again: a retried step of its execution.
		second := claim(t, first, "exec", at(12))
		if second.Attempt != first.Attempt+1 {
			t.Fatalf("attempt after a second claim = %d, want %d", second.Attempt, first.Attempt+1)
		}
		refused(t, "PutCheckpoint of the superseded attempt", th.ID, fenced(th.ID, run, first.Attempt, 13))
		refused(t, "PutCheckpoints of the superseded attempt", th.ID,
			fenced(th.ID, run, first.Attempt, 14), fenced(th.ID, run, first.Attempt, 15))
		latest, err := s.LatestCheckpoint(ctx(), org, th.ID)
		must(t, "LatestCheckpoint", err)
		if latest.ID != a1.ID {
			t.Errorf("latest checkpoint %s, want %s (the superseded attempt's writes are not stored)", latest.ID, a1.ID)
		}

		a2 := []store.Checkpoint{fenced(th.ID, run, second.Attempt, 16), fenced(th.ID, run, second.Attempt, 17)}
		must(t, "PutCheckpoints of the current attempt", s.PutCheckpoints(ctx(), org, a2))
		must(t, "PutCheckpoint of the current attempt", s.PutCheckpoint(ctx(), org, fenced(th.ID, run, second.Attempt, 18)))
		// An unfenced write (a state update, a copy) is not the run's.
		must(t, "PutCheckpoint without an attempt", s.PutCheckpoint(ctx(), org, fenced(th.ID, run, 0, 19)))

		// Another owner takes it over once the lease expired.
		third := claim(t, second, "exec-other", at(12).Add(2*time.Minute))
		refused(t, "PutCheckpoint of the attempt taken over", th.ID, fenced(th.ID, run, second.Attempt, 20))
		must(t, "PutCheckpoint of the owner that took over", s.PutCheckpoint(ctx(), org, fenced(th.ID, run, third.Attempt, 21)))

		// A terminal run has no current attempt.
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, run.ID, "exec-other", store.RunSuccess, store.ThreadIdle, at(200))))
		refused(t, "PutCheckpoint of a finished run", th.ID, fenced(th.ID, run, third.Attempt, 201))
	})

	t.Run("PendingOrOtherRun", func(t *testing.T) {
		th := createThread(t, s, org, 0)
		r1 := addRun(t, s, newRun(org, th.ID, 1))
		r2 := addRun(t, s, newRun(org, th.ID, 2))
		refused(t, "PutCheckpoint of a pending run", th.ID, fenced(th.ID, r1, 1, 3))
		c1 := claim(t, r1, "exec-1", at(10))
		refused(t, "PutCheckpoint of a run waiting behind the running one", th.ID, fenced(th.ID, r2, c1.Attempt, 11))
		must(t, "PutCheckpoint of the running run", s.PutCheckpoint(ctx(), org, fenced(th.ID, r1, c1.Attempt, 12)))
	})

	t.Run("ThreadGone", func(t *testing.T) {
		th := createThread(t, s, org, 0)
		run := addRun(t, s, newRun(org, th.ID, 1))
		c := claim(t, run, "exec", at(10))
		must(t, "DeleteThread", s.DeleteThread(ctx(), org, th.ID))
		err := s.PutCheckpoint(ctx(), org, fenced(th.ID, run, c.Attempt, 11))
		wantErr(t, "PutCheckpoint on a deleted thread", err, store.ErrNotFound)
	})
}

// testFinishFence: a finish carrying a run attempt (store.FinishedRun.Attempt)
// settles the run only while it is running under that attempt. An attempt
// superseded by a later claim (a retried step of the same execution, whose
// lease owner is the same, or another owner after the lease expired) gets
// ErrSuperseded and changes nothing: not the run, its result, its thread's
// status, values, interrupts or error, not a rollback's deletion, not a
// temporary run's thread or result. The current attempt's finish works; a
// finish after the run ended is ErrStale, as without a fence.
func testFinishFence(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	claim := func(t *testing.T, runID, owner string, now time.Time) store.Run {
		t.Helper()
		got, ok, err := s.ClaimRunByID(ctx(), runID, owner, now, now.Add(time.Minute), 0)
		must(t, "ClaimRunByID", err)
		if !ok {
			t.Fatalf("ClaimRunByID(%s) at %v: not claimed (status %s)", runID, now, got.Status)
		}
		return got
	}
	fencedFinish := func(th, runID, owner string, attempt, off int) store.FinishedRun {
		f := finish(org, th, runID, owner, store.RunError, store.ThreadError, at(off))
		f.Result = []byte(`{"__error__": {"error": "Stale", "message": "attempt ` + strconv.Itoa(attempt) + `"}}`)
		f.Values = []byte(`{"by": "attempt ` + strconv.Itoa(attempt) + `"}`)
		f.Interrupts = []byte(`{"task": [{"id": "i", "value": "stale"}]}`)
		f.Error = []byte(`{"error": "Stale", "message": "stale"}`)
		f.Attempt = attempt
		return f
	}
	// unchanged checks that a refused finish left the run and its thread as
	// they were read before it.
	unchanged := func(t *testing.T, what string, run store.Run, th store.Thread) {
		t.Helper()
		got, err := s.Run(ctx(), org, run.ThreadID, run.ID)
		must(t, what+": Run", err)
		if got.Status != store.RunRunning || got.Attempt != run.Attempt || got.LeaseOwner != run.LeaseOwner ||
			got.Result != nil || !got.EndedAt.IsZero() {
			t.Errorf("%s: run is %s at attempt %d owned by %q, result %q, ended %v; want it running at attempt %d owned by %q, no result",
				what, got.Status, got.Attempt, got.LeaseOwner, got.Result, got.EndedAt, run.Attempt, run.LeaseOwner)
		}
		gotTh, err := s.Thread(ctx(), org, th.ID)
		must(t, what+": Thread", err)
		eqSummary(t, gotTh, th)
	}
	thread := func(t *testing.T, id string) store.Thread {
		t.Helper()
		th, err := s.Thread(ctx(), org, id)
		must(t, "Thread", err)
		return th
	}

	t.Run("RetriedStepSupersedes", func(t *testing.T) {
		th := createThread(t, s, org, 0)
		run := addRun(t, s, newRun(org, th.ID, 1))
		first := claim(t, run.ID, "exec", at(10))
		cp := newCheckpoint(th.ID, checkpointIDs(t, 1)[0], "", run.ID, 11)
		cp.RunAttempt = first.Attempt
		must(t, "PutCheckpoint of the first attempt", s.PutCheckpoint(ctx(), org, cp))
		// The first attempt stored its last checkpoint; its step is retried
		// (the same owner) before it finishes.
		second := claim(t, run.ID, "exec", at(12))
		before := thread(t, th.ID)

		err := s.FinishRun(ctx(), fencedFinish(th.ID, run.ID, "exec", first.Attempt, 13))
		wantErr(t, "FinishRun of the superseded attempt", err, store.ErrSuperseded)
		unchanged(t, "after the superseded attempt's finish", second, before)

		f := finish(org, th.ID, run.ID, "exec", store.RunSuccess, store.ThreadIdle, at(14))
		f.Values, f.Attempt = []byte(`{"by": "current"}`), second.Attempt
		must(t, "FinishRun of the current attempt", s.FinishRun(ctx(), f))
		got := getRun(t, s, run)
		if got.Status != store.RunSuccess || !bytes.Equal(got.Result, f.Result) {
			t.Errorf("run after the current attempt's finish: %s result %s, want success %s", got.Status, got.Result, f.Result)
		}
		if th := thread(t, th.ID); th.Status != store.ThreadIdle || !bytes.Equal(th.Values, f.Values) || th.Error != nil {
			t.Errorf("thread after the current attempt's finish: %s values %s error %s, want idle %s no error", th.Status, th.Values, th.Error, f.Values)
		}

		// After the end, either attempt's finish is stale, as without a fence.
		wantErr(t, "FinishRun of the superseded attempt after the end",
			s.FinishRun(ctx(), fencedFinish(th.ID, run.ID, "exec", first.Attempt, 15)), store.ErrStale)
		wantErr(t, "FinishRun of the current attempt again",
			s.FinishRun(ctx(), fencedFinish(th.ID, run.ID, "exec", second.Attempt, 15)), store.ErrStale)
		if got := getRun(t, s, run); got.Status != store.RunSuccess || !bytes.Equal(got.Result, f.Result) {
			t.Errorf("run after finishes of an ended run: %s result %s, want success %s", got.Status, got.Result, f.Result)
		}
	})

	t.Run("TakenOver", func(t *testing.T) {
		th := createThread(t, s, org, 0)
		run := addRun(t, s, newRun(org, th.ID, 1))
		first := claim(t, run.ID, "exec", at(10))
		// Another owner claims it once the lease expired.
		second := claim(t, run.ID, "exec-other", at(10).Add(2*time.Minute))
		before := thread(t, th.ID)
		err := s.FinishRun(ctx(), fencedFinish(th.ID, run.ID, "exec", first.Attempt, 200))
		wantErr(t, "FinishRun of the attempt taken over", err, store.ErrSuperseded)
		unchanged(t, "after the taken-over attempt's finish", second, before)
		must(t, "FinishRun of the owner that took over",
			s.FinishRun(ctx(), fencedFinish(th.ID, run.ID, "exec-other", second.Attempt, 201)))
		if got := getRun(t, s, run); got.Status != store.RunError {
			t.Errorf("run after the current attempt's finish: %s, want error", got.Status)
		}
	})

	t.Run("RollbackStays", func(t *testing.T) {
		th := createThread(t, s, org, 0)
		run := addRun(t, s, newRun(org, th.ID, 1))
		first := claim(t, run.ID, "exec", at(10))
		cp := newCheckpoint(th.ID, checkpointIDs(t, 1)[0], "", run.ID, 11)
		cp.RunAttempt = first.Attempt
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, cp))
		_, err := s.CancelRun(ctx(), org, th.ID, run.ID, store.CancelRollback, at(12))
		must(t, "CancelRun rollback", err)
		second := claim(t, run.ID, "exec", at(13))
		before := thread(t, th.ID)
		err = s.FinishRun(ctx(), fencedFinish(th.ID, run.ID, "exec", first.Attempt, 14))
		wantErr(t, "FinishRun (rollback) of the superseded attempt", err, store.ErrSuperseded)
		unchanged(t, "after the superseded attempt's rollback", second, before)
		if _, err := s.Checkpoint(ctx(), org, th.ID, cp.ID); err != nil {
			t.Errorf("the run's checkpoint after a refused rollback: %v, want it kept", err)
		}
		must(t, "FinishRun (rollback) of the current attempt",
			s.FinishRun(ctx(), fencedFinish(th.ID, run.ID, "exec", second.Attempt, 15)))
		_, err = s.Run(ctx(), org, th.ID, run.ID)
		wantErr(t, "Run after the rollback", err, store.ErrNotFound)
	})

	t.Run("TemporaryRunStays", func(t *testing.T) {
		r := newRun(org, newID(), 0)
		r.Temporary = true
		_, _, err := s.AddRun(ctx(), store.NewRun{Run: r, CreateThread: true})
		must(t, "AddRun", err)
		first := claim(t, r.ID, "exec", at(10))
		second := claim(t, r.ID, "exec", at(11))
		before := thread(t, r.ThreadID)
		err = s.FinishRun(ctx(), fencedFinish(r.ThreadID, r.ID, "exec", first.Attempt, 12))
		wantErr(t, "FinishRun of a temporary run by the superseded attempt", err, store.ErrSuperseded)
		unchanged(t, "after the superseded attempt's finish of a temporary run", second, before)
		_, err = s.TemporaryResult(ctx(), org, r.ID, at(13))
		wantErr(t, "TemporaryResult after a refused finish", err, store.ErrNotFound)
		f := fencedFinish(r.ThreadID, r.ID, "exec", second.Attempt, 14)
		must(t, "FinishRun of a temporary run by the current attempt", s.FinishRun(ctx(), f))
		res, err := s.TemporaryResult(ctx(), org, r.ID, at(15))
		must(t, "TemporaryResult", err)
		if !bytes.Equal(res, f.Result) {
			t.Errorf("TemporaryResult = %s, want %s", res, f.Result)
		}
	})
}

// testLeaseFence: a lease renewal carrying a run attempt moves (or gives
// up) the lease only while the run is running under that attempt: the
// stale attempt of a retried step (the same owner) gets ErrSuperseded and
// the lease of the attempt that replaced it stays as it was.
func testLeaseFence(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	th := createThread(t, s, org, 0)
	run := addRun(t, s, newRun(org, th.ID, 1))
	first, ok, err := s.ClaimRunByID(ctx(), run.ID, "exec", at(10), at(70), 0)
	must(t, "ClaimRunByID", err)
	if !ok {
		t.Fatal("ClaimRunByID: not claimed")
	}
	renewed, err := s.RenewLease(ctx(), run.ID, "exec", first.Attempt, at(80))
	must(t, "RenewLease of the current attempt", err)
	checkTime(t, "lease after the current attempt's renewal", renewed.LeaseUntil, at(80))

	second, ok, err := s.ClaimRunByID(ctx(), run.ID, "exec", at(11), at(90), 0)
	must(t, "ClaimRunByID again (a retried step)", err)
	if !ok || second.Attempt != first.Attempt+1 {
		t.Fatalf("second claim: claimed %v at attempt %d, want attempt %d", ok, second.Attempt, first.Attempt+1)
	}
	for _, until := range []time.Time{at(200), at(5)} { // a renewal, a release
		_, err = s.RenewLease(ctx(), run.ID, "exec", first.Attempt, until)
		wantErr(t, "RenewLease of the superseded attempt", err, store.ErrSuperseded)
		got := getRun(t, s, run)
		checkTime(t, "lease after the superseded attempt's renewal", got.LeaseUntil, at(90))
		if got.Status != store.RunRunning || got.Attempt != second.Attempt {
			t.Errorf("run after the superseded attempt's renewal: %s at attempt %d", got.Status, got.Attempt)
		}
	}
	renewed, err = s.RenewLease(ctx(), run.ID, "exec", second.Attempt, at(95))
	must(t, "RenewLease of the current attempt", err)
	checkTime(t, "lease after the current attempt's renewal", renewed.LeaseUntil, at(95))
	_, err = s.RenewLease(ctx(), run.ID, "exec", 0, at(96))
	must(t, "RenewLease without an attempt", err)
	_, err = s.RenewLease(ctx(), run.ID, "stranger", second.Attempt, at(97))
	wantErr(t, "RenewLease by a stranger at the current attempt", err, store.ErrStale)

	must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, run.ID, "exec", store.RunSuccess, store.ThreadIdle, at(20))))
	_, err = s.RenewLease(ctx(), run.ID, "exec", first.Attempt, at(100))
	wantErr(t, "RenewLease of a finished run by a superseded attempt", err, store.ErrStale)
}

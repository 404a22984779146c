package storetest

import (
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

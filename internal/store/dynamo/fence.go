package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Checkpoint writes fenced by run attempt (store.Checkpoint.RunAttempt).
//
// The thread item records, next to its running run ("running"), the attempt
// that run was last claimed under ("rattempt"): every claim of a run sets
// it and bumps the thread's version, in the transaction that claims. A
// checkpoint write reads the thread, checks the fence on what it read
// (fenceCheckpoint), and commits on the version it read (threadCond), so a
// claim between the read and the commit fails the commit; the retry reads
// the new attempt and refuses. The fence thus costs a checkpoint nothing
// (no item more in its transaction); a claim pays one update of the thread
// item. On AWS a run is claimed again by the next step of its execution
// (every ≤ 5 min) and by a retried step: the stale Lambda of the step
// before finds itself superseded at its next checkpoint.
const runAttemptAttr = "rattempt"

// fenceCheckpoint refuses cp when it carries an attempt (RunAttempt > 0)
// and its run is not the thread's running run under that attempt. A thread
// item written before the fence existed has no attempt: its running run is
// not fenced (until its next claim writes one).
func fenceCheckpoint(t *threadRec, cp store.Checkpoint) error {
	if cp.RunAttempt <= 0 || cp.RunID == "" {
		return nil
	}
	if t.running != cp.RunID {
		return fmt.Errorf("%w (checkpoint of run %s by attempt %d; the run is not running on its thread)",
			store.ErrSuperseded, cp.RunID, cp.RunAttempt)
	}
	if _, recorded := t.it[runAttemptAttr]; !recorded {
		return nil
	}
	if cur := t.it.num(runAttemptAttr); cur != int64(cp.RunAttempt) {
		return fmt.Errorf("%w (checkpoint of run %s by attempt %d; the run is at attempt %d)",
			store.ErrSuperseded, cp.RunID, cp.RunAttempt, cur)
	}
	return nil
}

// fenceCheckpoints is fenceCheckpoint for each of a batch.
func fenceCheckpoints(t *threadRec, cps []store.Checkpoint) error {
	for _, cp := range cps {
		if err := fenceCheckpoint(t, cp); err != nil {
			return err
		}
	}
	return nil
}

// claimedAttempt records on a thread update the attempt its running run
// is claimed under (the run's attempt as read, plus one: the claim's
// update of the run is conditioned on the attempt it read).
func claimedAttempt(read int64) func(*upd) {
	return func(u *upd) { u.set(runAttemptAttr, n(read+1)) }
}

// reclaimThread is the thread's part of claiming again its running run
// runID (an expired lease, or a retried step of the same owner): it records
// the new attempt and bumps the version, so that a checkpoint write of the
// attempt before, read before this, fails its commit. It requires runID to
// be the thread's running run (not a thread being deleted).
func reclaimThread(table, orgID, threadID, runID string, read int64) types.TransactWriteItem {
	return newUpd().cond("running", "$ = ?", s(runID)).add("ver", 1).
		apply(claimedAttempt(read)).update(table, threadKey(orgID, threadID))
}

// errThreadGone: a run claimed again is no longer its thread's running run
// (the thread is being deleted, with its runs).
var errThreadGone = errors.New("dynamo: the run's thread is being deleted")

// Finishes fenced by run attempt (store.FinishedRun.Attempt).
//
// FinishRun reads the run item, refuses an attempt that is not the running
// run's current one (fenceFinish) and conditions its write of the run item
// on that attempt (finishFence), in the transaction that also commits on the
// thread's version: a claim between the read and the commit (which bumps
// both) fails the commit, and the retry reads the new attempt and refuses.
// What a refused finish may leave: a temporary run's result (TRES), put
// before its transaction, is replaced by the current attempt's finish (or
// the abandon's) before any waiter can read it (a waiter reads it only once
// the run is gone).

// fenceFinish refuses, with store.ErrSuperseded, the finish of run item rit,
// running, by an attempt other than its current one. A run that is not
// running is left to FinishRun's own check (ErrStale).
func fenceFinish(rit item, f store.FinishedRun) error {
	if f.Attempt <= 0 || rit.str("status") != store.RunRunning {
		return nil
	}
	if cur := rit.num("attempt"); cur != int64(f.Attempt) {
		return fmt.Errorf("%w (finish of run %s by attempt %d; the run is at attempt %d)",
			store.ErrSuperseded, f.RunID, f.Attempt, cur)
	}
	return nil
}

// finishFence conditions a finish's write of the run item on its attempt.
func finishFence(attempt int) func(*upd) {
	return func(u *upd) {
		if attempt > 0 {
			u.cond("attempt", "$ = ?", n(int64(attempt)))
		}
	}
}

// Lease renewals fenced by run attempt (store.RunQueue.RenewLease): the
// renewal's update is conditioned on the attempt too (renewalFence); when
// its condition fails, fenceRenewal reads the run to say why.

// renewalFence conditions a renewal's update of the run item on attempt.
func renewalFence(attempt int) func(*upd) { return finishFence(attempt) }

// fenceRenewal is the error of a renewal whose condition failed:
// store.ErrSuperseded when it carried an attempt and the run is running
// under another one, else store.ErrStale.
func (db *DB) fenceRenewal(ctx context.Context, runKey map[string]types.AttributeValue, runID string, attempt int) error {
	if attempt <= 0 {
		return store.ErrStale
	}
	rit, err := db.get(ctx, db.tables.threads, runKey)
	if err != nil {
		return wrap("renew lease", err)
	}
	if rit != nil && rit.str("status") == store.RunRunning && rit.num("attempt") != int64(attempt) {
		return fmt.Errorf("%w (lease of run %s renewed by attempt %d; the run is at attempt %d)",
			store.ErrSuperseded, runID, attempt, rit.num("attempt"))
	}
	return store.ErrStale
}

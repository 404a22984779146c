package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/stepgraph/stepgraph/internal/store"
)

// fenceCheckpoint refuses, with store.ErrSuperseded, a checkpoint written
// for an attempt of its run that is no longer the run's current one (see
// store.Checkpoint.RunAttempt): the run must be running under that attempt.
// It runs in the transaction of the write, under the one writer, so no claim
// can slip in between the check and the write. A missing thread is
// store.ErrNotFound, as for an unfenced write.
func fenceCheckpoint(ctx context.Context, tx queryer, orgID string, cp store.Checkpoint) error {
	if cp.RunAttempt <= 0 || cp.RunID == "" {
		return nil
	}
	var status string
	var attempt int
	err := tx.QueryRowContext(ctx, `SELECT status, attempt FROM runs WHERE org_id = ? AND thread_id = ? AND id = ?`,
		orgID, cp.ThreadID, cp.RunID).Scan(&status, &attempt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if err := threadExists(ctx, tx, orgID, cp.ThreadID); err != nil {
			return err
		}
		return fmt.Errorf("%w (run %s no longer exists)", store.ErrSuperseded, cp.RunID)
	case err != nil:
		return mapErr("put checkpoint", err)
	case status != store.RunRunning || attempt != cp.RunAttempt:
		return fmt.Errorf("%w (checkpoint of run %s by attempt %d; the run is %s at attempt %d)",
			store.ErrSuperseded, cp.RunID, cp.RunAttempt, status, attempt)
	}
	return nil
}

// fenceFinish refuses, with store.ErrSuperseded, the finish of a running
// run r by an attempt (f.Attempt > 0) that is not the run's current one
// (see store.FinishedRun.Attempt). It reads r in the transaction of the
// finish, under the one writer, as fenceCheckpoint does. A run that is not
// running is left to FinishRun's own check (ErrStale, as without a fence).
func fenceFinish(r store.Run, f store.FinishedRun) error {
	if f.Attempt <= 0 || r.Status != store.RunRunning || r.Attempt == f.Attempt {
		return nil
	}
	return fmt.Errorf("%w (finish of run %s by attempt %d; the run is at attempt %d)",
		store.ErrSuperseded, r.ID, f.Attempt, r.Attempt)
}

// fenceRenewal says why a lease renewal changed nothing: store.ErrSuperseded
// when it carried an attempt (> 0) and the run is running under another
// one (see store.RunQueue.RenewLease), else store.ErrStale (the owner does
// not hold it, or it is gone or not running).
func fenceRenewal(ctx context.Context, tx queryer, runID string, attempt int) error {
	if attempt <= 0 {
		return store.ErrStale
	}
	r, err := getRunByID(ctx, tx, runID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.ErrStale
	case err != nil:
		return err
	case r.Status == store.RunRunning && r.Attempt != attempt:
		return fmt.Errorf("%w (lease of run %s renewed by attempt %d; the run is at attempt %d)",
			store.ErrSuperseded, runID, attempt, r.Attempt)
	}
	return store.ErrStale
}

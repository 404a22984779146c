package runs

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// What a step of a run's execution asks its driver to do next.
const (
	StepContinue = "continue" // call StepRun again at once
	StepWait     = "wait"     // call StepRun again after WaitSeconds
	StepDone     = "done"     // the run is terminal (or gone)
)

// StepResult is what StepRun answers: the input of the next step too.
type StepResult struct {
	RunID       string `json:"run_id"`
	Status      string `json:"status"`
	WaitSeconds int    `json:"wait_seconds"`
	// OrgID and ThreadID name the run's thread when Status is StepPark:
	// the parked task hands them to ParkRun.
	OrgID    string `json:"org_id,omitempty"`
	ThreadID string `json:"thread_id,omitempty"`
}

// DefaultStepBudget bounds how long one StepRun executes super-steps when
// its context has no deadline.
const DefaultStepBudget = 5 * time.Minute

// StepRun advances one run as the single execution that carries it (a Step
// Functions execution on AWS, calling it in a loop, with waited the
// WaitSeconds of the previous answer): it claims the run when
// it is its turn, executes super-steps until a checkpoint past its budget
// and stores what it did. The budget is Service.StepBudget, else half the
// time left before ctx's deadline (a Lambda's timeout), else
// DefaultStepBudget; a step always makes progress, however small the budget. A step that crashed
// is simply called again: the run resumes from its last checkpoint.
func (s *Service) StepRun(ctx context.Context, runID string, waited int, log *slog.Logger) (StepResult, error) {
	return s.StepRunWithin(ctx, runID, waited, 0, log)
}

// StepRunWithin is StepRun with the step's budget given by its driver (0:
// as StepRun decides it): the Express front of the run machine has a
// budget of its own, far shorter than the Lambda's timeout.
func (s *Service) StepRunWithin(ctx context.Context, runID string, waited int, budget time.Duration, log *slog.Logger) (StepResult, error) {
	if log == nil {
		log = slog.Default()
	}
	res := StepResult{RunID: runID}
	// On AWS no process runs the workers' loop: the run worker sweeps
	// expired threads, at most once per sweepEvery per instance.
	defer s.sweepThrottled(ctx, log)
	now := s.now()
	run, ok, err := s.Store.ClaimRunByID(ctx, runID, executionOwner(runID), now, now.Add(s.leaseDuration()), s.perOrg())
	switch {
	case errors.Is(err, store.ErrNotFound):
		res.Status = StepDone
		return res, nil
	case err != nil:
		return res, err
	case !ok:
		res.Status, res.WaitSeconds = s.notClaimed(run, now, waited)
		if res.Status == StepWait && s.parks() && run.Status == store.RunPending && !run.NotBefore.After(now) {
			// Queued behind another run of its thread: wait to be woken
			// by its end rather than poll (a failed read: poll).
			if behind, err := s.queuedBehind(ctx, run); err == nil && behind {
				res = StepResult{RunID: runID, Status: StepPark, OrgID: run.OrgID, ThreadID: run.ThreadID}
			}
		}
		return res, nil
	}
	if budget <= 0 {
		budget = s.StepBudget
	}
	if budget <= 0 {
		budget = DefaultStepBudget
		if deadline, ok := ctx.Deadline(); ok {
			budget = time.Until(deadline) / 2
		}
	}
	if s.execute(ctx, run, log, s.now().Add(budget)) {
		res.Status = StepContinue
		return res, ctx.Err()
	}
	res.Status = StepDone
	return res, nil
}

// MaxTurnWait bounds the growing wait of a run whose thread is busy.
const MaxTurnWait = 30

// notClaimed says what to do about a run that could not be claimed. A run
// waiting for its turn on a busy thread, or for a free slot of its
// organization (MaxRunningPerOrg; it stays pending meanwhile), waits twice
// as long as the last time (waited), up to MaxTurnWait seconds: an
// execution that loops Step/Wait once a second behind a long run would use
// up Step Functions' 25,000 history events in under an hour (and pay a
// transition each time); at 30 s it lasts about 23 hours (9 events a loop).
func (s *Service) notClaimed(run store.Run, now time.Time, waited int) (string, int) {
	switch {
	case terminal(run.Status):
		return StepDone, 0
	case run.Status == store.RunPending && run.NotBefore.After(now):
		return StepWait, int(math.Ceil(run.NotBefore.Sub(now).Seconds()))
	default:
		return StepWait, min(max(2*waited, 1), MaxTurnWait) // another run has the thread, its organization no free slot, or another owner the run
	}
}

package runs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Dispatcher hands queued runs to whatever executes them. Without one
// (Service.Dispatcher nil) the in-process workers of StartWorkers claim
// them (Service.InProcess is that dispatcher, made explicit); on AWS,
// internal/dispatch/sfn starts one Step Functions execution per run, which
// drives StepRun until the run is done. internal/runs/dispatchtest is the
// contract both honour.
type Dispatcher interface {
	// Dispatch makes sure run gets executed. Calling it twice for one run
	// is harmless.
	Dispatch(ctx context.Context, run store.Run) error
	// Lost reports whether run's execution ended, or never started,
	// without settling run. Waiters then end the run with an error rather
	// than wait forever.
	Lost(ctx context.Context, run store.Run) (bool, error)
}

// KindExecutionLost is the __error__ of a run whose execution was lost.
const KindExecutionLost = "ExecutionLost"

// InProcess is the Dispatcher a nil Service.Dispatcher stands for. Dispatch
// wakes a worker of StartWorkers in this process; workers claim queued runs
// from the store under a lease, so a run is executed once however often it
// is dispatched. Lost is always false: the lease of a worker that crashed
// expires, and another worker resumes the run.
func (s *Service) InProcess() Dispatcher { return inProcess{s} }

type inProcess struct{ s *Service }

func (d inProcess) Dispatch(context.Context, store.Run) error {
	d.s.wake.poke()
	return nil
}

func (inProcess) Lost(context.Context, store.Run) (bool, error) { return false, nil }

// dispatcher is the Dispatcher in effect.
func (s *Service) dispatcher() Dispatcher {
	if s.Dispatcher != nil {
		return s.Dispatcher
	}
	return s.InProcess()
}

// dispatch starts run's execution. When that fails the run is abandoned
// (it would hold its thread forever) and the error returned.
func (s *Service) dispatch(ctx context.Context, run store.Run) error {
	err := s.dispatcher().Dispatch(ctx, run)
	if err == nil {
		return nil
	}
	if aerr := s.AbandonRun(context.WithoutCancel(ctx), run.ID, "the run could not be started: "+err.Error()); aerr != nil {
		return errors.Join(err, aerr)
	}
	return err
}

// executionOwner is the lease owner of the one execution that carries a
// run on AWS: a retried step of the execution takes the run back at once
// (its invocation crashed, or may still be executing: the heartbeat of an
// attempt whose run was claimed again stops it, see holds).
func executionOwner(runID string) string { return "execution:" + runID }

// AbandonRun ends a run that nothing will execute any more with an
// ExecutionLost error: when its execution failed for good or was lost. A
// terminal or deleted run is left alone; a pending run that is not first
// in its thread's queue is interrupted instead, so the queue moves on.
func (s *Service) AbandonRun(ctx context.Context, runID, reason string) error {
	now := s.now()
	owner := executionOwner(runID)
	// No cap: ending a run must not wait for its organization's slots.
	r, ok, err := s.Store.ClaimRunByID(ctx, runID, owner, now, now.Add(s.leaseDuration()), 0)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	case !ok && terminal(r.Status):
		return nil
	case !ok && r.Status == store.RunPending:
		_, err := s.Store.CancelRun(ctx, r.OrgID, r.ThreadID, r.ID, store.CancelInterrupt, now)
		if err == nil {
			s.wakeAfter(ctx, r, slog.Default())
		}
		return ignoreNotFound(err)
	case !ok:
		owner = r.LeaseOwner // running under a lease its lost execution held
	}
	e := graph.Error{Kind: KindExecutionLost, Message: reason}
	// Fenced by the attempt read (the one this claim made, or the lost
	// execution's): an attempt claimed since carries the run, and is left to.
	f := store.FinishedRun{OrgID: r.OrgID, ThreadID: r.ThreadID, RunID: r.ID, LeaseOwner: owner, Attempt: r.Attempt, Now: now,
		Status: store.RunError, ThreadStatus: store.ThreadError,
		Result: mustJSON(map[string]any{"__error__": e}), Error: mustJSON(e)}
	s.newStreamer(ctx, r, slog.Default()).end(f, nil) // the error event of a resumable stream
	if err := s.Store.FinishRun(ctx, f); errors.Is(err, store.ErrSuperseded) {
		return nil
	} else if err != nil && !errors.Is(err, store.ErrStale) {
		return err
	}
	s.finished(r, f.Result)
	s.wakeAfter(ctx, r, slog.Default())
	return nil
}

func ignoreNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// lostSilence is how long a run must have been silent (unchanged in the
// store: not claimed, stepped or settled) before a waiter asks the
// dispatcher whether its execution was lost, and how often one waiter asks
// after that. On AWS a failed, timed-out or aborted execution is reported
// by Step Functions itself (an EventBridge rule hands it to the run
// worker's abandon, internal/lambdaapp), so the waiters' DescribeExecution
// is only the repair of a lost report; asked every 10 s by every waiter it
// was the first Step Functions quota to give (review #11: 1,000 waiters
// ask 100 times a second against a refill of about 15). Ten minutes is
// longer than a step (a Lambda's timeout), so a run being executed is never
// silent that long.
var lostSilence = 10 * time.Minute

// lostWatch is one waiter's lost-execution check.
type lostWatch struct{ asked time.Time }

// due says whether the waiter should ask now about r, and notes that it does.
func (w *lostWatch) due(r store.Run, now time.Time) bool {
	if now.Sub(r.UpdatedAt) < lostSilence || now.Sub(w.asked) < lostSilence {
		return false
	}
	w.asked = now
	return true
}

// checkLost abandons r when its execution is lost; it reports whether it did.
func (s *Service) checkLost(ctx context.Context, r store.Run) bool {
	lost, err := s.dispatcher().Lost(ctx, r)
	if err != nil || !lost {
		return false
	}
	return s.AbandonRun(ctx, r.ID, "the run's execution ended without finishing it") == nil
}

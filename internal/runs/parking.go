package runs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// StepPark asks the run's driver to wait until it is woken (a Step
// Functions .waitForTaskToken task on AWS), then step again: the run is
// queued behind another run of its thread, whose end wakes it.
const StepPark = "park"

// Waker wakes a parked execution by its token (internal/dispatch/sfn:
// SendTaskSuccess). A token nothing waits on any more is not an error.
type Waker interface {
	Wake(ctx context.Context, token string) error
}

// Parking lets the execution of a run queued behind another run of its
// thread wait to be woken instead of polling in Wait/Step loops (review
// #12: a transition and a Lambda invocation per loop, and the execution's
// 25,000 history events used up after about a day). The token is stored
// with the run (store.RunParking); whoever ends a run of the thread (the
// run worker finishing or abandoning it) wakes the next run if it is
// parked. A wake-up that is lost (the waking Lambda crashed, SendTaskSuccess
// failed) is repaired by the driver: a parked task times out
// (internal/awsflow: 15 minutes) and steps again. Zero: off, queued runs
// poll (the local server, whose workers claim queued runs themselves).
type Parking struct {
	Store store.RunParking
	Waker Waker
}

func (s *Service) parks() bool { return s.Parking.Store != nil && s.Parking.Waker != nil }

// maxQueueRead bounds the runs read to decide who is next on a thread.
const maxQueueRead = 1000

// startsBefore is the order in which a thread's pending runs start
// (store.RunQueue ClaimRunByID: oldest NotBefore, then oldest CreatedAt).
func startsBefore(a, b store.Run) bool {
	if !a.NotBefore.Equal(b.NotBefore) {
		return a.NotBefore.Before(b.NotBefore)
	}
	return a.CreatedAt.Before(b.CreatedAt)
}

// queuedBehind reports whether run, pending and due, waits for another run
// of its thread: one running, or one pending that starts before it. Then
// the end of that run wakes it; otherwise (its organization has no free
// slot) it keeps polling, since no run of its thread will wake it.
func (s *Service) queuedBehind(ctx context.Context, run store.Run) (bool, error) {
	running, err := s.Store.ListRuns(ctx, run.OrgID, run.ThreadID, store.RunRunning, 1, 0)
	if err != nil || len(running) > 0 {
		return len(running) > 0, err
	}
	pending, err := s.Store.ListRuns(ctx, run.OrgID, run.ThreadID, store.RunPending, maxQueueRead, 0)
	if err != nil {
		return false, err
	}
	for _, p := range pending {
		if p.ID != run.ID && startsBefore(p, run) {
			return true, nil
		}
	}
	return false, nil
}

// ParkRun stores the token of the parked execution of a queued run, then
// wakes the thread's next run, which may be this one: the run ahead may
// have ended between the step that asked to park and now, and its worker
// then found no token to wake (the store's strong consistency orders the
// two: the token is written before the queue is read here, and the run
// ahead ended before its worker read the tokens). A run that is gone or no
// longer pending is woken at once: its next step says what to do.
func (s *Service) ParkRun(ctx context.Context, orgID, threadID, runID, token string, log *slog.Logger) error {
	if !s.parks() {
		return errors.New("runs: parking is not configured")
	}
	if log == nil {
		log = slog.Default()
	}
	ok, err := s.Parking.Store.ParkRun(ctx, orgID, threadID, runID, token)
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && !ok:
		return s.Parking.Waker.Wake(ctx, token)
	case err != nil:
		return err
	}
	return s.wakeNext(ctx, orgID, threadID, log)
}

// wakeNext wakes the first run in start order of the thread when it is
// parked, due and nothing runs on the thread. Nothing to do (the usual
// case: no run of the thread is parked) costs one query of the thread's
// runs.
func (s *Service) wakeNext(ctx context.Context, orgID, threadID string, log *slog.Logger) error {
	if !s.parks() {
		return nil
	}
	parked, err := s.Parking.Store.ParkedRuns(ctx, orgID, threadID)
	if err != nil || len(parked) == 0 {
		return err
	}
	if behind, err := s.headIsRunning(ctx, orgID, threadID); err != nil || behind {
		return ignoreNotFound(err)
	}
	pending, err := s.Store.ListRuns(ctx, orgID, threadID, store.RunPending, maxQueueRead, 0)
	if err != nil {
		return ignoreNotFound(err)
	}
	now := s.now()
	var head *store.Run
	for i, p := range pending {
		if !p.NotBefore.After(now) && (head == nil || startsBefore(p, *head)) {
			head = &pending[i]
		}
	}
	if head == nil {
		return nil
	}
	for _, p := range parked {
		if p.Run.ID == head.ID {
			log.Info("waking the thread's next run", "next_run_id", head.ID)
			return s.Parking.Waker.Wake(ctx, p.Token)
		}
	}
	return nil // the head is not parked: it claims the thread by itself
}

func (s *Service) headIsRunning(ctx context.Context, orgID, threadID string) (bool, error) {
	running, err := s.Store.ListRuns(ctx, orgID, threadID, store.RunRunning, 1, 0)
	return len(running) > 0, err
}

// parkedBefore reads the thread's parked runs before a request ends runs
// without a worker (cancelling a pending run, deleting a thread): once
// their records are gone or ended their tokens can no longer be read, and
// their executions would wait for the park's timeout (15 minutes) to find
// them ended. Nil when nothing parks; a failed read is logged, since the
// timeout still repairs it.
func (s *Service) parkedBefore(ctx context.Context, orgID, threadID string, log *slog.Logger) []store.ParkedRun {
	if !s.parks() {
		return nil
	}
	parked, err := s.Parking.Store.ParkedRuns(ctx, orgID, threadID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		log.Warn("read the thread's parked runs; they step again when their parks time out", "thread_id", threadID, "error", err.Error())
	}
	return parked
}

// wakeEnded wakes the parked executions of the runs ended (ended reports
// which), so each steps at once and finds its run ended or gone.
func (s *Service) wakeEnded(ctx context.Context, parked []store.ParkedRun, ended func(store.Run) bool, log *slog.Logger) {
	if len(parked) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, p := range parked {
		if !ended(p.Run) {
			continue
		}
		if err := s.Parking.Waker.Wake(ctx, p.Token); err != nil {
			log.Warn("wake an ended run's parked execution; it steps again when its park times out", "run_id", p.Run.ID, "error", err.Error())
		}
	}
}

// wakeAfter wakes the thread's next run once run ended, logging a failure:
// the parked run's timeout repairs a wake-up that did not happen.
func (s *Service) wakeAfter(ctx context.Context, run store.Run, log *slog.Logger) {
	if !s.parks() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.wakeNext(ctx, run.OrgID, run.ThreadID, log); err != nil {
		log.Warn("wake the thread's next run; its parked execution steps again when its park times out",
			"run_id", run.ID, "error", err.Error())
	}
}

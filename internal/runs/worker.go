package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// errLeaseLost / errCancelled are the causes a run's context ends with.
var (
	errLeaseLost = errors.New("lease lost")
	errShutdown  = errors.New("worker shutting down")
)

type cancelled struct{ action string }

func (c cancelled) Error() string { return "run cancelled (" + c.action + ")" }

// DefaultWorkers is how many runs a process executes at once unless told
// otherwise: graphs mostly wait on I/O (models, tools, the store's commits),
// so many more than the cores; a sync run's steps commit together with the
// other runs' (group commit), so more runs at once also means fewer fsyncs.
const DefaultWorkers = 64

// DefaultMaxRunningPerOrg is how many runs of one organization execute at
// once unless told otherwise (Service.MaxRunningPerOrg): a quarter of
// DefaultWorkers, so that one organization that keeps its runs going
// (however long they last, however many it queues) leaves three quarters of
// the workers to the others, and it takes four such organizations to fill
// them; organizations then take turns at every free worker (store.RunQueue
// ClaimRun), so none waits more than a round. On AWS, where every run has
// its own execution and no pool of workers, it bounds an organization's
// share of the Lambda concurrency and of the tables' throughput the same
// way.
const DefaultMaxRunningPerOrg = 16

// perOrg is the cap the store is asked to hold (0: none).
func (s *Service) perOrg() int {
	switch {
	case s.MaxRunningPerOrg < 0:
		return 0
	case s.MaxRunningPerOrg == 0:
		return DefaultMaxRunningPerOrg
	}
	return s.MaxRunningPerOrg
}

// StartWorkers starts n workers that claim and execute queued runs until
// stop is called. stop waits for them; a run cut short by stop keeps its
// checkpoints and its lease is released so the next start resumes it.
func (s *Service) StartWorkers(n int, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	owner := "worker-" + uuid.NewString()
	var wg sync.WaitGroup
	wg.Go(func() { s.sweepEvents(ctx, log) })
	wg.Go(func() { s.sweepThreads(ctx, log) })
	wg.Go(func() { s.pollQueue(ctx) })
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.workLoop(ctx, owner, log)
		}()
	}
	return func() {
		cancel(errShutdown)
		wg.Wait()
	}
}

func (s *Service) leaseDuration() time.Duration {
	if s.LeaseDuration > 0 {
		return s.LeaseDuration
	}
	return 10 * time.Second
}

func (s *Service) workLoop(ctx context.Context, owner string, log *slog.Logger) {
	polled := false // woken by the poll, not by a queued run
	for ctx.Err() == nil {
		now := s.now()
		run, ok, err := s.Store.ClaimRun(ctx, owner, now, now.Add(s.leaseDuration()), s.perOrg())
		if err != nil && ctx.Err() == nil {
			log.Error("claim a run", "error", err.Error())
		}
		if !ok {
			// A run queued since the claim left a wake-up pending.
			select {
			case <-s.wake.wait():
			case <-s.polled.wait():
				polled = true
			case <-ctx.Done():
			}
			continue
		}
		if polled {
			// The poll found a run: there may be more, which the next
			// idle worker looks for; a claim that finds none ends it.
			s.polled.poke()
		}
		polled = false
		s.execute(ctx, run, log, time.Time{})
	}
}

// pollQueue wakes one idle worker every poll interval, for what no
// wake-up announces: runs queued by another process, runs whose
// NotBefore came, leases that expired. One poll for the process rather
// than one per worker: 64 idle workers each claiming five times a second
// were a large share of an idle or lightly loaded server's CPU.
func (s *Service) pollQueue(ctx context.Context) {
	tick := time.NewTicker(s.pollInterval())
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.polled.poke()
		case <-ctx.Done():
			return
		}
	}
}

// execute runs one claimed run to a terminal state, or until its lease is
// lost or the worker stops (another attempt resumes it then), or until the
// first checkpoint stored after yieldAt when that is not zero (a step of a
// Step Functions execution: the next step resumes it). It reports whether
// the run is still unfinished.
func (s *Service) execute(parent context.Context, run store.Run, log *slog.Logger, yieldAt time.Time) (unfinished bool) {
	timeout := s.RunTimeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	// The run's time counts from its first start, across resumptions.
	ctx, cancelTimeout := context.WithDeadline(ctx, run.StartedAt.Add(timeout))
	defer cancelTimeout()
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		s.heartbeat(ctx, cancel, run)
	}()

	stream := s.newStreamer(ctx, run, log)
	defer stream.flush() // chunks of an attempt that stops early
	stream.start()
	var out graph.Outcome
	var cp *graph.Checkpoint
	var err error
	if max := s.Limits.maxAttempts(); yieldAt.IsZero() && run.Attempt > max {
		// Every earlier start ended without the run finishing: whatever
		// stops its process (say, it crashes it) would again. Ending it
		// here is what lets a server with such runs come up and serve
		// (and its stream still ends, with the error, below).
		out = failedOutcome(graph.KindLimit, fmt.Sprintf("the run was started %d times without finishing, the limit of attempts: "+
			"the process executing it stopped each time (crashed, restarted or lost its lease); it is not resumed again", run.Attempt-1))
	} else {
		out, cp, err = s.runGraph(ctx, run, yieldAt, stream)
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(err, errYield):
		// The next step of the execution claims the run at once: the
		// lease is given up (after the last renewal, which would take it
		// back), not left to expire.
		cancel(errYield)
		<-beating
		// Fenced by the attempt: a retry that claimed the run since keeps
		// its lease.
		if _, err := s.Store.RenewLease(context.WithoutCancel(ctx), run.ID, run.LeaseOwner, run.Attempt, s.now().Add(-time.Millisecond)); errors.Is(err, store.ErrSuperseded) {
			log.Info("run superseded: a newer attempt executes it, this one stops", "run_id", run.ID, "attempt", run.Attempt, "reason", err.Error())
		} else if err != nil {
			log.Warn("release the lease of a yielding run; the next step waits for it to expire", "run_id", run.ID, "error", err.Error())
		}
		return true
	case errors.Is(cause, errShutdown) || errors.Is(cause, errLeaseLost):
		if errors.Is(cause, errShutdown) {
			s.releaseLease(ctx, run)
		}
		return true
	case parent.Err() != nil && !errors.As(cause, new(cancelled)):
		// The invocation executing the run ended first (a Lambda's
		// deadline, its caller gone): what the engine has is a step cut
		// short, not the run's outcome. The next step executes it again
		// from the last checkpoint (the attempts limit bounds a node that
		// always outlives its invocation).
		log.Warn("the invocation executing the run ended mid-step; the next step resumes it", "run_id", run.ID,
			"attempt", run.Attempt, "cause", context.Cause(parent).Error())
		s.releaseLease(ctx, run)
		return true
	case errors.Is(err, store.ErrSuperseded):
		// A newer attempt claimed the run (a retried step of its execution)
		// before this one's heartbeat noticed: the store refused this
		// attempt's checkpoint, so it stops without a trace in the run.
		log.Info("run superseded: a newer attempt executes it, this one stops", "run_id", run.ID, "attempt", run.Attempt, "reason", err.Error())
		return true
	case err != nil && ctx.Err() == nil:
		log.Error("run failed in the store; it resumes after its lease expires", "run_id", run.ID, "error", err.Error())
		return true
	}
	// The state is serialized once for the thread's values and the
	// result (the same bytes when the run ended without interrupts).
	var values []byte
	if cp != nil {
		var err error
		if values, err = valuesJSON(cp.Values, s.latest.encoder(run.OrgID, run.ThreadID)); err != nil {
			values = mustJSON(cp.Values)
		}
	}
	var c cancelled
	// Fenced by the attempt, as its checkpoints are: a step retried after
	// this attempt's last checkpoint (the same lease owner) has claimed the
	// run again, and only that newer attempt may settle it.
	f := store.FinishedRun{OrgID: run.OrgID, ThreadID: run.ThreadID, RunID: run.ID, LeaseOwner: run.LeaseOwner,
		Attempt: run.Attempt, Now: s.now()}
	switch {
	case errors.As(cause, &c):
		f.Status, f.ThreadStatus = store.RunInterrupted, store.ThreadIdle
		f.Result = mustJSON(map[string]any{"__error__": graph.Error{Kind: "UserInterrupt", Message: "User interrupted the run"}})
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		f.Status, f.ThreadStatus = store.RunTimeout, store.ThreadError
		e := graph.Error{Kind: graph.KindTimeout, Message: "run exceeded " + timeout.String()}
		f.Result, f.Error = mustJSON(map[string]any{"__error__": e}), mustJSON(e)
	default:
		s.settle(&f, out, cp, values)
	}
	if cp != nil {
		f.Values = values
		f.Interrupts = mustJSON(cp.InterruptsByTask())
	}
	stream.end(f, cp) // before the run is terminal: a follower that sees it so has every event
	if err := s.Store.FinishRun(context.WithoutCancel(ctx), f); err != nil {
		if errors.Is(err, store.ErrSuperseded) {
			log.Info("run superseded: a newer attempt executes it, this one stops", "run_id", run.ID, "attempt", run.Attempt, "reason", err.Error())
			return true
		}
		log.Error("finish run", "run_id", run.ID, "error", err.Error())
		return !errors.Is(err, store.ErrStale)
	}
	s.finished(run, f.Result)
	s.wake.poke() // the thread may have a queued run
	s.wakeAfter(ctx, run, log)
	s.notify(ctx, run, f, cp)
	return false
}

// releaseLease gives up this attempt's lease (fenced by the attempt), so
// the run's next step claims it at once instead of waiting for it to expire.
// It keeps ctx's values (the tenant session of the run's organization on
// AWS), not its end, which may be what made the run yield.
func (s *Service) releaseLease(ctx context.Context, run store.Run) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.Store.RenewLease(ctx, run.ID, run.LeaseOwner, run.Attempt, s.now())
}

// notify delivers the run's webhook, if it asked for one, in the background.
func (s *Service) notify(ctx context.Context, run store.Run, f store.FinishedRun, cp *graph.Checkpoint) {
	var kw kwargs
	if s.Webhooks == nil || json.Unmarshal(run.Kwargs, &kw) != nil || kw.Webhook == nil {
		return
	}
	run.Status, run.UpdatedAt = f.Status, f.Now
	view := runView(run)
	payload := map[string]any{
		"run_id": view.RunID, "thread_id": view.ThreadID, "assistant_id": view.AssistantID,
		"created_at": view.CreatedAt, "updated_at": view.UpdatedAt, "metadata": view.Metadata,
		"kwargs": view.Kwargs, "multitask_strategy": view.MultitaskStrategy, "status": f.Status,
		"run_started_at": formatTime(run.StartedAt), "run_ended_at": formatTime(f.Now), "values": nil,
	}
	if cp != nil {
		payload["values"] = cp.Values
	}
	if len(f.Error) > 0 {
		var e graph.Error
		if json.Unmarshal(f.Error, &e) == nil {
			payload["error"] = e.Kind + ": " + e.Message
		}
	}
	s.Webhooks.Deliver(ctx, run.OrgID, *kw.Webhook, payload)
}

// settle maps the engine's outcome onto the run, the thread and the body;
// cpValues is cp's values as JSON.
func (s *Service) settle(f *store.FinishedRun, out graph.Outcome, cp *graph.Checkpoint, cpValues []byte) {
	values := map[string]any{}
	if cp != nil && cp.Values != nil {
		for k, v := range cp.Values {
			values[k] = v
		}
	}
	switch out.Status {
	case graph.Failed:
		e := out.Error
		if e == nil {
			e = &graph.Error{Kind: graph.KindGeneric, Message: "run failed"}
		}
		f.Status, f.ThreadStatus = store.RunError, store.ThreadError
		f.Result, f.Error = mustJSON(map[string]any{"__error__": e}), mustJSON(e)
	case graph.Interrupted:
		f.Status, f.ThreadStatus = store.RunSuccess, store.ThreadInterrupted
		if len(out.Interrupts) > 0 {
			values["__interrupt__"] = resultInterrupts(out.Interrupts)
		}
		f.Result = mustJSON(values)
	default:
		f.Status, f.ThreadStatus = store.RunSuccess, store.ThreadIdle
		if cp != nil && cp.Values != nil {
			f.Result = cpValues // the same members as values
		} else {
			f.Result = mustJSON(values)
		}
	}
}

// heartbeat keeps the lease until ctx ends, cancelling the run when the
// lease is lost or someone asked to cancel it. It looks every poll interval
// with a read, and writes (renews) only once a third of the lease has
// passed since the last write: on AWS the lease outlasts the Lambda that
// holds it (the Step Functions execution owns the run), so a step renews
// at most a few times, not once a second per running run (review #3).
func (s *Service) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, run store.Run) {
	renewEvery := s.leaseDuration() / 3
	every := renewEvery
	if every > s.pollInterval() {
		every = s.pollInterval()
	}
	renewed := s.now()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var r store.Run
		var err error
		if now := s.now(); now.Sub(renewed) >= renewEvery {
			r, err = s.Store.RenewLease(ctx, run.ID, run.LeaseOwner, run.Attempt, now.Add(s.leaseDuration()))
			if err == nil {
				renewed = now
			}
		} else if r, err = s.Store.Run(ctx, run.OrgID, run.ThreadID, run.ID); err == nil && !holds(r, run) {
			err = store.ErrStale // settled or taken over meanwhile
		}
		switch {
		case errors.Is(err, store.ErrStale) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrSuperseded):
			cancel(errLeaseLost)
			return
		case err == nil && r.CancelAction != "":
			cancel(cancelled{action: r.CancelAction})
			return
		}
	}
}

// holds says whether the attempt that claimed run still holds it as stored
// in r: running, under its owner, and not claimed again since (a store's
// claim by the same owner increments the attempt).
func holds(r, run store.Run) bool {
	return r.Status == store.RunRunning && r.LeaseOwner == run.LeaseOwner && r.Attempt == run.Attempt
}

// errYield stops a run at a checkpoint once its yieldAt has passed.
var errYield = errors.New("step budget used up")

// runGraph executes the run's graph from the right checkpoint and stores
// checkpoints as the run's durability asks, reporting to stream what the
// engine does. With a non-zero yieldAt it stops
// with errYield at the first checkpoint after yieldAt, once that checkpoint
// is stored whatever the durability: the next attempt resumes from it.
func (s *Service) runGraph(ctx context.Context, run store.Run, yieldAt time.Time, stream *streamer) (graph.Outcome, *graph.Checkpoint, error) {
	var kw kwargs
	if err := json.Unmarshal(run.Kwargs, &kw); err != nil {
		return failedOutcome(graph.KindValue, "stored run is unreadable: "+err.Error()), nil, nil
	}
	a, err := s.Store.Assistant(ctx, run.OrgID, run.AssistantID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return failedOutcome(graph.KindValue, "assistant "+run.AssistantID+" no longer exists"), nil, nil
	case err != nil:
		return graph.Outcome{}, nil, err // the store failed: the run resumes later
	}
	stream.graphID = a.GraphID
	g, fg, failed, err := s.revisionGraph(ctx, run.OrgID, a.GraphID, kw.GraphRevision)
	switch {
	case err != nil:
		return graph.Outcome{}, nil, err // passing: the run resumes later
	case failed != "":
		return failedOutcome(graph.KindValue, failed), nil, nil
	case fg != nil:
		// A language runtime executes it; in a step with a budget it stops
		// on a call that yielded past it, and the next step continues.
		return s.runForeign(ctx, run, kw, a.GraphID, fg, stream, yieldAt)
	}
	if max := s.Limits.maxRecursionLimit(); kw.RecursionLimit > max {
		// Stored before the maximum was set (or lowered): requests above it
		// are refused now, and such a run ends rather than running them.
		return failedOutcome(graph.KindLimit, fmt.Sprintf("config.recursion_limit %d is above this server's maximum of %d", kw.RecursionLimit, max)), nil, nil
	}
	p := parsed{kw: kw}
	input, err := kw.input()
	if err != nil {
		return failedOutcome(graph.KindValue, err.Error()), nil, nil
	}
	from, resumed, err := s.startingPoint(ctx, run, kw)
	if err != nil {
		return failedOutcome(graph.KindValue, err.Error()), nil, nil
	}
	sink, put := s.streamSink(ctx, run, kw.Durability, from, stream)
	if !yieldAt.IsZero() {
		first := !resumed // Begin's checkpoint: yielding there would make no progress
		stored := put
		put = func(ctx context.Context, cp graph.Checkpoint) error {
			if err := stored(ctx, cp); err != nil {
				return err
			}
			if first || s.now().Before(yieldAt) {
				first = false
				return nil
			}
			if err := sink.keep(ctx, cp); err != nil {
				return err
			}
			return errYield
		}
	}
	opts := p.options(s.Limits)
	opts.Metadata = runMetadata(run)
	opts.Observe = stream.observe
	if !yieldAt.IsZero() && (sink.mode == "sync" || sink.mode == "async") {
		// A step of a Step Functions execution can be cut short by its
		// Lambda's time limit and retried (review #16): each task of a
		// super-step is recorded as it completes, in place of the step's
		// checkpoint (in order with the others), so the retry runs only
		// the tasks that had not. Runs with durability exit write one
		// checkpoint per run, and stateless runs none: their retried
		// super-step runs whole.
		opts.Pending = func(cp graph.Checkpoint) {
			if err := sink.put(context.WithoutCancel(ctx), cp); err != nil {
				stream.log.Warn("record a completed task of the step; a retried step runs it again", "run_id", run.ID, "error", err.Error())
			}
		}
	}
	var cp graph.Checkpoint
	var out graph.Outcome
	if resumed {
		// This run's own work, after a crash or a yield: its counts go on,
		// so its limits hold across resumptions.
		cp, out, err = graph.Continue(ctx, g, *from, opts, put)
	} else {
		cp, out, err = graph.Run(ctx, g, from, input, opts, put)
	}
	if ferr := sink.flush(context.WithoutCancel(ctx)); err == nil {
		err = ferr
	}
	if serr := stream.failed(); err == nil {
		err = serr
	}
	if errors.Is(err, errYield) {
		return out, &cp, err
	}
	if fail.KindOf(err) == fail.KindQuota {
		// Over its organization's quota the run cannot store its work: it
		// ends, saying so, rather than resuming into the same refusal.
		return failedOutcome(graph.KindLimit, fail.MessageOf(err)), &cp, nil
	}
	if err != nil && ctx.Err() != nil {
		err = nil // reported through the context's cause
	}
	return out, &cp, err
}

func failedOutcome(kind, msg string) graph.Outcome {
	return graph.Outcome{Status: graph.Failed, Error: &graph.Error{Kind: kind, Message: msg}}
}

// input is the engine input of the run: a command, a state object or nil.
func (kw kwargs) input() (any, error) {
	if kw.Command != nil {
		return parseCommand(*kw.Command)
	}
	if len(kw.Input) == 0 || string(kw.Input) == "null" {
		return nil, nil
	}
	var in any
	dec := json.NewDecoder(bytesReader(kw.Input))
	dec.UseNumber()
	err := dec.Decode(&in)
	return in, err
}

// startingPoint picks the checkpoint a run starts from: its own latest one
// when it is resuming after a crash (resumed), the requested one when it
// forks, else the thread's latest (nil for a new thread).
// runMetadata is the run's metadata as its nodes see it: the caller's,
// with assistant_id always the run's assistant (graph documents' `auth`
// scopes a token to it, so a caller's metadata must not name another).
func runMetadata(run store.Run) map[string]any {
	meta := map[string]any{}
	if len(run.Metadata) > 0 {
		_ = json.Unmarshal(run.Metadata, &meta) // written by CreateRun from an object; unreadable is empty
	}
	if meta == nil {
		meta = map[string]any{}
	}
	meta["assistant_id"] = run.AssistantID
	return meta
}

func (s *Service) startingPoint(ctx context.Context, run store.Run, kw kwargs) (*graph.Checkpoint, bool, error) {
	latest, cached, err := s.latestCheckpoint(ctx, run.OrgID, run.ThreadID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		latest = store.Checkpoint{}
	case err != nil:
		return nil, false, err
	}
	if latest.ID != "" && latest.RunID == run.ID {
		cp, err := decodeCheckpoint(latest)
		return cp, true, err
	}
	if kw.CheckpointID != "" {
		at, err := s.Store.Checkpoint(ctx, run.OrgID, run.ThreadID, kw.CheckpointID)
		if err != nil {
			return nil, false, errors.New("checkpoint " + kw.CheckpointID + " not found on the thread")
		}
		cp, err := decodeCheckpoint(at)
		return cp, false, err
	}
	if latest.ID == "" {
		return nil, false, nil
	}
	if cached != nil {
		return cached, false, nil // the engine clones it: the cached copy stays as stored
	}
	cp, err := decodeCheckpoint(latest)
	return cp, false, err
}

func decodeCheckpoint(c store.Checkpoint) (*graph.Checkpoint, error) {
	var cp graph.Checkpoint
	if err := json.Unmarshal(c.Data, &cp); err != nil {
		return nil, err
	}
	return &cp, nil
}

// resultInterrupts is a run's pending interrupts as its output carries them:
// LangGraph's Interrupt whole, response_schema included (none here), as
// upstream's server answers a wait or a join.
func resultInterrupts(in []graph.Interrupt) []map[string]any {
	out := make([]map[string]any, len(in))
	for i, it := range in {
		out[i] = map[string]any{"id": it.ID, "value": it.Value, "response_schema": nil}
	}
	return out
}

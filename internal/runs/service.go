package runs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Messages of the upstream Python server, kept verbatim: SDK users match on them.
const (
	msgNotFound = "Thread or assistant not found."
	msgBusy     = "Thread is already running a task. Wait for it to finish or choose a different multitask strategy."
)

// Store is the storage of the assistants, threads and runs use cases: the
// store ports of those records and of checkpoints (a store.Store has them
// all).
type Store interface {
	store.Assistants
	store.Threads
	store.RunQueue
	store.Checkpoints
	store.CheckpointStorage
	store.Accounting
}

// Service runs the assistants, threads and runs use cases. Workers (see
// StartWorkers) execute the runs it queues.
type Service struct {
	Store Store
	// Graphs are the built-in graphs.
	Graphs *graph.Registry
	// Deployed serves the graphs of the organizations' deployments; nil:
	// only the built-in graphs run.
	Deployed DeployedGraphs
	Now      func() time.Time // time.Now when nil
	// PollInterval bounds how long a waiter or the idle workers may miss
	// a change made by another process (default 200 ms): one idle worker
	// looks every interval, and more while it finds runs.
	PollInterval time.Duration
	// LeaseDuration is how long a worker owns a run without renewing it;
	// after a crash its runs resume once it expired (default 10 s).
	LeaseDuration time.Duration
	// RunTimeout ends a run with status timeout (default 1 h).
	RunTimeout time.Duration
	// Webhooks checks webhook URLs and delivers notifications; nil refuses
	// runs that ask for a webhook.
	Webhooks Notifier
	// Dispatcher starts queued runs; nil means the workers of StartWorkers
	// in this process.
	Dispatcher Dispatcher
	// Parking lets the executions of queued runs wait to be woken rather
	// than poll (see Parking); zero: they poll.
	Parking Parking
	// StepBudget bounds how long one StepRun executes super-steps (see
	// StepRun for the default).
	StepBudget time.Duration
	// StageContext, when set, is the context stage-wide maintenance done
	// within a run's step runs under (the sweep of expired threads, which
	// reaches every organization's threads): the AWS root runs a step's
	// own work in a session of the run's organization and strips it here.
	StageContext func(context.Context) context.Context
	// MaxRunningPerOrg caps the runs of one organization that execute at
	// once, across processes: a run over the cap stays pending until one of
	// its organization's runs ends. 0 means DefaultMaxRunningPerOrg;
	// negative, no cap.
	MaxRunningPerOrg int
	// Limits bound what a run may use and what an organization may store
	// (their defaults when zero).
	Limits Limits

	// Events keeps the events of resumable run streams; nil: runs asking
	// for stream_resumable are refused.
	Events store.Events
	// EventRetention is how long a resumable run's events are kept after
	// the run can last have ended (RunTimeout after they were written);
	// DefaultEventRetention when 0.
	EventRetention time.Duration
	// StreamBufferEvents and StreamBufferBytes bound what one follower of
	// a run may have pending before it is dropped as too slow
	// (DefaultStreamBufferEvents, DefaultStreamBufferBytes when 0).
	StreamBufferEvents int
	StreamBufferBytes  int
	// ChunkWindow and ChunkBatch coalesce the token chunks of a resumable
	// run into one event-log write: a chunk waits at most ChunkWindow, and
	// at most ChunkBatch chunk events wait (DefaultChunkWindow,
	// DefaultChunkBatch when 0). Chunks of other runs are not held.
	ChunkWindow time.Duration
	ChunkBatch  int
	// TailEvents says that the runs this service follows execute in other
	// processes (the AWS functions: the run worker is another Lambda), so
	// the in-process hub never sees their events. A run created by a
	// stream request is then made resumable, so that its worker writes its
	// events to the event log, and a stream of a resumable run reads the
	// log as it grows (tail.go) instead of the hub. Needs Events.
	TailEvents bool
	// TailPollMin and TailPollMax bound the backoff of a tailing stream,
	// and of a thread event protocol stream, between reads of an idle log
	// (DefaultTailPollMin, DefaultTailPollMax when 0).
	TailPollMin, TailPollMax time.Duration

	// fakeAfter stands in for time.After in tests of read schedules (a
	// fake clock); nil: time.After.
	fakeAfter func(time.Duration) <-chan time.Time

	defaults defaults
	streams  feeds
	wake     wakeup
	polled   pollToken
	// latest spares a run decoding the checkpoint it starts from when this
	// process stored it (cpcache.go).
	latest latestCache
	// lastSweep is when this process last swept expired threads from a
	// run step (unix nanoseconds).
	lastSweep atomic.Int64
}

func (s *Service) now() time.Time {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return now().UTC().Truncate(time.Microsecond)
}

// after is time.After, or a test's fake clock.
func (s *Service) after(d time.Duration) <-chan time.Time {
	if s.fakeAfter != nil {
		return s.fakeAfter(d)
	}
	return time.After(d)
}

func (s *Service) pollInterval() time.Duration {
	if s.PollInterval > 0 {
		return s.PollInterval
	}
	return 200 * time.Millisecond
}

// Notifier delivers a run's webhook; webhooks.Sender is the implementation.
type Notifier interface {
	// Check reports why url cannot be a webhook (a fail.Invalid naming "webhook").
	Check(url string) error
	// Deliver posts payload to url in the background, under ctx's values
	// but not its end.
	Deliver(ctx context.Context, orgID, url string, payload map[string]any)
}

// CreateRun validates a run request and queues the run. threadID is "" for
// a stateless run (a new thread, deleted afterwards unless on_completion is
// keep). Every failure here has a real status code; once it returns a run,
// outcomes are reported through the run.
func (s *Service) CreateRun(ctx context.Context, orgID, threadID string, req RunRequest) (Run, error) {
	return s.createRun(ctx, orgID, threadID, req, uuid.Must(uuid.NewV7()).String())
}

// createRun is CreateRun with the new run's id chosen by the caller (a
// stream subscribes to the run before it exists).
func (s *Service) createRun(ctx context.Context, orgID, threadID string, req RunRequest, runID string) (Run, error) {
	stateless := threadID == ""
	p, err := parse(req, stateless, s.Limits)
	if err != nil {
		return Run{}, err
	}
	p.kw.Protocol = req.protocol
	if p.kw.Resumable && s.Events == nil {
		return Run{}, fail.Invalid("stream_resumable", "is not supported by this server: it keeps no event log")
	}
	if p.kw.Webhook != nil {
		if s.Webhooks == nil {
			return Run{}, fail.Invalid("webhook", "is not enabled on this server")
		}
		if err := s.Webhooks.Check(*p.kw.Webhook); err != nil {
			return Run{}, err
		}
	}
	if !stateless {
		if _, err := uuid.Parse(threadID); err != nil {
			return Run{}, fail.Invalid("thread_id", "Invalid thread ID: must be a UUID")
		}
		threadID = strings.ToLower(threadID)
	}
	a, err := s.resolveAssistant(ctx, orgID, *req.AssistantID)
	if fail.KindOf(err) == fail.KindNotFound {
		return Run{}, fail.NotFound(msgNotFound)
	}
	if err != nil {
		return Run{}, err
	}
	r, err := s.currentGraph(ctx, orgID, a.GraphID)
	if fail.KindOf(err) == fail.KindNotFound {
		return Run{}, fail.NotFound(msgNotFound)
	}
	if err != nil {
		return Run{}, err
	}
	if err := r.g.CheckOptions(p.options(s.Limits)); err != nil {
		return Run{}, fail.Invalid("body", "%v", err)
	}
	if r.foreign() != nil && slices.Contains(p.kw.StreamMode, modeEvents) {
		return Run{}, fail.Invalid("stream_mode", "events is not supported yet for the graphs of LangGraph apps (the other modes are)")
	}
	if err := r.checkInput(p.input); err != nil {
		return Run{}, err
	}
	if p.kw.Protocol {
		p.kw.ProtocolGraph = a.GraphID
	}
	if r.deployed != nil {
		// The run executes on this revision, whatever is deployed when it
		// starts or resumes.
		rev := r.deployed.Revision
		p.kw.GraphRevision = &rev
	}
	if stateless {
		threadID = uuid.NewString()
	}
	if err := s.checkQuota(ctx, orgID, s.threadsCreated(ctx, orgID, threadID, stateless, p.ifNotExists)); err != nil {
		return Run{}, err
	}
	now := s.now()
	// As upstream: the run's metadata is the assistant's (a graph's own
	// assistant: created_by system) under the request's.
	meta := map[string]any{}
	_ = json.Unmarshal(a.Metadata, &meta)
	for k, v := range p.metadata {
		meta[k] = v
	}
	meta["assistant_id"] = a.ID
	threadMeta := map[string]any{}
	for k, v := range p.metadata {
		threadMeta[k] = v
	}
	threadMeta["graph_id"], threadMeta["assistant_id"] = a.GraphID, a.ID
	run := store.Run{
		ID: runID, OrgID: orgID, ThreadID: threadID, AssistantID: a.ID, Status: store.RunPending,
		Metadata: mustJSON(meta), Kwargs: mustJSON(p.kw), MultitaskStrategy: p.multitask,
		Temporary: p.kw.Temporary, CreatedAt: now, UpdatedAt: now,
		NotBefore: now.Add(time.Duration(p.afterSeconds * float64(time.Second))),
	}
	ifBusy, cancel := ifInflight(p.multitask)
	stored, _, err := s.Store.AddRun(ctx, store.NewRun{Run: run,
		CreateThread: stateless || p.ifNotExists == "create", ThreadMetadata: mustJSON(threadMeta),
		// Upstream marks an existing thread with what ran on it last:
		// thread lists (agent-chat-ui, Studio) and update_state read it.
		StampMetadata: mustJSON(map[string]any{"graph_id": a.GraphID, "assistant_id": a.ID}),
		ThreadConfig:  threadConfigAfterRun(a.Config, p.kw.Config),
		IfInflight:    ifBusy, CancelAction: cancel})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Run{}, fail.NotFound(msgNotFound)
	case errors.Is(err, store.ErrBusy):
		return Run{}, fail.Conflict(msgBusy)
	case err != nil:
		return Run{}, err
	}
	if err := s.dispatch(ctx, stored); err != nil {
		return Run{}, err
	}
	return runView(stored), nil
}

// threadsCreated is how many threads storing the run creates: 1 for a
// stateless run, or one with if_not_exists "create" on a missing thread.
func (s *Service) threadsCreated(ctx context.Context, orgID, threadID string, stateless bool, ifNotExists string) int64 {
	switch {
	case stateless:
		return 1
	case ifNotExists != "create" || s.Limits.MaxThreads == 0:
		return 0
	}
	if _, err := s.Store.Thread(ctx, orgID, threadID); errors.Is(err, store.ErrNotFound) {
		return 1
	}
	return 0
}

// options are the engine options of a run under limits.
func (p parsed) options(limits Limits) graph.Options {
	o := graph.Options{RecursionLimit: p.kw.RecursionLimit, InterruptBefore: p.kw.InterruptBefore, InterruptAfter: p.kw.InterruptAfter,
		Limits: limits.Graph()}
	if len(p.kw.Context) > 0 {
		_ = json.Unmarshal(p.kw.Context, &o.Context)
	}
	return o
}

// Wait blocks until the run is terminal and returns the runs/wait body. It
// returns ctx's error when the caller gave up first.
func (s *Service) Wait(ctx context.Context, orgID, threadID, runID string) (json.RawMessage, error) {
	sub := s.streams.subscribe(runKey(runID), false, 0, 0)
	defer sub.Close()
	tick := time.NewTicker(s.pollInterval() * 25) // a fallback: runs finished here are announced
	defer tick.Stop()
	var lost lostWatch
	for {
		r, err := s.Store.Run(ctx, orgID, threadID, runID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return s.temporaryResult(ctx, orgID, runID, sub)
		case err != nil:
			return nil, err
		case terminal(r.Status):
			return rawOr(r.Result, "null"), nil
		case lost.due(r, s.now()):
			if s.checkLost(ctx, r) {
				continue // settled: read it again
			}
		}
		select {
		case <-sub.Ready():
			if _, state, res := sub.Take(); state == subEnded {
				return res, nil
			}
		case <-tick.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// temporaryResult answers for a temporary run whose thread is gone: it ended.
// A run finished in this process publishes its result right after; one
// finished elsewhere left it in the store for a while. Past that, the
// upstream answer is {} too.
func (s *Service) temporaryResult(ctx context.Context, orgID, runID string, sub *Subscription) (json.RawMessage, error) {
	if _, state, res := sub.Take(); state == subEnded {
		return res, nil
	}
	res, err := s.Store.TemporaryResult(ctx, orgID, runID, s.now())
	if err == nil {
		return res, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	select {
	case <-sub.Ready():
		if _, state, res := sub.Take(); state == subEnded {
			return res, nil
		}
		return json.RawMessage("{}"), nil
	case <-time.After(s.pollInterval() * 25):
		return json.RawMessage("{}"), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// GetRun returns one run.
func (s *Service) GetRun(ctx context.Context, orgID, threadID, runID string) (Run, error) {
	r, err := s.run(ctx, orgID, threadID, runID)
	if err != nil {
		return Run{}, err
	}
	return runView(r), nil
}

// Join waits for an existing run and returns its runs/wait body.
func (s *Service) Join(ctx context.Context, orgID, threadID, runID string) (json.RawMessage, error) {
	r, err := s.run(ctx, orgID, threadID, runID)
	if err != nil {
		return nil, err
	}
	return s.Wait(ctx, orgID, r.ThreadID, r.ID)
}

// ListRuns lists a thread's runs, newest first.
func (s *Service) ListRuns(ctx context.Context, orgID, threadID, status string, limit, offset int) ([]Run, error) {
	t, err := s.thread(ctx, orgID, threadID)
	if err != nil {
		return nil, err
	}
	list, err := s.Store.ListRuns(ctx, orgID, t.ID, status, limit, offset)
	if err != nil {
		return nil, err
	}
	out := make([]Run, 0, len(list))
	for _, r := range list {
		out = append(out, runView(r))
	}
	return out, nil
}

// CancelRun stops an inflight run: interrupt keeps its finished steps,
// rollback deletes it with its checkpoints.
func (s *Service) CancelRun(ctx context.Context, orgID, threadID, runID, action string) (Run, error) {
	if action == "" {
		action = store.CancelInterrupt
	}
	if action != store.CancelInterrupt && action != store.CancelRollback {
		return Run{}, fail.Invalid("action", "must be one of interrupt, rollback")
	}
	r, err := s.run(ctx, orgID, threadID, runID)
	if err != nil {
		return Run{}, err
	}
	before := r
	var parked []store.ParkedRun
	if before.Status == store.RunPending {
		parked = s.parkedBefore(ctx, orgID, r.ThreadID, slog.Default())
	}
	r, err = s.Store.CancelRun(ctx, orgID, r.ThreadID, r.ID, action, s.now())
	if err != nil {
		return Run{}, notFoundAs(err, "run %s not found", runID)
	}
	if !terminal(before.Status) && terminal(r.Status) {
		// Settled at once (it was pending): no worker will announce it,
		// nor wake its parked execution or the run now first in line.
		s.finished(r, r.Result)
		s.wakeEnded(ctx, parked, func(p store.Run) bool { return p.ID == r.ID }, slog.Default())
		s.wakeAfter(ctx, r, slog.Default())
	}
	return runView(r), nil
}

// DeleteRun removes a terminal run.
func (s *Service) DeleteRun(ctx context.Context, orgID, threadID, runID string) error {
	r, err := s.run(ctx, orgID, threadID, runID)
	if err != nil {
		return err
	}
	err = s.Store.DeleteRun(ctx, orgID, r.ThreadID, r.ID)
	if errors.Is(err, store.ErrBusy) {
		return fail.Conflict("run %s is still %s; cancel it first", runID, r.Status)
	}
	return notFoundAs(err, "run %s not found", runID)
}

func (s *Service) run(ctx context.Context, orgID, threadID, runID string) (store.Run, error) {
	t, err := s.thread(ctx, orgID, threadID)
	if err != nil {
		return store.Run{}, err
	}
	if _, err := uuid.Parse(runID); err != nil {
		return store.Run{}, fail.Invalid("run_id", "must be a UUID")
	}
	r, err := s.Store.Run(ctx, orgID, t.ID, strings.ToLower(runID))
	return r, notFoundAs(err, "run %s not found", runID)
}

func terminal(status string) bool {
	return status != store.RunPending && status != store.RunRunning
}

// wakeup lets idle workers sleep until a run may be claimable. Each poke
// wakes one sleeping worker (or the next one to sleep): queuing k runs
// wakes k workers, which claim them in parallel, rather than every idle
// worker racing to claim each run (a write transaction each, all but one
// for nothing).
type wakeup struct {
	once sync.Once
	ch   chan struct{} // pending wake-ups
}

// maxPendingWakeups bounds the wake-ups kept for busy workers; past it a
// poke is dropped, which loses nothing: that many wake-ups are pending, and
// workers poll the store anyway.
const maxPendingWakeups = 256

func (w *wakeup) tokens() chan struct{} {
	w.once.Do(func() { w.ch = make(chan struct{}, maxPendingWakeups) })
	return w.ch
}

// wait returns the channel a sleeping worker receives its wake-up on.
func (w *wakeup) wait() <-chan struct{} { return w.tokens() }

// poke wakes one worker.
func (w *wakeup) poke() {
	select {
	case w.tokens() <- struct{}{}:
	default:
	}
}

// pollToken is the poll's wake-up: at most one pending, so that polls
// missed while every worker was busy do not pile up.
type pollToken struct {
	once sync.Once
	ch   chan struct{}
}

func (p *pollToken) token() chan struct{} {
	p.once.Do(func() { p.ch = make(chan struct{}, 1) })
	return p.ch
}

func (p *pollToken) wait() <-chan struct{} { return p.token() }

func (p *pollToken) poke() {
	select {
	case p.token() <- struct{}{}:
	default:
	}
}

package runs

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Following a run's or a thread's stream: what POST .../runs/stream, GET
// .../runs/{id}/stream and GET /threads/{id}/stream serve. A RunStream
// reads the run's feed in this process (feeds) and, for a resumable run,
// its event log: events written before the client came (Last-Event-ID),
// and the rest of the log once the run ended. The HTTP framing is the
// api package's.

// ErrStreamDropped ends a stream whose client read too slowly: it fell
// further behind than its buffer holds. A client of a resumable run
// reconnects with Last-Event-ID and misses nothing.
var ErrStreamDropped = errors.New("the client fell behind the run's stream and was dropped; reconnect with Last-Event-ID (stream_resumable runs replay what was missed)")

// Thread stream modes (GET /threads/{id}/stream?stream_mode=).
const (
	ThreadModeRunModes    = "run_modes"    // every event of the thread's runs
	ThreadModeLifecycle   = "lifecycle"    // runs starting and ending (metadata events)
	ThreadModeStateUpdate = "state_update" // a client's writes of the thread's state (UpdateState)
)

var threadStreamModes = []string{ThreadModeRunModes, ThreadModeLifecycle, ThreadModeStateUpdate}

// replayPage is how many logged events a stream reads at once.
const replayPage = 500

// RunStream is one client's stream of a run, or of a thread's runs.
type RunStream struct {
	s                      *Service
	orgID, threadID, runID string
	sub                    *Subscription
	thread                 bool            // a thread stream: it ends only with its client
	modes                  map[string]bool // what the client asked for; nil: everything
	resumable              bool
	next                   int64       // resumable: the id of the next event to deliver
	replaying              bool        // the log may hold events not delivered yet
	ended                  bool        // the run is terminal: the stream ends after what is left
	lost                   lostWatch   // when this stream last asked whether the run's execution was lost
	backoff                idleBackoff // tail.go: the wait before the next read of an idle log
	tt                     *threadTail // tail.go: a tailing thread stream's runs
}

// Close ends the stream's subscription.
func (rs *RunStream) Close() { rs.sub.Close() }

// RunID is the streamed run's id ("" for a thread stream).
func (rs *RunStream) RunID() string { return rs.runID }

// CreateRunStream creates a run as CreateRun does and returns its stream,
// subscribed before the run exists so that no event is missed.
func (s *Service) CreateRunStream(ctx context.Context, orgID, threadID string, req RunRequest) (Run, *RunStream, error) {
	runID := uuid.Must(uuid.NewV7()).String()
	rs := &RunStream{s: s, orgID: orgID, runID: runID, sub: s.subscribe(runKey(runID))}
	if s.TailEvents && s.Events != nil {
		// The worker is elsewhere: only the event log carries the run's
		// events here, so a streamed run is always logged (and its events
		// carry ids a reconnect resumes from).
		req.StreamResumable = &[]bool{true}[0]
	}
	run, err := s.createRun(ctx, orgID, threadID, req, runID)
	if err != nil {
		rs.Close()
		return Run{}, nil, err
	}
	rs.threadID = run.ThreadID
	rs.resumable = req.StreamResumable != nil && *req.StreamResumable
	return run, rs, nil
}

func (s *Service) subscribe(key string) *Subscription {
	events, bytes := s.StreamBufferEvents, s.StreamBufferBytes
	if events <= 0 {
		events = DefaultStreamBufferEvents
	}
	if bytes <= 0 {
		bytes = DefaultStreamBufferBytes
	}
	return s.streams.subscribe(key, true, events, bytes)
}

// JoinRunStream follows an existing run. lastEventID is the Last-Event-ID
// header: "" follows from now on; "-1" (or "-") replays the whole kept
// stream first; an event id replays what came after it. Only runs created
// with stream_resumable keep their events; for the others the stream is
// live whatever lastEventID says. modes narrows the events to those stream
// modes (metadata and error events always pass).
func (s *Service) JoinRunStream(ctx context.Context, orgID, threadID, runID, lastEventID string, modes []string) (Run, *RunStream, error) {
	filter, err := modeFilter("stream_mode", modes, streamModes)
	if err != nil {
		return Run{}, nil, err
	}
	after, err := parseLastEventID(lastEventID)
	if err != nil {
		return Run{}, nil, err
	}
	r, err := s.run(ctx, orgID, threadID, runID)
	if err != nil {
		return Run{}, nil, err
	}
	rs := &RunStream{s: s, orgID: orgID, threadID: r.ThreadID, runID: r.ID, modes: filter, sub: s.subscribe(runKey(r.ID))}
	// Subscribed first, read again after: a run that ends in between is
	// seen terminal here, or its end reaches the subscription.
	if r, err = s.Store.Run(ctx, orgID, r.ThreadID, r.ID); err != nil {
		rs.Close()
		return Run{}, nil, notFoundAs(err, "run %s not found", runID)
	}
	var kw kwargs
	_ = json.Unmarshal(r.Kwargs, &kw)
	rs.resumable = kw.Resumable && s.Events != nil
	rs.ended = terminal(r.Status)
	if rs.resumable {
		rs.next = 0
		if lastEventID != "" {
			next, err := s.Events.NextRunEventSeq(ctx, orgID, r.ID, s.now())
			if err != nil {
				rs.Close()
				return Run{}, nil, err
			}
			if after >= next {
				rs.Close()
				return Run{}, nil, fail.Invalid("Last-Event-ID", "run %s has no event %d: its stream's last event is %d", r.ID, after, next-1)
			}
			rs.next, rs.replaying = after+1, true
		} else {
			// Live from now on: what the log holds is not replayed.
			next, err := s.Events.NextRunEventSeq(ctx, orgID, r.ID, s.now())
			if err != nil {
				rs.Close()
				return Run{}, nil, err
			}
			rs.next = next
		}
	}
	return runView(r), rs, nil
}

// JoinThreadStream follows every run of a thread, from now on, until the
// client leaves. modes are thread stream modes (run_modes when empty).
// Thread streams do not replay: a lastEventID is refused.
func (s *Service) JoinThreadStream(ctx context.Context, orgID, threadID, lastEventID string, modes []string) (*RunStream, error) {
	if len(modes) == 0 {
		modes = []string{ThreadModeRunModes}
	}
	filter, err := modeFilter("stream_mode", modes, threadStreamModes)
	if err != nil {
		return nil, err
	}
	if lastEventID != "" {
		return nil, fail.Invalid("Last-Event-ID", "thread streams are live only: their events have no ids to resume from (join a run's stream of a stream_resumable run to replay it)")
	}
	t, err := s.thread(ctx, orgID, threadID)
	if err != nil {
		return nil, err
	}
	rs := &RunStream{s: s, orgID: orgID, threadID: t.ID, thread: true, modes: filter, sub: s.subscribe(threadKey(orgID, t.ID))}
	if s.TailEvents {
		rs.tt = &threadTail{since: s.now(), runs: map[string]*tailedRun{}, done: map[string]bool{}}
	}
	return rs, nil
}

// modeFilter checks the modes a client asked for; nil means all.
func modeFilter(field string, modes, allowed []string) (map[string]bool, error) {
	var set map[string]bool
	for _, m := range modes {
		if m == "" {
			continue // an absent value, as some clients send it
		}
		if !slices.Contains(allowed, m) {
			return nil, fail.Invalid(field, "%q is not one of %s", m, strings.Join(allowed, ", "))
		}
		if set == nil {
			set = map[string]bool{}
		}
		set[m] = true
	}
	return set, nil
}

// parseLastEventID reads a Last-Event-ID: the event to resume after, -1
// for "from the start". "" (absent) gives -1 too; the caller tells them
// apart.
func parseLastEventID(v string) (int64, error) {
	switch strings.TrimSpace(v) {
	case "", "-", "-1":
		return -1, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fail.Invalid("Last-Event-ID", "%q is not an event id of this server: ids are whole numbers (-1 replays from the start)", v)
	}
	return n, nil
}

// Next waits up to wait for the stream's next events. It returns them (in
// order), or done when the stream is over: the run ended and everything
// was delivered. With nothing to say within wait it returns neither, so
// the caller can send a keep-alive. It fails with ErrStreamDropped when
// the client fell behind, and with ctx's error when the client left.
func (rs *RunStream) Next(ctx context.Context, wait time.Duration) ([]StreamEvent, bool, error) {
	if rs.resumable && !rs.thread && rs.s.TailEvents {
		return rs.tail(ctx, wait)
	}
	if rs.thread && rs.s.TailEvents && rs.s.Events != nil {
		return rs.tailThread(ctx, wait)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	poll := time.NewTimer(rs.s.pollInterval() * 25) // a fallback: a run ending here is announced
	defer poll.Stop()
	for {
		if rs.replaying {
			evs, err := rs.replay(ctx)
			if err != nil {
				return nil, false, err
			}
			if len(evs) > 0 {
				return evs, false, nil
			}
		}
		if rs.ended && !rs.replaying {
			// The store can show the run ended (the poll below) before this
			// subscription was read: the worker publishes every event, then
			// stores the run terminal. What is pending is delivered first.
			select {
			case <-rs.sub.Ready():
				evs, state, _ := rs.sub.Take()
				if state == subDropped {
					return nil, false, ErrStreamDropped
				}
				if evs = rs.filter(evs); len(evs) > 0 {
					return evs, false, nil
				}
			default:
			}
			return nil, true, nil
		}
		select {
		case <-rs.sub.Ready():
			evs, state, _ := rs.sub.Take()
			evs = rs.filter(evs)
			switch state {
			case subDropped:
				return nil, false, ErrStreamDropped
			case subEnded:
				rs.end()
			}
			if len(evs) > 0 {
				return evs, false, nil
			}
		case <-poll.C:
			if err := rs.checkEnded(ctx); err != nil {
				return nil, false, err
			}
			poll.Reset(rs.s.pollInterval() * 25)
		case <-timer.C:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// end marks the run terminal; a resumable run's log is read to its end
// (events logged by an attempt in another process reach no feed here).
func (rs *RunStream) end() {
	rs.ended = true
	rs.replaying = rs.resumable
}

// checkEnded asks the store whether the run ended (it may have ended in
// another process, or been settled without a worker).
func (rs *RunStream) checkEnded(ctx context.Context) error {
	if rs.thread {
		return nil
	}
	r, err := rs.s.Store.Run(ctx, rs.orgID, rs.threadID, rs.runID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		rs.end()
	case err != nil:
		return err
	case terminal(r.Status):
		rs.end()
	case rs.lost.due(r, rs.s.now()):
		rs.s.checkLost(ctx, r)
	}
	return nil
}

// replay reads the next page of the run's event log.
func (rs *RunStream) replay(ctx context.Context) ([]StreamEvent, error) {
	page, err := rs.s.Events.RunEvents(ctx, rs.orgID, rs.runID, rs.next-1, replayPage, rs.s.now())
	if err != nil {
		return nil, err
	}
	if len(page) < replayPage {
		rs.replaying = false
	}
	evs := make([]StreamEvent, len(page))
	for i, e := range page {
		evs[i] = StreamEvent{ID: e.Seq, Event: e.Event, Data: e.Data}
	}
	return rs.filter(evs), nil
}

// filter drops what the client already has (a resumable run's events
// delivered from the log and the feed both) and what it did not ask for.
func (rs *RunStream) filter(evs []StreamEvent) []StreamEvent {
	out := evs[:0:0]
	for _, e := range evs {
		if rs.thread {
			e.ID = -1 // thread streams have no ids to resume from
			if rs.keepThread(e) {
				out = append(out, e)
			}
			continue
		}
		if rs.resumable && e.ID >= 0 {
			if e.ID < rs.next {
				continue
			}
			rs.next = e.ID + 1
		}
		if rs.keep(e.Event) {
			out = append(out, e)
		}
	}
	return out
}

// keep applies a join's stream_mode: the mode of the event, with its
// subgraph namespace left out, must be asked for; metadata and errors
// always pass, and messages-tuple and messages cover every messages event.
func (rs *RunStream) keep(event string) bool {
	if rs.modes == nil {
		return true
	}
	mode, _, _ := strings.Cut(event, "|")
	switch {
	case mode == "metadata" || mode == "error" || rs.modes[mode]:
		return true
	case strings.HasPrefix(mode, "messages"):
		return rs.modes[modeMessages] || rs.modes[modeMessagesTuple]
	}
	return false
}

// keepThread applies a thread stream's modes, as the Python server does:
// run_modes passes every run event, lifecycle the metadata events of runs
// starting ({run_id, attempt}) and ending ({status: run_done}).
func (rs *RunStream) keepThread(e StreamEvent) bool {
	switch {
	case rs.modes[ThreadModeRunModes] && e.Event != "state_update":
		return true
	case rs.modes[ThreadModeStateUpdate] && e.Event == "state_update":
		return true
	}
	return rs.modes[ThreadModeLifecycle] && e.Event == "metadata"
}

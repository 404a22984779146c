package runs

import (
	"context"
	"encoding/json"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Tailing the event log: how a stream follows a run executed in another
// process (Service.TailEvents; on AWS the run worker is another Lambda, so
// the in-process hub of feeds.go never sees the run's events). The worker
// writes every batch of a resumable run's events to the log before the run
// is terminal (streamer.send, then FinishRun), so a stream that reads the
// log until it comes back empty after it saw the run terminal has every
// event. The reads are pages of replayPage events; between reads of an
// idle log the stream backs off from TailPollMin to TailPollMax, and a
// page with events resets it. The log is generic: whatever the streamer
// wrote (coalesced token chunks included) is read back as it was written.

// Defaults of the tail's backoff (Service.TailPollMin, TailPollMax).
const (
	DefaultTailPollMin = 50 * time.Millisecond
	DefaultTailPollMax = time.Second
)

func (s *Service) tailPoll() (lo, hi time.Duration) {
	lo, hi = s.TailPollMin, s.TailPollMax
	if lo <= 0 {
		lo = DefaultTailPollMin
	}
	if hi <= 0 {
		hi = DefaultTailPollMax
	}
	return lo, max(lo, hi)
}

// idleBackoff is the wait between reads of a quiet event log: TailPollMin
// after the first empty read, doubling up to TailPollMax; a read that finds
// events resets it. Run streams that tail (below) and the thread event
// protocol's stream (protocol_stream.go) read their logs on it.
type idleBackoff time.Duration

// quiet notes an empty read and says how long to wait before the next.
func (b *idleBackoff) quiet(s *Service) time.Duration {
	lo, hi := s.tailPoll()
	*b = idleBackoff(min(max(time.Duration(*b)*2, lo), hi))
	return time.Duration(*b)
}

// active notes a read that found events: the next wait starts over.
func (b *idleBackoff) active() { *b = 0 }

// tail is Next for a resumable run followed through the log only.
func (rs *RunStream) tail(ctx context.Context, wait time.Duration) ([]StreamEvent, bool, error) {
	deadline := time.Now().Add(wait)
	for {
		ended := rs.ended // seen terminal before this read: the read is the last one needed
		page, n, err := rs.readLog(ctx)
		if err != nil {
			return nil, false, err
		}
		if len(page) > 0 {
			rs.backoff.active()
			return page, false, nil
		}
		if n > 0 {
			continue // a full page of events the client did not ask for
		}
		if ended {
			return nil, true, nil
		}
		if err := rs.checkEnded(ctx); err != nil {
			return nil, false, err
		}
		if rs.ended {
			continue // read once more: the worker logged its last events before it ended the run
		}
		sleep := min(rs.backoff.quiet(rs.s), time.Until(deadline))
		if sleep <= 0 {
			return nil, false, nil // quiet: the caller sends a heartbeat
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		case <-t.C:
		}
	}
}

// readLog reads the next page of the log; it returns the events the
// client asked for and how many were read.
func (rs *RunStream) readLog(ctx context.Context) ([]StreamEvent, int, error) {
	page, err := rs.s.Events.RunEvents(ctx, rs.orgID, rs.runID, rs.next-1, replayPage, rs.s.now())
	if err != nil {
		return nil, 0, err
	}
	evs := make([]StreamEvent, len(page))
	for i, e := range page {
		evs[i] = StreamEvent{ID: e.Seq, Event: e.Event, Data: e.Data}
	}
	return rs.filter(evs), len(page), nil
}

// Thread streams (GET /threads/{id}/stream) that tail: the thread's runs
// are listed (its newest threadTailRuns) at each poll; a resumable run's
// events are read from its log — from its first event for a run created
// after the client joined, from then on for one already going — and a run
// that is not logged shows only its lifecycle: a metadata event when it
// starts and {"status": "run_done"} when it ends, as for every run.

// threadTailRuns is how many of a thread's newest runs a tailing thread
// stream follows.
const threadTailRuns = 20

// threadTail is a thread stream's view of its thread's runs.
type threadTail struct {
	since time.Time
	runs  map[string]*tailedRun
	done  map[string]bool // ended (or ended before the client came): not followed
}

type tailedRun struct {
	resumable bool
	next      int64 // resumable: the next event to read
	started   bool  // not logged: its start was announced
}

// tailThread is Next for a thread stream followed through the store.
func (rs *RunStream) tailThread(ctx context.Context, wait time.Duration) ([]StreamEvent, bool, error) {
	if rs.tt == nil {
		rs.tt = &threadTail{since: rs.s.now(), runs: map[string]*tailedRun{}, done: map[string]bool{}}
	}
	deadline := time.Now().Add(wait)
	for {
		evs, err := rs.pollThread(ctx)
		if err != nil {
			return nil, false, err
		}
		if evs = rs.filter(evs); len(evs) > 0 {
			rs.backoff.active()
			return evs, false, nil
		}
		sleep := min(rs.backoff.quiet(rs.s), time.Until(deadline))
		if sleep <= 0 {
			return nil, false, nil
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		case <-t.C:
		}
	}
}

// pollThread reads what happened in the thread's runs since the last poll.
func (rs *RunStream) pollThread(ctx context.Context) ([]StreamEvent, error) {
	list, err := rs.s.Store.ListRuns(ctx, rs.orgID, rs.threadID, "", threadTailRuns, 0)
	if err != nil {
		return nil, err
	}
	tt := rs.tt
	var out []StreamEvent
	listed := map[string]bool{}
	for i := len(list) - 1; i >= 0; i-- { // oldest first
		r := list[i]
		listed[r.ID] = true
		if tt.done[r.ID] {
			continue
		}
		ended := terminal(r.Status) // read before the log: the log then has every event
		tr := tt.runs[r.ID]
		if tr == nil {
			fresh := !r.CreatedAt.Before(tt.since)
			if ended && !fresh {
				tt.done[r.ID] = true
				continue
			}
			var kw kwargs
			_ = json.Unmarshal(r.Kwargs, &kw)
			tr = &tailedRun{resumable: kw.Resumable}
			if tr.resumable && !fresh {
				if tr.next, err = rs.s.Events.NextRunEventSeq(ctx, rs.orgID, r.ID, rs.s.now()); err != nil {
					return nil, err
				}
			}
			tt.runs[r.ID] = tr
		}
		drained := true
		if tr.resumable {
			page, err := rs.s.Events.RunEvents(ctx, rs.orgID, r.ID, tr.next-1, replayPage, rs.s.now())
			if err != nil {
				return nil, err
			}
			for _, e := range page {
				out = append(out, StreamEvent{ID: -1, Event: e.Event, Data: e.Data})
				tr.next = e.Seq + 1
			}
			drained = len(page) < replayPage
		} else if !tr.started && r.Status != store.RunPending {
			tr.started = true
			b, _ := json.Marshal(map[string]any{"run_id": r.ID, "attempt": max(r.Attempt, 1)})
			out = append(out, StreamEvent{ID: -1, Event: "metadata", Data: b})
		}
		if ended && drained {
			b, _ := json.Marshal(map[string]any{"status": "run_done", "run_id": r.ID})
			out = append(out, StreamEvent{ID: -1, Event: "metadata", Data: b})
			delete(tt.runs, r.ID)
			tt.done[r.ID] = true
		}
	}
	for id := range tt.done {
		if !listed[id] {
			delete(tt.done, id) // out of the window: it will not be listed again
		}
	}
	for id := range tt.runs {
		if !listed[id] {
			delete(tt.runs, id) // pushed out by newer runs (or deleted)
		}
	}
	return out, nil
}

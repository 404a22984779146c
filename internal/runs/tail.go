package runs

import (
	"context"
	"time"
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

// tail is Next for a resumable run followed through the log only.
func (rs *RunStream) tail(ctx context.Context, wait time.Duration) ([]StreamEvent, bool, error) {
	deadline := time.Now().Add(wait)
	lo, hi := rs.s.tailPoll()
	for {
		ended := rs.ended // seen terminal before this read: the read is the last one needed
		page, n, err := rs.readLog(ctx)
		if err != nil {
			return nil, false, err
		}
		if len(page) > 0 {
			rs.backoff = 0
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
		rs.backoff = min(max(rs.backoff*2, lo), hi)
		sleep := min(rs.backoff, time.Until(deadline))
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

package runs

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
)

// EventStreamRequest is the body of POST /threads/{id}/stream/events (the
// protocol's EventStreamRequest): the channels and namespaces this
// connection wants, and the seq it resumes after.
type EventStreamRequest struct {
	Channels []string `json:"channels"`
	// Namespaces are prefixes (a segment without ":" also matches the
	// segment's name with any task id); nil: every namespace.
	Namespaces [][]string `json:"namespaces"`
	// Depth bounds how far below a prefix an event may be; nil: unbounded.
	Depth *int `json:"depth"`
	// Since replays the kept events with a greater seq first; nil replays
	// every kept event (the Python server's thread reader always starts at
	// the beginning of the thread's stream).
	Since *int64 `json:"since"`
}

// ThreadEventStream is one connection's stream of a thread's protocol
// events: the thread's event log after its cursor, then what the thread's
// protocol runs publish, filtered by the connection's request. It ends only
// with its client (or when the client falls too far behind).
type ThreadEventStream struct {
	s               *Service
	orgID, threadID string
	sub             *Subscription
	req             EventStreamRequest
	channels        map[string]bool
	cursor          int64 // the highest seq seen (delivered or filtered out)
	replaying       bool  // the log may hold events after cursor not seen yet
	// read fires when the log is due to be read again. It outlives one
	// Next: Next's wait is the heartbeat's, shorter than a quiet log's
	// backoff, so a timer made per Next would never fire.
	read    <-chan time.Time
	backoff idleBackoff
}

// Close ends the stream's subscription.
func (ts *ThreadEventStream) Close() { ts.sub.Close() }

// OpenThreadEvents checks req and opens the thread's event stream. Another
// organization's thread, like a missing one, is not found; a since past
// the thread's last event is not one of this server's cursors (422).
func (s *Service) OpenThreadEvents(ctx context.Context, orgID, threadID string, req EventStreamRequest) (*ThreadEventStream, error) {
	if s.Events == nil {
		return nil, fail.Invalid("body", "this server keeps no event log, so it serves no thread event stream")
	}
	channels, err := protocolChannelSet("channels", req.Channels)
	if err != nil {
		return nil, err
	}
	var c fail.Checks
	c.Add(req.Depth != nil && *req.Depth < 0, "depth", "must be 0 or more")
	c.Add(req.Since != nil && *req.Since < 0, "since", "must be a seq this server sent (0 or more)")
	if err := c.Err(); err != nil {
		return nil, err
	}
	t, err := s.thread(ctx, orgID, threadID)
	if err != nil {
		return nil, err
	}
	// Subscribed before the log is read: an event appended in between is
	// in one or the other.
	ts := &ThreadEventStream{s: s, orgID: orgID, threadID: t.ID, req: req, channels: channels,
		sub: s.subscribe(protoKey(orgID, t.ID)), replaying: true}
	if req.Since != nil {
		last, err := s.Events.LastThreadEventSeq(ctx, orgID, t.ID)
		if err != nil {
			ts.Close()
			return nil, err
		}
		if *req.Since > last {
			ts.Close()
			return nil, fail.Invalid("since", "thread %s has no event %d: its last event is %d", t.ID, *req.Since, last)
		}
		ts.cursor = *req.Since
	}
	return ts, nil
}

// protocolChannelSet checks channels against the protocol's.
func protocolChannelSet(field string, channels []string) (map[string]bool, error) {
	if len(channels) == 0 {
		return nil, fail.Invalid(field, "must name at least one channel")
	}
	set := map[string]bool{}
	for _, ch := range channels {
		if !slices.Contains(protocolChannels, ch) && !(strings.HasPrefix(ch, "custom:") && len(ch) > len("custom:")) {
			return nil, fail.Invalid(field, "%q is not one of %s, or custom:<name>", ch, strings.Join(protocolChannels, ", "))
		}
		set[ch] = true
	}
	return set, nil
}

// Next waits up to wait for the stream's next events, each framed as the
// protocol's event ({type, event_id, seq, method, params}) with its seq as
// ID and its method as Event. With nothing to say within wait it returns
// none, so the caller can send a keep-alive. It fails with
// ErrStreamDropped when the client fell behind (it resumes with since and
// misses nothing), and with ctx's error when the client left.
//
// The log is read besides the feed: events of a run executing in another
// process (a run worker on AWS) reach no feed here, so this is how they
// come. A quiet log is read less and less often (idleBackoff, from
// TailPollMin to TailPollMax), on a schedule of its own.
func (ts *ThreadEventStream) Next(ctx context.Context, wait time.Duration) ([]StreamEvent, error) {
	heartbeat := time.NewTimer(wait)
	defer heartbeat.Stop()
	for {
		if ts.replaying {
			evs, err := ts.replay(ctx)
			if err != nil {
				return nil, err
			}
			if len(evs) > 0 {
				return evs, nil
			}
		}
		select {
		case <-ts.sub.Ready():
			evs, state, _ := ts.sub.Take()
			if state == subDropped {
				return nil, ErrStreamDropped
			}
			if len(evs) > 0 && evs[0].ID > ts.cursor+1 {
				// Something came before these that this stream did not
				// see (another run's batch published first, or an event
				// of another process): the log has everything, in order.
				ts.replaying = true
				continue
			}
			if out := ts.deliver(evs); len(out) > 0 {
				return out, nil
			}
		case <-ts.read:
			ts.replaying = true
		case <-heartbeat.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// replay reads the next page of the thread's log after the cursor. A read
// that finds events is followed by another at once; an empty one arms the
// next read after the backoff.
func (ts *ThreadEventStream) replay(ctx context.Context) ([]StreamEvent, error) {
	page, err := ts.s.Events.ThreadEvents(ctx, ts.orgID, ts.threadID, ts.cursor, replayPage, ts.s.now())
	if err != nil {
		return nil, err
	}
	if len(page) > 0 {
		ts.backoff.active()
	} else {
		ts.replaying = false
		ts.read = ts.s.after(ts.backoff.quiet(ts.s))
	}
	evs := make([]StreamEvent, len(page))
	for i, e := range page {
		evs[i] = StreamEvent{ID: e.Seq, Event: e.Event, Data: e.Data}
	}
	return ts.deliver(evs), nil
}

// deliver frames the events after the cursor that the request wants.
func (ts *ThreadEventStream) deliver(evs []StreamEvent) []StreamEvent {
	var out []StreamEvent
	for _, e := range evs {
		if e.ID <= ts.cursor {
			continue // delivered from the log and the feed both
		}
		ts.cursor = e.ID
		var params struct {
			Namespace []string `json:"namespace"`
			Data      struct {
				Name string `json:"name"`
			} `json:"data"`
		}
		_ = json.Unmarshal(e.Data, &params)
		if !ts.wants(e.Event, params.Namespace, params.Data.Name) {
			continue
		}
		frame, err := json.Marshal(map[string]any{"type": "event", "event_id": strconv.FormatInt(e.ID, 10), "seq": e.ID,
			"method": e.Event, "params": json.RawMessage(e.Data)})
		if err != nil {
			continue // stored params are JSON
		}
		out = append(out, StreamEvent{ID: e.ID, Event: e.Event, Data: frame})
	}
	return out
}

// wants applies the request's filter, as the protocol defines it: the
// event's channel (input for input.requested; custom:<name> for a named
// custom event, which "custom" covers too), and its namespace by prefix
// within depth.
func (ts *ThreadEventStream) wants(method string, ns []string, customName string) bool {
	channel := method
	switch {
	case method == "input.requested":
		channel = "input"
	case method == "custom" && customName != "":
		channel = "custom:" + customName
	}
	if !ts.channels[channel] && !(strings.HasPrefix(channel, "custom:") && ts.channels["custom"]) {
		return false
	}
	if len(ts.req.Namespaces) == 0 {
		return true
	}
	for _, prefix := range ts.req.Namespaces {
		if isPrefixMatch(ns, prefix) && (ts.req.Depth == nil || len(ns)-len(prefix) <= *ts.req.Depth) {
			return true
		}
	}
	return false
}

// isPrefixMatch says whether ns starts with prefix: segments are equal, or
// a prefix segment without ":" names the segment's node (any task id).
func isPrefixMatch(ns, prefix []string) bool {
	if len(prefix) > len(ns) {
		return false
	}
	for i, seg := range prefix {
		if ns[i] == seg {
			continue
		}
		if strings.Contains(seg, ":") || segmentName(ns[i]) != seg {
			return false
		}
	}
	return true
}

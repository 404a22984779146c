package runs

import (
	"encoding/json"
	"sync"
	"time"
)

// StreamEvent is one event of a run's stream as clients receive it: an SSE
// event (name and JSON data) and, for a resumable run, its id.
type StreamEvent struct {
	// ID is the event's Seq in the run's event log (store.Events), or -1
	// for an event that is not kept (the run is not resumable, or the
	// event belongs to a thread stream, whose events have no ids).
	ID    int64
	Event string
	Data  json.RawMessage
}

// feeds is the in-memory hub through which whoever follows a run in this
// process (runs/wait, join, a run's or a thread's stream) gets what its
// worker produces: the run's stream events as they happen, and its result
// when it ends. Followers subscribe to a run or to a thread; the worker
// publishes. It is the one mechanism of following a run: a waiter is a
// subscriber that only wants the end.
//
// Nothing here blocks the worker: every subscriber has a bounded buffer,
// and one that falls behind is dropped (it learns so on its next Take) —
// a slow client never makes the server hold a run's events without bound.
type feeds struct {
	mu     sync.Mutex
	subs   map[string]map[*Subscription]struct{} // by feed key: runKey or threadKey
	recent map[string]published                  // results no one was waiting for yet
}

type published struct {
	result json.RawMessage
	at     time.Time
}

// Results of temporary runs are kept a while for waiters that subscribe
// late (their records are gone); the map is bounded.
const (
	keepPublished = time.Minute
	maxPublished  = 10000
)

// A subscriber's buffer holds at most this many events or bytes of data
// (defaults of Service.StreamBufferEvents and StreamBufferBytes).
const (
	DefaultStreamBufferEvents = 4096
	DefaultStreamBufferBytes  = 16 << 20
)

func runKey(runID string) string              { return "run:" + runID }
func threadKey(orgID, threadID string) string { return "thread:" + orgID + "/" + threadID }

// Subscription is one follower's view of a feed.
type Subscription struct {
	f      *feeds
	key    string
	events bool // false: only the end is wanted (a waiter)
	max    int
	maxB   int

	mu      sync.Mutex
	queue   []StreamEvent
	bytes   int
	dropped bool
	ended   bool
	result  json.RawMessage
	ready   chan struct{} // holds a token when Take has news
}

// subscribe follows the feed key. events says whether the subscriber wants
// the stream's events or only the run's end.
func (f *feeds) subscribe(key string, events bool, maxEvents, maxBytes int) *Subscription {
	sub := &Subscription{f: f, key: key, events: events, max: maxEvents, maxB: maxBytes, ready: make(chan struct{}, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.recent[key]; ok {
		delete(f.recent, key)
		sub.end(p.result)
		return sub
	}
	if f.subs == nil {
		f.subs = map[string]map[*Subscription]struct{}{}
	}
	if f.subs[key] == nil {
		f.subs[key] = map[*Subscription]struct{}{}
	}
	f.subs[key][sub] = struct{}{}
	return sub
}

// Close stops the subscription; it is safe to call more than once.
func (s *Subscription) Close() {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if set := s.f.subs[s.key]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(s.f.subs, s.key)
		}
	}
}

// Ready has a value when Take has something new.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// subState is what Take says about a subscription besides its events.
type subState int

const (
	subLive    subState = iota
	subEnded            // the run ended: result is its runs/wait body
	subDropped          // the subscriber fell behind and lost events
)

// Take returns the events queued since the last Take, and the state.
func (s *Subscription) Take() ([]StreamEvent, subState, json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := s.queue
	s.queue, s.bytes = nil, 0
	switch {
	case s.dropped:
		return nil, subDropped, nil
	case s.ended:
		return evs, subEnded, s.result
	}
	return evs, subLive, nil
}

func (s *Subscription) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// deliver queues evs, or drops the subscriber when they do not fit.
func (s *Subscription) deliver(evs []StreamEvent) {
	if !s.events {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropped || s.ended {
		return
	}
	n := 0
	for _, e := range evs {
		n += len(e.Data) + len(e.Event)
	}
	if len(s.queue)+len(evs) > s.max || s.bytes+n > s.maxB {
		s.dropped, s.queue, s.bytes = true, nil, 0
	} else {
		s.queue = append(s.queue, evs...)
		s.bytes += n
	}
	s.signal()
}

func (s *Subscription) end(result json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended, s.result = true, result
	s.signal()
}

// watched reports whether a subscriber of the feeds keys wants events: a
// run that keeps no events need not make any while no one would get them
// (a follower that comes later only sees what happens from then on).
func (f *feeds) watched(keys ...string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		for sub := range f.subs[k] {
			if sub.events {
				return true
			}
		}
	}
	return false
}

// publish hands evs to the subscribers of the feeds keys.
func (f *feeds) publish(evs []StreamEvent, keys ...string) {
	if len(evs) == 0 {
		return
	}
	f.mu.Lock()
	var subs []*Subscription
	for _, k := range keys {
		for sub := range f.subs[k] {
			subs = append(subs, sub)
		}
	}
	f.mu.Unlock()
	for _, sub := range subs {
		sub.deliver(evs)
	}
}

// finish ends the run's feed with its result: its subscribers get it after
// the events queued before. keep holds the result for a subscriber that
// comes late, when none is subscribed yet: only temporary runs need that,
// the others' results are in the store.
func (f *feeds) finish(runID string, result json.RawMessage, keep bool, now time.Time) {
	key := runKey(runID)
	f.mu.Lock()
	defer f.mu.Unlock()
	subs := f.subs[key]
	delete(f.subs, key)
	for sub := range subs {
		sub.end(result)
	}
	if !keep || len(subs) > 0 {
		return
	}
	if f.recent == nil {
		f.recent = map[string]published{}
	}
	if len(f.recent) >= maxPublished/2 {
		for id, p := range f.recent {
			if now.Sub(p.at) > keepPublished || len(f.recent) >= maxPublished {
				delete(f.recent, id)
			}
		}
	}
	f.recent[key] = published{result: result, at: now}
}

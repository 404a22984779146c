package runs

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// How the thread event protocol's stream reads the thread's log: on a
// schedule of its own (not restarted by heartbeats), backing off while the
// log is quiet, as a tailing run stream does.

// A protocol run executed by another service (the AWS shape: the run
// worker is another Lambda, so events reach the stream only through the
// log) is streamed although the heartbeat interval is much shorter than
// the log's read interval: each heartbeat used to restart the read timer,
// so the log was never read again.
func TestProtocolStreamReadsTheLogBetweenShortHeartbeats(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	g := newGate()
	worker := &Service{Store: db, Events: db, Graphs: streamGraphs(t, g), PollInterval: 5 * time.Millisecond}
	follower := &Service{Store: db, Events: db, Graphs: streamGraphs(t, g), PollInterval: time.Second,
		TailEvents: true, TailPollMin: 20 * time.Millisecond, TailPollMax: 50 * time.Millisecond}
	stop := worker.StartWorkers(2, slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		close(g.release)
		stop()
	})
	thread := newThreadID()
	command(t, worker, thread, 1, "run.start", `{"assistant_id":"held","input":{"log":[]}}`)
	ts := open(t, follower, thread, `{"channels":["values","lifecycle"]}`)
	<-g.entered
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a guard, not a timing assertion
	defer cancel()
	// The stream reads the log once (what the held run logged so far),
	// then the run goes on: its end reaches the stream only by later reads.
	got, err := ts.Next(ctx, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	g.release <- struct{}{}
	for !slices.ContainsFunc(got, isRootCompleted(t)) {
		evs, err := ts.Next(ctx, time.Millisecond) // a heartbeat far shorter than every read interval
		if err != nil {
			t.Fatalf("Next after %d events: %v (the log was not read between heartbeats)", len(got), err)
		}
		got = append(got, evs...)
	}
}

// isRootCompleted says whether an event is the root's completed lifecycle.
func isRootCompleted(t *testing.T) func(StreamEvent) bool {
	return func(e StreamEvent) bool {
		t.Helper()
		var ev protoEv
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			t.Fatalf("event %s: %v", e.Data, err)
		}
		return rootTerminal(ev) && ev.Params.Data["event"] == "completed"
	}
}

// fakeClock stands in for time.After: it records every wait asked for and
// fires at once while it has budget; past it, it holds the timer (for the
// test to fire) and calls onHold.
type fakeClock struct {
	mu     sync.Mutex
	waits  []time.Duration
	budget int
	held   chan time.Time
	onHold func()
}

func (f *fakeClock) after(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, d)
	c := make(chan time.Time, 1)
	if f.budget > 0 {
		f.budget--
		c <- time.Time{}
		return c
	}
	f.held = c
	f.onHold()
	return c
}

// threadReads counts reads of the thread event log.
type threadReads struct {
	store.Events
	mu sync.Mutex
	n  int
}

func (c *threadReads) ThreadEvents(ctx context.Context, orgID, threadID string, after int64, limit int, now time.Time) ([]store.ThreadEvent, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.Events.ThreadEvents(ctx, orgID, threadID, after, limit, now)
}

func (c *threadReads) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// A quiet log is read after 50 ms, then twice as long each time up to 1 s
// (the defaults of TailPollMin, TailPollMax); a read that finds an event
// starts the backoff over. Counted on a fake clock: one read per wait.
func TestProtocolStreamBacksOffWhileTheLogIsQuiet(t *testing.T) {
	clock := &fakeClock{}
	var reads *threadReads
	s, _ := newStreamService(t, func(s *Service) {
		reads = &threadReads{Events: s.Events}
		s.Events, s.fakeAfter = reads, clock.after
	})
	thread := newThreadID()
	if _, err := s.CreateThread(context.Background(), org, ThreadInput{ThreadID: &thread}); err != nil {
		t.Fatal(err)
	}
	ts := open(t, s, thread, `{"channels":["custom"]}`)

	// The context ends when the clock holds its 8th timer (30 s is a guard).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock.budget, clock.onHold = 7, cancel
	if _, err := ts.Next(ctx, time.Hour); err == nil {
		t.Fatal("Next returned before the test ended it")
	}
	ms := time.Millisecond
	want := []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second, time.Second}
	if !slices.Equal(clock.waits, want) {
		t.Fatalf("waits between reads of a quiet log %v, want %v", clock.waits, want)
	}
	if n := reads.count(); n != len(want) {
		t.Fatalf("%d reads of the log, want one per wait: %d", n, len(want))
	}

	// Another process writes an event: the held read finds it, and the
	// next quiet read waits the shortest time again.
	if _, err := s.Events.AppendThreadEvents(context.Background(), org, thread,
		[]store.ThreadEvent{{Event: "custom", Data: []byte(`{"namespace":[],"timestamp":1,"data":{"payload":1}}`)}},
		s.now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	clock.held <- time.Time{}
	guard, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	evs, err := ts.Next(guard, time.Hour)
	if err != nil || len(evs) != 1 || evs[0].Event != "custom" {
		t.Fatalf("after the write: %v, %v", evs, err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock.mu.Lock()
	clock.waits, clock.onHold = nil, cancel
	clock.mu.Unlock()
	if _, err := ts.Next(ctx, time.Hour); err == nil {
		t.Fatal("Next returned before the test ended it")
	}
	if !slices.Equal(clock.waits, []time.Duration{50 * ms}) {
		t.Fatalf("waits after the log was active %v, want [50ms]", clock.waits)
	}
}

package runs

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// How the thread event protocol's stream reads the thread's log: on a
// schedule of its own, not restarted by heartbeats.

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
	follower := &Service{Store: db, Events: db, Graphs: streamGraphs(t, g), PollInterval: 25 * time.Millisecond,
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

package runs

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// newTailingPair is the AWS shape of a run's followers: a service that
// executes nothing and tails the event log (TailEvents, no workers: an API
// function) and a worker service with its own hub (the run worker), on one
// store. Events reach the follower only through the log.
func newTailingPair(t *testing.T) (follower *Service, g *gate) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	g = newGate()
	worker := &Service{Store: db, Events: db, Graphs: streamGraphs(t, g), PollInterval: 5 * time.Millisecond}
	follower = &Service{Store: db, Events: db, Graphs: streamGraphs(t, g), PollInterval: 5 * time.Millisecond,
		TailEvents: true, TailPollMin: time.Millisecond, TailPollMax: 20 * time.Millisecond}
	stop := worker.StartWorkers(2, slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		close(g.release)
		stop()
	})
	return follower, g
}

// A run created by a stream request on a tailing service is logged
// although it did not ask for stream_resumable, and its stream is read
// from the log: every event, with ids, in order, to the end.
func TestTailStreamsARunExecutedElsewhere(t *testing.T) {
	s, g := newTailingPair(t)
	thread := newThreadID()
	run, rs, err := s.CreateRunStream(context.Background(), org, thread, request(t,
		`{"assistant_id":"held","input":{"log":[]},"if_not_exists":"create","stream_mode":["values","updates"]}`))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.Store.Run(context.Background(), org, run.ThreadID, run.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var kw kwargs
	if json.Unmarshal(stored.Kwargs, &kw) != nil || !kw.Resumable {
		t.Fatalf("the streamed run is not logged: %s", stored.Kwargs)
	}
	<-g.entered
	// A second follower joins from its first event while the run waits.
	_, joined, err := s.JoinRunStream(context.Background(), org, thread, run.RunID, "1", []string{"values"})
	if err != nil {
		t.Fatal(err)
	}
	g.release <- struct{}{}
	evs := collect(t, rs)
	wantNames(t, evs, "metadata", "values", "updates", "values", "updates", "values")
	for i, e := range evs {
		if e.ID != int64(i) {
			t.Fatalf("event %d has id %d", i, e.ID)
		}
	}
	if got := jsonOf(t, evs[len(evs)-1]); got != `{"log":["first","held"]}` {
		t.Fatalf("last values %s", got)
	}
	// The join: after id 1, values only (metadata and errors always pass).
	rest := collect(t, joined)
	wantNames(t, rest, "values", "values")
	if rest[0].ID != 3 || rest[1].ID != 5 {
		t.Fatalf("joined ids %d, %d; want 3, 5", rest[0].ID, rest[1].ID)
	}
}

// Without TailEvents nothing is forced: a run streamed by a local server
// is logged only when it asks.
func TestNoTailNoForcedLog(t *testing.T) {
	s, _ := newStreamService(t, nil)
	run, rs, err := s.CreateRunStream(context.Background(), org, "", request(t, `{"assistant_id":"echo","input":{"messages":[]}}`))
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, rs)
	for _, e := range evs {
		if e.ID != -1 {
			t.Fatalf("event %s has id %d: a run that is not resumable has no ids", e.Event, e.ID)
		}
	}
	if next, err := s.Events.NextRunEventSeq(context.Background(), org, run.RunID, s.now()); err != nil || next != 0 {
		t.Fatalf("the log of a run that is not resumable: next %d, %v", next, err)
	}
}

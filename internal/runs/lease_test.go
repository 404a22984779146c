package runs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// leaseCounter counts a store's lease renewals and reads of one run, and
// signals once they add up to want (the heartbeat has looked want times).
type leaseCounter struct {
	Store
	mu     sync.Mutex
	runID  string
	reads  int
	renews int
	want   int
	seen   chan struct{}
}

func (c *leaseCounter) RenewLease(ctx context.Context, runID, owner string, attempt int, until time.Time) (store.Run, error) {
	c.mu.Lock()
	if runID == c.runID {
		c.renews++
		c.signal()
	}
	c.mu.Unlock()
	return c.Store.RenewLease(ctx, runID, owner, attempt, until)
}

func (c *leaseCounter) Run(ctx context.Context, orgID, threadID, id string) (store.Run, error) {
	c.mu.Lock()
	if id == c.runID {
		c.reads++
		c.signal()
	}
	c.mu.Unlock()
	return c.Store.Run(ctx, orgID, threadID, id)
}

func (c *leaseCounter) signal() {
	if c.reads+c.renews == c.want {
		close(c.seen)
	}
}

func (c *leaseCounter) counts() (reads, renews int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads, c.renews
}

// A worker holding a run looks for a cancellation every poll interval with
// a read, and writes its lease only once a third of the lease has passed:
// with the lease of the AWS run worker (longer than the step), a step never
// renews it, where it used to write once a poll interval (review #3). The
// read still delivers a cancellation.
func TestHeartbeatReadsAndRenewsOnlyWhenTheLeaseAsks(t *testing.T) {
	counter := &leaseCounter{want: 20, seen: make(chan struct{})}
	s, g := newStreamService(t, func(s *Service) {
		counter.Store = s.Store
		s.Store, s.LeaseDuration, s.PollInterval = counter, time.Hour, time.Millisecond
	})
	thread := newThreadID()
	run, err := s.CreateRun(context.Background(), org, thread, request(t,
		`{"assistant_id":"held","input":{"log":[]},"if_not_exists":"create"}`))
	if err != nil {
		t.Fatal(err)
	}
	counter.mu.Lock()
	counter.runID = run.RunID
	counter.mu.Unlock()
	<-g.entered // the run is held in a node, its heartbeat going
	<-counter.seen
	if _, renews := counter.counts(); renews != 0 {
		t.Errorf("%d lease renewals within the first third of a 1 h lease; want none", renews)
	}
	if _, err := s.CancelRun(context.Background(), org, thread, run.RunID, store.CancelInterrupt); err != nil {
		t.Fatal(err)
	}
	body, err := s.Join(context.Background(), org, thread, run.RunID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Store.Run(context.Background(), org, thread, run.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.RunInterrupted {
		t.Errorf("run %s after a cancel seen by the heartbeat's read (join answered %s), want %s", got.Status, body, store.RunInterrupted)
	}
}

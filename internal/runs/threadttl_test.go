package runs

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// clock is a settable Service.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestThreadTTLRules(t *testing.T) {
	s := &Service{}
	f := func(v float64) *float64 { return &v }
	str := func(v string) *string { return &v }
	for _, tc := range []struct {
		name  string
		in    *ThreadTTL
		field string // "" when valid
	}{
		{"none", nil, ""},
		{"minutes, delete by default", &ThreadTTL{TTL: f(1.5)}, ""},
		{"keep_latest", &ThreadTTL{TTL: f(10), Strategy: str("keep_latest")}, ""},
		{"missing ttl", &ThreadTTL{Strategy: str("delete")}, "ttl.ttl"},
		{"zero", &ThreadTTL{TTL: f(0)}, "ttl.ttl"},
		{"negative", &ThreadTTL{TTL: f(-1)}, "ttl.ttl"},
		{"beyond ten years", &ThreadTTL{TTL: f(maxTTLMinutes + 1)}, "ttl.ttl"},
		{"unknown strategy", &ThreadTTL{TTL: f(1), Strategy: str("archive")}, "ttl.strategy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c fail.Checks
			s.parseTTL(&c, tc.in)
			err := c.Err()
			if (tc.field == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.field)) {
				t.Errorf("parseTTL(%+v) = %v, want a failure naming %q", tc.in, err, tc.field)
			}
		})
	}
}

// TestSweepExpiredThreads: delete removes an expired thread; keep_latest
// keeps it with its latest checkpoint; a thread not yet expired, one
// without ttl and one whose ttl a patch moved stay.
func TestSweepExpiredThreads(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	clk := &clock{now: time.Now()}
	s := &Service{Store: db, Graphs: graph.NewRegistry(), Now: clk.Now}
	ctx := context.Background()
	org := "org-ttl"
	mk := func(ttl string) string {
		var in ThreadInput
		body := `{"metadata": {"graph_id": "counter"}, "supersteps": [
			{"updates": [{"values": {"steps": 3}, "as_node": "__start__"}]},
			{"updates": [{"values": {"count": 1}, "as_node": "inc"}]}]` + ttl + `}`
		if err := json.Unmarshal([]byte(body), &in); err != nil {
			t.Fatal(err)
		}
		th, err := s.CreateThread(ctx, org, in)
		if err != nil {
			t.Fatal(err)
		}
		return th.ThreadID
	}
	gone := mk(`, "ttl": {"ttl": 1}`)
	kept := mk(`, "ttl": {"ttl": 1, "strategy": "keep_latest"}`)
	later := mk(`, "ttl": {"ttl": 10}`)
	never := mk(``)
	moved := mk(`, "ttl": {"ttl": 1}`)
	if _, err := s.PatchThread(ctx, org, moved, ThreadPatch{TTL: &ThreadTTL{TTL: func(v float64) *float64 { return &v }(60)}}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SweepExpiredThreads(ctx); err != nil || n != 0 {
		t.Fatalf("sweep before any expiry: %d, %v", n, err)
	}
	clk.add(2 * time.Minute)
	if n, err := s.SweepExpiredThreads(ctx); err != nil || n != 2 {
		t.Fatalf("sweep after a minute: %d, %v; want 2", n, err)
	}
	if _, err := s.GetThread(ctx, org, gone); fail.KindOf(err) != fail.KindNotFound {
		t.Errorf("expired thread with strategy delete: %v", err)
	}
	hist, err := s.History(ctx, org, kept, HistoryQuery{Limit: 100})
	if err != nil || len(hist) != 1 {
		t.Errorf("expired thread with strategy keep_latest: %d states, %v; want its latest only", len(hist), err)
	}
	for _, id := range []string{later, never, moved} {
		if hist, err := s.History(ctx, org, id, HistoryQuery{Limit: 100}); err != nil || len(hist) != 2 {
			t.Errorf("thread %s not expired: %d states, %v", id, len(hist), err)
		}
	}
	// keep_latest cleared the expiry: a second sweep leaves it.
	if n, err := s.SweepExpiredThreads(ctx); err != nil || n != 0 {
		t.Errorf("second sweep: %d, %v", n, err)
	}
}

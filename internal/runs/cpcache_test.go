package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

func cached(id string, size int) ([]byte, *graph.Checkpoint) {
	data := make([]byte, size)
	for i := range data {
		data[i] = 'x'
	}
	return data, &graph.Checkpoint{ID: id}
}

func lookup(c *latestCache, org, thread, id string, data []byte) bool {
	return c.get(org, store.Checkpoint{ThreadID: thread, ID: id, Data: data}) != nil
}

func TestLatestCacheAnswersOnlyForTheStoredBytes(t *testing.T) {
	data, cp := cached("cp1", 100)
	other := append([]byte{}, data...)
	other[50] = 'y'
	cases := []struct {
		name            string
		org, thread, id string
		data            []byte
		forget          bool
		want            bool
	}{
		{name: "the same checkpoint, byte for byte", org: "a", thread: "t", id: "cp1", data: data, want: true},
		{name: "replaced under the same id (a partial step, a PATCH elsewhere)", org: "a", thread: "t", id: "cp1", data: other},
		{name: "a newer checkpoint", org: "a", thread: "t", id: "cp2", data: data},
		{name: "another thread", org: "a", thread: "u", id: "cp1", data: data},
		{name: "the same thread id in another organization", org: "b", thread: "t", id: "cp1", data: data},
		{name: "forgotten (the thread was written or deleted here)", org: "a", thread: "t", id: "cp1", data: data, forget: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c latestCache
			c.put("a", "t", data, cp, nil)
			if tc.forget {
				c.forget("a", "t")
			}
			if got := lookup(&c, tc.org, tc.thread, tc.id, tc.data); got != tc.want {
				t.Errorf("hit = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLatestCacheIsBoundedPerOrganizationAndInAll(t *testing.T) {
	const size = 1000 // costs cacheCostFactor*size
	c := latestCache{max: 10 * cacheCostFactor * size, maxOrg: 3 * cacheCostFactor * size}
	victim, vcp := cached("v", size)
	c.put("victim", "t", victim, vcp, nil)
	// A flooding organization keeps at most its share, evicting its own
	// oldest threads, never the victim's.
	for i := range 50 {
		data, cp := cached(fmt.Sprint(i), size)
		c.put("flood", fmt.Sprint("t", i), data, cp, nil)
	}
	if !lookup(&c, "victim", "t", "v", victim) {
		t.Error("one organization's threads evicted another's")
	}
	if c.byOrg["flood"] > c.maxOrg || c.len() != 4 {
		t.Errorf("flood holds %d bytes (share %d), %d entries in all; want 3 of flood and the victim's", c.byOrg["flood"], c.maxOrg, c.len())
	}
	for i := 47; i < 50; i++ { // the most recent survive
		data, _ := cached(fmt.Sprint(i), size)
		if !lookup(&c, "flood", fmt.Sprint("t", i), fmt.Sprint(i), data) {
			t.Errorf("thread t%d, among the latest, was evicted", i)
		}
	}
	// Past the whole budget, the least recently used go, whoever owns them.
	for o := range 5 {
		for i := range 3 {
			data, cp := cached("x", size)
			c.put(fmt.Sprint("org", o), fmt.Sprint("t", i), data, cp, nil)
		}
	}
	if c.size > c.max || c.len() != 10 {
		t.Errorf("%d bytes in %d entries; budget %d bytes, want 10 entries", c.size, c.len(), c.max)
	}
	// A checkpoint over an organization's share is not kept at all.
	big, bcp := cached("big", 4*size)
	c.put("victim", "big", big, bcp, nil)
	if lookup(&c, "victim", "big", "big", big) {
		t.Error("a checkpoint larger than an organization's share was cached")
	}
	var sum int64
	for _, n := range c.byOrg {
		sum += n
	}
	if sum != c.size {
		t.Errorf("per-organization sizes sum to %d, the whole to %d", sum, c.size)
	}
}

// A run starts from the cached checkpoint only while the store still holds
// exactly it: a write by another process (here another Service on the same
// database, as two Lambdas or a restarted server) is seen.
func TestRunsStartFromTheStoreWhenItChangedElsewhere(t *testing.T) {
	// SQLite compares without reading the values (LatestCheckpointIfNot);
	// a store without that reads the checkpoint and the bytes are compared.
	for _, hide := range []bool{false, true} {
		t.Run(fmt.Sprint("comparing the bytes read: ", hide), func(t *testing.T) { startFromTheStore(t, hide) })
	}
}

func startFromTheStore(t *testing.T, hideIfNot bool) {
	s, _ := newStepService(t)
	s.StepBudget = 0 // a StepRun runs to the end
	if hideIfNot {
		s.Store = struct{ Store }{s.Store}
	}
	if _, ok := s.Store.(latestIfNot); ok == hideIfNot {
		t.Fatalf("the store offers LatestCheckpointIfNot: %v", ok)
	}
	other := &Service{Store: s.Store, Graphs: s.Graphs, Dispatcher: s.Dispatcher, PollInterval: s.PollInterval}
	ctx := context.Background()
	thread := "0d7c2a57-4d53-4d1e-9a43-1b1c3e9f2a10"
	turn := func(content string) []any {
		t.Helper()
		r, err := s.CreateRun(ctx, "org", thread, request(t,
			`{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"`+content+`"}]},"if_not_exists":"create"}`))
		if err != nil {
			t.Fatal(err)
		}
		drive(t, s, r.RunID)
		msgs, _ := waitBody(t, s, "org", thread, r.RunID)["messages"].([]any)
		return msgs
	}
	contents := func(msgs []any) []string {
		var out []string
		for _, m := range msgs {
			out = append(out, fmt.Sprint(m.(map[string]any)["content"]))
		}
		return out
	}
	turn("one")
	latest, err := s.Store.LatestCheckpoint(ctx, "org", thread)
	if err != nil {
		t.Fatal(err)
	}
	if s.latest.get("org", latest) == nil {
		t.Fatal("the checkpoint a run stored last is not cached")
	}
	if got := contents(turn("two")); fmt.Sprint(got) != "[one echo: one two echo: two]" {
		t.Fatalf("second turn: %v", got)
	}
	if n := s.latest.hits.Load(); n != 1 {
		t.Fatalf("the second turn started from the cache %d times, want once", n)
	}
	upd, _ := json.Marshal(map[string]any{"values": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "elsewhere"}}}})
	var in StateUpdate
	if err := json.Unmarshal(upd, &in); err != nil {
		t.Fatal(err)
	}
	if _, err := other.UpdateState(ctx, "org", thread, in); err != nil {
		t.Fatal(err)
	}
	got := contents(turn("three"))
	if fmt.Sprint(got) != "[one echo: one two echo: two elsewhere three echo: three]" {
		t.Fatalf("the turn after another process's update_state: %v", got)
	}
	if n := s.latest.hits.Load(); n != 1 {
		t.Fatalf("the turn after another process's update_state started from the cache")
	}
	if err := s.DeleteThread(ctx, "org", thread); err != nil {
		t.Fatal(err)
	}
	if s.latest.len() != 0 {
		t.Errorf("a deleted thread's checkpoint is still cached")
	}
}

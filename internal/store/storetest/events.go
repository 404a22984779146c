package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// EventsContract is the contract of the store.Events port (the event log
// of resumable run streams). open returns the port of a store for t, set up
// as for Run. Runs need not exist in the store: the log is keyed by
// organization and run id alone. The suite reads at fixed times in the
// past (2024) and appends events that expire long after them, so it does
// not disturb, nor depend on, other events of a shared store; its expiry
// case uses expiries in 2090 (expirySoon).
func EventsContract(t *testing.T, open func(t *testing.T) store.Events) {
	t.Run("AppendNumbersFromZero", func(t *testing.T) { testAppendNumbers(t, open(t)) })
	t.Run("ReadAfter", func(t *testing.T) { testReadAfter(t, open(t)) })
	t.Run("Isolation", func(t *testing.T) { testEventIsolation(t, open(t)) })
	t.Run("Expiry", func(t *testing.T) { testEventExpiry(t, open(t)) })
	t.Run("ConcurrentAppends", func(t *testing.T) { testConcurrentAppends(t, open(t)) })
	t.Run("LargeEvents", func(t *testing.T) { testLargeEvents(t, open(t)) })
}

// readAt is when the suite reads: before every expiry it sets except the
// expiry case's.
var readAt = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)

// keep is an expiry after every read of the suite.
var keep = time.Date(2100, 1, 1, 0, 0, 0, 0, zone)

// expirySoon is when the expiry cases' events expire: after the real
// clock, so a store that also deletes expired items on its own (DynamoDB's
// TTL, which MiniStack's reaper applies every 60 s by the wall clock) never
// removes them while a case reads them; the cases pass their own "now"
// around it. Before keep, so DeleteExpiredRunEvents at expirySoon leaves
// every other case's events alone.
var expirySoon = time.Date(2090, 1, 1, 0, 0, 0, 0, zone)

func events(names ...string) []store.RunEvent {
	out := make([]store.RunEvent, len(names))
	for i, n := range names {
		out[i] = store.RunEvent{Event: n, Data: []byte(fmt.Sprintf(`{"n": %q, "x": [1, 2.50]}`, n))}
	}
	return out
}

func readAll(t *testing.T, s store.Events, orgID, runID string, after int64) []store.RunEvent {
	t.Helper()
	got, err := s.RunEvents(ctx(), orgID, runID, after, 0, readAt)
	must(t, "RunEvents", err)
	return got
}

// checkEvents compares events read back: Seq, name and data byte for byte.
func checkEvents(t *testing.T, what string, got []store.RunEvent, firstSeq int64, want []store.RunEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d: %+v", what, len(got), len(want), got)
	}
	for i := range got {
		w := want[i]
		w.Seq = firstSeq + int64(i)
		if got[i].Seq != w.Seq || got[i].Event != w.Event {
			t.Errorf("%s[%d]: seq %d %q, want %d %q", what, i, got[i].Seq, got[i].Event, w.Seq, w.Event)
		}
		checkBytes(t, fmt.Sprintf("%s[%d] data", what, i), got[i].Data, w.Data)
	}
}

func testAppendNumbers(t *testing.T, s store.Events) {
	org, run := newID(), newID()
	next, err := s.NextRunEventSeq(ctx(), org, run, readAt)
	must(t, "NextRunEventSeq", err)
	if next != 0 {
		t.Fatalf("NextRunEventSeq of a run without events = %d, want 0", next)
	}
	first, err := s.AppendRunEvents(ctx(), org, run, events("metadata", "values"), keep)
	must(t, "AppendRunEvents", err)
	if first != 0 {
		t.Errorf("first append starts at %d, want 0", first)
	}
	first, err = s.AppendRunEvents(ctx(), org, run, events("updates|sub:1", "values"), keep)
	must(t, "AppendRunEvents", err)
	if first != 2 {
		t.Errorf("second append starts at %d, want 2", first)
	}
	first, err = s.AppendRunEvents(ctx(), org, run, nil, keep)
	must(t, "AppendRunEvents (none)", err)
	next, err = s.NextRunEventSeq(ctx(), org, run, readAt)
	must(t, "NextRunEventSeq", err)
	if next != 4 {
		t.Errorf("NextRunEventSeq = %d after 4 events, want 4", next)
	}
	checkEvents(t, "events", readAll(t, s, org, run, -1), 0, events("metadata", "values", "updates|sub:1", "values"))
	// Another run of the organization numbers its own events.
	other := newID()
	first, err = s.AppendRunEvents(ctx(), org, other, events("metadata"), keep)
	must(t, "AppendRunEvents (other run)", err)
	if first != 0 {
		t.Errorf("another run's first event is %d, want 0", first)
	}
}

func testReadAfter(t *testing.T, s store.Events) {
	org, run := newID(), newID()
	all := events("a", "b", "c", "d", "e")
	_, err := s.AppendRunEvents(ctx(), org, run, all, keep)
	must(t, "AppendRunEvents", err)
	checkEvents(t, "after -1", readAll(t, s, org, run, -1), 0, all)
	checkEvents(t, "after 1", readAll(t, s, org, run, 1), 2, all[2:])
	checkEvents(t, "after 4", readAll(t, s, org, run, 4), 5, nil)
	checkEvents(t, "after 9", readAll(t, s, org, run, 9), 10, nil)
	page, err := s.RunEvents(ctx(), org, run, 0, 2, readAt)
	must(t, "RunEvents (limit 2)", err)
	checkEvents(t, "after 0 limit 2", page, 1, all[1:3])
}

func testEventIsolation(t *testing.T, s store.Events) {
	orgA, orgB, run := newID(), newID(), newID()
	_, err := s.AppendRunEvents(ctx(), orgA, run, events("a", "b"), keep)
	must(t, "AppendRunEvents", err)
	checkEvents(t, "another organization's read", readAll(t, s, orgB, run, -1), 0, nil)
	next, err := s.NextRunEventSeq(ctx(), orgB, run, readAt)
	must(t, "NextRunEventSeq", err)
	if next != 0 {
		t.Errorf("another organization sees NextRunEventSeq %d, want 0", next)
	}
}

func testEventExpiry(t *testing.T, s store.Events) {
	org, run := newID(), newID()
	soon := expirySoon
	_, err := s.AppendRunEvents(ctx(), org, run, events("old1", "old2"), soon)
	must(t, "AppendRunEvents", err)
	_, err = s.AppendRunEvents(ctx(), org, run, events("new"), soon.Add(time.Hour))
	must(t, "AppendRunEvents", err)

	before := soon.Add(-time.Second)
	got, err := s.RunEvents(ctx(), org, run, -1, 0, before)
	must(t, "RunEvents before expiry", err)
	checkEvents(t, "before expiry", got, 0, events("old1", "old2", "new"))
	// Expired events are never read, though not deleted yet.
	got, err = s.RunEvents(ctx(), org, run, -1, 0, soon)
	must(t, "RunEvents at expiry", err)
	checkEvents(t, "at the first expiry", got, 2, events("new"))
	next, err := s.NextRunEventSeq(ctx(), org, run, soon)
	must(t, "NextRunEventSeq", err)
	if next != 3 {
		t.Errorf("NextRunEventSeq = %d with the last event alive, want 3", next)
	}
	next, err = s.NextRunEventSeq(ctx(), org, run, soon.Add(time.Hour))
	must(t, "NextRunEventSeq", err)
	if next != 0 {
		t.Errorf("NextRunEventSeq = %d with every event expired, want 0", next)
	}

	n, err := s.DeleteExpiredRunEvents(ctx(), soon, 1000)
	must(t, "DeleteExpiredRunEvents", err)
	if n < 2 {
		t.Errorf("DeleteExpiredRunEvents removed %d, want at least this run's 2", n)
	}
	got, err = s.RunEvents(ctx(), org, run, -1, 0, before)
	must(t, "RunEvents after the deletion", err)
	checkEvents(t, "after the deletion", got, 2, events("new"))
	// limit bounds one call.
	_, err = s.AppendRunEvents(ctx(), org, newID(), events("x", "y", "z"), soon)
	must(t, "AppendRunEvents", err)
	n, err = s.DeleteExpiredRunEvents(ctx(), soon, 1)
	must(t, "DeleteExpiredRunEvents (limit 1)", err)
	if n != 1 {
		t.Errorf("DeleteExpiredRunEvents with limit 1 removed %d", n)
	}
}

func testConcurrentAppends(t *testing.T, s store.Events) {
	org, run := newID(), newID()
	const writers, appends = 6, 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := map[int64]string{}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range appends {
				tag := fmt.Sprintf("w%d-%d", w, a)
				first, err := s.AppendRunEvents(ctx(), org, run, events(tag+"a", tag+"b"), keep)
				if err != nil {
					t.Errorf("AppendRunEvents: %v", err)
					return
				}
				mu.Lock()
				firsts[first] = tag
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	got := readAll(t, s, org, run, -1)
	if len(got) != 2*writers*appends {
		t.Fatalf("%d events, want %d", len(got), 2*writers*appends)
	}
	for i, e := range got {
		if e.Seq != int64(i) {
			t.Fatalf("event %d has Seq %d: the log has a gap or a duplicate", i, e.Seq)
		}
	}
	// Each append's events are contiguous, at the Seq it was answered.
	for first, tag := range firsts {
		if got[first].Event != tag+"a" || got[first+1].Event != tag+"b" {
			t.Errorf("append %s answered Seq %d, where the log holds %q, %q", tag, first, got[first].Event, got[first+1].Event)
		}
	}
}

// testLargeEvents: events far larger than a database item (a
// messages/partial event carries the whole message so far) are kept whole,
// several in one append.
func testLargeEvents(t *testing.T, s store.Events) {
	org, run := newID(), newID()
	big := []store.RunEvent{
		{Event: "messages/partial", Data: bigJSON(1_200_000, "partial-1")},
		{Event: "values", Data: bigJSON(450_000, "values")},
		{Event: "messages/partial", Data: bigJSON(1_300_000, "partial-2")},
	}
	first, err := s.AppendRunEvents(ctx(), org, run, big, keep)
	must(t, "AppendRunEvents of 3 MB of events", err)
	got := readAll(t, s, org, run, first-1)
	if len(got) != len(big) {
		t.Fatalf("read back %d events, want %d", len(got), len(big))
	}
	for i := range big {
		if got[i].Event != big[i].Event {
			t.Errorf("event %d: %q, want %q", i, got[i].Event, big[i].Event)
		}
		checkBig(t, fmt.Sprintf("event %d data", i), got[i].Data, big[i].Data)
	}
}

package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// EventStore is a store whose event log is keyed by its threads: the
// thread-keyed log needs the threads it numbers.
type EventStore interface {
	store.Store
	store.Events
}

// ThreadEventsContract is the contract of the thread-keyed half of the
// store.Events port (the thread event protocol's stream, from which a
// client resumes with since). open returns a store for t, set up as for
// Run. Like EventsContract it reads in 2024 and expires in 2100, except in
// its expiry case (expirySoon, after the real clock too).
func ThreadEventsContract(t *testing.T, open func(t *testing.T) EventStore) {
	t.Run("AppendNumbersFromOne", func(t *testing.T) { testThreadAppendNumbers(t, open(t)) })
	t.Run("ReadAfter", func(t *testing.T) { testThreadReadAfter(t, open(t)) })
	t.Run("Isolation", func(t *testing.T) { testThreadEventIsolation(t, open(t)) })
	t.Run("ExpiryKeepsTheNumbering", func(t *testing.T) { testThreadEventExpiry(t, open(t)) })
	t.Run("DeletedWithTheThread", func(t *testing.T) { testThreadEventsDeleted(t, open(t)) })
	t.Run("ConcurrentAppends", func(t *testing.T) { testThreadConcurrentAppends(t, open(t)) })
	t.Run("LargeEvents", func(t *testing.T) { testThreadLargeEvents(t, open(t)) })
}

func threadEvents(run string, names ...string) []store.ThreadEvent {
	out := make([]store.ThreadEvent, len(names))
	for i, n := range names {
		out[i] = store.ThreadEvent{RunID: run, Event: n, Data: []byte(fmt.Sprintf(`{"namespace": [], "data": {"n": %q, "x": [1, 2.50]}}`, n))}
	}
	return out
}

func newEventThread(t *testing.T, s EventStore) (org, thread string) {
	t.Helper()
	org = newOrg(t, s)
	th := store.Thread{ID: newID(), OrgID: org, Status: store.ThreadIdle, Metadata: []byte(`{}`), Config: []byte(`{}`),
		CreatedAt: at(0), UpdatedAt: at(0)}
	must(t, "CreateThread", s.CreateThread(ctx(), th))
	return org, th.ID
}

func readThread(t *testing.T, s store.Events, org, thread string, after int64, now time.Time) []store.ThreadEvent {
	t.Helper()
	got, err := s.ThreadEvents(ctx(), org, thread, after, 0, now)
	must(t, "ThreadEvents", err)
	return got
}

func checkThreadEvents(t *testing.T, what string, got []store.ThreadEvent, firstSeq int64, want []store.ThreadEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d: %+v", what, len(got), len(want), got)
	}
	for i := range got {
		w := want[i]
		if got[i].Seq != firstSeq+int64(i) || got[i].Event != w.Event || got[i].RunID != w.RunID {
			t.Errorf("%s[%d]: seq %d %q of run %q, want %d %q of %q", what, i, got[i].Seq, got[i].Event, got[i].RunID,
				firstSeq+int64(i), w.Event, w.RunID)
		}
		checkBytes(t, fmt.Sprintf("%s[%d] data", what, i), got[i].Data, w.Data)
	}
}

func lastSeq(t *testing.T, s store.Events, org, thread string) int64 {
	t.Helper()
	last, err := s.LastThreadEventSeq(ctx(), org, thread)
	must(t, "LastThreadEventSeq", err)
	return last
}

func testThreadAppendNumbers(t *testing.T, s EventStore) {
	org, thread := newEventThread(t, s)
	if last := lastSeq(t, s, org, thread); last != 0 {
		t.Fatalf("LastThreadEventSeq of a thread without events = %d, want 0", last)
	}
	runA, runB := newID(), newID()
	first, err := s.AppendThreadEvents(ctx(), org, thread, threadEvents(runA, "lifecycle", "values"), keep)
	must(t, "AppendThreadEvents", err)
	if first != 1 {
		t.Errorf("first append starts at %d, want 1", first)
	}
	// The next run of the thread continues its numbering.
	first, err = s.AppendThreadEvents(ctx(), org, thread, threadEvents(runB, "lifecycle", "input.requested"), keep)
	must(t, "AppendThreadEvents", err)
	if first != 3 {
		t.Errorf("second append starts at %d, want 3", first)
	}
	_, err = s.AppendThreadEvents(ctx(), org, thread, nil, keep)
	must(t, "AppendThreadEvents (none)", err)
	if last := lastSeq(t, s, org, thread); last != 4 {
		t.Errorf("LastThreadEventSeq = %d after 4 events, want 4", last)
	}
	want := append(threadEvents(runA, "lifecycle", "values"), threadEvents(runB, "lifecycle", "input.requested")...)
	checkThreadEvents(t, "events", readThread(t, s, org, thread, 0, readAt), 1, want)

	// A thread that does not exist (or not in this organization) has no log.
	_, err = s.AppendThreadEvents(ctx(), org, newID(), threadEvents(runA, "values"), keep)
	wantErr(t, "AppendThreadEvents to a missing thread", err, store.ErrNotFound)
	_, err = s.AppendThreadEvents(ctx(), newOrg(t, s), thread, threadEvents(runA, "values"), keep)
	wantErr(t, "AppendThreadEvents to another organization's thread", err, store.ErrNotFound)
}

func testThreadReadAfter(t *testing.T, s EventStore) {
	org, thread := newEventThread(t, s)
	run := newID()
	all := threadEvents(run, "a", "b", "c", "d", "e")
	_, err := s.AppendThreadEvents(ctx(), org, thread, all, keep)
	must(t, "AppendThreadEvents", err)
	checkThreadEvents(t, "after 0", readThread(t, s, org, thread, 0, readAt), 1, all)
	checkThreadEvents(t, "after 2", readThread(t, s, org, thread, 2, readAt), 3, all[2:])
	checkThreadEvents(t, "after 5", readThread(t, s, org, thread, 5, readAt), 6, nil)
	checkThreadEvents(t, "after 9", readThread(t, s, org, thread, 9, readAt), 10, nil)
	page, err := s.ThreadEvents(ctx(), org, thread, 1, 2, readAt)
	must(t, "ThreadEvents (limit 2)", err)
	checkThreadEvents(t, "after 1 limit 2", page, 2, all[1:3])
}

func testThreadEventIsolation(t *testing.T, s EventStore) {
	org, thread := newEventThread(t, s)
	other := newOrg(t, s)
	_, err := s.AppendThreadEvents(ctx(), org, thread, threadEvents(newID(), "a", "b"), keep)
	must(t, "AppendThreadEvents", err)
	checkThreadEvents(t, "another organization's read", readThread(t, s, other, thread, 0, readAt), 1, nil)
	if last := lastSeq(t, s, other, thread); last != 0 {
		t.Errorf("another organization sees LastThreadEventSeq %d, want 0", last)
	}
	// Another thread numbers its own events.
	org2, thread2 := newEventThread(t, s)
	first, err := s.AppendThreadEvents(ctx(), org2, thread2, threadEvents(newID(), "x"), keep)
	must(t, "AppendThreadEvents (other thread)", err)
	if first != 1 {
		t.Errorf("another thread's first event is %d, want 1", first)
	}
}

func testThreadEventExpiry(t *testing.T, s EventStore) {
	org, thread := newEventThread(t, s)
	run := newID()
	soon := expirySoon
	_, err := s.AppendThreadEvents(ctx(), org, thread, threadEvents(run, "old1", "old2"), soon)
	must(t, "AppendThreadEvents", err)
	_, err = s.AppendThreadEvents(ctx(), org, thread, threadEvents(run, "new"), soon.Add(time.Hour))
	must(t, "AppendThreadEvents", err)

	before := soon.Add(-time.Second)
	checkThreadEvents(t, "before expiry", readThread(t, s, org, thread, 0, before), 1, threadEvents(run, "old1", "old2", "new"))
	checkThreadEvents(t, "at the first expiry", readThread(t, s, org, thread, 0, soon), 3, threadEvents(run, "new"))

	n, err := s.DeleteExpiredRunEvents(ctx(), soon, 100000)
	must(t, "DeleteExpiredRunEvents", err)
	if n < 2 {
		t.Errorf("DeleteExpiredRunEvents removed %d, want at least this thread's 2", n)
	}
	checkThreadEvents(t, "after the deletion", readThread(t, s, org, thread, 0, before), 3, threadEvents(run, "new"))
	n, err = s.DeleteExpiredRunEvents(ctx(), soon.Add(time.Hour), 100000)
	must(t, "DeleteExpiredRunEvents", err)
	if n < 1 {
		t.Errorf("DeleteExpiredRunEvents removed %d, want at least this thread's last", n)
	}
	// Every event expired and deleted: the numbering still goes on, so a
	// client's cursor never names a later event.
	if last := lastSeq(t, s, org, thread); last != 3 {
		t.Errorf("LastThreadEventSeq = %d with every event deleted, want 3", last)
	}
	first, err := s.AppendThreadEvents(ctx(), org, thread, threadEvents(run, "later"), keep)
	must(t, "AppendThreadEvents after the expiry", err)
	if first != 4 {
		t.Errorf("an append after every event expired starts at %d, want 4", first)
	}
}

func testThreadEventsDeleted(t *testing.T, s EventStore) {
	org, thread := newEventThread(t, s)
	_, err := s.AppendThreadEvents(ctx(), org, thread, threadEvents(newID(), "a", "b"), keep)
	must(t, "AppendThreadEvents", err)
	must(t, "DeleteThread", s.DeleteThread(ctx(), org, thread))
	checkThreadEvents(t, "a deleted thread's events", readThread(t, s, org, thread, 0, readAt), 1, nil)
	if last := lastSeq(t, s, org, thread); last != 0 {
		t.Errorf("a deleted thread has LastThreadEventSeq %d, want 0", last)
	}
	_, err = s.AppendThreadEvents(ctx(), org, thread, threadEvents(newID(), "c"), keep)
	wantErr(t, "AppendThreadEvents to a deleted thread", err, store.ErrNotFound)
}

func testThreadConcurrentAppends(t *testing.T, s EventStore) {
	org, thread := newEventThread(t, s)
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
				first, err := s.AppendThreadEvents(ctx(), org, thread, threadEvents("run-"+tag, tag+"a", tag+"b"), keep)
				if err != nil {
					t.Errorf("AppendThreadEvents: %v", err)
					return
				}
				mu.Lock()
				firsts[first] = tag
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var got []store.ThreadEvent
	for after := int64(0); ; {
		page, err := s.ThreadEvents(ctx(), org, thread, after, 25, readAt)
		must(t, "ThreadEvents", err)
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1].Seq
	}
	if len(got) != 2*writers*appends {
		t.Fatalf("%d events, want %d", len(got), 2*writers*appends)
	}
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has Seq %d: the log has a gap or a duplicate", i, e.Seq)
		}
	}
	for first, tag := range firsts {
		if got[first-1].Event != tag+"a" || got[first].Event != tag+"b" {
			t.Errorf("append %s answered Seq %d, where the log holds %q, %q", tag, first, got[first-1].Event, got[first].Event)
		}
	}
}

// testThreadLargeEvents: a thread's events may be far larger than a
// database item, and are kept whole.
func testThreadLargeEvents(t *testing.T, s EventStore) {
	org, thread := newEventThread(t, s)
	run := newID()
	big := []store.ThreadEvent{
		{RunID: run, Event: "messages", Data: bigJSON(1_100_000, "thread-partial")},
		{RunID: run, Event: "values", Data: bigJSON(420_000, "thread-values")},
	}
	first, err := s.AppendThreadEvents(ctx(), org, thread, big, keep)
	must(t, "AppendThreadEvents of 1.5 MB of events", err)
	got := readThread(t, s, org, thread, first-1, readAt)
	if len(got) != len(big) {
		t.Fatalf("read back %d events, want %d", len(got), len(big))
	}
	for i := range big {
		checkBig(t, fmt.Sprintf("event %d data", i), got[i].Data, big[i].Data)
	}
}

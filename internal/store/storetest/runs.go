package storetest

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/store"
)

// RunsContract is the part of the suite for store.Runs (Run calls it).
//
// ClaimRun acts across organizations, so a test that claims first parks every
// run other tests left claimable: it claims them with a lease that outlives
// every time the suite uses (see park). The suite assumes nobody else claims
// runs from the store while it runs.
func RunsContract(t *testing.T, open func(t *testing.T) store.Store) {
	t.Run("Assistants", func(t *testing.T) { testAssistants(t, open(t)) })
	t.Run("AssistantSearch", func(t *testing.T) { testAssistantSearch(t, open(t)) })
	t.Run("Threads", func(t *testing.T) { testThreads(t, open(t)) })
	t.Run("ThreadSearch", func(t *testing.T) { testThreadSearch(t, open(t)) })
	t.Run("AddRun", func(t *testing.T) { testAddRun(t, open(t)) })
	t.Run("MultitaskStrategies", func(t *testing.T) { testMultitask(t, open(t)) })
	t.Run("ClaimOrder", func(t *testing.T) { testClaimOrder(t, open(t)) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, open(t)) })
	t.Run("ClaimRunByID", func(t *testing.T) { testClaimRunByID(t, open(t)) })
	t.Run("FinishRun", func(t *testing.T) { testFinishRun(t, open(t)) })
	t.Run("CancelRun", func(t *testing.T) { testCancelRun(t, open(t)) })
	t.Run("ListAndDeleteRuns", func(t *testing.T) { testListAndDeleteRuns(t, open(t)) })
	t.Run("Checkpoints", func(t *testing.T) { testCheckpoints(t, open(t)) })
	t.Run("CheckpointBatch", func(t *testing.T) { testCheckpointBatch(t, open(t)) })
	t.Run("UpdateThreadState", func(t *testing.T) { testUpdateThreadState(t, open(t)) })
	t.Run("RunsAcrossOrganizations", func(t *testing.T) { testRunsIsolation(t, open(t)) })
	t.Run("RunsConcurrency", func(t *testing.T) { testRunsConcurrency(t, open(t)) })
}

// ---- fixtures and helpers ----------------------------------------------------

// parkNow and parkLease are after every time the suite uses.
var (
	parkNow   = time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)
	parkLease = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

// park claims every run claimable now or later (left by other tests sharing
// the store) and holds it beyond any time the suite uses, so that ClaimRun
// only finds the calling test's runs afterwards.
func park(t *testing.T, s store.Store) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		_, ok, err := s.ClaimRun(ctx(), "storetest-parked", parkNow, parkLease)
		must(t, "ClaimRun (parking runs of other tests)", err)
		if !ok {
			return
		}
	}
	t.Fatal("ClaimRun never ran out of runs to park")
}

func eqAssistant(t *testing.T, got, want store.Assistant) {
	t.Helper()
	checkTime(t, "assistant CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, "assistant UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	checkBytes(t, "assistant Config", got.Config, want.Config)
	checkBytes(t, "assistant Context", got.Context, want.Context)
	checkBytes(t, "assistant Metadata", got.Metadata, want.Metadata)
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	got.UpdatedAt, want.UpdatedAt = time.Time{}, time.Time{}
	got.Config, want.Config, got.Context, want.Context = nil, nil, nil, nil
	got.Metadata, want.Metadata = nil, nil
	checkRest(t, "assistant", got, want)
}

func eqThread(t *testing.T, got, want store.Thread) {
	t.Helper()
	checkTime(t, "thread CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, "thread UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	checkBytes(t, "thread Metadata", got.Metadata, want.Metadata)
	checkBytes(t, "thread Config", got.Config, want.Config)
	eqSummary(t, got, want)
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	got.UpdatedAt, want.UpdatedAt = time.Time{}, time.Time{}
	got.Metadata, want.Metadata, got.Config, want.Config = nil, nil, nil, nil
	got.Values, want.Values, got.Interrupts, want.Interrupts, got.Error, want.Error = nil, nil, nil, nil, nil, nil
	checkRest(t, "thread", got, want)
}

// eqSummary compares a thread's status and summary of its latest state.
func eqSummary(t *testing.T, got, want store.Thread) {
	t.Helper()
	if got.Status != want.Status {
		t.Errorf("thread Status %q, want %q", got.Status, want.Status)
	}
	checkBytes(t, "thread Values", got.Values, want.Values)
	checkBytes(t, "thread Interrupts", got.Interrupts, want.Interrupts)
	checkBytes(t, "thread Error", got.Error, want.Error)
	if (got.Values == nil) != (want.Values == nil) {
		t.Errorf("thread Values %q, want %q (nil means none)", got.Values, want.Values)
	}
	if (got.Interrupts == nil) != (want.Interrupts == nil) {
		t.Errorf("thread Interrupts %q, want %q (nil means none)", got.Interrupts, want.Interrupts)
	}
	if (got.Error == nil) != (want.Error == nil) {
		t.Errorf("thread Error %q, want %q (nil means none)", got.Error, want.Error)
	}
}

func eqRun(t *testing.T, got, want store.Run) {
	t.Helper()
	for _, c := range []struct {
		name      string
		got, want time.Time
	}{
		{"NotBefore", got.NotBefore, want.NotBefore},
		{"CreatedAt", got.CreatedAt, want.CreatedAt},
		{"UpdatedAt", got.UpdatedAt, want.UpdatedAt},
		{"StartedAt", got.StartedAt, want.StartedAt},
		{"EndedAt", got.EndedAt, want.EndedAt},
		{"LeaseUntil", got.LeaseUntil, want.LeaseUntil},
	} {
		checkTime(t, "run "+c.name, c.got, c.want)
	}
	checkBytes(t, "run Metadata", got.Metadata, want.Metadata)
	checkBytes(t, "run Kwargs", got.Kwargs, want.Kwargs)
	checkBytes(t, "run Result", got.Result, want.Result)
	if (got.Result == nil) != (want.Result == nil) {
		t.Errorf("run Result %q, want %q (nil means none)", got.Result, want.Result)
	}
	for _, r := range []*store.Run{&got, &want} {
		r.NotBefore, r.CreatedAt, r.UpdatedAt = time.Time{}, time.Time{}, time.Time{}
		r.StartedAt, r.EndedAt, r.LeaseUntil = time.Time{}, time.Time{}, time.Time{}
		r.Metadata, r.Kwargs, r.Result = nil, nil, nil
	}
	checkRest(t, "run", got, want)
}

func eqCheckpoint(t *testing.T, got, want store.Checkpoint) {
	t.Helper()
	checkTime(t, "checkpoint CreatedAt", got.CreatedAt, want.CreatedAt)
	checkBytes(t, "checkpoint Data", got.Data, want.Data)
	got.CreatedAt, want.CreatedAt, got.Data, want.Data = time.Time{}, time.Time{}, nil, nil
	checkRest(t, "checkpoint", got, want)
}

func newAssistant(org, graph, name string, created time.Time, metadata string) store.Assistant {
	return store.Assistant{
		ID:          newID(),
		OrgID:       org,
		GraphID:     graph,
		Name:        name,
		Description: "the " + name + " assistant",
		Config:      doc("config-" + name),
		Context:     []byte(`{"user": "ü"}`),
		Metadata:    []byte(metadata),
		Version:     3,
		CreatedAt:   created,
		UpdatedAt:   created.Add(time.Millisecond),
	}
}

// createThread stores a new idle thread created at at(off) and returns it.
func createThread(t *testing.T, s store.Store, org string, off int) store.Thread {
	t.Helper()
	th := store.Thread{
		ID:        newID(),
		OrgID:     org,
		Status:    store.ThreadIdle,
		Metadata:  []byte(`{"kind": "test", "n": 1}`),
		Config:    doc("thread-config"),
		CreatedAt: at(off),
		UpdatedAt: at(off),
	}
	must(t, "CreateThread", s.CreateThread(ctx(), th))
	return th
}

// newRun returns a run of thread created (and startable) at at(off).
func newRun(org, thread string, off int, strategy string) store.Run {
	return store.Run{
		ID:                newID(),
		OrgID:             org,
		ThreadID:          thread,
		AssistantID:       "assistant-1",
		Metadata:          []byte(`{"source": "storetest"}`),
		Kwargs:            doc("kwargs"),
		MultitaskStrategy: strategy,
		NotBefore:         at(off),
		CreatedAt:         at(off),
		UpdatedAt:         at(off),
	}
}

// stored is r as AddRun must store it: pending, not started.
func stored(r store.Run) store.Run {
	r.Status = store.RunPending
	r.StartedAt, r.EndedAt, r.LeaseUntil = time.Time{}, time.Time{}, time.Time{}
	r.Result, r.CancelAction, r.LeaseOwner, r.Attempt = nil, "", "", 0
	return r
}

// addRun adds r to its existing thread, checks the stored run and returns it.
func addRun(t *testing.T, s store.Store, r store.Run) store.Run {
	t.Helper()
	got, created, err := s.AddRun(ctx(), store.NewRun{Run: r})
	must(t, "AddRun", err)
	if created {
		t.Errorf("AddRun to an existing thread: created = true")
	}
	eqRun(t, got, stored(r))
	return got
}

// claimed is r as ClaimRun by owner at now must leave it.
func claimed(r store.Run, owner string, now, until time.Time) store.Run {
	r.Status = store.RunRunning
	if r.StartedAt.IsZero() {
		r.StartedAt = now
	}
	r.LeaseOwner, r.LeaseUntil = owner, until
	r.Attempt++
	return r
}

// claimWant claims a run as owner and checks it is want (ID "" means none).
func claimWant(t *testing.T, s store.Store, owner string, now, until time.Time, want string) store.Run {
	t.Helper()
	got, ok, err := s.ClaimRun(ctx(), owner, now, until)
	must(t, "ClaimRun", err)
	switch {
	case want == "" && ok:
		t.Fatalf("ClaimRun at %v: got run %s (thread %s, status before claim unknown), want none", now, got.ID, got.ThreadID)
	case want != "" && !ok:
		t.Fatalf("ClaimRun at %v: no run, want %s", now, want)
	case want != "" && got.ID != want:
		t.Fatalf("ClaimRun at %v: run %s, want %s", now, got.ID, want)
	}
	return got
}

func getRun(t *testing.T, s store.Store, r store.Run) store.Run {
	t.Helper()
	got, err := s.Run(ctx(), r.OrgID, r.ThreadID, r.ID)
	must(t, "Run", err)
	return got
}

func getThread(t *testing.T, s store.Store, org, id string) store.Thread {
	t.Helper()
	got, err := s.Thread(ctx(), org, id)
	must(t, "Thread", err)
	return got
}

func wantThreadStatus(t *testing.T, s store.Store, org, id, want string) {
	t.Helper()
	if got := getThread(t, s, org, id); got.Status != want {
		t.Errorf("thread status %q, want %q", got.Status, want)
	}
}

func finish(org, thread, run, owner, status, threadStatus string, now time.Time) store.FinishedRun {
	return store.FinishedRun{OrgID: org, ThreadID: thread, RunID: run, LeaseOwner: owner,
		Status: status, Result: []byte(`{"ok": true}`), ThreadStatus: threadStatus, Now: now}
}

// checkpointIDs returns n time-ordered (UUIDv7) IDs, oldest first.
func checkpointIDs(t *testing.T, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		u, err := uuid.NewV7()
		must(t, "uuid.NewV7", err)
		ids[i] = u.String()
	}
	sort.Strings(ids)
	return ids
}

func newCheckpoint(thread, id, parent, run string, off int) store.Checkpoint {
	return store.Checkpoint{ThreadID: thread, ID: id, ParentID: parent, RunID: run,
		CreatedAt: at(off), Data: doc("checkpoint-" + id)}
}

func cpIDs(cps []store.Checkpoint) []string {
	out := []string{}
	for _, c := range cps {
		out = append(out, c.ID)
	}
	return out
}

func runIDs(rs []store.Run) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func threadIDs(ts []store.Thread) []string {
	out := []string{}
	for _, th := range ts {
		out = append(out, th.ID)
	}
	return out
}

func assistantIDs(as []store.Assistant) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

// ---- assistants ----------------------------------------------------------------

func testAssistants(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	a := newAssistant(org, "agent", "helper", at(0), `{"env": "prod"}`)
	must(t, "CreateAssistant", s.CreateAssistant(ctx(), a))
	got, err := s.Assistant(ctx(), org, a.ID)
	must(t, "Assistant", err)
	eqAssistant(t, got, a)

	dup := newAssistant(org, "other-graph", "dup", at(1), `{}`)
	dup.ID = a.ID
	wantErr(t, "CreateAssistant with a taken ID", s.CreateAssistant(ctx(), dup), store.ErrConflict)
	got, err = s.Assistant(ctx(), org, a.ID)
	must(t, "Assistant after conflict", err)
	eqAssistant(t, got, a)

	inOther := newAssistant(other, "agent", "same id elsewhere", at(2), `{}`)
	inOther.ID = a.ID
	must(t, "CreateAssistant with the same ID in another org", s.CreateAssistant(ctx(), inOther))
	got, err = s.Assistant(ctx(), other, a.ID)
	must(t, "Assistant of the other org", err)
	eqAssistant(t, got, inOther)

	for _, c := range []struct{ org, id string }{{org, newID()}, {newID(), a.ID}, {"", a.ID}} {
		_, err := s.Assistant(ctx(), c.org, c.id)
		wantErr(t, fmt.Sprintf("Assistant(%q, %q)", c.org, c.id), err, store.ErrNotFound)
	}

	wantErr(t, "DeleteAssistant from a third org", s.DeleteAssistant(ctx(), newID(), a.ID), store.ErrNotFound)
	must(t, "DeleteAssistant", s.DeleteAssistant(ctx(), org, a.ID))
	_, err = s.Assistant(ctx(), org, a.ID)
	wantErr(t, "Assistant after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteAssistant again", s.DeleteAssistant(ctx(), org, a.ID), store.ErrNotFound)
	got, err = s.Assistant(ctx(), other, a.ID)
	must(t, "Assistant of the other org after delete", err)
	eqAssistant(t, got, inOther)
	must(t, "CreateAssistant after delete", s.CreateAssistant(ctx(), a))
}

func testAssistantSearch(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	mk := func(graph, name string, off int, metadata string) store.Assistant {
		a := newAssistant(org, graph, name, at(off), metadata)
		must(t, "CreateAssistant "+name, s.CreateAssistant(ctx(), a))
		return a
	}
	a1 := mk("chat", "Support Bot", 10, `{"env": "prod", "team": {"a": 1, "b": [1, "x"]}, "n": 1}`)
	a2 := mk("chat", "sales bot", 11, `{"env": "dev", "n": 2}`)
	a3 := mk("search", "Support Search", 12, `{"n": 1.0, "env": "prod", "flag": true, "nil": null}`)
	a4 := mk("search", "tie", 12, `{"env": "staging"}`) // same CreatedAt as a3, inserted later
	a5 := mk("chat", "elsewhere", 13, `{"env": "prod"}`)
	foreign := newAssistant(newOrg(t, s), "chat", "Support Bot", at(14), `{"env": "prod"}`)
	must(t, "CreateAssistant in another org", s.CreateAssistant(ctx(), foreign))

	all, err := s.SearchAssistants(ctx(), org, store.AssistantFilter{})
	must(t, "SearchAssistants", err)
	checkRest(t, "SearchAssistants order (newest first, ties: later insert first)",
		assistantIDs(all), []string{a5.ID, a4.ID, a3.ID, a2.ID, a1.ID})
	eqAssistant(t, all[4], a1)

	tests := []struct {
		name string
		f    store.AssistantFilter
		want []string
	}{
		{"graph", store.AssistantFilter{GraphID: "search"}, []string{a4.ID, a3.ID}},
		{"name contains (case-sensitive)", store.AssistantFilter{NameContains: "Support"}, []string{a3.ID, a1.ID}},
		{"name and graph", store.AssistantFilter{NameContains: "bot", GraphID: "chat"}, []string{a2.ID}},
		{"metadata string", store.AssistantFilter{Metadata: []byte(`{"env": "prod"}`)}, []string{a5.ID, a3.ID, a1.ID}},
		{"metadata number 1 = 1.0", store.AssistantFilter{Metadata: []byte(`{"n": 1}`)}, []string{a3.ID, a1.ID}},
		{"metadata object, other key order and spelling", store.AssistantFilter{Metadata: []byte(`{"team":{"b":[1.0,"x"],"a":1}}`)}, []string{a1.ID}},
		{"metadata object is compared whole", store.AssistantFilter{Metadata: []byte(`{"team": {"a": 1}}`)}, nil},
		{"metadata array order matters", store.AssistantFilter{Metadata: []byte(`{"team": {"a": 1, "b": ["x", 1]}}`)}, nil},
		{"metadata bool", store.AssistantFilter{Metadata: []byte(`{"flag": true}`)}, []string{a3.ID}},
		{"metadata null", store.AssistantFilter{Metadata: []byte(`{"nil": null}`)}, []string{a3.ID}},
		{"metadata missing key is not null", store.AssistantFilter{Metadata: []byte(`{"absent": null}`)}, nil},
		{"metadata string is not number", store.AssistantFilter{Metadata: []byte(`{"n": "1"}`)}, nil},
		{"metadata all keys", store.AssistantFilter{Metadata: []byte(`{"env": "prod", "n": 1}`)}, []string{a3.ID, a1.ID}},
		{"metadata one key differs", store.AssistantFilter{Metadata: []byte(`{"env": "prod", "n": 2}`)}, nil},
		{"metadata empty object", store.AssistantFilter{Metadata: []byte(`{}`)}, []string{a5.ID, a4.ID, a3.ID, a2.ID, a1.ID}},
		{"metadata with graph", store.AssistantFilter{Metadata: []byte(`{"env": "prod"}`), GraphID: "chat"}, []string{a5.ID, a1.ID}},
		{"metadata paged", store.AssistantFilter{Metadata: []byte(`{"env": "prod"}`), Limit: 1, Offset: 1}, []string{a3.ID}},
		{"metadata page past the end", store.AssistantFilter{Metadata: []byte(`{"env": "prod"}`), Offset: 3}, nil},
		{"paged", store.AssistantFilter{Limit: 2, Offset: 1}, []string{a4.ID, a3.ID}},
		{"no match", store.AssistantFilter{GraphID: "none"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.SearchAssistants(ctx(), org, tc.f)
			must(t, "SearchAssistants", err)
			want := tc.want
			if want == nil {
				want = []string{}
			}
			checkRest(t, "SearchAssistants", assistantIDs(got), want)
		})
	}

	t.Run("default limit 10", func(t *testing.T) {
		org := newOrg(t, s)
		for i := 0; i < 12; i++ {
			must(t, "CreateAssistant", s.CreateAssistant(ctx(), newAssistant(org, "g", fmt.Sprint(i), at(100+i), `{"k": 1}`)))
		}
		for _, f := range []store.AssistantFilter{{}, {Metadata: []byte(`{"k": 1}`)}} {
			got, err := s.SearchAssistants(ctx(), org, f)
			must(t, "SearchAssistants", err)
			if len(got) != 10 || got[0].Name != "11" {
				t.Errorf("SearchAssistants(%s) with Limit 0 = %d assistants (first %v), want 10 from the newest", f.Metadata, len(got), assistantIDs(got[:1]))
			}
			f.Offset = 10
			got, err = s.SearchAssistants(ctx(), org, f)
			must(t, "SearchAssistants", err)
			if len(got) != 2 || got[1].Name != "0" {
				t.Errorf("SearchAssistants(%s) from offset 10 = %d assistants, want the 2 oldest", f.Metadata, len(got))
			}
		}
	})
}

// ---- threads -------------------------------------------------------------------

func testThreads(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	th := createThread(t, s, org, 0)
	eqThread(t, getThread(t, s, org, th.ID), th)

	full := store.Thread{ID: newID(), OrgID: org, Status: store.ThreadInterrupted,
		Metadata: []byte(`{"a": 1}`), Config: []byte(`{}`), Values: doc("values"),
		Interrupts: []byte(`{"task": [{"id": "i1", "value": "?"}]}`), Error: []byte(`{"error": "E", "message": "m"}`),
		CreatedAt: at(1), UpdatedAt: at(2)}
	must(t, "CreateThread with a summary", s.CreateThread(ctx(), full))
	eqThread(t, getThread(t, s, org, full.ID), full)

	dup := th
	dup.Metadata = []byte(`{"dup": true}`)
	wantErr(t, "CreateThread with a taken ID", s.CreateThread(ctx(), dup), store.ErrConflict)
	eqThread(t, getThread(t, s, org, th.ID), th)

	inOther := th
	inOther.OrgID = other
	inOther.Metadata = []byte(`{"org": "other"}`)
	must(t, "CreateThread with the same ID in another org", s.CreateThread(ctx(), inOther))
	eqThread(t, getThread(t, s, other, th.ID), inOther)

	_, err := s.Thread(ctx(), org, newID())
	wantErr(t, "Thread missing", err, store.ErrNotFound)
	_, err = s.Thread(ctx(), newID(), th.ID)
	wantErr(t, "Thread from a third org", err, store.ErrNotFound)

	t.Run("UpdateThreadMetadata", func(t *testing.T) {
		meta := []byte(`{"kind": "test", "n": 2, "new": ["x"]}`)
		got, err := s.UpdateThreadMetadata(ctx(), org, th.ID, meta, at(5))
		must(t, "UpdateThreadMetadata", err)
		want := th
		want.Metadata, want.UpdatedAt = meta, at(5)
		eqThread(t, got, want)
		eqThread(t, getThread(t, s, org, th.ID), want)
		eqThread(t, getThread(t, s, other, th.ID), inOther)

		_, err = s.UpdateThreadMetadata(ctx(), org, newID(), meta, at(6))
		wantErr(t, "UpdateThreadMetadata missing", err, store.ErrNotFound)
		_, err = s.UpdateThreadMetadata(ctx(), newID(), th.ID, meta, at(6))
		wantErr(t, "UpdateThreadMetadata from a third org", err, store.ErrNotFound)
	})

	t.Run("DeleteThread", func(t *testing.T) {
		park(t, s)
		victim := createThread(t, s, org, 10)
		keep := createThread(t, s, org, 11)
		r1 := addRun(t, s, newRun(org, victim.ID, 10, store.MultitaskEnqueue))
		r2 := addRun(t, s, newRun(org, victim.ID, 11, store.MultitaskEnqueue))
		kept := addRun(t, s, newRun(org, keep.ID, 12, store.MultitaskEnqueue))
		claimWant(t, s, "w", at(20), at(80), r1.ID)
		ids := checkpointIDs(t, 2)
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(victim.ID, ids[0], "", r1.ID, 12)))
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(keep.ID, ids[1], "", "", 12)))

		wantErr(t, "DeleteThread from another org", s.DeleteThread(ctx(), other, victim.ID), store.ErrNotFound)
		must(t, "DeleteThread", s.DeleteThread(ctx(), org, victim.ID))
		_, err := s.Thread(ctx(), org, victim.ID)
		wantErr(t, "Thread after delete", err, store.ErrNotFound)
		for _, r := range []store.Run{r1, r2} {
			_, err := s.Run(ctx(), org, victim.ID, r.ID)
			wantErr(t, "Run of a deleted thread", err, store.ErrNotFound)
		}
		_, err = s.Checkpoint(ctx(), org, victim.ID, ids[0])
		wantErr(t, "Checkpoint of a deleted thread", err, store.ErrNotFound)
		_, err = s.RenewLease(ctx(), r1.ID, "w", at(90))
		wantErr(t, "RenewLease of a run deleted with its thread", err, store.ErrStale)
		wantErr(t, "FinishRun of a run deleted with its thread",
			s.FinishRun(ctx(), finish(org, victim.ID, r1.ID, "w", store.RunSuccess, store.ThreadIdle, at(30))), store.ErrStale)
		wantErr(t, "DeleteThread again", s.DeleteThread(ctx(), org, victim.ID), store.ErrNotFound)

		// The other thread keeps its run and checkpoint; the deleted one's
		// pending run is not claimable any more.
		eqRun(t, getRun(t, s, kept), kept)
		_, err = s.Checkpoint(ctx(), org, keep.ID, ids[1])
		must(t, "Checkpoint of the kept thread", err)
		claimWant(t, s, "w", at(20), at(80), kept.ID)
		claimWant(t, s, "w", at(20), at(80), "")
	})
}

func testThreadSearch(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	mk := func(off int, status, metadata, values string) store.Thread {
		th := store.Thread{ID: newID(), OrgID: org, Status: status, Metadata: []byte(metadata),
			Config: []byte(`{}`), CreatedAt: at(off), UpdatedAt: at(off)}
		if values != "" {
			th.Values = []byte(values)
		}
		must(t, "CreateThread", s.CreateThread(ctx(), th))
		return th
	}
	t1 := mk(0, store.ThreadIdle, `{"user": "ann", "tags": ["a"]}`, `{"messages": [], "step": 1}`)
	t2 := mk(1, store.ThreadError, `{"user": "bob"}`, `{"step": 2}`)
	t3 := mk(2, store.ThreadIdle, `{"user": "ann", "tags": ["a", "b"]}`, "")
	t4 := mk(2, store.ThreadInterrupted, `{"tags": ["a"], "user": "ann"}`, `{"step": 1.0, "messages": []}`)
	foreign := store.Thread{ID: newID(), OrgID: newOrg(t, s), Status: store.ThreadIdle,
		Metadata: []byte(`{"user": "ann"}`), Config: []byte(`{}`), CreatedAt: at(3), UpdatedAt: at(3)}
	must(t, "CreateThread in another org", s.CreateThread(ctx(), foreign))

	tests := []struct {
		name string
		f    store.ThreadFilter
		want []string
	}{
		{"all, newest first", store.ThreadFilter{}, []string{t4.ID, t3.ID, t2.ID, t1.ID}},
		{"ids", store.ThreadFilter{IDs: []string{t1.ID, t3.ID, foreign.ID, newID()}}, []string{t3.ID, t1.ID}},
		{"status", store.ThreadFilter{Status: store.ThreadIdle}, []string{t3.ID, t1.ID}},
		{"metadata", store.ThreadFilter{Metadata: []byte(`{"user": "ann"}`)}, []string{t4.ID, t3.ID, t1.ID}},
		{"metadata array", store.ThreadFilter{Metadata: []byte(`{"tags": ["a"]}`)}, []string{t4.ID, t1.ID}},
		{"values", store.ThreadFilter{Values: []byte(`{"step": 1}`)}, []string{t4.ID, t1.ID}},
		{"values empty array", store.ThreadFilter{Values: []byte(`{"messages": []}`)}, []string{t4.ID, t1.ID}},
		{"values and metadata", store.ThreadFilter{Values: []byte(`{"step": 1}`), Metadata: []byte(`{"tags": ["a"], "user": "ann"}`)}, []string{t4.ID, t1.ID}},
		{"values and status", store.ThreadFilter{Values: []byte(`{"step": 1}`), Status: store.ThreadIdle}, []string{t1.ID}},
		{"values of a thread without values", store.ThreadFilter{Values: []byte(`{"step": 2}`), IDs: []string{t3.ID}}, nil},
		{"metadata paged", store.ThreadFilter{Metadata: []byte(`{"user": "ann"}`), Limit: 2, Offset: 1}, []string{t3.ID, t1.ID}},
		{"paged", store.ThreadFilter{Limit: 1, Offset: 2}, []string{t2.ID}},
		{"no match", store.ThreadFilter{Metadata: []byte(`{"user": "zed"}`)}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.SearchThreads(ctx(), org, tc.f)
			must(t, "SearchThreads", err)
			want := tc.want
			if want == nil {
				want = []string{}
			}
			checkRest(t, "SearchThreads", threadIDs(got), want)
		})
	}
	got, err := s.SearchThreads(ctx(), org, store.ThreadFilter{IDs: []string{t2.ID}})
	must(t, "SearchThreads", err)
	if len(got) == 1 {
		eqThread(t, got[0], t2)
	}

	t.Run("default limit 10", func(t *testing.T) {
		org := newOrg(t, s)
		var ids []string
		for i := 0; i < 12; i++ {
			ids = append(ids, createThread(t, s, org, 100+i).ID)
		}
		for _, f := range []store.ThreadFilter{{}, {Metadata: []byte(`{"kind": "test"}`)}} {
			got, err := s.SearchThreads(ctx(), org, f)
			must(t, "SearchThreads", err)
			if len(got) != 10 || got[0].ID != ids[11] {
				t.Errorf("SearchThreads(%s) with Limit 0 = %d threads, want the 10 newest", f.Metadata, len(got))
			}
		}
	})
}

// ---- adding runs -----------------------------------------------------------------

func testAddRun(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)

	t.Run("MissingThread", func(t *testing.T) {
		r := newRun(org, newID(), 0, store.MultitaskEnqueue)
		_, _, err := s.AddRun(ctx(), store.NewRun{Run: r})
		wantErr(t, "AddRun to a missing thread", err, store.ErrNotFound)
		_, err = s.Thread(ctx(), org, r.ThreadID)
		wantErr(t, "Thread after the failed AddRun", err, store.ErrNotFound)
		_, err = s.Run(ctx(), org, r.ThreadID, r.ID)
		wantErr(t, "Run after the failed AddRun", err, store.ErrNotFound)

		// Another organization's thread is missing too.
		th := createThread(t, s, other, 0)
		r = newRun(org, th.ID, 0, store.MultitaskEnqueue)
		_, _, err = s.AddRun(ctx(), store.NewRun{Run: r})
		wantErr(t, "AddRun to another org's thread", err, store.ErrNotFound)
		eqThread(t, getThread(t, s, other, th.ID), th)
		_, err = s.Run(ctx(), org, th.ID, r.ID)
		wantErr(t, "Run after the failed AddRun", err, store.ErrNotFound)
		runs, err := s.ListRuns(ctx(), other, th.ID, "", 0, 0)
		must(t, "ListRuns", err)
		checkRest(t, "runs of the other org's thread", runIDs(runs), []string{})
	})

	t.Run("CreateThread", func(t *testing.T) {
		r := newRun(org, newID(), 1, store.MultitaskReject)
		meta := []byte(`{"graph_id": "agent", "x": [1, 2]}`)
		got, created, err := s.AddRun(ctx(), store.NewRun{Run: r, CreateThread: true, ThreadMetadata: meta})
		must(t, "AddRun creating the thread", err)
		if !created {
			t.Error("AddRun creating the thread: created = false")
		}
		eqRun(t, got, stored(r))
		eqRun(t, getRun(t, s, r), stored(r))
		th := getThread(t, s, org, r.ThreadID)
		checkBytes(t, "created thread Metadata", th.Metadata, meta)
		if th.Status != store.ThreadBusy || th.OrgID != org || th.ID != r.ThreadID {
			t.Errorf("created thread: %+v, want busy thread %s of org %s", th, r.ThreadID, org)
		}
		if th.Values != nil || th.Interrupts != nil || th.Error != nil {
			t.Errorf("created thread has a summary: %+v", th)
		}

		// The thread exists now: CreateThread is a no-op.
		r2 := newRun(org, r.ThreadID, 2, store.MultitaskEnqueue)
		_, created, err = s.AddRun(ctx(), store.NewRun{Run: r2, CreateThread: true, ThreadMetadata: []byte(`{"other": 1}`)})
		must(t, "AddRun to the existing thread", err)
		if created {
			t.Error("AddRun with CreateThread to an existing thread: created = true")
		}
		checkBytes(t, "thread Metadata after the second AddRun", getThread(t, s, org, r.ThreadID).Metadata, meta)

		// The same thread ID in another org is another thread.
		r3 := newRun(other, r.ThreadID, 3, store.MultitaskReject)
		_, created, err = s.AddRun(ctx(), store.NewRun{Run: r3, CreateThread: true})
		must(t, "AddRun creating the same thread ID in another org", err)
		if !created {
			t.Error("AddRun creating a thread in another org: created = false")
		}
		runs, err := s.ListRuns(ctx(), org, r.ThreadID, "", 0, 0)
		must(t, "ListRuns", err)
		checkRest(t, "runs of the first org's thread", runIDs(runs), []string{r2.ID, r.ID})
	})

	t.Run("StoredAsPending", func(t *testing.T) {
		th := createThread(t, s, org, 4)
		r := newRun(org, th.ID, 4, store.MultitaskEnqueue)
		// Execution fields the caller sets are not taken.
		r.Status, r.StartedAt, r.EndedAt = store.RunSuccess, at(5), at(6)
		r.Result, r.CancelAction, r.LeaseOwner, r.LeaseUntil, r.Attempt = []byte(`{}`), store.CancelRollback, "w", at(7), 4
		r.Temporary = true
		r.NotBefore = at(60)
		got := addRun(t, s, r)
		if !got.Temporary || got.Status != store.RunPending {
			t.Errorf("stored run: %+v", got)
		}
		wantThreadStatus(t, s, org, th.ID, store.ThreadBusy)
	})

	t.Run("DuplicateRunID", func(t *testing.T) {
		th := createThread(t, s, org, 5)
		r := addRun(t, s, newRun(org, th.ID, 5, store.MultitaskEnqueue))
		th2 := createThread(t, s, org, 6)
		dup := newRun(org, th2.ID, 6, store.MultitaskEnqueue)
		dup.ID = r.ID
		_, _, err := s.AddRun(ctx(), store.NewRun{Run: dup})
		wantErr(t, "AddRun with a taken run ID", err, store.ErrConflict)
		wantThreadStatus(t, s, org, th2.ID, store.ThreadIdle)
		eqRun(t, getRun(t, s, r), r)

		created := newRun(org, newID(), 6, store.MultitaskEnqueue)
		created.ID = r.ID
		_, _, err = s.AddRun(ctx(), store.NewRun{Run: created, CreateThread: true})
		wantErr(t, "AddRun creating a thread with a taken run ID", err, store.ErrConflict)
		_, err = s.Thread(ctx(), org, created.ThreadID)
		wantErr(t, "thread of the failed AddRun", err, store.ErrNotFound)
	})

	t.Run("Reject", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 7)
		first := addRun(t, s, newRun(org, th.ID, 7, store.MultitaskReject))
		for _, running := range []bool{false, true} {
			if running {
				claimWant(t, s, "w", at(8), at(100), first.ID)
			}
			r := newRun(org, th.ID, 8, store.MultitaskReject)
			_, _, err := s.AddRun(ctx(), store.NewRun{Run: r, CreateThread: true})
			wantErr(t, fmt.Sprintf("AddRun reject with an inflight run (running %v)", running), err, store.ErrBusy)
			_, err = s.Run(ctx(), org, th.ID, r.ID)
			wantErr(t, "Run of the rejected AddRun", err, store.ErrNotFound)
			runs, err := s.ListRuns(ctx(), org, th.ID, "", 0, 0)
			must(t, "ListRuns", err)
			checkRest(t, "runs after the rejected AddRun", runIDs(runs), []string{first.ID})
		}
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, first.ID, "w", store.RunSuccess, store.ThreadIdle, at(9))))
		addRun(t, s, newRun(org, th.ID, 10, store.MultitaskReject))
	})
}

func testMultitask(t *testing.T, s store.Store) {
	org := newOrg(t, s)

	// setup gives a thread with a running run (claimed by "w") and a pending
	// one, each with a checkpoint it wrote, and a checkpoint of no run.
	type fixture struct {
		th               store.Thread
		running, pending store.Run
		cps              []string // of running, of pending, of no run
	}
	setup := func(t *testing.T, off int) fixture {
		park(t, s)
		th := createThread(t, s, org, off)
		running := addRun(t, s, newRun(org, th.ID, off, store.MultitaskEnqueue))
		pending := addRun(t, s, newRun(org, th.ID, off+1, store.MultitaskEnqueue))
		running = claimWant(t, s, "w", at(off+2), at(off+100), running.ID)
		cps := checkpointIDs(t, 3)
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(th.ID, cps[0], "", running.ID, off+3)))
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(th.ID, cps[1], cps[0], pending.ID, off+3)))
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(th.ID, cps[2], cps[1], "", off+3)))
		return fixture{th, running, pending, cps}
	}
	hasCheckpoint := func(t *testing.T, th, id string, want bool) {
		t.Helper()
		_, err := s.Checkpoint(ctx(), org, th, id)
		if want {
			must(t, "Checkpoint", err)
		} else {
			wantErr(t, "Checkpoint of a rolled back run", err, store.ErrNotFound)
		}
	}

	t.Run("Enqueue", func(t *testing.T) {
		f := setup(t, 0)
		r := addRun(t, s, newRun(org, f.th.ID, 10, store.MultitaskEnqueue))
		eqRun(t, getRun(t, s, f.pending), f.pending)
		eqRun(t, getRun(t, s, f.running), f.running)
		eqRun(t, getRun(t, s, r), stored(r))
		wantThreadStatus(t, s, org, f.th.ID, store.ThreadBusy)
	})

	t.Run("Interrupt", func(t *testing.T) {
		f := setup(t, 100)
		r := addRun(t, s, newRun(org, f.th.ID, 110, store.MultitaskInterrupt))

		got := getRun(t, s, f.running)
		if got.Status != store.RunRunning || got.CancelAction != store.CancelInterrupt || got.LeaseOwner != "w" {
			t.Errorf("running run after interrupt: status %q cancel %q owner %q, want running, interrupt, w", got.Status, got.CancelAction, got.LeaseOwner)
		}
		renewed, err := s.RenewLease(ctx(), f.running.ID, "w", at(300))
		must(t, "RenewLease", err)
		if renewed.CancelAction != store.CancelInterrupt {
			t.Errorf("RenewLease: CancelAction %q, want interrupt", renewed.CancelAction)
		}

		got = getRun(t, s, f.pending)
		if got.Status != store.RunInterrupted || got.CancelAction != store.CancelInterrupt || got.EndedAt.IsZero() {
			t.Errorf("pending run after interrupt: status %q cancel %q ended %v, want interrupted, interrupt, set", got.Status, got.CancelAction, got.EndedAt)
		}
		eqRun(t, getRun(t, s, r), stored(r))
		for _, id := range f.cps {
			hasCheckpoint(t, f.th.ID, id, true)
		}
		wantThreadStatus(t, s, org, f.th.ID, store.ThreadBusy)

		// The interrupted worker finishes; the new run is next.
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, f.th.ID, f.running.ID, "w", store.RunInterrupted, store.ThreadIdle, at(120))))
		claimWant(t, s, "w2", at(121), at(200), r.ID)
	})

	t.Run("Rollback", func(t *testing.T) {
		f := setup(t, 200)
		r := addRun(t, s, newRun(org, f.th.ID, 210, store.MultitaskRollback))

		got := getRun(t, s, f.running)
		if got.Status != store.RunRunning || got.CancelAction != store.CancelRollback {
			t.Errorf("running run after rollback: status %q cancel %q, want running, rollback", got.Status, got.CancelAction)
		}
		_, err := s.Run(ctx(), org, f.th.ID, f.pending.ID)
		wantErr(t, "pending run after rollback", err, store.ErrNotFound)
		hasCheckpoint(t, f.th.ID, f.cps[0], true) // the running run's, until it finishes
		hasCheckpoint(t, f.th.ID, f.cps[1], false)
		hasCheckpoint(t, f.th.ID, f.cps[2], true)
		eqRun(t, getRun(t, s, r), stored(r))
		wantThreadStatus(t, s, org, f.th.ID, store.ThreadBusy)

		// The worker finishes the rolled back run: it goes with its checkpoints.
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, f.th.ID, f.running.ID, "w", store.RunInterrupted, store.ThreadIdle, at(220))))
		_, err = s.Run(ctx(), org, f.th.ID, f.running.ID)
		wantErr(t, "rolled back run after FinishRun", err, store.ErrNotFound)
		hasCheckpoint(t, f.th.ID, f.cps[0], false)
		hasCheckpoint(t, f.th.ID, f.cps[2], true)
		wantThreadStatus(t, s, org, f.th.ID, store.ThreadBusy) // r is pending
		claimWant(t, s, "w2", at(221), at(300), r.ID)
	})

	t.Run("OnIdleThread", func(t *testing.T) {
		for i, strategy := range []string{store.MultitaskReject, store.MultitaskEnqueue, store.MultitaskInterrupt, store.MultitaskRollback} {
			th := createThread(t, s, org, 300+i)
			addRun(t, s, newRun(org, th.ID, 300+i, strategy))
			wantThreadStatus(t, s, org, th.ID, store.ThreadBusy)
		}
	})
}

// ---- claiming and leases -----------------------------------------------------------

func testClaimOrder(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)

	t.Run("FIFOPerThread", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 0)
		var want []string
		for i := 0; i < 4; i++ {
			off := 1
			if i == 3 {
				off = 2
			}
			// Three runs share NotBefore and CreatedAt: insertion order decides.
			want = append(want, addRun(t, s, newRun(org, th.ID, off, store.MultitaskEnqueue)).ID)
		}
		var got []string
		for i := range want {
			now := at(10 + i)
			r := claimWant(t, s, "w", now, now.Add(time.Minute), want[i])
			got = append(got, r.ID)
			// The next run of the thread waits for this one.
			claimWant(t, s, "w", now, now.Add(time.Minute), "")
			must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r.ID, "w", store.RunSuccess, store.ThreadIdle, now)))
		}
		checkRest(t, "claim order", got, want)
		wantThreadStatus(t, s, org, th.ID, store.ThreadIdle)
	})

	t.Run("NotBeforeFirst", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 0)
		late := newRun(org, th.ID, 1, store.MultitaskEnqueue)
		late.NotBefore = at(30)
		addRun(t, s, late)
		early := newRun(org, th.ID, 2, store.MultitaskEnqueue)
		early.NotBefore = at(20)
		addRun(t, s, early)
		claimWant(t, s, "w", at(15), at(100), "")
		r := claimWant(t, s, "w", at(25), at(100), early.ID)
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r.ID, "w", store.RunSuccess, store.ThreadIdle, at(26))))
		claimWant(t, s, "w", at(29), at(100), "")
		claimWant(t, s, "w", at(30), at(100), late.ID) // NotBefore itself has passed
	})

	t.Run("ThreadsInParallel", func(t *testing.T) {
		park(t, s)
		a, b := createThread(t, s, org, 0), createThread(t, s, other, 0)
		a1 := addRun(t, s, newRun(org, a.ID, 1, store.MultitaskEnqueue))
		a2 := addRun(t, s, newRun(org, a.ID, 2, store.MultitaskEnqueue))
		b1 := addRun(t, s, newRun(other, b.ID, 3, store.MultitaskEnqueue))
		now, until := at(10), at(100)
		got := claimWant(t, s, "w1", now, until, a1.ID)
		want := claimed(a1, "w1", now, until)
		want.UpdatedAt = got.UpdatedAt
		eqRun(t, got, want)
		eqRun(t, getRun(t, s, a1), got)
		got = claimWant(t, s, "w2", now, until, b1.ID)
		want = claimed(b1, "w2", now, until)
		want.UpdatedAt = got.UpdatedAt
		eqRun(t, got, want)
		claimWant(t, s, "w3", now, until, "")
		eqRun(t, getRun(t, s, a2), a2)
		wantThreadStatus(t, s, org, a.ID, store.ThreadBusy)
		wantThreadStatus(t, s, other, b.ID, store.ThreadBusy)
	})

	t.Run("OldestAcrossThreads", func(t *testing.T) {
		park(t, s)
		var want []string
		threads := []store.Thread{createThread(t, s, org, 0), createThread(t, s, other, 0), createThread(t, s, org, 0)}
		for i, off := range []int{3, 1, 2} {
			r := newRun(threads[i].OrgID, threads[i].ID, off, store.MultitaskEnqueue)
			addRun(t, s, r)
			want = append(want, r.ID)
		}
		want = []string{want[1], want[2], want[0]}
		for _, id := range want {
			claimWant(t, s, "w", at(10), at(100), id)
		}
	})

	t.Run("NothingToClaim", func(t *testing.T) {
		park(t, s)
		claimWant(t, s, "w", at(0), at(1), "")
	})
}

func testLeases(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	park(t, s)
	th := createThread(t, s, org, 0)
	r1 := addRun(t, s, newRun(org, th.ID, 1, store.MultitaskEnqueue))

	got := claimWant(t, s, "w1", at(10), at(20), r1.ID)
	want := claimed(r1, "w1", at(10), at(20))
	want.UpdatedAt = got.UpdatedAt
	eqRun(t, got, want)

	// A run enqueued later, but to start earlier: it still waits for r1.
	r2 := newRun(org, th.ID, 2, store.MultitaskEnqueue)
	r2.NotBefore = at(0)
	addRun(t, s, r2)

	_, err := s.RenewLease(ctx(), r1.ID, "w2", at(40))
	wantErr(t, "RenewLease by a stranger", err, store.ErrStale)
	_, err = s.RenewLease(ctx(), newID(), "w1", at(40))
	wantErr(t, "RenewLease of a missing run", err, store.ErrStale)
	renewed, err := s.RenewLease(ctx(), r1.ID, "w1", at(30))
	must(t, "RenewLease", err)
	want.LeaseUntil = at(30)
	want.UpdatedAt = renewed.UpdatedAt
	eqRun(t, renewed, want)
	eqRun(t, getRun(t, s, r1), renewed)

	claimWant(t, s, "w2", at(25), at(60), "") // lease renewed past 25

	// The lease expires: r1 is claimed again, before r2.
	got = claimWant(t, s, "w2", at(31), at(60), r1.ID)
	want = claimed(renewed, "w2", at(31), at(60))
	want.UpdatedAt = got.UpdatedAt
	eqRun(t, got, want)
	if got.Attempt != 2 {
		t.Errorf("Attempt after a second claim = %d, want 2", got.Attempt)
	}
	claimWant(t, s, "w3", at(32), at(60), "")

	// The first worker lost the run.
	_, err = s.RenewLease(ctx(), r1.ID, "w1", at(90))
	wantErr(t, "RenewLease by the previous owner", err, store.ErrStale)
	wantErr(t, "FinishRun by the previous owner",
		s.FinishRun(ctx(), finish(org, th.ID, r1.ID, "w1", store.RunSuccess, store.ThreadIdle, at(33))), store.ErrStale)
	eqRun(t, getRun(t, s, r1), got)
	wantThreadStatus(t, s, org, th.ID, store.ThreadBusy)

	must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r1.ID, "w2", store.RunSuccess, store.ThreadIdle, at(34))))
	_, err = s.RenewLease(ctx(), r1.ID, "w2", at(90))
	wantErr(t, "RenewLease of a finished run", err, store.ErrStale)
	wantErr(t, "FinishRun twice",
		s.FinishRun(ctx(), finish(org, th.ID, r1.ID, "w2", store.RunError, store.ThreadError, at(35))), store.ErrStale)
	if got := getRun(t, s, r1); got.Status != store.RunSuccess {
		t.Errorf("status after a second FinishRun: %q, want success", got.Status)
	}
	wantErr(t, "FinishRun of a pending run",
		s.FinishRun(ctx(), finish(org, th.ID, r2.ID, "", store.RunSuccess, store.ThreadIdle, at(35))), store.ErrStale)
	claimWant(t, s, "w3", at(36), at(60), r2.ID)
}

// ---- finishing and cancelling ---------------------------------------------------------

func testFinishRun(t *testing.T, s store.Store) {
	org := newOrg(t, s)

	t.Run("SettlesRunAndThread", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 0)
		r := addRun(t, s, newRun(org, th.ID, 1, store.MultitaskEnqueue))
		c := claimWant(t, s, "w", at(2), at(50), r.ID)
		f := finish(org, th.ID, r.ID, "w", store.RunSuccess, store.ThreadInterrupted, at(3))
		f.Result = doc("result")
		f.Values = doc("values")
		f.Interrupts = []byte(`{"t1": [{"id": "i", "value": 1}]}`)
		f.Error = []byte(`{"error": "Oops", "message": "x"}`)
		must(t, "FinishRun", s.FinishRun(ctx(), f))

		want := c
		want.Status, want.Result, want.EndedAt, want.UpdatedAt = store.RunSuccess, f.Result, at(3), at(3)
		want.LeaseOwner, want.LeaseUntil = "", time.Time{}
		eqRun(t, getRun(t, s, r), want)
		gotThread := getThread(t, s, org, th.ID)
		eqSummary(t, gotThread, store.Thread{Status: store.ThreadInterrupted, Values: f.Values,
			Interrupts: f.Interrupts, Error: f.Error})
		checkBytes(t, "thread Metadata", gotThread.Metadata, th.Metadata)

		// nil Values leave the values; nil Interrupts and Error clear theirs.
		r2 := addRun(t, s, newRun(org, th.ID, 4, store.MultitaskEnqueue))
		wantThreadStatus(t, s, org, th.ID, store.ThreadBusy)
		claimWant(t, s, "w", at(5), at(50), r2.ID)
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r2.ID, "w", store.RunError, store.ThreadError, at(6))))
		eqSummary(t, getThread(t, s, org, th.ID), store.Thread{Status: store.ThreadError, Values: f.Values})
		if got := getRun(t, s, r2); got.Status != store.RunError || got.CancelAction != "" {
			t.Errorf("run after FinishRun: status %q cancel %q, want error and none", got.Status, got.CancelAction)
		}
	})

	t.Run("BusyWhileAnotherRunIsInflight", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 0)
		r1 := addRun(t, s, newRun(org, th.ID, 1, store.MultitaskEnqueue))
		r2 := addRun(t, s, newRun(org, th.ID, 2, store.MultitaskEnqueue))
		claimWant(t, s, "w", at(3), at(50), r1.ID)
		f := finish(org, th.ID, r1.ID, "w", store.RunSuccess, store.ThreadIdle, at(4))
		f.Values = []byte(`{"step": 1}`)
		must(t, "FinishRun", s.FinishRun(ctx(), f))
		eqSummary(t, getThread(t, s, org, th.ID), store.Thread{Status: store.ThreadBusy, Values: f.Values})
		claimWant(t, s, "w", at(5), at(50), r2.ID)
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r2.ID, "w", store.RunTimeout, store.ThreadError, at(6))))
		eqSummary(t, getThread(t, s, org, th.ID), store.Thread{Status: store.ThreadError, Values: f.Values})
	})

	t.Run("Rollback", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 0)
		cps := checkpointIDs(t, 3)
		state := store.Checkpoint{ThreadID: th.ID, ID: cps[0], CreatedAt: at(0), Data: []byte(`{}`)}
		must(t, "UpdateThreadState", s.UpdateThreadState(ctx(), org, state, []byte(`{"before": true}`), nil, store.ThreadIdle, at(0)))
		r := addRun(t, s, newRun(org, th.ID, 1, store.MultitaskEnqueue))
		claimWant(t, s, "w", at(2), at(50), r.ID)
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(th.ID, cps[1], cps[0], r.ID, 3)))
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(th.ID, cps[2], cps[1], r.ID, 4)))
		cancelled, err := s.CancelRun(ctx(), org, th.ID, r.ID, store.CancelRollback, at(5))
		must(t, "CancelRun rollback", err)
		if cancelled.Status != store.RunRunning || cancelled.CancelAction != store.CancelRollback {
			t.Errorf("CancelRun of a running run: status %q cancel %q, want running, rollback", cancelled.Status, cancelled.CancelAction)
		}
		f := finish(org, th.ID, r.ID, "w", store.RunInterrupted, store.ThreadIdle, at(6))
		f.Values = []byte(`{"after": true}`)
		must(t, "FinishRun", s.FinishRun(ctx(), f))
		_, err = s.Run(ctx(), org, th.ID, r.ID)
		wantErr(t, "Run after a rolled back finish", err, store.ErrNotFound)
		latest, err := s.LatestCheckpoint(ctx(), org, th.ID)
		must(t, "LatestCheckpoint", err)
		eqCheckpoint(t, latest, state)
		list, err := s.ListCheckpoints(ctx(), org, th.ID, "", 0)
		must(t, "ListCheckpoints", err)
		checkRest(t, "checkpoints after rollback", cpIDs(list), []string{cps[0]})
		gotThread := getThread(t, s, org, th.ID)
		if gotThread.Status != store.ThreadIdle {
			t.Errorf("thread status after rollback %q, want idle", gotThread.Status)
		}
	})

	t.Run("Temporary", func(t *testing.T) {
		park(t, s)
		r := newRun(org, newID(), 0, store.MultitaskReject)
		r.Temporary = true
		_, created, err := s.AddRun(ctx(), store.NewRun{Run: r, CreateThread: true})
		must(t, "AddRun", err)
		if !created {
			t.Error("AddRun of a temporary run: created = false")
		}
		claimWant(t, s, "w", at(1), at(50), r.ID)
		cp := checkpointIDs(t, 1)[0]
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(r.ThreadID, cp, "", r.ID, 2)))
		wantErr(t, "FinishRun of a temporary run by a stranger",
			s.FinishRun(ctx(), finish(org, r.ThreadID, r.ID, "x", store.RunSuccess, store.ThreadIdle, at(3))), store.ErrStale)
		getThread(t, s, org, r.ThreadID)
		f := finish(org, r.ThreadID, r.ID, "w", store.RunSuccess, store.ThreadIdle, at(3))
		f.Values = []byte(`{}`)
		must(t, "FinishRun", s.FinishRun(ctx(), f))
		_, err = s.Thread(ctx(), org, r.ThreadID)
		wantErr(t, "Thread of a finished temporary run", err, store.ErrNotFound)
		_, err = s.Run(ctx(), org, r.ThreadID, r.ID)
		wantErr(t, "finished temporary run", err, store.ErrNotFound)
		_, err = s.Checkpoint(ctx(), org, r.ThreadID, cp)
		wantErr(t, "Checkpoint of a finished temporary run", err, store.ErrNotFound)

		res, err := s.TemporaryResult(ctx(), org, r.ID, at(4))
		must(t, "TemporaryResult", err)
		checkBytes(t, "TemporaryResult", res, f.Result)
		_, err = s.TemporaryResult(ctx(), newOrg(t, s), r.ID, at(4))
		wantErr(t, "TemporaryResult of another organization's run", err, store.ErrNotFound)
		_, err = s.TemporaryResult(ctx(), org, r.ID, at(3).Add(store.TemporaryResultTTL+time.Second))
		wantErr(t, "TemporaryResult after its TTL", err, store.ErrNotFound)
		_, err = s.TemporaryResult(ctx(), org, newID(), at(4))
		wantErr(t, "TemporaryResult of an unknown run", err, store.ErrNotFound)
	})
}

// testClaimRunByID: the claim of one given run, as a per-run execution does.
func testClaimRunByID(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	claimByID := func(t *testing.T, r store.Run, owner string, now time.Time, wantOK bool) store.Run {
		t.Helper()
		got, ok, err := s.ClaimRunByID(ctx(), r.ID, owner, now, now.Add(time.Minute))
		must(t, "ClaimRunByID", err)
		if ok != wantOK || got.ID != r.ID {
			t.Fatalf("ClaimRunByID(%s) at %v = run %q claimed %v, want claimed %v", r.ID, now, got.ID, ok, wantOK)
		}
		return got
	}

	t.Run("InTurn", func(t *testing.T) {
		th := createThread(t, s, org, 0)
		first := addRun(t, s, newRun(org, th.ID, 1, store.MultitaskEnqueue))
		second := addRun(t, s, newRun(org, th.ID, 2, store.MultitaskEnqueue))
		late := newRun(org, th.ID, 3, store.MultitaskEnqueue)
		late.NotBefore = at(60)
		addRun(t, s, late)

		got := claimByID(t, second, "exec-2", at(10), false) // first comes first
		if got.Status != store.RunPending {
			t.Errorf("unclaimed run status %q, want pending", got.Status)
		}
		got = claimByID(t, first, "exec-1", at(10), true)
		want := claimed(first, "exec-1", at(10), at(10).Add(time.Minute))
		want.UpdatedAt = got.UpdatedAt
		eqRun(t, got, want)
		claimByID(t, second, "exec-2", at(11), false) // the thread has a running run
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, first.ID, "exec-1", store.RunSuccess, store.ThreadIdle, at(12))))

		got = claimByID(t, first, "exec-1", at(13), false) // terminal
		if got.Status != store.RunSuccess {
			t.Errorf("finished run status %q, want success", got.Status)
		}
		claimByID(t, late, "exec-3", at(13), false) // NotBefore has not come
		claimByID(t, second, "exec-2", at(13), true)
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, second.ID, "exec-2", store.RunSuccess, store.ThreadIdle, at(14))))
		claimByID(t, late, "exec-3", at(60), true)
	})

	t.Run("Leases", func(t *testing.T) {
		th := createThread(t, s, org, 0)
		r := addRun(t, s, newRun(org, th.ID, 1, store.MultitaskReject))
		claimByID(t, r, "exec", at(10), true)
		// A retried step of the same execution takes the run back at once.
		got := claimByID(t, r, "exec", at(11), true)
		if got.Attempt != 2 || got.LeaseOwner != "exec" {
			t.Errorf("reclaim by the owner: attempt %d owner %q, want 2 exec", got.Attempt, got.LeaseOwner)
		}
		claimByID(t, r, "other", at(12), false) // leased to exec until at(71)
		got = claimByID(t, r, "other", at(72), true)
		if got.LeaseOwner != "other" || got.Attempt != 3 {
			t.Errorf("claim after the lease expired: owner %q attempt %d, want other 3", got.LeaseOwner, got.Attempt)
		}
		wantErr(t, "FinishRun by the former owner",
			s.FinishRun(ctx(), finish(org, th.ID, r.ID, "exec", store.RunSuccess, store.ThreadIdle, at(73))), store.ErrStale)
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r.ID, "other", store.RunSuccess, store.ThreadIdle, at(73))))
	})

	t.Run("Gone", func(t *testing.T) {
		_, _, err := s.ClaimRunByID(ctx(), newID(), "exec", at(1), at(2))
		wantErr(t, "ClaimRunByID of an unknown run", err, store.ErrNotFound)
		th := createThread(t, s, org, 0)
		r := addRun(t, s, newRun(org, th.ID, 1, store.MultitaskReject))
		must(t, "DeleteThread", s.DeleteThread(ctx(), org, th.ID))
		_, _, err = s.ClaimRunByID(ctx(), r.ID, "exec", at(10), at(20))
		wantErr(t, "ClaimRunByID of a run whose thread was deleted", err, store.ErrNotFound)
	})
}

func testCancelRun(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)

	tests := []struct {
		name       string
		action     string
		another    bool   // a second run is pending behind the cancelled one
		wantThread string // the thread's status afterwards
	}{
		{"interrupt pending", store.CancelInterrupt, false, store.ThreadIdle},
		{"interrupt pending with another inflight", store.CancelInterrupt, true, store.ThreadBusy},
		{"rollback pending", store.CancelRollback, false, store.ThreadIdle},
		{"rollback pending with another inflight", store.CancelRollback, true, store.ThreadBusy},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			th := createThread(t, s, org, i)
			r := newRun(org, th.ID, i, store.MultitaskEnqueue)
			r.NotBefore = parkLease // never claimed by anyone
			r = addRun(t, s, r)
			var next store.Run
			if tc.another {
				n := newRun(org, th.ID, i+1, store.MultitaskEnqueue)
				n.NotBefore = parkLease
				next = addRun(t, s, n)
			}
			cp := checkpointIDs(t, 1)[0]
			must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, newCheckpoint(th.ID, cp, "", r.ID, i)))

			_, err := s.CancelRun(ctx(), other, th.ID, r.ID, tc.action, at(50))
			wantErr(t, "CancelRun from another org", err, store.ErrNotFound)
			_, err = s.CancelRun(ctx(), org, newID(), r.ID, tc.action, at(50))
			wantErr(t, "CancelRun on another thread", err, store.ErrNotFound)
			_, err = s.CancelRun(ctx(), org, th.ID, newID(), tc.action, at(50))
			wantErr(t, "CancelRun of a missing run", err, store.ErrNotFound)

			got, err := s.CancelRun(ctx(), org, th.ID, r.ID, tc.action, at(50))
			must(t, "CancelRun", err)
			if got.ID != r.ID || got.CancelAction != tc.action {
				t.Errorf("CancelRun returned %s with action %q, want %s with %q", got.ID, got.CancelAction, r.ID, tc.action)
			}
			if tc.action == store.CancelInterrupt {
				want := r
				want.Status, want.CancelAction, want.EndedAt, want.UpdatedAt = store.RunInterrupted, tc.action, at(50), got.UpdatedAt
				eqRun(t, got, want)
				eqRun(t, getRun(t, s, r), want)
				_, err = s.Checkpoint(ctx(), org, th.ID, cp)
				must(t, "Checkpoint of an interrupted run", err)
				// Cancelling a terminal run changes nothing.
				again, err := s.CancelRun(ctx(), org, th.ID, r.ID, store.CancelRollback, at(60))
				must(t, "CancelRun of a terminal run", err)
				eqRun(t, again, want)
				eqRun(t, getRun(t, s, r), want)
			} else {
				_, err = s.Run(ctx(), org, th.ID, r.ID)
				wantErr(t, "Run after rollback", err, store.ErrNotFound)
				_, err = s.Checkpoint(ctx(), org, th.ID, cp)
				wantErr(t, "Checkpoint of a rolled back run", err, store.ErrNotFound)
			}
			wantThreadStatus(t, s, org, th.ID, tc.wantThread)
			if tc.another {
				eqRun(t, getRun(t, s, next), next)
			}
		})
	}

	t.Run("running", func(t *testing.T) {
		park(t, s)
		for i, action := range []string{store.CancelInterrupt, store.CancelRollback} {
			th := createThread(t, s, org, 10)
			r := addRun(t, s, newRun(org, th.ID, 10, store.MultitaskEnqueue))
			c := claimWant(t, s, "w", at(11), at(90), r.ID)
			got, err := s.CancelRun(ctx(), org, th.ID, r.ID, action, at(12+i))
			must(t, "CancelRun", err)
			want := c
			want.CancelAction = action
			want.UpdatedAt = got.UpdatedAt
			eqRun(t, got, want)
			eqRun(t, getRun(t, s, r), got)
			renewed, err := s.RenewLease(ctx(), r.ID, "w", at(95))
			must(t, "RenewLease", err)
			if renewed.CancelAction != action || renewed.Status != store.RunRunning {
				t.Errorf("RenewLease after CancelRun: status %q action %q, want running, %q", renewed.Status, renewed.CancelAction, action)
			}
			wantThreadStatus(t, s, org, th.ID, store.ThreadBusy)
			must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r.ID, "w", store.RunInterrupted, store.ThreadIdle, at(20))))
			wantThreadStatus(t, s, org, th.ID, store.ThreadIdle)
		}
	})
}

func testListAndDeleteRuns(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	park(t, s)
	th := createThread(t, s, org, 0)
	var all []store.Run // newest first
	for i := 0; i < 22; i++ {
		off := i
		if i == 21 {
			off = 20 // same CreatedAt as the previous run: insertion decides
		}
		all = append([]store.Run{addRun(t, s, newRun(org, th.ID, off, store.MultitaskEnqueue))}, all...)
	}
	oldest := all[len(all)-1]
	claimWant(t, s, "w", at(30), at(90), oldest.ID)
	must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, oldest.ID, "w", store.RunSuccess, store.ThreadIdle, at(31))))
	second := all[len(all)-2]
	claimWant(t, s, "w", at(32), at(90), second.ID)

	tests := []struct {
		name          string
		status        string
		limit, offset int
		want          []store.Run
	}{
		{"default limit 20", "", 0, 0, all[:20]},
		{"offset", "", 0, 20, all[20:]},
		{"paged", "", 3, 1, all[1:4]},
		{"success", store.RunSuccess, 0, 0, all[21:]},
		{"running", store.RunRunning, 0, 0, all[20:21]},
		{"pending", store.RunPending, 5, 0, all[:5]},
		{"error", store.RunError, 0, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListRuns(ctx(), org, th.ID, tc.status, tc.limit, tc.offset)
			must(t, "ListRuns", err)
			checkRest(t, "ListRuns", runIDs(got), runIDs(tc.want))
		})
	}
	_, err := s.ListRuns(ctx(), org, newID(), "", 0, 0)
	wantErr(t, "ListRuns of a missing thread", err, store.ErrNotFound)
	_, err = s.ListRuns(ctx(), other, th.ID, "", 0, 0)
	wantErr(t, "ListRuns of another org's thread", err, store.ErrNotFound)

	t.Run("DeleteRun", func(t *testing.T) {
		wantErr(t, "DeleteRun of a pending run", s.DeleteRun(ctx(), org, th.ID, all[0].ID), store.ErrBusy)
		wantErr(t, "DeleteRun of a running run", s.DeleteRun(ctx(), org, th.ID, second.ID), store.ErrBusy)
		wantErr(t, "DeleteRun from another org", s.DeleteRun(ctx(), other, th.ID, oldest.ID), store.ErrNotFound)
		wantErr(t, "DeleteRun on another thread", s.DeleteRun(ctx(), org, newID(), oldest.ID), store.ErrNotFound)
		wantErr(t, "DeleteRun of a missing run", s.DeleteRun(ctx(), org, th.ID, newID()), store.ErrNotFound)
		must(t, "DeleteRun", s.DeleteRun(ctx(), org, th.ID, oldest.ID))
		_, err := s.Run(ctx(), org, th.ID, oldest.ID)
		wantErr(t, "Run after DeleteRun", err, store.ErrNotFound)
		wantErr(t, "DeleteRun again", s.DeleteRun(ctx(), org, th.ID, oldest.ID), store.ErrNotFound)
		eqRun(t, getRun(t, s, all[0]), all[0])
		got, err := s.ListRuns(ctx(), org, th.ID, "", 100, 0)
		must(t, "ListRuns", err)
		if len(got) != 21 {
			t.Errorf("ListRuns after DeleteRun = %d runs, want 21", len(got))
		}
		wantThreadStatus(t, s, org, th.ID, store.ThreadBusy)
	})
}

// ---- checkpoints and state -----------------------------------------------------------

func testCheckpoints(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	th := createThread(t, s, org, 0)
	otherTh := createThread(t, s, org, 0)

	_, err := s.LatestCheckpoint(ctx(), org, th.ID)
	wantErr(t, "LatestCheckpoint of a thread without checkpoints", err, store.ErrNotFound)
	empty, err := s.ListCheckpoints(ctx(), org, th.ID, "", 0)
	must(t, "ListCheckpoints of a thread without checkpoints", err)
	checkRest(t, "ListCheckpoints empty", cpIDs(empty), []string{})

	ids := checkpointIDs(t, 12)
	cps := make(map[string]store.Checkpoint)
	// Stored out of order: the order is the IDs'.
	for _, i := range []int{3, 0, 11, 5, 1, 2, 9, 4, 6, 8, 7, 10} {
		parent := ""
		if i > 0 {
			parent = ids[i-1]
		}
		cp := newCheckpoint(th.ID, ids[i], parent, "run-"+fmt.Sprint(i%3), 20-i)
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, cp))
		cps[cp.ID] = cp
	}
	must(t, "PutCheckpoint on another thread", s.PutCheckpoint(ctx(), org, newCheckpoint(otherTh.ID, checkpointIDs(t, 1)[0], "", "", 0)))

	got, err := s.Checkpoint(ctx(), org, th.ID, ids[4])
	must(t, "Checkpoint", err)
	eqCheckpoint(t, got, cps[ids[4]])
	latest, err := s.LatestCheckpoint(ctx(), org, th.ID)
	must(t, "LatestCheckpoint", err)
	eqCheckpoint(t, latest, cps[ids[11]])

	rev := func(from, to int) []string { // ids[to..from] newest first
		var out []string
		for i := from; i >= to; i-- {
			out = append(out, ids[i])
		}
		return out
	}
	tests := []struct {
		name   string
		before string
		limit  int
		want   []string
	}{
		{"default limit 10", "", 0, rev(11, 2)},
		{"limit", "", 3, rev(11, 9)},
		{"before", ids[5], 0, rev(4, 0)},
		{"before and limit", ids[9], 2, rev(8, 7)},
		{"before the oldest", ids[0], 0, nil},
		{"page after page", ids[2], 10, rev(1, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListCheckpoints(ctx(), org, th.ID, tc.before, tc.limit)
			must(t, "ListCheckpoints", err)
			want := tc.want
			if want == nil {
				want = []string{}
			}
			checkRest(t, "ListCheckpoints", cpIDs(got), want)
			for _, c := range got {
				eqCheckpoint(t, c, cps[c.ID])
			}
		})
	}

	t.Run("ReplaceSameID", func(t *testing.T) {
		repl := store.Checkpoint{ThreadID: th.ID, ID: ids[4], ParentID: "p", RunID: "", CreatedAt: at(99), Data: doc("replaced")}
		must(t, "PutCheckpoint replacing", s.PutCheckpoint(ctx(), org, repl))
		got, err := s.Checkpoint(ctx(), org, th.ID, ids[4])
		must(t, "Checkpoint", err)
		eqCheckpoint(t, got, repl)
		list, err := s.ListCheckpoints(ctx(), org, th.ID, "", 100)
		must(t, "ListCheckpoints", err)
		checkRest(t, "ListCheckpoints after replace", cpIDs(list), rev(11, 0))
	})

	t.Run("Isolation", func(t *testing.T) {
		wantErr(t, "PutCheckpoint on a missing thread",
			s.PutCheckpoint(ctx(), org, newCheckpoint(newID(), checkpointIDs(t, 1)[0], "", "", 0)), store.ErrNotFound)
		wantErr(t, "PutCheckpoint on another org's thread",
			s.PutCheckpoint(ctx(), other, newCheckpoint(th.ID, checkpointIDs(t, 1)[0], "", "", 0)), store.ErrNotFound)
		_, err := s.Checkpoint(ctx(), other, th.ID, ids[4])
		wantErr(t, "Checkpoint from another org", err, store.ErrNotFound)
		_, err = s.Checkpoint(ctx(), org, otherTh.ID, ids[4])
		wantErr(t, "Checkpoint on another thread", err, store.ErrNotFound)
		_, err = s.Checkpoint(ctx(), org, th.ID, checkpointIDs(t, 1)[0])
		wantErr(t, "Checkpoint missing", err, store.ErrNotFound)
		_, err = s.LatestCheckpoint(ctx(), other, th.ID)
		wantErr(t, "LatestCheckpoint from another org", err, store.ErrNotFound)
		_, err = s.ListCheckpoints(ctx(), other, th.ID, "", 0)
		wantErr(t, "ListCheckpoints from another org", err, store.ErrNotFound)
		_, err = s.ListCheckpoints(ctx(), org, newID(), "", 0)
		wantErr(t, "ListCheckpoints of a missing thread", err, store.ErrNotFound)
	})
}

func testUpdateThreadState(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	th := createThread(t, s, org, 0)
	ids := checkpointIDs(t, 3)

	cp := newCheckpoint(th.ID, ids[0], "", "", 1)
	values, interrupts := doc("state"), []byte(`{"t": [{"id": "i", "value": "ask"}]}`)
	must(t, "UpdateThreadState", s.UpdateThreadState(ctx(), org, cp, values, interrupts, store.ThreadInterrupted, at(2)))
	got, err := s.LatestCheckpoint(ctx(), org, th.ID)
	must(t, "LatestCheckpoint", err)
	eqCheckpoint(t, got, cp)
	want := th
	want.Status, want.Values, want.Interrupts, want.UpdatedAt = store.ThreadInterrupted, values, interrupts, at(2)
	eqThread(t, getThread(t, s, org, th.ID), want)

	cp2 := newCheckpoint(th.ID, ids[1], ids[0], "", 3)
	must(t, "UpdateThreadState", s.UpdateThreadState(ctx(), org, cp2, []byte(`{"v": 2}`), nil, store.ThreadIdle, at(4)))
	want.Status, want.Values, want.Interrupts, want.UpdatedAt = store.ThreadIdle, []byte(`{"v": 2}`), nil, at(4)
	eqThread(t, getThread(t, s, org, th.ID), want)

	cp3 := newCheckpoint(th.ID, ids[2], ids[1], "", 5)
	wantErr(t, "UpdateThreadState from another org",
		s.UpdateThreadState(ctx(), other, cp3, values, nil, store.ThreadIdle, at(6)), store.ErrNotFound)
	missing := newCheckpoint(newID(), ids[2], "", "", 5)
	wantErr(t, "UpdateThreadState of a missing thread",
		s.UpdateThreadState(ctx(), org, missing, values, nil, store.ThreadIdle, at(6)), store.ErrNotFound)

	for _, running := range []bool{false, true} {
		t.Run(fmt.Sprintf("busy (running %v)", running), func(t *testing.T) {
			park(t, s)
			th := createThread(t, s, org, 10)
			r := addRun(t, s, newRun(org, th.ID, 10, store.MultitaskEnqueue))
			if running {
				claimWant(t, s, "w", at(11), at(90), r.ID)
			}
			cp := newCheckpoint(th.ID, checkpointIDs(t, 1)[0], "", "", 12)
			wantErr(t, "UpdateThreadState with an inflight run",
				s.UpdateThreadState(ctx(), org, cp, []byte(`{"x": 1}`), nil, store.ThreadIdle, at(12)), store.ErrBusy)
			_, err := s.LatestCheckpoint(ctx(), org, th.ID)
			wantErr(t, "checkpoint of the refused update", err, store.ErrNotFound)
			got := getThread(t, s, org, th.ID)
			eqSummary(t, got, store.Thread{Status: store.ThreadBusy})
		})
	}
}

// ---- organizations -----------------------------------------------------------------

// testRunsIsolation: every org-scoped method reports another organization's
// thread, run, assistant or checkpoint as missing and leaves it alone.
func testRunsIsolation(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	park(t, s)
	a := newAssistant(org, "g", "mine", at(0), `{"k": "v"}`)
	must(t, "CreateAssistant", s.CreateAssistant(ctx(), a))
	th := createThread(t, s, org, 0)
	r := addRun(t, s, newRun(org, th.ID, 1, store.MultitaskEnqueue))
	done := addRun(t, s, newRun(org, th.ID, 2, store.MultitaskEnqueue))
	claimWant(t, s, "w", at(3), at(90), r.ID)
	must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, r.ID, "w", store.RunSuccess, store.ThreadIdle, at(4))))
	r = getRun(t, s, r)
	claimWant(t, s, "w", at(5), at(90), done.ID)
	cp := newCheckpoint(th.ID, checkpointIDs(t, 1)[0], "", r.ID, 5)
	must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, cp))
	threadBefore := getThread(t, s, org, th.ID)
	doneBefore := getRun(t, s, done)

	checks := []struct {
		name string
		call func() error
	}{
		{"Assistant", func() error { _, err := s.Assistant(ctx(), other, a.ID); return err }},
		{"DeleteAssistant", func() error { return s.DeleteAssistant(ctx(), other, a.ID) }},
		{"Thread", func() error { _, err := s.Thread(ctx(), other, th.ID); return err }},
		{"UpdateThreadMetadata", func() error {
			_, err := s.UpdateThreadMetadata(ctx(), other, th.ID, []byte(`{}`), at(9))
			return err
		}},
		{"DeleteThread", func() error { return s.DeleteThread(ctx(), other, th.ID) }},
		{"AddRun", func() error {
			_, _, err := s.AddRun(ctx(), store.NewRun{Run: newRun(other, th.ID, 9, store.MultitaskInterrupt)})
			return err
		}},
		{"Run", func() error { _, err := s.Run(ctx(), other, th.ID, r.ID); return err }},
		{"ListRuns", func() error { _, err := s.ListRuns(ctx(), other, th.ID, "", 0, 0); return err }},
		{"DeleteRun", func() error { return s.DeleteRun(ctx(), other, th.ID, r.ID) }},
		{"CancelRun", func() error {
			_, err := s.CancelRun(ctx(), other, th.ID, done.ID, store.CancelRollback, at(9))
			return err
		}},
		{"PutCheckpoint", func() error { return s.PutCheckpoint(ctx(), other, cp) }},
		{"Checkpoint", func() error { _, err := s.Checkpoint(ctx(), other, th.ID, cp.ID); return err }},
		{"LatestCheckpoint", func() error { _, err := s.LatestCheckpoint(ctx(), other, th.ID); return err }},
		{"ListCheckpoints", func() error { _, err := s.ListCheckpoints(ctx(), other, th.ID, "", 0); return err }},
		{"UpdateThreadState", func() error {
			return s.UpdateThreadState(ctx(), other, cp, []byte(`{}`), nil, store.ThreadIdle, at(9))
		}},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			wantErr(t, c.name+" from another org", c.call(), store.ErrNotFound)
		})
	}
	wantErr(t, "FinishRun naming another org",
		s.FinishRun(ctx(), finish(other, th.ID, done.ID, "w", store.RunSuccess, store.ThreadIdle, at(9))), store.ErrStale)

	got, err := s.Assistant(ctx(), org, a.ID)
	must(t, "Assistant", err)
	eqAssistant(t, got, a)
	eqThread(t, getThread(t, s, org, th.ID), threadBefore)
	eqRun(t, getRun(t, s, r), r)
	eqRun(t, getRun(t, s, done), doneBefore)
	gotCP, err := s.Checkpoint(ctx(), org, th.ID, cp.ID)
	must(t, "Checkpoint", err)
	eqCheckpoint(t, gotCP, cp)
	for _, f := range []store.AssistantFilter{{}, {Metadata: []byte(`{"k": "v"}`)}} {
		as, err := s.SearchAssistants(ctx(), other, f)
		must(t, "SearchAssistants", err)
		checkRest(t, "SearchAssistants of another org", assistantIDs(as), []string{})
	}
	ts, err := s.SearchThreads(ctx(), other, store.ThreadFilter{IDs: []string{th.ID}})
	must(t, "SearchThreads", err)
	checkRest(t, "SearchThreads of another org", threadIDs(ts), []string{})
}

// ---- concurrency -----------------------------------------------------------------

func testRunsConcurrency(t *testing.T, s store.Store) {
	t.Run("ClaimOneThread", func(t *testing.T) {
		org := newOrg(t, s)
		park(t, s)
		th := createThread(t, s, org, 0)
		var runs []string
		for i := 0; i < 5; i++ {
			runs = append(runs, addRun(t, s, newRun(org, th.ID, i, store.MultitaskEnqueue)).ID)
		}
		const n = 10
		got := make([]store.Run, n)
		ok := make([]bool, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				got[i], ok[i], errs[i] = s.ClaimRun(ctx(), fmt.Sprintf("w%d", i), at(10), at(100))
			}(i)
		}
		wg.Wait()
		var claimedIDs []string
		for i := range ok {
			must(t, "ClaimRun", errs[i])
			if ok[i] {
				claimedIDs = append(claimedIDs, got[i].ID)
			}
		}
		checkRest(t, "runs claimed by concurrent workers", claimedIDs, runs[:1])
		running, err := s.ListRuns(ctx(), org, th.ID, store.RunRunning, 0, 0)
		must(t, "ListRuns", err)
		checkRest(t, "running runs", runIDs(running), runs[:1])
	})

	t.Run("ClaimManyThreads", func(t *testing.T) {
		org := newOrg(t, s)
		park(t, s)
		want := map[string]bool{}
		for i := 0; i < 3; i++ {
			th := createThread(t, s, org, 0)
			first := addRun(t, s, newRun(org, th.ID, 1, store.MultitaskEnqueue))
			addRun(t, s, newRun(org, th.ID, 2, store.MultitaskEnqueue))
			want[first.ID] = true
		}
		const n = 10
		got := make([]store.Run, n)
		ok := make([]bool, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				got[i], ok[i], errs[i] = s.ClaimRun(ctx(), fmt.Sprintf("w%d", i), at(10), at(100))
			}(i)
		}
		wg.Wait()
		seen := map[string]bool{}
		for i := range ok {
			must(t, "ClaimRun", errs[i])
			if !ok[i] {
				continue
			}
			if !want[got[i].ID] || seen[got[i].ID] {
				t.Errorf("worker %d claimed %s (want the first run of each thread, once)", i, got[i].ID)
			}
			seen[got[i].ID] = true
		}
		if len(seen) != len(want) {
			t.Errorf("%d runs claimed concurrently, want %d (one per thread)", len(seen), len(want))
		}
	})

	t.Run("AddRunReject", func(t *testing.T) {
		org := newOrg(t, s)
		th := createThread(t, s, org, 0)
		const n = 20
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, _, errs[i] = s.AddRun(ctx(), store.NewRun{Run: newRun(org, th.ID, i, store.MultitaskReject)})
			}(i)
		}
		wg.Wait()
		okCount := 0
		for i, err := range errs {
			switch {
			case err == nil:
				okCount++
			case !errors.Is(err, store.ErrBusy):
				t.Errorf("AddRun %d: error %v, want ErrBusy", i, err)
			}
		}
		if okCount != 1 {
			t.Errorf("%d concurrent AddRun with reject succeeded, want 1", okCount)
		}
		runs, err := s.ListRuns(ctx(), org, th.ID, "", 100, 0)
		must(t, "ListRuns", err)
		if len(runs) != 1 {
			t.Errorf("%d runs stored, want 1", len(runs))
		}
	})

	t.Run("AddRunCreateThread", func(t *testing.T) {
		org, thread := newOrg(t, s), newID()
		const n = 10
		created := make([]bool, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, created[i], errs[i] = s.AddRun(ctx(), store.NewRun{Run: newRun(org, thread, i, store.MultitaskEnqueue), CreateThread: true})
			}(i)
		}
		wg.Wait()
		count := 0
		for i := range errs {
			must(t, "AddRun", errs[i])
			if created[i] {
				count++
			}
		}
		if count != 1 {
			t.Errorf("%d concurrent AddRun created the thread, want 1", count)
		}
		runs, err := s.ListRuns(ctx(), org, thread, "", 100, 0)
		must(t, "ListRuns", err)
		if len(runs) != n {
			t.Errorf("%d runs stored, want %d", len(runs), n)
		}
	})
}

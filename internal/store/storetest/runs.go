package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/store"
)

// RunsContract is the part of the suite for the ports of assistants, threads,
// runs and checkpoints: store.Assistants, store.Threads, store.RunQueue and
// store.Checkpoints (Run calls it).
//
// ClaimRun acts across organizations, so a test that claims first parks every
// run other tests left claimable: it claims them with a lease that outlives
// every time the suite uses (see park). The suite assumes nobody else claims
// runs from the store while it runs.
func RunsContract(t *testing.T, open func(t *testing.T) store.Store) {
	t.Run("Assistants", func(t *testing.T) { testAssistants(t, open(t)) })
	t.Run("AssistantSearch", func(t *testing.T) { testAssistantSearch(t, open(t)) })
	t.Run("AssistantVersions", func(t *testing.T) { testAssistantVersions(t, open(t)) })
	t.Run("Threads", func(t *testing.T) { testThreads(t, open(t)) })
	t.Run("ThreadSearch", func(t *testing.T) { testThreadSearch(t, open(t)) })
	t.Run("ThreadSort", func(t *testing.T) { testThreadSort(t, open(t)) })
	t.Run("StateUpdatedAt", func(t *testing.T) { testStateUpdatedAt(t, open(t)) })
	t.Run("ThreadConfig", func(t *testing.T) { testThreadConfig(t, open(t)) })
	t.Run("ThreadTTL", func(t *testing.T) { testThreadTTL(t, open(t)) })
	t.Run("AddRun", func(t *testing.T) { testAddRun(t, open(t)) })
	t.Run("IfInflight", func(t *testing.T) { testIfInflight(t, open(t)) })
	t.Run("Behind", func(t *testing.T) { testBehind(t, open(t)) })
	t.Run("StampMetadata", func(t *testing.T) { testStampMetadata(t, open(t)) })
	t.Run("ClaimOrder", func(t *testing.T) { testClaimOrder(t, open(t)) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, open(t)) })
	t.Run("ClaimRunByID", func(t *testing.T) { testClaimRunByID(t, open(t)) })
	t.Run("Parking", func(t *testing.T) { testParking(t, open(t)) })
	t.Run("ClaimFairness", func(t *testing.T) { testClaimFairness(t, open(t)) })
	t.Run("FinishRun", func(t *testing.T) { testFinishRun(t, open(t)) })
	t.Run("CancelRun", func(t *testing.T) { testCancelRun(t, open(t)) })
	t.Run("ListAndDeleteRuns", func(t *testing.T) { testListAndDeleteRuns(t, open(t)) })
	t.Run("Checkpoints", func(t *testing.T) { testCheckpoints(t, open(t)) })
	t.Run("CheckpointBatch", func(t *testing.T) { testCheckpointBatch(t, open(t)) })
	t.Run("CheckpointFence", func(t *testing.T) { testCheckpointFence(t, open(t)) })
	t.Run("FinishFence", func(t *testing.T) { testFinishFence(t, open(t)) })
	t.Run("LeaseFence", func(t *testing.T) { testLeaseFence(t, open(t)) })
	t.Run("UpdateThreadState", func(t *testing.T) { testUpdateThreadState(t, open(t)) })
	t.Run("PruneCheckpoints", func(t *testing.T) { testPruneCheckpoints(t, open(t)) })
	t.Run("CheckpointDeltas", func(t *testing.T) { testCheckpointDeltas(t, open(t)) })
	t.Run("ThreadStorage", func(t *testing.T) { testThreadStorage(t, open(t)) })
	t.Run("RunsAcrossOrganizations", func(t *testing.T) { testRunsIsolation(t, open(t)) })
	t.Run("RunsConcurrency", func(t *testing.T) { testRunsConcurrency(t, open(t)) })
	t.Run("Usage", func(t *testing.T) { testUsage(t, open(t)) })
	t.Run("UsageConcurrency", func(t *testing.T) { testUsageConcurrency(t, open(t)) })
	t.Run("Sizes", func(t *testing.T) { testSizes(t, open(t)) })
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
		r.Behind = false // AddRun's answer only: Runs/Behind checks it
	}
	checkRest(t, "run", got, want)
}

// newRun returns a run of thread created (and startable) at at(off). Its
// MultitaskStrategy is a label the store keeps without acting on it.
func newRun(org, thread string, off int) store.Run {
	return store.Run{
		ID:                newRunID(),
		OrgID:             org,
		ThreadID:          thread,
		AssistantID:       "assistant-1",
		Metadata:          []byte(`{"source": "storetest"}`),
		Kwargs:            doc("kwargs"),
		MultitaskStrategy: "enqueue",
		NotBefore:         at(off),
		CreatedAt:         at(off),
		UpdatedAt:         at(off),
	}
}

// newRunID is a run ID as the runs package makes them: a UUIDv7, so that
// runs made later have greater IDs (see store.RunQueue ListRuns).
func newRunID() string { return uuid.Must(uuid.NewV7()).String() }

// stored is r as AddRun must store it: pending, not started.
func stored(r store.Run) store.Run {
	r.Status = store.RunPending
	r.StartedAt, r.EndedAt, r.LeaseUntil = time.Time{}, time.Time{}, time.Time{}
	r.Result, r.CancelAction, r.LeaseOwner, r.Attempt = nil, "", "", 0
	return r
}

// addRun adds r to its existing thread (enqueued behind inflight runs),
// checks the stored run and returns it.
func addRun(t *testing.T, s store.Store, r store.Run) store.Run {
	t.Helper()
	return addRunWith(t, s, store.NewRun{Run: r})
}

// addRunWith is addRun for any request to an existing thread.
func addRunWith(t *testing.T, s store.Store, req store.NewRun) store.Run {
	t.Helper()
	got, created, err := s.AddRun(ctx(), req)
	must(t, "AddRun", err)
	if created {
		t.Errorf("AddRun to an existing thread: created = true")
	}
	eqRun(t, got, stored(req.Run))
	return got
}

func getRun(t *testing.T, s store.Store, r store.Run) store.Run {
	t.Helper()
	got, err := s.Run(ctx(), r.OrgID, r.ThreadID, r.ID)
	must(t, "Run", err)
	return got
}

func testAddRun(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)

	t.Run("MissingThread", func(t *testing.T) {
		r := newRun(org, newID(), 0)
		_, _, err := s.AddRun(ctx(), store.NewRun{Run: r})
		wantErr(t, "AddRun to a missing thread", err, store.ErrNotFound)
		_, err = s.Thread(ctx(), org, r.ThreadID)
		wantErr(t, "Thread after the failed AddRun", err, store.ErrNotFound)
		_, err = s.Run(ctx(), org, r.ThreadID, r.ID)
		wantErr(t, "Run after the failed AddRun", err, store.ErrNotFound)

		// Another organization's thread is missing too.
		th := createThread(t, s, other, 0)
		r = newRun(org, th.ID, 0)
		_, _, err = s.AddRun(ctx(), store.NewRun{Run: r})
		wantErr(t, "AddRun to another org's thread", err, store.ErrNotFound)
		eqThread(t, getThread(t, s, other, th.ID), th)
		_, err = s.Run(ctx(), org, th.ID, r.ID)
		wantErr(t, "Run after the failed AddRun", err, store.ErrNotFound)
		runs, err := s.ListRuns(ctx(), other, th.ID, "", 0, 0)
		must(t, "ListRuns", err)
		checkRest(t, "runs of the other org's thread", idsOf(runs), []string{})
	})

	t.Run("CreateThread", func(t *testing.T) {
		r := newRun(org, newID(), 1)
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
		r2 := newRun(org, r.ThreadID, 2)
		_, created, err = s.AddRun(ctx(), store.NewRun{Run: r2, CreateThread: true, ThreadMetadata: []byte(`{"other": 1}`)})
		must(t, "AddRun to the existing thread", err)
		if created {
			t.Error("AddRun with CreateThread to an existing thread: created = true")
		}
		checkBytes(t, "thread Metadata after the second AddRun", getThread(t, s, org, r.ThreadID).Metadata, meta)

		// The same thread ID in another org is another thread.
		r3 := newRun(other, r.ThreadID, 3)
		_, created, err = s.AddRun(ctx(), store.NewRun{Run: r3, CreateThread: true})
		must(t, "AddRun creating the same thread ID in another org", err)
		if !created {
			t.Error("AddRun creating a thread in another org: created = false")
		}
		runs, err := s.ListRuns(ctx(), org, r.ThreadID, "", 0, 0)
		must(t, "ListRuns", err)
		checkRest(t, "runs of the first org's thread", idsOf(runs), []string{r2.ID, r.ID})
	})

	t.Run("StoredAsPending", func(t *testing.T) {
		th := createThread(t, s, org, 4)
		r := newRun(org, th.ID, 4)
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
		r := addRun(t, s, newRun(org, th.ID, 5))
		th2 := createThread(t, s, org, 6)
		dup := newRun(org, th2.ID, 6)
		dup.ID = r.ID
		_, _, err := s.AddRun(ctx(), store.NewRun{Run: dup})
		wantErr(t, "AddRun with a taken run ID", err, store.ErrConflict)
		wantThreadStatus(t, s, org, th2.ID, store.ThreadIdle)
		eqRun(t, getRun(t, s, r), r)

		created := newRun(org, newID(), 6)
		created.ID = r.ID
		_, _, err = s.AddRun(ctx(), store.NewRun{Run: created, CreateThread: true})
		wantErr(t, "AddRun creating a thread with a taken run ID", err, store.ErrConflict)
		_, err = s.Thread(ctx(), org, created.ThreadID)
		wantErr(t, "thread of the failed AddRun", err, store.ErrNotFound)
	})
}

// testBehind: the run AddRun returns says whether another run of its thread
// was running or ahead of it in the queue (store.Run.Behind), after
// IfInflight was applied; a run read back never says so.
func testBehind(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	add := func(t *testing.T, req store.NewRun, want bool) store.Run {
		t.Helper()
		got, _, err := s.AddRun(ctx(), req)
		must(t, "AddRun", err)
		if got.Behind != want {
			t.Errorf("AddRun of run %s: Behind = %v, want %v", req.Run.ID, got.Behind, want)
		}
		if read := getRun(t, s, got); read.Behind {
			t.Errorf("run %s read back: Behind = true, want false (not stored)", got.ID)
		}
		return got
	}
	park(t, s)
	th := createThread(t, s, org, 0)
	add(t, store.NewRun{Run: newRun(org, th.ID, 10)}, false)
	add(t, store.NewRun{Run: newRun(org, th.ID, 11)}, true) // behind the pending first
	early := newRun(org, th.ID, 12)
	early.NotBefore = at(5) // starts before both
	add(t, store.NewRun{Run: early}, false)
	claimWant(t, s, "w", at(13), at(100), early.ID)
	add(t, store.NewRun{Run: newRun(org, th.ID, 14)}, true) // behind the running one

	// Cancelling settles the pending runs but not the running one.
	add(t, store.NewRun{Run: newRun(org, th.ID, 15), IfInflight: store.InflightCancel, CancelAction: store.CancelInterrupt}, true)
	onlyPending := createThread(t, s, org, 20)
	add(t, store.NewRun{Run: newRun(org, onlyPending.ID, 20)}, false)
	add(t, store.NewRun{Run: newRun(org, onlyPending.ID, 21), IfInflight: store.InflightCancel, CancelAction: store.CancelInterrupt}, false)

	// A run that creates its thread has nothing ahead of it.
	fresh := newRun(org, newID(), 30)
	got, created, err := s.AddRun(ctx(), store.NewRun{Run: fresh, CreateThread: true})
	must(t, "AddRun creating its thread", err)
	if !created || got.Behind {
		t.Errorf("AddRun creating its thread: created %v, Behind %v; want true, false", created, got.Behind)
	}
}

// testIfInflight: AddRun applies NewRun.IfInflight to the thread's inflight
// runs in the step that stores the new run, whatever the run's
// MultitaskStrategy label says.
func testIfInflight(t *testing.T, s store.Store) {
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
		running := addRun(t, s, newRun(org, th.ID, off))
		pending := addRun(t, s, newRun(org, th.ID, off+1))
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
		r := addRun(t, s, newRun(org, f.th.ID, 10))
		eqRun(t, getRun(t, s, f.pending), f.pending)
		eqRun(t, getRun(t, s, f.running), f.running)
		eqRun(t, getRun(t, s, r), stored(r))
		wantThreadStatus(t, s, org, f.th.ID, store.ThreadBusy)
	})

	t.Run("Reject", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 7)
		first := addRunWith(t, s, store.NewRun{Run: newRun(org, th.ID, 7), IfInflight: store.InflightReject})
		for _, running := range []bool{false, true} {
			if running {
				claimWant(t, s, "w", at(8), at(100), first.ID)
			}
			r := newRun(org, th.ID, 8)
			_, _, err := s.AddRun(ctx(), store.NewRun{Run: r, CreateThread: true, IfInflight: store.InflightReject})
			wantErr(t, fmt.Sprintf("AddRun reject with an inflight run (running %v)", running), err, store.ErrBusy)
			_, err = s.Run(ctx(), org, th.ID, r.ID)
			wantErr(t, "Run of the rejected AddRun", err, store.ErrNotFound)
			runs, err := s.ListRuns(ctx(), org, th.ID, "", 0, 0)
			must(t, "ListRuns", err)
			checkRest(t, "runs after the rejected AddRun", idsOf(runs), []string{first.ID})
		}
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, first.ID, "w", store.RunSuccess, store.ThreadIdle, at(9))))
		addRunWith(t, s, store.NewRun{Run: newRun(org, th.ID, 10), IfInflight: store.InflightReject})
	})

	t.Run("CancelInterrupt", func(t *testing.T) {
		f := setup(t, 100)
		r := addRunWith(t, s, store.NewRun{Run: newRun(org, f.th.ID, 110),
			IfInflight: store.InflightCancel, CancelAction: store.CancelInterrupt})

		got := getRun(t, s, f.running)
		if got.Status != store.RunRunning || got.CancelAction != store.CancelInterrupt || got.LeaseOwner != "w" {
			t.Errorf("running run after interrupt: status %q cancel %q owner %q, want running, interrupt, w", got.Status, got.CancelAction, got.LeaseOwner)
		}
		renewed, err := s.RenewLease(ctx(), f.running.ID, "w", 0, at(300))
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

	t.Run("CancelRollback", func(t *testing.T) {
		f := setup(t, 200)
		r := addRunWith(t, s, store.NewRun{Run: newRun(org, f.th.ID, 210),
			IfInflight: store.InflightCancel, CancelAction: store.CancelRollback})

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
		for i, req := range []store.NewRun{
			{IfInflight: store.InflightReject},
			{IfInflight: store.InflightEnqueue},
			{IfInflight: store.InflightCancel, CancelAction: store.CancelInterrupt},
			{IfInflight: store.InflightCancel, CancelAction: store.CancelRollback},
		} {
			th := createThread(t, s, org, 300+i)
			req.Run = newRun(org, th.ID, 300+i)
			addRunWith(t, s, req)
			wantThreadStatus(t, s, org, th.ID, store.ThreadBusy)
		}
	})

	// The run's MultitaskStrategy is a label: only IfInflight decides.
	t.Run("StrategyIsALabel", func(t *testing.T) {
		f := setup(t, 400)
		r := newRun(org, f.th.ID, 410)
		r.MultitaskStrategy = "reject"
		r = addRun(t, s, r)
		if r.MultitaskStrategy != "reject" {
			t.Errorf("stored MultitaskStrategy %q, want reject", r.MultitaskStrategy)
		}
		eqRun(t, getRun(t, s, f.pending), f.pending)
		eqRun(t, getRun(t, s, f.running), f.running)
	})

	// A request AddRun does not know is refused before anything is written.
	t.Run("Unknown", func(t *testing.T) {
		f := setup(t, 500)
		for _, req := range []store.NewRun{
			{IfInflight: store.InflightCancel},
			{IfInflight: store.InflightCancel, CancelAction: "pause"},
			{IfInflight: store.IfInflight(99)},
		} {
			req.Run = newRun(org, f.th.ID, 510)
			_, _, err := s.AddRun(ctx(), req)
			if err == nil {
				t.Fatalf("AddRun with IfInflight %d and CancelAction %q: no error", req.IfInflight, req.CancelAction)
			}
			_, err = s.Run(ctx(), org, f.th.ID, req.Run.ID)
			wantErr(t, "Run of the refused AddRun", err, store.ErrNotFound)
			req.Run = newRun(org, newID(), 510)
			_, _, err = s.AddRun(ctx(), store.NewRun{Run: req.Run, CreateThread: true,
				IfInflight: req.IfInflight, CancelAction: req.CancelAction})
			if err == nil {
				t.Fatalf("AddRun creating a thread with IfInflight %d and CancelAction %q: no error", req.IfInflight, req.CancelAction)
			}
			_, err = s.Thread(ctx(), org, req.Run.ThreadID)
			wantErr(t, "thread of the refused AddRun", err, store.ErrNotFound)
		}
		eqRun(t, getRun(t, s, f.pending), f.pending)
		eqRun(t, getRun(t, s, f.running), f.running)
		wantThreadStatus(t, s, org, f.th.ID, store.ThreadBusy)
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
			r := newRun(org, th.ID, i)
			r.NotBefore = parkLease // never claimed by anyone
			r = addRun(t, s, r)
			var next store.Run
			if tc.another {
				n := newRun(org, th.ID, i+1)
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
			r := addRun(t, s, newRun(org, th.ID, 10))
			c := claimWant(t, s, "w", at(11), at(90), r.ID)
			got, err := s.CancelRun(ctx(), org, th.ID, r.ID, action, at(12+i))
			must(t, "CancelRun", err)
			want := c
			want.CancelAction = action
			want.UpdatedAt = got.UpdatedAt
			eqRun(t, got, want)
			eqRun(t, getRun(t, s, r), got)
			renewed, err := s.RenewLease(ctx(), r.ID, "w", 0, at(95))
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
		all = append([]store.Run{addRun(t, s, newRun(org, th.ID, off))}, all...)
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
			checkRest(t, "ListRuns", idsOf(got), idsOf(tc.want))
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

// testRunsIsolation: every org-scoped method reports another organization's
// thread, run, assistant or checkpoint as missing and leaves it alone.
func testRunsIsolation(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	park(t, s)
	a := newAssistant(org, "g", "mine", at(0), `{"k": "v"}`)
	must(t, "CreateAssistant", s.CreateAssistant(ctx(), a))
	th := createThread(t, s, org, 0)
	r := addRun(t, s, newRun(org, th.ID, 1))
	done := addRun(t, s, newRun(org, th.ID, 2))
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
			_, _, err := s.AddRun(ctx(), store.NewRun{Run: newRun(other, th.ID, 9),
				IfInflight: store.InflightCancel, CancelAction: store.CancelInterrupt})
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
		checkRest(t, "SearchAssistants of another org", idsOf(as), []string{})
	}
	ts, err := s.SearchThreads(ctx(), other, store.ThreadFilter{IDs: []string{th.ID}})
	must(t, "SearchThreads", err)
	checkRest(t, "SearchThreads of another org", idsOf(ts), []string{})
}

func testRunsConcurrency(t *testing.T, s store.Store) {
	t.Run("ClaimOneThread", func(t *testing.T) {
		org := newOrg(t, s)
		park(t, s)
		th := createThread(t, s, org, 0)
		var runs []string
		for i := 0; i < 5; i++ {
			runs = append(runs, addRun(t, s, newRun(org, th.ID, i)).ID)
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
				got[i], ok[i], errs[i] = s.ClaimRun(ctx(), fmt.Sprintf("w%d", i), at(10), at(100), 0)
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
		checkRest(t, "running runs", idsOf(running), runs[:1])
	})

	t.Run("ClaimManyThreads", func(t *testing.T) {
		org := newOrg(t, s)
		park(t, s)
		want := map[string]bool{}
		for i := 0; i < 3; i++ {
			th := createThread(t, s, org, 0)
			first := addRun(t, s, newRun(org, th.ID, 1))
			addRun(t, s, newRun(org, th.ID, 2))
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
				got[i], ok[i], errs[i] = s.ClaimRun(ctx(), fmt.Sprintf("w%d", i), at(10), at(100), 0)
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
				_, _, errs[i] = s.AddRun(ctx(), store.NewRun{Run: newRun(org, th.ID, i), IfInflight: store.InflightReject})
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
				_, created[i], errs[i] = s.AddRun(ctx(), store.NewRun{Run: newRun(org, thread, i), CreateThread: true})
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

// testStampMetadata: AddRun merges StampMetadata into an existing thread's
// metadata (keys replaced, others kept) in the step that adds the run; a
// thread it creates gets ThreadMetadata.
func testStampMetadata(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	th := createThread(t, s, org, 0)
	stamp := []byte(`{"graph_id": "echo", "n": 2}`)
	addRunWith(t, s, store.NewRun{Run: newRun(org, th.ID, 1), StampMetadata: stamp})
	got := getThread(t, s, org, th.ID)
	checkJSONObject(t, "stamped metadata", got.Metadata, []byte(`{"kind": "test", "n": 2, "graph_id": "echo"}`))

	fresh := newRun(org, newID(), 2)
	_, created, err := s.AddRun(ctx(), store.NewRun{Run: fresh, CreateThread: true,
		ThreadMetadata: []byte(`{"graph_id": "echo", "assistant_id": "a"}`), StampMetadata: stamp})
	must(t, "AddRun creating its thread", err)
	if !created {
		t.Fatalf("AddRun with CreateThread on a new id: created = false")
	}
	checkJSONObject(t, "created thread metadata", getThread(t, s, org, fresh.ThreadID).Metadata,
		[]byte(`{"graph_id": "echo", "assistant_id": "a"}`))

	other := newOrg(t, s)
	_, _, err = s.AddRun(ctx(), store.NewRun{Run: newRun(other, th.ID, 3), StampMetadata: stamp})
	wantErr(t, "AddRun with StampMetadata to another organization's thread", err, store.ErrNotFound)
	checkJSONObject(t, "metadata after a foreign stamp", getThread(t, s, org, th.ID).Metadata,
		[]byte(`{"kind": "test", "n": 2, "graph_id": "echo"}`))
}

// checkJSONObject compares two JSON objects by their decoded values.
func checkJSONObject(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: %q is not a JSON object: %v", what, got, err)
		return
	}
	_ = json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: %s, want %s", what, got, want)
	}
}

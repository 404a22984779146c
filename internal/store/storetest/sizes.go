package storetest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// bigJSON is a JSON object of size bytes (at least 32) whose content
// depends on seed, so two documents of one size differ.
func bigJSON(size int, seed string) []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"seed": %q, "fill": "`, seed)
	for i := 0; buf.Len() < size-2; i++ {
		buf.WriteByte("abcdefghijklmnopqrstuvwxyz0123456789"[(i*31+len(seed)*7+i/97)%36])
	}
	buf.WriteString(`"}`)
	return buf.Bytes()
}

// checkBig is checkBytes for documents too large to print.
func checkBig(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s: %d bytes, want %d bytes (equal: false)", what, len(got), len(want))
	}
}

// testSizes: documents far larger than a database item (DynamoDB's is
// 400 KB) are stored and read back whole, whatever the adapter keeps where:
// a run whose input, state and checkpoints grow past 1 MB finishes and its
// history reads back; a 5 MB result comes back whole, from a run on a
// thread and from a temporary (stateless) run.
func testSizes(t *testing.T, s store.Store) {
	org := newOrg(t, s)

	t.Run("StateGrowsPastOneMegabyte", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 0)
		r := newRun(org, th.ID, 1)
		r.Kwargs = bigJSON(450_000, "kwargs")
		r = addRun(t, s, r)
		claimWant(t, s, "w", at(2), at(50), r.ID)

		const steps = 6
		ids := checkpointIDs(t, steps)
		states := make([][]byte, steps)
		for i := range steps {
			states[i] = bigJSON(220_000*(i+1), fmt.Sprintf("state-%d", i)) // 220 KB … 1.32 MB
			parent := ""
			if i > 0 {
				parent = ids[i-1]
			}
			cp := store.Checkpoint{ThreadID: th.ID, ID: ids[i], ParentID: parent, RunID: r.ID, CreatedAt: at(3 + i), Data: states[i]}
			must(t, fmt.Sprintf("PutCheckpoint of %d bytes", len(states[i])), s.PutCheckpoint(ctx(), org, cp))
		}
		f := finish(org, th.ID, r.ID, "w", store.RunSuccess, store.ThreadInterrupted, at(20))
		f.Values = states[steps-1]
		f.Result = states[steps-1]
		f.Interrupts = bigJSON(500_000, "interrupt")
		must(t, "FinishRun with a 1.3 MB state", s.FinishRun(ctx(), f))

		got := getRun(t, s, r)
		if got.Status != store.RunSuccess {
			t.Errorf("run status %q, want success", got.Status)
		}
		checkBig(t, "run Result", got.Result, f.Result)
		checkBig(t, "run Kwargs", got.Kwargs, r.Kwargs)
		thread := getThread(t, s, org, th.ID)
		checkBig(t, "thread Values", thread.Values, f.Values)
		checkBig(t, "thread Interrupts", thread.Interrupts, f.Interrupts)
		if thread.Status != store.ThreadInterrupted {
			t.Errorf("thread status %q, want interrupted", thread.Status)
		}
		history, err := s.ListCheckpoints(ctx(), org, th.ID, "", 0)
		must(t, "ListCheckpoints", err)
		if len(history) != steps {
			t.Fatalf("history: %d checkpoints, want %d", len(history), steps)
		}
		for i, cp := range history { // newest first
			j := steps - 1 - i
			if cp.ID != ids[j] {
				t.Fatalf("history[%d] = %s, want %s", i, cp.ID, ids[j])
			}
			checkBig(t, "history["+cp.ID+"]", cp.Data, states[j])
		}
		runs, err := s.ListRuns(ctx(), org, th.ID, "", 10, 0)
		must(t, "ListRuns", err)
		if len(runs) != 1 {
			t.Fatalf("ListRuns: %d runs, want 1", len(runs))
		}
		checkBig(t, "ListRuns Result", runs[0].Result, f.Result)

		// A new state replaces the large one, and the thread goes whole.
		r2 := addRun(t, s, newRun(org, th.ID, 30))
		claimWant(t, s, "w", at(31), at(50), r2.ID)
		f2 := finish(org, th.ID, r2.ID, "w", store.RunSuccess, store.ThreadIdle, at(32))
		f2.Values = bigJSON(700_000, "second")
		must(t, "FinishRun replacing the state", s.FinishRun(ctx(), f2))
		checkBig(t, "thread Values after the second run", getThread(t, s, org, th.ID).Values, f2.Values)
		must(t, "DeleteThread", s.DeleteThread(ctx(), org, th.ID))
		_, err = s.Thread(ctx(), org, th.ID)
		wantErr(t, "Thread after DeleteThread", err, store.ErrNotFound)
	})

	t.Run("FiveMegabyteResult", func(t *testing.T) {
		park(t, s)
		th := createThread(t, s, org, 0)
		r := addRun(t, s, newRun(org, th.ID, 1))
		claimWant(t, s, "w", at(2), at(50), r.ID)
		f := finish(org, th.ID, r.ID, "w", store.RunSuccess, store.ThreadIdle, at(3))
		f.Result = bigJSON(5<<20, "five")
		f.Values = f.Result
		must(t, "FinishRun with a 5 MB result", s.FinishRun(ctx(), f))
		checkBig(t, "run Result", getRun(t, s, r).Result, f.Result)
		checkBig(t, "thread Values", getThread(t, s, org, th.ID).Values, f.Values)
	})

	t.Run("FiveMegabyteTemporaryResult", func(t *testing.T) {
		park(t, s)
		r := newRun(org, newID(), 0)
		r.Temporary = true
		_, _, err := s.AddRun(ctx(), store.NewRun{Run: r, CreateThread: true})
		must(t, "AddRun", err)
		claimWant(t, s, "w", at(1), at(50), r.ID)
		f := finish(org, r.ThreadID, r.ID, "w", store.RunSuccess, store.ThreadIdle, at(3))
		f.Result = bigJSON(5<<20, "stateless")
		f.Values = f.Result
		must(t, "FinishRun of a temporary run with a 5 MB result", s.FinishRun(ctx(), f))
		res, err := s.TemporaryResult(ctx(), org, r.ID, at(4))
		must(t, "TemporaryResult", err)
		checkBig(t, "TemporaryResult", res, f.Result)
		_, err = s.TemporaryResult(ctx(), org, r.ID, at(3).Add(store.TemporaryResultTTL+time.Second))
		wantErr(t, "TemporaryResult after its TTL", err, store.ErrNotFound)
	})

	t.Run("LargeThreadAndAssistantDocuments", func(t *testing.T) {
		th := store.Thread{ID: newID(), OrgID: org, Status: store.ThreadIdle, CreatedAt: at(0), UpdatedAt: at(0),
			Metadata: bigJSON(300_000, "meta"), Config: bigJSON(300_000, "config"), Values: bigJSON(300_000, "values")}
		must(t, "CreateThread with 900 KB of documents", s.CreateThread(ctx(), th))
		got := getThread(t, s, org, th.ID)
		checkBig(t, "thread Metadata", got.Metadata, th.Metadata)
		checkBig(t, "thread Config", got.Config, th.Config)
		checkBig(t, "thread Values", got.Values, th.Values)
	})
}

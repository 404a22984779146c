package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/store"
)

// CheckpointBlobs is what an adapter reports of how it stores checkpoint
// values apart from the checkpoints themselves (the cpcodec format's
// blobs: one per version of a channel, appends as deltas): how many a
// thread has and their bytes. The suite reads it to check that a growing
// conversation is stored in linear, not quadratic, bytes and that deleting
// checkpoints leaves no blob behind. Every adapter must implement it.
type CheckpointBlobs interface {
	CheckpointBlobs(ctx context.Context, orgID, threadID string) (count int, bytes int64, err error)
}

// engineCheckpoint is a checkpoint shaped as the engine writes it (compact
// JSON, a "values" object), which adapters store split.
func engineCheckpoint(t *testing.T, id, parent string, msgs []any, step int) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"v": 1, "id": id, "parent_id": parent, "values": map[string]any{"messages": msgs, "step": step},
		"next": []string{}, "tasks": []any{}, "metadata": map[string]any{"source": "loop", "step": step},
	})
	must(t, "marshal checkpoint", err)
	return b
}

func message(tag string, i int) map[string]any {
	return map[string]any{"role": "user", "content": fmt.Sprintf("%s %d %s", tag, i, strings.Repeat("é\"x", 300))}
}

func blobStats(t *testing.T, bs CheckpointBlobs, org, thread string) (int, int64) {
	t.Helper()
	n, size, err := bs.CheckpointBlobs(ctx(), org, thread)
	must(t, "CheckpointBlobs", err)
	return n, size
}

// testCheckpointDeltas: a thread whose state grows by appends (a
// conversation) is stored in bytes that grow linearly with it, and every
// checkpoint reads back exactly, whatever is done to the history: reading
// it all, forking from an old checkpoint, a state update on an old
// checkpoint, a rollback of a run's checkpoints, a prune, checkpoints
// stored whole between split ones; deleting the thread leaves no blob.
func testCheckpointDeltas(t *testing.T, s store.Store) {
	bs, ok := s.(CheckpointBlobs)
	if !ok {
		t.Fatalf("the adapter does not implement storetest.CheckpointBlobs")
	}
	org := newOrg(t, s)
	th := createThread(t, s, org, 0)
	run := addRun(t, s, newRun(org, th.ID, 1)) // pending: a rollback deletes its checkpoints

	const steps = 40
	ids := checkpointIDs(t, steps+2)
	want := map[string]store.Checkpoint{}
	var msgs []any
	parent := ""
	var batch []store.Checkpoint
	for i := 0; i < steps; i++ {
		msgs = append(msgs, message("m", i))
		if i == 0 { // a first value past an item's inline size: stored as a blob of its own
			msgs[0].(map[string]any)["attachment"] = strings.Repeat("a", 100<<10)
		}
		cp := store.Checkpoint{ThreadID: th.ID, ID: ids[i], ParentID: parent, CreatedAt: at(i),
			Data: engineCheckpoint(t, ids[i], parent, msgs, i)}
		if i == 20 { // another runtime's format, stored whole, in the middle of the lineage
			cp.Data = doc("opaque-" + ids[i])
		}
		if i >= steps-5 {
			cp.RunID = run.ID
		}
		want[cp.ID] = cp
		if i%3 == 0 { // one by one and in batches: both encode against the parent
			must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, cp))
		} else {
			batch = append(batch, cp)
			if len(batch) == 2 {
				must(t, "PutCheckpoints", s.PutCheckpoints(ctx(), org, batch))
				batch = nil
			}
		}
		parent = cp.ID
	}
	if len(batch) > 0 {
		must(t, "PutCheckpoints", s.PutCheckpoints(ctx(), org, batch))
	}
	checkHistory := func(what string) {
		t.Helper()
		list, err := s.ListCheckpoints(ctx(), org, th.ID, "", 100)
		must(t, "ListCheckpoints", err)
		if len(list) != len(want) {
			t.Fatalf("%s: %d checkpoints, want %d", what, len(list), len(want))
		}
		for _, got := range list {
			eqCheckpoint(t, got, want[got.ID])
		}
		for id, w := range want {
			got, err := s.Checkpoint(ctx(), org, th.ID, id)
			must(t, "Checkpoint", err)
			eqCheckpoint(t, got, w)
		}
	}
	checkHistory("a grown conversation")
	state, _ := json.Marshal(msgs)
	_, size := blobStats(t, bs, org, th.ID)
	// Stored whole each step, 40 steps would take about 20 times the
	// final state; stored once per version, under 3 (the opaque one and
	// the one after it are whole).
	if size > 3*int64(len(state)) {
		t.Fatalf("%d steps of a conversation of %d bytes are stored in %d bytes of values: not linear", steps, len(state), size)
	}

	// A fork from an old checkpoint, and a state update on another.
	fork := append(append([]any{}, msgs[:10]...), message("fork", 10))
	cp := store.Checkpoint{ThreadID: th.ID, ID: ids[steps], ParentID: ids[9], CreatedAt: at(100),
		Data: engineCheckpoint(t, ids[steps], ids[9], fork, 10)}
	must(t, "PutCheckpoint of a fork", s.PutCheckpoint(ctx(), org, cp))
	want[cp.ID] = cp
	// A rollback deletes the run's checkpoints and the values only they held.
	count, size := blobStats(t, bs, org, th.ID)
	_, err := s.CancelRun(ctx(), org, th.ID, run.ID, store.CancelRollback, at(102))
	must(t, "CancelRun rollback", err)
	for id, w := range want {
		if w.RunID == run.ID {
			delete(want, id)
		}
	}
	checkHistory("after a fork and a rollback")
	if n, after := blobStats(t, bs, org, th.ID); n >= count || after >= size {
		t.Errorf("a rollback of 5 checkpoints left %d blobs of %d bytes, was %d of %d", n, after, count, size)
	}

	edited := append(append([]any{}, msgs[:5]...), message("update", 5))
	cp = store.Checkpoint{ThreadID: th.ID, ID: ids[steps+1], ParentID: ids[4], CreatedAt: at(101),
		Data: engineCheckpoint(t, ids[steps+1], ids[4], edited, 5)}
	must(t, "UpdateThreadState on an old checkpoint", s.UpdateThreadState(ctx(), org, cp, nil, nil, "", at(101)))
	want[cp.ID] = cp
	checkHistory("after a fork, a rollback and a state update")
	latest, err := s.LatestCheckpoint(ctx(), org, th.ID)
	must(t, "LatestCheckpoint", err)
	eqCheckpoint(t, latest, cp)

	// A run ends with the state of the latest checkpoint: the thread's
	// values and the run's result (the state and one more key) read back
	// exactly, and a values filter finds the thread.
	values, err := json.Marshal(map[string]any{"messages": edited, "step": 5})
	must(t, "marshal values", err)
	result, err := json.Marshal(map[string]any{"messages": edited, "step": 5, "__interrupt__": []any{map[string]any{"id": "i", "value": 1}}})
	must(t, "marshal result", err)
	run2 := addRun(t, s, newRun(org, th.ID, 2))
	if _, ok, err := s.ClaimRunByID(ctx(), run2.ID, "deltas-owner", at(103), at(200), 0); err != nil || !ok {
		t.Fatalf("ClaimRunByID: %v %v", ok, err)
	}
	f := finish(org, th.ID, run2.ID, "deltas-owner", store.RunSuccess, store.ThreadIdle, at(104))
	f.Values, f.Result = values, result
	must(t, "FinishRun", s.FinishRun(ctx(), f))
	checkDocs := func(what string) {
		t.Helper()
		got, err := s.Thread(ctx(), org, th.ID)
		must(t, "Thread", err)
		checkBytes(t, what+": thread values", got.Values, values)
		r, err := s.Run(ctx(), org, th.ID, run2.ID)
		must(t, "Run", err)
		checkBytes(t, what+": run result", r.Result, result)
		runs, err := s.ListRuns(ctx(), org, th.ID, "", 10, 0)
		must(t, "ListRuns", err)
		for _, r := range runs {
			if r.ID == run2.ID {
				checkBytes(t, what+": listed run's result", r.Result, result)
			}
		}
		found, err := s.SearchThreads(ctx(), org, store.ThreadFilter{Values: []byte(`{"step": 5}`)})
		must(t, "SearchThreads", err)
		if len(found) != 1 || found[0].ID != th.ID {
			t.Fatalf("%s: a values filter found %d threads", what, len(found))
		}
		checkBytes(t, what+": searched thread's values", found[0].Values, values)
		n, err := s.CountThreads(ctx(), org, store.ThreadFilter{Values: []byte(`{"step": 5}`)})
		must(t, "CountThreads", err)
		if n != 1 {
			t.Fatalf("%s: a values filter counted %d threads", what, n)
		}
	}
	checkDocs("a finished run")

	// A prune keeps the latest, exactly, and only the values it, the
	// thread's values and the runs' results need.
	must(t, "PruneCheckpoints", s.PruneCheckpoints(ctx(), org, th.ID))
	want = map[string]store.Checkpoint{cp.ID: cp}
	checkHistory("after a prune")
	checkDocs("after a prune")
	if _, after := blobStats(t, bs, org, th.ID); after > int64(len(cp.Data)) {
		t.Errorf("after a prune %d bytes of values remain for a checkpoint of %d", after, len(cp.Data))
	}
	must(t, "DeleteRun", s.DeleteRun(ctx(), org, th.ID, run2.ID))
	checkHistory("after a run's deletion")
	got, err := s.Thread(ctx(), org, th.ID)
	must(t, "Thread", err)
	checkBytes(t, "thread values after a run's deletion", got.Values, values)

	// Usage counts each checkpoint's data as put, whatever the format.
	u, err := s.Usage(ctx(), org)
	must(t, "Usage", err)
	if wantBytes := int64(len(th.Metadata) + len(cp.Data)); u.Bytes != wantBytes {
		t.Errorf("usage %d bytes, want %d (the thread's metadata and its one checkpoint)", u.Bytes, wantBytes)
	}

	must(t, "DeleteThread", s.DeleteThread(ctx(), org, th.ID))
	if n, after := blobStats(t, bs, org, th.ID); n != 0 || after != 0 {
		t.Errorf("a deleted thread left %d checkpoint blobs (%d bytes)", n, after)
	}
	wantUsage(t, s, "everything deleted", org, 0, 0)
}

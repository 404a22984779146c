package storetest

import (
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/store"
)

// total is every byte a ThreadStorage reports.
func total(st store.ThreadStorage) int64 {
	return st.Checkpoints.Bytes + st.ChannelValues.Bytes + st.PendingWrites.Bytes
}

// testThreadStorage: ThreadStorage counts the thread's stored checkpoints
// and their bytes (a replaced checkpoint once, with its new data; a large
// one whole), not another thread's; a missing thread, or another
// organization's, is ErrNotFound.
func testThreadStorage(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	th := createThread(t, s, org, 0)
	other := createThread(t, s, org, 0)

	empty, err := s.ThreadStorage(ctx(), org, th.ID)
	must(t, "ThreadStorage of a thread without checkpoints", err)
	if empty.Checkpoints.Count != 0 || total(empty) != 0 {
		t.Errorf("a thread without checkpoints: %+v, want nothing", empty)
	}
	if empty.ByChannel == nil {
		t.Error("ByChannel is nil, want an empty map")
	}

	ids := checkpointIDs(t, 4)
	var want int64
	put := func(cp store.Checkpoint) {
		t.Helper()
		must(t, "PutCheckpoint", s.PutCheckpoint(ctx(), org, cp))
	}
	first := newCheckpoint(th.ID, ids[0], "", "run", 0)
	put(first)
	// Replaced by a larger version: counted once, at its new size.
	first.Data = []byte(`{"replaced": "` + strings.Repeat("r", 300) + `"}`)
	put(first)
	want += int64(len(first.Data))
	// Large enough for an adapter to keep it apart (DynamoDB's blobs).
	big := newCheckpoint(th.ID, ids[1], ids[0], "run", 1)
	big.Data = []byte(`{"big": "` + strings.Repeat("x", 600<<10) + `"}`)
	put(big)
	want += int64(len(big.Data))
	batch := []store.Checkpoint{newCheckpoint(th.ID, ids[2], ids[1], "run", 2), newCheckpoint(th.ID, ids[3], ids[2], "run", 3)}
	must(t, "PutCheckpoints", s.PutCheckpoints(ctx(), org, batch))
	for _, cp := range batch {
		want += int64(len(cp.Data))
	}
	put(newCheckpoint(other.ID, ids[0], "", "run", 0))

	got, err := s.ThreadStorage(ctx(), org, th.ID)
	must(t, "ThreadStorage", err)
	if got.Checkpoints.Count != 4 {
		t.Errorf("ThreadStorage counts %d checkpoints, want 4", got.Checkpoints.Count)
	}
	if total(got) != want {
		t.Errorf("ThreadStorage reports %d bytes (%+v), want %d: the checkpoints' data", total(got), got, want)
	}

	_, err = s.ThreadStorage(ctx(), newOrg(t, s), th.ID)
	wantErr(t, "ThreadStorage of another organization's thread", err, store.ErrNotFound)
	_, err = s.ThreadStorage(ctx(), org, newID())
	wantErr(t, "ThreadStorage of a missing thread", err, store.ErrNotFound)

	must(t, "PruneCheckpoints", s.PruneCheckpoints(ctx(), org, th.ID))
	pruned, err := s.ThreadStorage(ctx(), org, th.ID)
	must(t, "ThreadStorage after a prune", err)
	if pruned.Checkpoints.Count != 1 || total(pruned) != int64(len(batch[1].Data)) {
		t.Errorf("after a prune: %+v, want the latest checkpoint only (%d bytes)", pruned, len(batch[1].Data))
	}
}

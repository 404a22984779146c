package storetest

import (
	"testing"

	"github.com/stepgraph/stepgraph/internal/store"
)

// testCheckpointBatch: PutCheckpoints stores each checkpoint as PutCheckpoint
// would, a later one with the same ID replacing an earlier one, and refuses a
// missing thread.
func testCheckpointBatch(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	th := createThread(t, s, org, 0)
	ids := checkpointIDs(t, 3)
	first := newCheckpoint(th.ID, ids[0], "", "r", 1)
	replaced := newCheckpoint(th.ID, ids[0], "", "r", 2)
	replaced.Data = doc("replaced")
	batch := []store.Checkpoint{first, newCheckpoint(th.ID, ids[1], ids[0], "r", 3), replaced, newCheckpoint(th.ID, ids[2], ids[1], "r", 4)}
	must(t, "PutCheckpoints", s.PutCheckpoints(ctx(), org, batch))
	must(t, "PutCheckpoints of nothing", s.PutCheckpoints(ctx(), org, nil))
	list, err := s.ListCheckpoints(ctx(), org, th.ID, "", 10)
	must(t, "ListCheckpoints", err)
	checkRest(t, "batch stored newest first", cpIDs(list), []string{ids[2], ids[1], ids[0]})
	got, err := s.Checkpoint(ctx(), org, th.ID, ids[0])
	must(t, "Checkpoint", err)
	eqCheckpoint(t, got, replaced)
	wantErr(t, "PutCheckpoints on a missing thread",
		s.PutCheckpoints(ctx(), org, []store.Checkpoint{newCheckpoint(newID(), checkpointIDs(t, 1)[0], "", "", 0)}), store.ErrNotFound)
	wantErr(t, "PutCheckpoints in another organization",
		s.PutCheckpoints(ctx(), newOrg(t, s), []store.Checkpoint{newCheckpoint(th.ID, checkpointIDs(t, 1)[0], "", "", 0)}), store.ErrNotFound)
}

package storetest

import (
	"strings"
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
	checkRest(t, "batch stored newest first", idsOf(list), []string{ids[2], ids[1], ids[0]})
	got, err := s.Checkpoint(ctx(), org, th.ID, ids[0])
	must(t, "Checkpoint", err)
	eqCheckpoint(t, got, replaced)

	// A later batch that replaces a stored checkpoint, with data larger than
	// a DynamoDB item, next to a new one.
	more := checkpointIDs(t, 1)[0]
	big := newCheckpoint(th.ID, ids[1], ids[0], "r", 5)
	big.Data = []byte(`{"blob": "` + strings.Repeat("x", 500_000) + `"}`)
	again := []store.Checkpoint{big, newCheckpoint(th.ID, more, ids[2], "r", 6)}
	must(t, "PutCheckpoints replacing a stored checkpoint", s.PutCheckpoints(ctx(), org, again))
	for _, want := range again {
		got, err := s.Checkpoint(ctx(), org, th.ID, want.ID)
		must(t, "Checkpoint", err)
		eqCheckpoint(t, got, want)
	}
	list, err = s.ListCheckpoints(ctx(), org, th.ID, "", 10)
	must(t, "ListCheckpoints", err)
	checkRest(t, "after the second batch", idsOf(list), []string{more, ids[2], ids[1], ids[0]})

	wantErr(t, "PutCheckpoints on a missing thread",
		s.PutCheckpoints(ctx(), org, []store.Checkpoint{newCheckpoint(newID(), checkpointIDs(t, 1)[0], "", "", 0)}), store.ErrNotFound)
	wantErr(t, "PutCheckpoints in another organization",
		s.PutCheckpoints(ctx(), newOrg(t, s), []store.Checkpoint{newCheckpoint(th.ID, checkpointIDs(t, 1)[0], "", "", 0)}), store.ErrNotFound)
}

package runs

import (
	"context"
	"testing"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// putRecorder records each PutCheckpoints batch; the first one waits for
// release, so the checkpoints put meanwhile pile up in the next batch.
type putRecorder struct {
	store.Store
	started, release chan struct{}
	batches          [][]store.Checkpoint
}

func (r *putRecorder) PutCheckpoints(_ context.Context, _ string, cps []store.Checkpoint) error {
	if len(r.batches) == 0 {
		close(r.started)
		<-r.release
	}
	r.batches = append(r.batches, cps)
	return nil
}

func TestWriteBehindStoresTheLatestVersionOfACheckpointOnce(t *testing.T) {
	rec := &putRecorder{started: make(chan struct{}), release: make(chan struct{})}
	s := &Service{Store: rec}
	ctx := context.Background()
	k := s.sink(ctx, store.Run{ID: "r", OrgID: "o", ThreadID: "t"}, "async", "")
	cp := func(id, parent string, step int) graph.Checkpoint {
		return graph.Checkpoint{V: 1, ID: id, ParentID: parent, Values: map[string]any{"step": step}}
	}
	put := func(c graph.Checkpoint) {
		t.Helper()
		if err := k.put(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	put(cp("a", "", 0))
	<-rec.started // the writer holds the first batch: the rest queue behind it
	// a again (with its step's writes), b three times, then a's version 3:
	// not consecutive with the others, so it is stored after b, as sent.
	for _, c := range []graph.Checkpoint{cp("a", "", 1), cp("b", "a", 2), cp("b", "a", 3), cp("b", "a", 4), cp("a", "", 5)} {
		put(c)
	}
	close(rec.release)
	if err := k.flush(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range rec.batches {
		for _, c := range b {
			got = append(got, c.ID+":"+string(c.Data))
		}
	}
	want := []string{`a:` + string(mustJSON(cp("a", "", 0))), `a:` + string(mustJSON(cp("a", "", 1))),
		`b:` + string(mustJSON(cp("b", "a", 4))), `a:` + string(mustJSON(cp("a", "", 5)))}
	if len(rec.batches) != 2 || len(got) != len(want) {
		t.Fatalf("stored %d batches: %q, want 2 batches: %q", len(rec.batches), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("stored %q, want %q", got, want)
		}
	}
}

package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/store"
)

// A commit takes the oldest queued transaction whatever its weight, then
// the later ones, in order, whose weight fits in maxBatch; the heavy ones
// that do not fit wait, in order, without holding back the light ones
// queued behind them.
func TestTakeLetsLightTransactionsPastHeavyOnes(t *testing.T) {
	light := func(n int) []int {
		w := make([]int, n)
		for i := range w {
			w[i] = 1
		}
		return w
	}
	for _, c := range []struct {
		name      string
		weights   []int
		taken     []int // indexes into weights, in commit order
		remaining []int
	}{
		{name: "empty", weights: nil, taken: nil, remaining: nil},
		{name: "one heavy alone goes in", weights: []int{500}, taken: []int{0}, remaining: nil},
		{name: "light ones: the oldest and maxBatch more", weights: light(70),
			taken: seq(0, 65), remaining: seq(65, 70)},
		{name: "a light one passes the write-behind batches queued before it",
			weights: []int{65, 65, 65, 65, 1}, taken: []int{0, 4}, remaining: []int{1, 2, 3}},
		{name: "weight 0 counts as 1", weights: append([]int{65}, make([]int, 66)...),
			taken: seq(0, 65), remaining: seq(65, 67)},
		{name: "what fits goes in, in order", weights: []int{1, 30, 30, 30, 1, 4, 2},
			taken: []int{0, 1, 2, 4, 6}, remaining: []int{3, 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var q txQueue
			reqs := make([]*txRequest, len(c.weights))
			for i, w := range c.weights {
				reqs[i] = &txRequest{weight: w}
				q.join(reqs[i])
			}
			index := func(list []*txRequest) []int {
				var out []int
				for _, r := range list {
					out = append(out, slices.Index(reqs, r))
				}
				return out
			}
			if got := index(q.take()); !slices.Equal(got, c.taken) {
				t.Errorf("taken %v, want %v", got, c.taken)
			}
			if got := index(q.waiting); !slices.Equal(got, c.remaining) {
				t.Errorf("left queued %v, want %v", got, c.remaining)
			}
			used := 0
			for _, i := range c.taken[min(1, len(c.taken)):] {
				used += max(c.weights[i], 1)
			}
			if used > maxBatch {
				t.Errorf("the commit holds %d past its oldest, above maxBatch %d", used, maxBatch)
			}
		})
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// The rule through the store: while a commit holds the writer, three
// PutCheckpoints of 65 checkpoints each (an async run's write-behind
// batches) and then a one-row write queue; the one-row write commits with
// the first batch, so it sees 65 checkpoints stored before it, not 195
// (all three batches, as a commit of every queued transaction gave).
func TestWriteBehindBatchesDoNotHoldTheWriterForOthers(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	org := uuid.NewString()
	th := store.Thread{ID: uuid.NewString(), OrgID: org, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := db.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	queued := func(n int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute) // a safety net only
		for {
			db.txq.mu.Lock()
			k := len(db.txq.waiting)
			db.txq.mu.Unlock()
			if k == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d transactions queued, want %d", k, n)
			}
			time.Sleep(time.Millisecond)
		}
	}

	// The commit in progress: it holds the writer until released.
	holding, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	wg.Go(func() {
		errs <- db.inTx(ctx, func(*txn) error {
			close(holding)
			<-release
			return nil
		})
	})
	<-holding

	const batches, perBatch = 3, 65
	for b := range batches {
		cps := make([]store.Checkpoint, perBatch)
		for i := range cps {
			id := uuid.Must(uuid.NewV7()).String()
			data, _ := json.Marshal(map[string]any{"v": 1, "id": id, "values": map[string]any{"count": fmt.Sprint(b, i)}})
			cps[i] = store.Checkpoint{ThreadID: th.ID, ID: id, CreatedAt: time.Now(), Data: data}
		}
		wg.Go(func() { errs <- db.PutCheckpoints(ctx, org, cps) })
		queued(b + 1) // in this order
	}
	seen := -1
	wg.Go(func() {
		errs <- db.inTx(ctx, func(tx *txn) error {
			return tx.QueryRowContext(ctx, `SELECT count(*) FROM checkpoints WHERE thread_id = ?`, th.ID).Scan(&seen)
		})
	})
	queued(batches + 1)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if seen != perBatch {
		t.Errorf("the one-row write committed after %d checkpoints, want %d (one write-behind batch)", seen, perBatch)
	}
	var total int
	if err := db.db.QueryRowContext(ctx, `SELECT count(*) FROM checkpoints WHERE thread_id = ?`, th.ID).Scan(&total); err != nil || total != batches*perBatch {
		t.Fatalf("%d checkpoints stored (%v), want %d", total, err, batches*perBatch)
	}
}

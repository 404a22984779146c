package dynamo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/payloads"
	payloadss3 "github.com/stepgraph/stepgraph/internal/payloads/s3"
	"github.com/stepgraph/stepgraph/internal/store"
)

// countingPayloads counts the bytes put in the payload store.
type countingPayloads struct {
	payloads.Store
	put atomic.Int64
}

func (c *countingPayloads) Put(ctx context.Context, key string, data []byte) error {
	c.put.Add(int64(len(data)))
	return c.Store.Put(ctx, key, data)
}

// A growing conversation on the deployed shape (S3 payloads, every item
// metered as DynamoDB counts its size): what a turn writes — its three
// checkpoints, the run's end with the thread's values and the run's
// result — stays the size of what the turn added while the state grows
// past the payload threshold, and everything reads back exactly.
func TestGrowingConversationWritesWhatChanged(t *testing.T) {
	ep := awstest.Start(t)
	openShared(t)
	m := &sizeMeter{}
	metered := sizeMetered(ep.Config, m)
	pl := &countingPayloads{Store: payloadss3.New(ep.Config, sharedBucket(t), true)}
	db := NewFromClient(metered, Options{TablePrefix: sharedPrefix, Payloads: pl})
	ctx := context.Background()
	org := uuid.NewString()
	th := store.Thread{ID: uuid.NewString(), OrgID: org, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	must(t, "CreateThread", db.CreateThread(ctx, th))

	written := func() int64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.bytes + pl.put.Load()
	}
	const turns = 60 // about 2 KB a turn: the state ends near 130 KB, past the payload threshold
	var msgs []any
	parent := ""
	var perTurn []int64
	var lastValues, lastResult []byte
	var lastRun string
	for turn := 1; turn <= turns; turn++ {
		before := written()
		r := store.Run{ID: uuid.NewString(), OrgID: org, ThreadID: th.ID, AssistantID: "a", Status: store.RunPending,
			CreatedAt: time.Now(), UpdatedAt: time.Now()}
		if _, _, err := db.AddRun(ctx, store.NewRun{Run: r}); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := db.ClaimRunByID(ctx, r.ID, "owner", time.Now(), time.Now().Add(time.Minute), 0); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		var cps []store.Checkpoint
		for step, msg := range []string{"user", "assistant"} {
			msgs = append(msgs, map[string]any{"role": msg, "content": fmt.Sprintf("%d %s", turn, strings.Repeat("x", 1000))})
			id := uuid.Must(uuid.NewV7()).String()
			data, err := json.Marshal(map[string]any{"v": 1, "id": id, "parent_id": parent,
				"values": map[string]any{"messages": msgs}, "metadata": map[string]any{"step": step}})
			must(t, "marshal", err)
			cps = append(cps, store.Checkpoint{ThreadID: th.ID, ID: id, ParentID: parent, RunID: r.ID, CreatedAt: time.Now(), Data: data})
			parent = id
		}
		must(t, "PutCheckpoints", db.PutCheckpoints(ctx, org, cps))
		values, err := json.Marshal(map[string]any{"messages": msgs})
		must(t, "marshal", err)
		f := store.FinishedRun{OrgID: org, ThreadID: th.ID, RunID: r.ID, LeaseOwner: "owner", Status: store.RunSuccess,
			Result: values, ThreadStatus: store.ThreadIdle, Values: values, Now: time.Now()}
		must(t, "FinishRun", db.FinishRun(ctx, f))
		perTurn = append(perTurn, written()-before)
		lastValues, lastResult, lastRun = values, values, r.ID
	}
	first, last := perTurn[1], perTurn[turns-1] // turn 1 creates what turn 2 only updates
	t.Logf("bytes written per turn (items as DynamoDB sizes them, and S3): turn 2 %d, turn %d %d; state %d", first, turns, last, len(lastValues))
	if len(lastValues) < PayloadThreshold {
		t.Fatalf("the state (%d bytes) never passed the payload threshold: the test proves less than it says", len(lastValues))
	}
	if last > 2*first {
		t.Fatalf("turn %d wrote %d bytes, turn 2 %d: more than 2×", turns, last, first)
	}
	got, err := db.Thread(ctx, org, th.ID)
	must(t, "Thread", err)
	run, err := db.Run(ctx, org, th.ID, lastRun)
	must(t, "Run", err)
	latest, err := db.LatestCheckpoint(ctx, org, th.ID)
	must(t, "LatestCheckpoint", err)
	if !bytes.Equal(got.Values, lastValues) || !bytes.Equal(run.Result, lastResult) || latest.ID != parent {
		t.Fatalf("read back: values %d bytes (want %d), result %d (want %d), latest %s (want %s)",
			len(got.Values), len(lastValues), len(run.Result), len(lastResult), latest.ID, parent)
	}
	history, err := db.ListCheckpoints(ctx, org, th.ID, "", 2*turns)
	must(t, "ListCheckpoints", err)
	if len(history) != 2*turns {
		t.Fatalf("%d checkpoints, want %d", len(history), 2*turns)
	}
	must(t, "DeleteThread", db.DeleteThread(ctx, org, th.ID))
	if n, _, err := db.CheckpointBlobs(ctx, org, th.ID); err != nil || n != 0 {
		t.Fatalf("a deleted thread left %d values (%v)", n, err)
	}
}

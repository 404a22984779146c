package chatgraph

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// A turn runs the three nodes one after the other — three super-steps,
// each ending in a checkpoint of the whole state (the cost the workload
// measures) — and answers as the built-in echo graph does (what the
// workload checks).
func TestTurnIsThreeSuperSteps(t *testing.T) {
	g := New()
	var checkpoints []graph.Checkpoint
	sink := func(_ context.Context, cp graph.Checkpoint) error {
		checkpoints = append(checkpoints, cp)
		return nil
	}
	in := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	cp, out, err := graph.Run(context.Background(), g, nil, in, graph.Options{}, sink)
	if err != nil || out.Status != graph.Done {
		t.Fatalf("Run: %v, outcome %+v", err, out)
	}
	// The input (step -1) and start (step 0) checkpoints, as LangGraph
	// writes them, then one after each node: steps 1, 2, 3 written by
	// context, respond, remember.
	var steps []int
	var writers []string
	for _, c := range checkpoints {
		steps = append(steps, c.Metadata.Step)
		for node := range c.Metadata.Writes {
			if c.Metadata.Step > 0 {
				writers = append(writers, node)
			}
		}
	}
	if !reflect.DeepEqual(steps, []int{-1, 0, 1, 2, 3}) || !reflect.DeepEqual(writers, []string{"context", "respond", "remember"}) {
		t.Fatalf("checkpoints of steps %v written by %v, want steps [-1 0 1 2 3] by [context respond remember]", steps, writers)
	}
	// Compared as JSON (the engine keeps numbers as json.Number).
	want := `{"context":{"chars":2,"messages":1},"messages":[{"content":"hi","role":"user"},{"content":"echo: hi","role":"assistant"}],"summary":"2 messages"}`
	got, err := json.Marshal(cp.Values)
	if err != nil || string(got) != want {
		t.Fatalf("final state %s (%v), want %s", got, err, want)
	}
}

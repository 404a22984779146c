package chatgraph

import (
	"context"
	"testing"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// The graph is three nodes run one after the other, so a turn is three
// super-steps; its answers are what the workload checks.
func TestNodesInOrder(t *testing.T) {
	g := New()
	if g.Name() != Name {
		t.Fatalf("name %q", g.Name())
	}
	state := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	c, err := contextNode(context.Background(), state, nil)
	if err != nil || c == nil {
		t.Fatalf("context: %v", err)
	}
	r, err := respondNode(context.Background(), state, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := graph.Update(map[string]any{"messages": map[string]any{"role": "assistant", "content": "echo: hi"}})
	if len(r.Update) != len(want.Update) {
		t.Fatalf("respond wrote %+v, want %+v", r.Update, want.Update)
	}
	m, err := rememberNode(context.Background(), state, nil)
	if err != nil || m == nil {
		t.Fatalf("remember: %v", err)
	}
}

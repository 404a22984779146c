package graph

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStateSizeFollowsWrites: the size a checkpoint keeps per channel is
// the JSON size of its values after every write, clone and child, and the
// bounded measure passes the bound exactly when the whole one does.
func TestStateSizeFollowsWrites(t *testing.T) {
	g := NewBuilder("sizes").
		AddChannel("xs", Channel{Reducer: Append, Default: []any{}}).
		AddChannel("big", Channel{}).
		AddChannel("ys", Channel{}).
		AddNode("n", logNode("n")).
		AddEdge(Start, "n").
		MustCompile()
	cp := Checkpoint{Values: map[string]any{"big": strings.Repeat("é\"", 100), "xs": []any{}}}
	for i := range 6 {
		child := cp.child(SourceLoop, nil)
		// xs grows (its size follows the new elements), ys is replaced by
		// a list as long (measured again).
		ws := Writes{{Key: "xs", Value: `a"b` + strings.Repeat("c", i)}, {Key: "ys", Value: []any{strings.Repeat("y", i), map[string]any{"i": i}}}}
		if i == 3 {
			ws = append(ws, Write{Key: "big", Value: "short now"})
		}
		if e := g.applyTo(&child, ws); e != nil {
			t.Fatal(e)
		}
		whole, err := json.Marshal(child.Values)
		if err != nil {
			t.Fatal(err)
		}
		if got := child.stateSize(0); got != len(whole) {
			t.Fatalf("write %d: stateSize %d, JSON %d bytes", i, got, len(whole))
		}
		for _, max := range []int{len(whole) - 1, len(whole), len(whole) + 1} {
			if over, want := child.stateSize(max) > max, len(whole) > max; over != want {
				t.Fatalf("write %d, bound %d: over %v, want %v", i, max, over, want)
			}
		}
		cp = child.clone()
	}
}

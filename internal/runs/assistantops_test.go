package runs

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// TestAssistantSubgraphs: namespaces follow LangGraph's get_subgraphs.
func TestAssistantSubgraphs(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pass := func(context.Context, map[string]any, *graph.Runtime) (*graph.Command, error) { return nil, nil }
	leaf := graph.NewBuilder("leaf").AddChannel("l", graph.Channel{}).AddNode("x", pass).AddEdge(graph.Start, "x").MustCompile()
	mid := graph.NewBuilder("mid").AddChannel("m", graph.Channel{}).AddNode("deep", pass).MarkSubgraph("deep", leaf).
		AddEdge(graph.Start, "deep").MustCompile()
	outer := graph.NewBuilder("outer").AddChannel("o", graph.Channel{}).
		AddNode("a", pass).MarkSubgraph("a", mid).AddNode("b", pass).MarkSubgraph("b", leaf).AddNode("plain", pass).
		AddEdge(graph.Start, "a").AddEdge("a", "b").AddEdge("b", "plain").MustCompile()
	reg := graph.NewRegistry()
	if err := reg.Register(outer); err != nil {
		t.Fatal(err)
	}
	s := &Service{Store: db, Graphs: reg}
	for _, tc := range []struct {
		namespace string
		recurse   bool
		want      []string
	}{
		{"", false, []string{"a", "b"}},
		{"", true, []string{"a", "a|deep", "b"}},
		{"a", false, []string{"a"}},
		{"a", true, []string{"a", "a|deep"}},
		{"a|deep", false, []string{"a|deep"}},
		{"plain", false, nil},
		{"nope", true, nil},
	} {
		got, err := s.AssistantSubgraphs(context.Background(), "org", "outer", tc.namespace, tc.recurse)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, tc.want) {
			t.Errorf("subgraphs(%q, recurse %v) = %v, want %v", tc.namespace, tc.recurse, keys, tc.want)
		}
	}
	got, _ := s.AssistantSubgraphs(context.Background(), "org", "outer", "a", false)
	if props, _ := got["a"].StateSchema["properties"].(map[string]any); props["m"] == nil {
		t.Errorf("schema of subgraph a: %v", got["a"].StateSchema)
	}
}

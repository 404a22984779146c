package graphdoc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// fanOut is graphs g0 … g<depth>: each of g0 … g<depth-1> runs the next
// one width times in parallel, g<depth> adds 1 to n. g0 runs
// width^depth leaves; its node executions are width + width² + … + 2·width^depth.
func fanOut(depth, width int) map[string]string {
	docs := map[string]string{}
	for i := 0; i < depth; i++ {
		var nodes, targets []string
		for j := 0; j < width; j++ {
			name := fmt.Sprintf("s%d", j)
			nodes = append(nodes, fmt.Sprintf("  %s: {kind: subgraph, graph: g%d}", name, i+1))
			targets = append(targets, name)
		}
		docs[fmt.Sprintf("g%d", i)] = "state: {n: {reducer: add}}\nnodes:\n" + strings.Join(nodes, "\n") +
			"\nedges: [{from: __start__, to: [" + strings.Join(targets, ", ") + "]}]\n"
	}
	docs[fmt.Sprintf("g%d", depth)] = "state: {n: {reducer: add}}\nnodes: {leaf: {kind: transform, update: {n: 1}}}\nedges: [{from: __start__, to: leaf}]\n"
	return docs
}

// Nesting deeper than the limit is known from the documents: such a graph
// is refused when compiled for the platform, naming the chain.
func TestSubgraphNestingIsRefusedAtCompile(t *testing.T) {
	cfg, err := Load(files(fanOut(3, 1)), "stepgraph.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Compile(Options{MaxSubgraphDepth: 2})
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Compile: %v, want a ValidationError", err)
	}
	want := `graphs/g0.yaml: /nodes/s0/graph: subgraphs nest 3 deep from graph "g0" (g0 → g1 → g2 → g3), more than the limit of 2 nested subgraphs`
	if err.Error() != want {
		t.Errorf("problems:\n%v\nwant\n%s", err, want)
	}
	if _, err := cfg.Compile(Options{MaxSubgraphDepth: 3}); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

// Subgraph runs share the run's limits: their depth is checked as they
// start (for graphs compiled before the limit was lowered) and their node
// executions count against the run's, so a fan-out stops at the budget.
func TestSubgraphRunsShareTheRunsLimits(t *testing.T) {
	graphs := compileDocs(t, Options{}, fanOut(3, 3)) // 3+9+27+27 = 66 node executions
	g := graphs["g0"]
	cases := []struct {
		name   string
		limits graph.Limits
		kind   string
		msg    string
	}{
		{"within the limits", graph.Limits{MaxNodeExecutions: 66, MaxSubgraphDepth: 3}, "", ""},
		{"too deep", graph.Limits{MaxSubgraphDepth: 2},
			graph.KindLimit, `node "s0": subgraph "g1": node "s0": subgraph "g2": node "s0": a subgraph at depth 3 passes the limit of 2 nested subgraphs`},
		{"too many executions", graph.Limits{MaxNodeExecutions: 40},
			graph.KindLimit, "the run reached its limit of 40 node executions (subgraph nodes included)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cp, out := run(t, g, nil, map[string]any{}, graph.Options{Limits: c.limits})
			if c.kind == "" {
				wantStatus(t, out, graph.Done)
				jsonEqual(t, cp.Values, `{"n": 27}`)
				if cp.RunExecutions != 66 {
					t.Errorf("RunExecutions = %d, want 66", cp.RunExecutions)
				}
				return
			}
			wantError(t, out, c.kind, c.msg)
		})
	}
}

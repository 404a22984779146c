package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/stepgraph/stepgraph/bench/internal/growth"
)

// growthResults is what this report shows of bench/cmd/ckptbench's results
// (the growing conversation and the large state, run by `make bench`
// before loadgen): <date>-checkpoints.json beside the report, else the
// latest one there.
type growthResults struct {
	File   string // its name, beside the report
	Series []growth.Series
}

func readGrowth(dir, date string) *growthResults {
	path := growth.Find(dir, date)
	if path == "" {
		return nil
	}
	all, err := growth.Read(path)
	if err != nil {
		return nil
	}
	return &growthResults{File: filepath.Base(path), Series: all}
}

// summaries are the growing conversations, one per durability.
func (g *growthResults) summaries() []growth.Summary {
	if g == nil {
		return nil
	}
	var out []growth.Summary
	for _, s := range g.Series {
		if sum, ok := growth.Summarize(s); ok {
			out = append(out, sum)
		}
	}
	return out
}

func (g *growthResults) report() string { return strings.TrimSuffix(g.File, ".json") + ".md" }

// growthTargetRows are the targets table's rows for the growing
// conversation, one per durability measured.
func growthTargetRows(g *growthResults) string {
	target := fmt.Sprintf("growing conversation: turn-200 latency ≤ %.0f× turn 1; bytes written at turn 200 ≤ %.0f× turn 1", growth.TargetRatio, growth.TargetRatio)
	sums := g.summaries()
	if len(sums) == 0 {
		return fmt.Sprintf("| %s | – | **not measured** | `go run ./bench/cmd/ckptbench` (run by `make bench` before the load generator) writes the figures this row quotes |\n", target)
	}
	var b strings.Builder
	for _, s := range sums {
		fmt.Fprintf(&b, "| %s | %s | %s | latency (median of 10 turns) %.2f → %.2f ms = %.2f× (fastest of 10: %.2f×); bytes %.1f → %.1f KB = %.2f× ([%s](%s)) |\n",
			target, s.Durability, metWord(s.Met()), s.Latency1, s.LatencyN, s.LatencyRatio(), s.FastestN/s.Fastest1,
			float64(s.Bytes1)/1024, float64(s.BytesN)/1024, s.BytesRatio(), g.report(), g.report())
	}
	return b.String()
}

// growthSection is the report's section on issue 19's growing
// conversation and large state.
func growthSection(r *Results) string {
	var b strings.Builder
	b.WriteString("## Growing conversation and large state (issue 19)\n\n")
	g := r.Growth
	if len(g.summaries()) == 0 {
		b.WriteString("Not measured: no results of `go run ./bench/cmd/ckptbench` beside this report. `make bench` runs it before the load generator: one thread of 200 turns adding ~2 KB of messages each (latency and bytes written to storage per turn, ")
		b.WriteString("charted against the turn number; targets: turn-200 latency ≤ 2× turn 1, bytes written at turn 200 ≤ 2× turn 1) and a run with a 1 MB state over 20 steps (latency and bytes written per step).\n\n")
		return b.String()
	}
	base := strings.TrimSuffix(g.File, ".json")
	fmt.Fprintf(&b, "From [%s.md](%s.md) (chart: [%s.svg](%s.svg)), written by `go run ./bench/cmd/ckptbench`: stepgraph only, the API in process on the SQLite store, one request at a time over HTTP on 127.0.0.1; ", base, base, base, base)
	b.WriteString("the peers are not measured on these workloads. Bytes are those bound to write statements (`sqlite.WriteMeter`), latency to the answer's last byte; turn 1 and the last turn are each the median of ten turns (1–10 and the last ten).\n\n")
	b.WriteString("| durability | turns | latency turn 1 | latency last turn | ratio (target ≤ 2×) | fastest of 10, ratio | bytes turn 1 | bytes last turn | ratio (target ≤ 2×) | state at the end | result |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, s := range g.summaries() {
		fmt.Fprintf(&b, "| %s | %d | %.2f ms | %.2f ms | %.2f× | %.2f× | %.1f KB | %.1f KB | %.2f× | %.0f KB | %s |\n", s.Durability, s.LastTurn,
			s.Latency1, s.LatencyN, s.LatencyRatio(), s.FastestN/s.Fastest1, float64(s.Bytes1)/1024, float64(s.BytesN)/1024, s.BytesRatio(), s.StateN, metWord(s.Met()))
	}
	b.WriteString("\n")
	for _, s := range g.Series {
		if s.Workload == growth.LargeState && len(s.Points) > 0 {
			fmt.Fprintf(&b, "Large state, durability %s: one run of %d steps over a %.0f KB state took %.1f ms and wrote %.1f KB.\n\n",
				s.Durability, len(s.Points)+1, s.Points[0].StateKB, s.RunMS, float64(s.RunBytes)/1024)
		}
	}
	return b.String()
}

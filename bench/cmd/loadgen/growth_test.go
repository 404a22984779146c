package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/bench/internal/growth"
)

// conversation is a growing conversation of 200 turns whose turns take
// lat(n) ms and write bytes(n).
func conversation(durability string, lat func(n int) float64, bytes func(n int) int64) growth.Series {
	s := growth.Series{Workload: growth.Conversation, Durability: durability}
	for n := 1; n <= 200; n++ {
		s.Points = append(s.Points, growth.Point{N: n, LatencyMS: lat(n), Bytes: bytes(n), StateKB: float64(2 * n)})
	}
	return s
}

// The report quotes ckptbench's results beside it (the latest when none
// has its date) in the issue-19 targets and its growth section: met when
// both ratios are within 2×, not met otherwise, not measured without them.
func TestGrowthFromCkptbench(t *testing.T) {
	dir := t.TempDir()
	r := results19(600, 0.5)
	r.Growth = readGrowth(dir, r.Date)
	md := markdown(r)
	for _, w := range []string{
		"| growing conversation: turn-200 latency ≤ 2× turn 1; bytes written at turn 200 ≤ 2× turn 1 | – | **not measured** |",
		"Not measured: no results of `go run ./bench/cmd/ckptbench`",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("report lacks %q", w)
		}
	}

	flat := func(int) int64 { return 11 << 10 }
	all := []growth.Series{
		conversation("sync", func(n int) float64 { return 4 + float64(n)/100 }, flat), // medians 4.06 → 5.96 ms
		conversation("async", func(n int) float64 { return 2 + float64(n)/20 }, flat), // medians 2.30 → 11.80 ms
		{Workload: growth.LargeState, Durability: "async", RunMS: 300, RunBytes: 2 << 20, Points: []growth.Point{{N: 1, StateKB: 1024}}},
	}
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(growth.File(dir, "2026-01-01", ""), b, 0o644); err != nil {
		t.Fatal(err)
	}
	r.Growth = readGrowth(dir, r.Date) // another date: the latest one there
	md = markdown(r)
	for _, w := range []string{
		"turn 1 | sync | **met** | latency (median of 10 turns) 4.06 → 5.96 ms = 1.47× (fastest of 10: 1.47×); bytes 11.0 → 11.0 KB = 1.00× ([2026-01-01-checkpoints.md](2026-01-01-checkpoints.md)) |",
		"turn 1 | async | **not met** | latency (median of 10 turns) 2.30 → 11.80 ms = 5.13×",
		"| async | 200 | 2.30 ms | 11.80 ms | 5.13× |",
		"Large state, durability async: one run of 2 steps over a 1024 KB state took 300.0 ms and wrote 2048.0 KB.",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("report lacks %q", w)
		}
	}
}

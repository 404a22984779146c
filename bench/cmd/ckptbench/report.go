package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// checkpointTables are the tables of the checkpoint format.
var checkpointTables = []string{"checkpoints", "checkpoint_blobs"}

func checkpointBytes(p Point) int64 {
	var n int64
	for _, t := range checkpointTables {
		n += p.ByTable[t]
	}
	return n
}

// window is the median of a field over points [from, to] (1-based turns).
func window(ps []Point, from, to int, f func(Point) float64) float64 {
	var v []float64
	for _, p := range ps {
		if p.N >= from && p.N <= to {
			v = append(v, f(p))
		}
	}
	sort.Float64s(v)
	if len(v) == 0 {
		return math.NaN()
	}
	return v[len(v)/2]
}

// fastest is the lowest latency over turns [from, to].
func fastest(ps []Point, from, to int) float64 {
	best := math.Inf(1)
	for _, p := range ps {
		if p.N >= from && p.N <= to {
			best = math.Min(best, p.LatencyMS)
		}
	}
	return best
}

func report(all []Series, name string, turns, msgBytes, stateMB, steps int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Checkpoint cost vs state size (%s)\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "`go run ./bench/cmd/ckptbench` (issue 19). The API in process on the SQLite store, driven over HTTP on 127.0.0.1, one request at a time. "+
		"Bytes are counted in the adapter (`sqlite.WriteMeter`: every value bound to a write statement, by table; SQLite's page, index and WAL overhead not included). "+
		"Chart: [%s.svg](%s.svg); every point: [%s.json](%s.json).\n\n", name, name, name, name)
	fmt.Fprintf(&b, "- growing conversation: one thread, %d turns of `echo` (`POST /threads/{id}/runs/wait`), each turn a user message of %d bytes and its echo (about %.1f KB of messages per turn); every answer checked (the whole conversation).\n", turns, msgBytes, float64(2*msgBytes+120)/1024)
	fmt.Fprintf(&b, "- large state: one run of a graph whose state holds a %d MB string and which runs %d super-steps, each appending a small entry and adding 1 to a counter; per step: the time and the bytes between the starts of two consecutive steps (with `sync` the previous step's checkpoint is written in between; with `async` it is written behind, so per-step figures mix steps).\n\n", stateMB, steps)
	for _, s := range all {
		if s.Workload != "growing conversation" || len(s.Points) == 0 {
			continue
		}
		ps := s.Points
		first, last := ps[0], ps[len(ps)-1]
		fmt.Fprintf(&b, "## Growing conversation, durability %s\n\n", s.Durability)
		lat1 := window(ps, 1, 10, func(p Point) float64 { return p.LatencyMS })
		latN := window(ps, last.N-9, last.N, func(p Point) float64 { return p.LatencyMS })
		fmt.Fprintf(&b, "| | turn 1 | turn %d | ratio | target |\n|---|---|---|---|---|\n", last.N)
		fmt.Fprintf(&b, "| bytes written, all tables | %s | %s | %.2f× | ≤ 2× |\n", kb(first.Bytes), kb(last.Bytes), float64(last.Bytes)/float64(first.Bytes))
		fmt.Fprintf(&b, "| bytes written, checkpoints and their blobs | %s | %s | %.2f× | |\n", kb(checkpointBytes(first)), kb(checkpointBytes(last)), float64(checkpointBytes(last))/float64(checkpointBytes(first)))
		fmt.Fprintf(&b, "| latency, median of 10 turns (1–10, %d–%d) | %.2f ms | %.2f ms | %.2f× | ≤ 2× |\n", last.N-9, last.N, lat1, latN, latN/lat1)
		l1, lN := fastest(ps, 1, 10), fastest(ps, last.N-9, last.N)
		fmt.Fprintf(&b, "| latency, fastest of those 10 turns | %.2f ms | %.2f ms | %.2f× | ≤ 2× |\n", l1, lN, lN/l1)
		c1 := window(ps, 1, 10, func(p Point) float64 { return p.CPUMS })
		cN := window(ps, last.N-9, last.N, func(p Point) float64 { return p.CPUMS })
		fmt.Fprintf(&b, "| CPU time of the process per turn, median of those 10 | %.2f ms | %.2f ms | %.2f× | |\n", c1, cN, cN/c1)
		fmt.Fprintf(&b, "| state (the answer's JSON) | %.1f KB | %.1f KB | %.0f× | |\n\n", first.StateKB, last.StateKB, last.StateKB/first.StateKB)
		fmt.Fprintf(&b, "| turn | latency ms | CPU ms | bytes written | by table |\n|---|---|---|---|---|\n")
		for _, p := range ps {
			if p.N == 1 || p.N == 2 || p.N%25 == 0 || p.N == last.N {
				fmt.Fprintf(&b, "| %d | %.2f | %.2f | %s | %s |\n", p.N, p.LatencyMS, p.CPUMS, kb(p.Bytes), tables(p.ByTable))
			}
		}
		var total, cps int64
		for _, p := range ps {
			total += p.Bytes
			cps += checkpointBytes(p)
		}
		fmt.Fprintf(&b, "\nTotal over %d turns: %s written, of which %s checkpoints and their blobs.\n\n", len(ps), kb(total), kb(cps))
	}
	for _, s := range all {
		if s.Workload != "large state" {
			continue
		}
		fmt.Fprintf(&b, "## Large state, durability %s\n\n", s.Durability)
		fmt.Fprintf(&b, "The run: %.1f ms, %s written (input, %d steps, result).\n\n", s.RunMS, kb(s.RunBytes), len(s.Points)+1)
		fmt.Fprintf(&b, "| step | latency ms | bytes written | by table |\n|---|---|---|---|\n")
		for _, p := range s.Points {
			fmt.Fprintf(&b, "| %d | %.2f | %s | %s |\n", p.N, p.LatencyMS, kb(p.Bytes), tables(p.ByTable))
		}
		b.WriteString("\n")
	}
	return b.String()
}

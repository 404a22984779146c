package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/bench/internal/growth"
)

func report(all []Series, name string, turns, msgBytes, stateMB, steps int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Checkpoint cost vs state size (%s)\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "`go run ./bench/cmd/ckptbench` (issue 19). The API in process on the SQLite store, driven over HTTP on 127.0.0.1, one request at a time. "+
		"Bytes are counted in the adapter (`sqlite.WriteMeter`: every value bound to a write statement, by table; SQLite's page, index and WAL overhead not included). "+
		"Chart: [%s.svg](%s.svg); every point: [%s.json](%s.json).\n\n", name, name, name, name)
	fmt.Fprintf(&b, "- growing conversation: one thread, %d turns of `echo` (`POST /threads/{id}/runs/wait`), each turn a user message of %d bytes and its echo (about %.1f KB of messages per turn); every answer checked (the whole conversation).\n", turns, msgBytes, float64(2*msgBytes+120)/1024)
	fmt.Fprintf(&b, "- large state: one run of a graph whose state holds a %d MB string and which runs %d super-steps, each appending a small entry and adding 1 to a counter; per step: the time and the bytes between the starts of two consecutive steps (with `sync` the previous step's checkpoint is written in between; with `async` it is written behind, so per-step figures mix steps).\n\n", stateMB, steps)
	for _, s := range all {
		sum, ok := growth.Summarize(s)
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "## Growing conversation, durability %s\n\n", s.Durability)
		n := sum.LastTurn
		fmt.Fprintf(&b, "| | turn 1 | turn %d | ratio | target |\n|---|---|---|---|---|\n", n)
		fmt.Fprintf(&b, "| bytes written, all tables | %s | %s | %.2f× | ≤ 2× |\n", kb(sum.Bytes1), kb(sum.BytesN), sum.BytesRatio())
		fmt.Fprintf(&b, "| bytes written, checkpoints and their blobs | %s | %s | %.2f× | |\n", kb(sum.Ckpt1), kb(sum.CkptN), float64(sum.CkptN)/float64(sum.Ckpt1))
		fmt.Fprintf(&b, "| latency, median of 10 turns (1–10, %d–%d) | %.2f ms | %.2f ms | %.2f× | ≤ 2× |\n", n-9, n, sum.Latency1, sum.LatencyN, sum.LatencyRatio())
		fmt.Fprintf(&b, "| latency, fastest of those 10 turns | %.2f ms | %.2f ms | %.2f× | ≤ 2× |\n", sum.Fastest1, sum.FastestN, sum.FastestN/sum.Fastest1)
		fmt.Fprintf(&b, "| CPU time of the process per turn, median of those 10 | %.2f ms | %.2f ms | %.2f× | |\n", sum.CPU1, sum.CPUN, sum.CPUN/sum.CPU1)
		fmt.Fprintf(&b, "| state (the answer's JSON) | %.1f KB | %.1f KB | %.0f× | |\n\n", sum.State1, sum.StateN, sum.StateN/sum.State1)
		fmt.Fprintf(&b, "| turn | latency ms | CPU ms | bytes written | by table |\n|---|---|---|---|---|\n")
		for _, p := range s.Points {
			if p.N == 1 || p.N == 2 || p.N%25 == 0 || p.N == n {
				fmt.Fprintf(&b, "| %d | %.2f | %.2f | %s | %s |\n", p.N, p.LatencyMS, p.CPUMS, kb(p.Bytes), tables(p.ByTable))
			}
		}
		fmt.Fprintf(&b, "\nTotal over %d turns: %s written, of which %s checkpoints and their blobs.\n\n", len(s.Points), kb(sum.TotalBytes), kb(sum.TotalCheckpoint))
	}
	for _, s := range all {
		if s.Workload != growth.LargeState {
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

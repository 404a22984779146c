package main

import (
	"fmt"
	"strings"
)

// Targets of issue 19, for stepgraph (durability async and sync) against
// the best peer per cell, measured side by side in one run.
const (
	target19Ratio    = 10.0 // ≥ 10× the best peer's throughput
	target19CPUShare = 0.1  // ≤ 1/10 of the best peer's server CPU per run
)

// target19Workloads and target19Concurrency are the cells the throughput
// and CPU targets name.
var (
	target19Workloads   = []string{"echo", "counter", "approval"}
	target19Concurrency = []int{10, 50}
)

// lowestCPUPeer is the peer that spent the least server CPU time per
// iteration in a cell (error-free cells with a measured CPU time only).
func (r *Results) lowestCPUPeer(workload string, conc int) (string, *Cell) {
	var name string
	var best *Cell
	for _, p := range r.peers() {
		c := r.cell(p.Name, workload, conc)
		if c == nil || c.Errors > 0 || c.ServerCPUmsPerOp <= 0 {
			continue
		}
		if best == nil || c.ServerCPUmsPerOp < best.ServerCPUmsPerOp {
			name, best = p.Name, c
		}
	}
	return name, best
}

// workloadPeakKB is a server's highest per-cell peak RSS (server
// processes, with Aegra's PostgreSQL): its peak over the workloads, which
// every server ran alike, without the fairness flood that only some did.
func (s *ServerResult) workloadPeakKB() int64 {
	var kb int64
	for _, c := range s.Cells {
		kb = max(kb, c.PeakServerKB)
	}
	return kb
}

// lowestPeerRSS is the lowest workload peak RSS of the peers that ran.
func (r *Results) lowestPeerRSS() (string, int64) {
	var name string
	var kb int64
	for _, pr := range r.peers() {
		if w := pr.workloadPeakKB(); !pr.App && pr.Error == "" && w > 0 && (kb == 0 || w < kb) {
			name, kb = pr.Name, w
		}
	}
	return name, kb
}

// targets19Section is the report's "Targets (issue 19)" table and the
// per-cell ratios against the best peer ("" when no cell of its workloads
// was measured).
func targets19Section(r *Results) string {
	measured := false
	for _, w := range target19Workloads {
		measured = measured || r.hasWorkload(w)
	}
	if !measured || len(r.peers()) == 0 || len(r.stepgraphs()) == 0 {
		return ""
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	p("## Targets (issue 19)\n\n")
	p("Each stepgraph server against the **best peer per cell**, all measured in this run: for throughput the peer with the highest throughput in that cell, ")
	p("for CPU the peer with the lowest server CPU time per iteration in that cell, for memory the peer with the lowest peak RSS over its whole run ")
	p("(its highest per-cell peak over the workloads, which every server ran alike; Aegra's includes its PostgreSQL's). A target counts as met only when every cell it names was measured without errors.\n\n")
	p("| target | stepgraph | result | cells (measured) |\n|---|---|---|---|\n")
	for _, sg := range r.stepgraphs() {
		if sg.App { // the app servers: appSection
			continue
		}
		name := strings.TrimPrefix(sg.Name, "stepgraph-")
		// Throughput.
		var parts []string
		ok, all := true, true
		for _, w := range target19Workloads {
			for _, conc := range target19Concurrency {
				c := r.cell(sg.Name, w, conc)
				peer, pc := r.bestPeer(w, conc)
				if c == nil || pc == nil || pc.Throughput == 0 {
					all = false
					parts = append(parts, fmt.Sprintf("%s c=%d: –", w, conc))
					continue
				}
				ratio := c.Throughput / pc.Throughput
				ok = ok && c.Errors == 0 && ratio >= target19Ratio
				parts = append(parts, fmt.Sprintf("%s c=%d: %s× (%s)", w, conc, ratioText(ratio), peer))
			}
		}
		p("| throughput ≥ %.0f× best peer (echo, counter/%d, approval; c=10 and 50) | %s | %s | %s |\n",
			target19Ratio, r.CounterSteps, name, metOrIncomplete(ok, all), strings.Join(parts, "; "))
		// CPU.
		parts = parts[:0]
		ok, all = true, true
		for _, w := range target19Workloads {
			for _, conc := range target19Concurrency {
				c := r.cell(sg.Name, w, conc)
				peer, pc := r.lowestCPUPeer(w, conc)
				if c == nil || pc == nil || c.ServerCPUmsPerOp <= 0 {
					all = false
					parts = append(parts, fmt.Sprintf("%s c=%d: –", w, conc))
					continue
				}
				share := c.ServerCPUmsPerOp / pc.ServerCPUmsPerOp
				ok = ok && c.Errors == 0 && share <= target19CPUShare
				parts = append(parts, fmt.Sprintf("%s c=%d: %.2f (%s)", w, conc, share, peer))
			}
		}
		p("| server CPU per run ≤ 1/10 of best peer's | %s | %s | %s |\n", name, metOrIncomplete(ok, all), strings.Join(parts, "; "))
		// Memory.
		peer, kb := r.lowestPeerRSS()
		if kb > 0 && sg.Error == "" {
			w := sg.workloadPeakKB()
			p("| peak RSS below every peer's (over the workloads) | %s | %s | %s MiB vs %s %s MiB |\n", name, metWord(w > 0 && w < kb),
				mib(w), peer, mib(kb))
		}
	}
	p("%s", growthTargetRows(r.Growth))
	p("\n")

	// Per-cell ratios against the best peer.
	p("### Ratios against the best peer per cell\n\n")
	p("Throughput ratio: stepgraph's throughput ÷ the best peer's in that cell (target ≥ %.0f). ", target19Ratio)
	p("CPU share: stepgraph's server CPU time per iteration ÷ the lowest peer's in that cell (target ≤ %.2f). ", target19CPUShare)
	p("Server CPU time counts every process of the server (Aegra: uvicorn and all PostgreSQL processes); /proc counts it in 10 ms ticks over the whole timed part. ")
	p("Peak RSS: during that cell, server processes (Aegra: with PostgreSQL's).\n\n")
	p("| workload | c | stepgraph | throughput/s | best peer (throughput/s) | throughput ratio | CPU ms/iter | lowest-CPU peer (ms/iter) | CPU share | peak RSS MiB | lowest peer RSS in cell (MiB) |\n")
	p("|---|--:|---|--:|---|--:|--:|---|--:|--:|---|\n")
	for _, w := range workloads {
		if w.stream != nil || !r.hasWorkload(w.Name) {
			continue
		}
		for _, conc := range r.Concurrency {
			for _, sg := range r.stepgraphs() {
				c := r.cell(sg.Name, w.Name, conc)
				if c == nil {
					continue
				}
				tp, tpName := "–", "–"
				if peer, pc := r.bestPeer(w.Name, conc); pc != nil && pc.Throughput > 0 {
					tpName = fmt.Sprintf("%s (%.1f)", peer, pc.Throughput)
					tp = ratioText(c.Throughput/pc.Throughput) + "×"
				}
				cpu, cpuName := "–", "–"
				if peer, pc := r.lowestCPUPeer(w.Name, conc); pc != nil && c.ServerCPUmsPerOp > 0 {
					cpuName = fmt.Sprintf("%s (%.2f)", peer, pc.ServerCPUmsPerOp)
					cpu = fmt.Sprintf("%.3f", c.ServerCPUmsPerOp/pc.ServerCPUmsPerOp)
				}
				rssName := "–"
				var low int64
				for _, pr := range r.peers() {
					if pc := r.cell(pr.Name, w.Name, conc); pc != nil && pc.PeakServerKB > 0 && (low == 0 || pc.PeakServerKB < low) {
						low, rssName = pc.PeakServerKB, fmt.Sprintf("%s (%s)", pr.Name, mib(pc.PeakServerKB))
					}
				}
				p("| %s | %d | %s | %.1f | %s | %s | %s | %s | %s | %s | %s |\n", w.Name, conc, strings.TrimPrefix(sg.Name, "stepgraph-"),
					c.Throughput, tpName, tp, f2(c.ServerCPUmsPerOp), cpuName, cpu, mib(c.PeakServerKB), rssName)
			}
		}
	}
	p("\n")
	return b.String()
}

func metOrIncomplete(ok, all bool) string {
	if !all {
		if !ok {
			return "**not met** (and not every cell measured)"
		}
		return "not every cell measured"
	}
	return metWord(ok)
}

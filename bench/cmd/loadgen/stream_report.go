package main

import (
	"fmt"
	"strings"
)

// Targets from issue 13 for the streaming workloads.
const (
	targetFirstEventP50ms       = 5.0
	targetFirstEventConcurrency = 1
	targetStreamRatio           = 10.0
	targetStreamConcurrency     = 10
)

func streamWorkloads() []*workload {
	var out []*workload
	for _, w := range workloads {
		if w.stream != nil {
			out = append(out, w)
		}
	}
	return out
}

func (r *Results) hasStreaming() bool {
	for _, w := range streamWorkloads() {
		if r.hasWorkload(w.Name) {
			return true
		}
	}
	return false
}

// streamingSection is the report's streaming part: targets, figures per
// workload, ratios to the peers ("" when no streaming workload ran).
func streamingSection(r *Results) string {
	if !r.hasStreaming() {
		return ""
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	p("## Streaming (issue 13)\n\n")
	p("A run created and streamed in one request, read to the end of its stream, every stream checked ")
	p("(`metadata` first and once, only the modes asked for, no `error`, the right final values; for `stream-chat` the model's whole answer assembled from the `messages` events and in the final values):\n\n")
	p("- **stream**: `counter` with `steps` %d on a fresh thread, `POST /threads/{id}/runs/stream`, `stream_mode` `[values, updates]` (%d updates, the values after each step);\n", r.CounterSteps, r.CounterSteps)
	p("- **stream-stateless**: `echo`, `POST /runs/stream`, `stream_mode` `[values, updates]`;\n")
	p("- **stream-chat**: one chat model call on a fresh thread, `POST /threads/{id}/runs/stream`, `stream_mode` `[messages-tuple, values]`. ")
	if r.ModelChunks > 0 {
		p("The model is loadgen's local OpenAI-compatible endpoint on 127.0.0.1, answering %d tokens, one every %.1f ms ", r.ModelChunks, r.ModelChunkDelayMs)
		p("(its own first token after %.1f ms, its whole answer after %.0f ms, streamed or not). ", r.ModelChunkDelayMs, float64(r.ModelChunks)*r.ModelChunkDelayMs)
	}
	p("stepgraph runs it as a deployed graph document with a `chat_model` node; the peers as a `StateGraph` whose node calls LangChain's `ChatOpenAI` (`langchain-openai`, `@langchain/openai`) pointed at the same endpoint, ")
	p("which LangGraph's messages handler makes stream token by token.\n\n")
	p("Figures: **first event**: from sending the request to receiving the `metadata` event; **first token**: to the first `messages` event carrying ai text; ")
	p("**end**: to the end of the stream (the cell's latency); **events/s per stream**: a stream's events divided by its time to end (p50 over the streams); **runs/s**: streamed runs per second of wall time.\n\n")

	// Targets.
	p("| target (issue 13) | measured | result |\n|---|---|---|\n")
	for _, w := range streamWorkloads() {
		for _, sg := range r.stepgraphs() {
			c := r.cell(sg.Name, w.Name, targetFirstEventConcurrency)
			if c == nil || c.Stream == nil {
				continue
			}
			ok := c.Errors == 0 && c.Stream.FirstEventP50ms <= targetFirstEventP50ms
			p("| %s %s: first event p50 ≤ %.0f ms at c=%d | %.2f ms | %s |\n", sg.Name, w.Name, targetFirstEventP50ms,
				targetFirstEventConcurrency, c.Stream.FirstEventP50ms, metWord(ok))
		}
	}
	for _, w := range streamWorkloads() {
		for _, sg := range r.stepgraphs() {
			c := r.cell(sg.Name, w.Name, targetStreamConcurrency)
			peer, pc := r.bestPeer(w.Name, targetStreamConcurrency)
			if c == nil || pc == nil {
				continue
			}
			ratio := c.Throughput / pc.Throughput
			p("| %s %s: streamed runs/s ≥ %.0f× best peer at c=%d | %.0f/s vs %s %.1f/s = %s× | %s |\n", sg.Name, w.Name,
				targetStreamRatio, targetStreamConcurrency, c.Throughput, peer, pc.Throughput, ratioText(ratio),
				metWord(c.Errors == 0 && ratio >= targetStreamRatio))
		}
	}
	p("\n")

	// Figures.
	for _, w := range streamWorkloads() {
		if !r.hasWorkload(w.Name) {
			continue
		}
		p("### %s\n\n", w.Title)
		p("| c | server | n | errors | first event p50 | p99 | first token p50 | p99 | end p50 | p99 | events/stream | events/s per stream | runs/s | peak RSS MiB | server CPU ms/run | other CPU |\n")
		p("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, conc := range r.Concurrency {
			for _, s := range r.Servers {
				c := r.cell(s.Name, w.Name, conc)
				if c == nil {
					continue
				}
				st := c.Stream
				if st == nil {
					st = &StreamStats{}
				}
				tok50, tok99 := "–", "–"
				if st.FirstTokenP50ms > 0 {
					tok50, tok99 = f2(st.FirstTokenP50ms), f2(st.FirstTokenP99ms)
				}
				p("| %d | %s | %d | %d | %s | %s | %s | %s | %s | %s | %.1f | %.0f | %s | %s | %s | %s |\n", conc, s.Name, c.Requests, c.Errors,
					f2(st.FirstEventP50ms), f2(st.FirstEventP99ms), tok50, tok99, f2(c.P50ms), f2(c.P99ms),
					st.EventsPerStream, st.EventsPerSecStreamP50, f1(c.Throughput), mib(c.PeakServerKB), f2(c.ServerCPUmsPerOp), pct(c.OtherCPUPercent))
			}
		}
		p("\n")
	}
	if r.hasWorkload("stream-chat") {
		p("**Reading the first-token figure.** A server that streams the model's tokens sends a `messages` event per token chunk, so its first token comes about one model token time after the call starts; ")
		p("one that sends the whole message when the node ends has its first token after the model's whole answer. Messages events carrying ai text per stream, at c=%d: ", r.Concurrency[0])
		var parts []string
		for _, s := range r.Servers {
			if c := r.cell(s.Name, "stream-chat", r.Concurrency[0]); c != nil && c.Stream != nil && c.Errors == 0 {
				parts = append(parts, fmt.Sprintf("%s %.1f", s.Name, c.Stream.TokenEvents))
			}
		}
		p("%s", strings.Join(parts, ", "))
		if r.ModelChunks > 0 {
			p(" (the model answers %d tokens)", r.ModelChunks)
		}
		p(".\n\n")
	}

	// Ratios.
	if len(r.peers()) > 0 && len(r.stepgraphs()) > 0 {
		p("### Streaming ratios stepgraph / peer\n\n")
		p("Times: stepgraph's p50 divided by the peer's (below 1: stepgraph is sooner). Runs/s: stepgraph's divided by the peer's (above 1: stepgraph does more).\n\n")
		p("| workload | c | stepgraph |")
		for _, pr := range r.peers() {
			p(" first event ÷ %s | first token ÷ %s | end ÷ %s | runs/s ÷ %s |", pr.Name, pr.Name, pr.Name, pr.Name)
		}
		p("\n|---|--:|---|")
		for range r.peers() {
			p("--:|--:|--:|--:|")
		}
		p("\n")
		ratio := func(a, b float64) string {
			if a <= 0 || b <= 0 {
				return "–"
			}
			return fmt.Sprintf("%.3f", a/b)
		}
		for _, w := range streamWorkloads() {
			for _, conc := range r.Concurrency {
				for _, sg := range r.stepgraphs() {
					c := r.cell(sg.Name, w.Name, conc)
					if c == nil || c.Stream == nil {
						continue
					}
					p("| %s | %d | %s |", w.Name, conc, strings.TrimPrefix(sg.Name, "stepgraph-"))
					for _, pr := range r.peers() {
						pc := r.cell(pr.Name, w.Name, conc)
						if pc == nil || pc.Stream == nil || pc.Throughput == 0 || pc.Errors > 0 {
							p(" – | – | – | – |")
							continue
						}
						p(" %s | %s | %s | %s× |", ratio(c.Stream.FirstEventP50ms, pc.Stream.FirstEventP50ms),
							ratio(c.Stream.FirstTokenP50ms, pc.Stream.FirstTokenP50ms), ratio(c.P50ms, pc.P50ms),
							ratioText(c.Throughput/pc.Throughput))
					}
					p("\n")
				}
			}
		}
		p("\n")
	}
	return b.String()
}

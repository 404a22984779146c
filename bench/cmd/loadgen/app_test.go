package main

import (
	"strings"
	"testing"
)

// reactConversation is the agent's answer as the servers send it: the
// question, the model's tool call, the tool's result, the model's answer.
func reactConversation(question string) []any {
	return []any{
		map[string]any{"type": "human", "content": question},
		map[string]any{"type": "ai", "content": "", "tool_calls": []any{map[string]any{"name": "get_weather", "args": map[string]any{"city": "Paris"}, "id": "call_1"}}},
		map[string]any{"type": "tool", "content": reactTool, "name": "get_weather"},
		map[string]any{"type": "ai", "content": reactAnswer},
	}
}

// Every defect of the agent's conversation fails the iteration, naming it.
func TestCheckReact(t *testing.T) {
	if err := checkReact(map[string]any{"messages": reactConversation("q 1")}, "q 1"); err != nil {
		t.Fatalf("a right answer failed: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(msgs []any) []any
		want string
	}{
		{"other question", func(m []any) []any { m[0].(map[string]any)["content"] = "q 2"; return m }, `message 0 is human "q 2"`},
		{"no tool round", func(m []any) []any { return []any{m[0], m[3]} }, "2 messages, want 4"},
		{"wrong answer", func(m []any) []any { m[3].(map[string]any)["content"] = "It rains."; return m }, `message 3 is ai "It rains."`},
		{"no tool call", func(m []any) []any { delete(m[1].(map[string]any), "tool_calls"); return m }, "want one get_weather"},
	} {
		got := map[string]any{"messages": c.edit(reactConversation("q 1"))}
		if err := checkReact(got, "q 1"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

// appResults is a run of the react workload: stepgraph dev (async) and
// langgraph dev serving the app, each with its graph's own time.
func appResults() *Results {
	r := results19(600, 0.5)
	r.Concurrency = []int{1, 10}
	cell := func(c int, p50, tp, cpu float64) Cell {
		return Cell{Workload: "react", Concurrency: c, Requests: 10, P50ms: p50, P99ms: 2 * p50, Throughput: tp,
			ServerCPUmsPerOp: cpu, PeakServerKB: 120 << 10, OtherCPUPercent: -1}
	}
	r.Servers = append(r.Servers,
		ServerResult{Name: "stepgraph-dev-async", Label: "stepgraph dev", App: true, PeakServerKB: 120 << 10, GracefulStop: true,
			GraphOwn: &GraphOwn{Runs: 200, P50ms: 3, MeanMs: 3.1, CPUmsPerRun: 3},
			Cells:    []Cell{cell(1, 53, 18, 23), cell(10, 203, 40, 33)}},
		ServerResult{Name: "python-app", Label: "langgraph dev", App: true, Peer: true, PeakServerKB: 2 << 10, GracefulStop: true,
			GraphOwn: &GraphOwn{Runs: 200, P50ms: 5, MeanMs: 5.2, CPUmsPerRun: 4},
			Cells:    []Cell{cell(1, 1005, 1, 20), cell(10, 1105, 9, 14)}})
	return r
}

func TestReportAppSection(t *testing.T) {
	md := markdown(appResults())
	for _, w := range []string{
		"## A LangGraph app: the ReAct agent (issues 16 and 19)",
		// overhead = p50 − the graph's own p50; CPU overhead likewise.
		"| stepgraph-dev-async | 1 | 10 | 0 | 53.00 | 106.00 | 18.0 | 23.00 | 120.0 | 3.00 | 3.00 | 50.00 | 20.00 |",
		"| python-app | 10 | 10 | 0 | 1105.00 | 2210.00 | 9.0 | 14.00 | 120.0 | 5.00 | 4.00 | 1100.00 | 10.00 |",
		// ratios: throughput 18/1, p50 53/1005, overhead 50/1000, CPU 23/20.
		"| 1 | stepgraph-dev-async | python-app | 18.0× | 0.053 | 0.050 | 1.15 |",
		"| 10 | stepgraph-dev-async | python-app | 4.44× | 0.184 | 0.182 | 2.36 |",
		// the react row of the ratios against the best peer per cell
		"| react | 10 | dev-async | 40.0 | python-app (9.0) | 4.44× |",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("report lacks %q", w)
		}
	}
	// The app servers stay out of the serve targets: not a target row of
	// their own, and langgraph dev's 2 MiB is no peer's peak for them.
	for _, w := range []string{"| throughput ≥ 10× best peer (echo, counter/20, approval; c=10 and 50) | dev-async |", "vs python-app"} {
		if strings.Contains(md, w) {
			t.Errorf("report has %q", w)
		}
	}
	r := appResults()
	r.Servers[len(r.Servers)-1].GraphOwn = &GraphOwn{Error: "graphtime.py: exit status 1"}
	md = markdown(r)
	if !strings.Contains(md, "- python-app: the graph's own time was not measured: graphtime.py: exit status 1") ||
		!strings.Contains(md, "| 1 | stepgraph-dev-async | python-app | 18.0× | 0.053 | – | 1.15 |") {
		t.Errorf("a failed own-time measurement should show as such:\n%s", md)
	}
	if strings.Contains(markdown(results19(600, 0.5)), "## A LangGraph app") {
		t.Error("a run without react has an app section")
	}
}

// The app servers serve the app workloads only, the others everything but.
func TestAppServersServeTheApp(t *testing.T) {
	app, serve := stepgraphDevSpec("async"), stepgraphSpec("async")
	if !app.serves("react") || app.serves("echo") || serve.serves("react") || !serve.serves("echo") || !pythonAppSpec().serves("react") {
		t.Fatal("serves: react on the app servers only")
	}
}

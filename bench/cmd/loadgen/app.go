package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/testserver"
)

// The LangGraph-app workload (issues 16 and 19): a LangGraph user's app —
// runtimes/python/tests/apps/basic, whose graph `agent` is a ReAct agent
// with a scripted chat model (no endpoint) and one tool — served as its
// user serves it: `stepgraph dev DIR` (durability async and sync per run)
// and `langgraph dev` on the same directory. Beside the servers, the same
// graph invoked in-process with the server's own interpreter (graphtime.py)
// is the graph's own time, so the report shows what each server adds.

// AppDir is the app, relative to the repository root.
const AppDir = "runtimes/python/tests/apps/basic"

// AppGraph is the app's graph the react workload runs.
const AppGraph = "agent"

// AppReadyTimeout bounds an app server's start: stepgraph dev first makes
// the app's virtual environment (pip installs LangGraph).
const AppReadyTimeout = 10 * time.Minute

// reactQuestion and reactAnswer: the app's scripted model calls
// get_weather(Paris) on any question, then answers with reactAnswer.
const (
	reactQuestion = "What is the weather in Paris?"
	reactAnswer   = "The weather in Paris is sunny today."
	reactTool     = "It is sunny in Paris."
)

// copyApp copies the app into dir/app (the servers write .venv,
// .stepgraph or .langgraph_api next to langgraph.json, never into the
// repository) and returns that folder.
func copyApp(root, dir string) (string, error) {
	dst := filepath.Join(dir, "app")
	src := filepath.Join(root, AppDir)
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if d.Name() == "__pycache__" || strings.HasSuffix(d.Name(), ".egg-info") {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	return dst, err
}

// stepgraphDevSpec is `stepgraph dev` on a copy of the app: it makes
// DIR/.venv from the app's dependencies (offline, from appWheelhouse) and
// serves the app on its embedded store.
func stepgraphDevSpec(durability string) *serverSpec {
	return &serverSpec{
		Name:      "stepgraph-dev-" + durability,
		Label:     "stepgraph dev (durability " + durability + ")",
		RunFields: map[string]any{"durability": durability},
		needsKey:  true,
		App:       true,
		start: func(ctx context.Context, e *env, dir string, port int, _ *startExtras) (testserver.Options, error) {
			app, err := copyApp(e.root, dir)
			if err != nil {
				return testserver.Options{}, err
			}
			args := []string{e.stepgraphBin, "dev", "-addr", fmt.Sprintf("127.0.0.1:%d", port)}
			if wheels := appWheelhouse(e.root); wheels != "" {
				args = append(args, "-no-index", "-find-links", wheels)
			}
			return testserver.Options{Port: port, Dir: dir, Command: append(args, app),
				Env: append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")}, nil
		},
	}
}

// pythonAppSpec is `langgraph dev` (bench/.venv) on a copy of the app. It
// does not install the app's dependencies ("." in langgraph.json): the
// app's package is on PYTHONPATH, and bench/.venv holds its pins
// (langgraph 1.2.22, langchain-core 1.7.2).
func pythonAppSpec() *serverSpec {
	return &serverSpec{
		Name:  "python-app",
		Label: "Python langgraph dev (the app)",
		Peer:  true,
		App:   true,
		start: func(ctx context.Context, e *env, dir string, port int, _ *startExtras) (testserver.Options, error) {
			app, err := copyApp(e.root, dir)
			if err != nil {
				return testserver.Options{}, err
			}
			bin := filepath.Join(e.root, "bench", ".venv", "bin", "langgraph")
			if !fileExists(bin) {
				return testserver.Options{}, fmt.Errorf("%s missing: run scripts/install-bench-deps.sh", bin)
			}
			return testserver.Options{Port: port, Dir: app,
				Command: []string{bin, "dev", "--no-browser", "--no-reload",
					"--host", "127.0.0.1", "--port", fmt.Sprint(port),
					"--config", "langgraph.json",
					"--n-jobs-per-worker", fmt.Sprint(PythonJobs),
					"--server-log-level", "WARNING"},
				Env: peerEnv(e, "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"),
					"PYTHONPATH="+filepath.Join(app, "src"), "PYTHONDONTWRITEBYTECODE=1",
					"LANGGRAPH_NO_VERSION_CHECK=true")}, nil
		},
	}
}

// appPython is the interpreter a running app server imports the app with:
// the .venv stepgraph dev made, or bench/.venv for `langgraph dev`.
func appPython(e *env, s *runningServer) string {
	if s.spec.Peer {
		return filepath.Join(e.root, "bench", ".venv", "bin", "python")
	}
	return filepath.Join(s.dir, "app", ".venv", "bin", "python")
}

// appWheelhouse is where stepgraph dev installs the app's dependencies
// from without a package index: bench/.wheelhouse (install-bench-deps.sh),
// else the tests' .deps/wheelhouse (install-test-deps.sh), both the
// runtime's pinned requirements; "" (the package index) when neither is.
func appWheelhouse(root string) string {
	for _, d := range []string{filepath.Join(root, "bench", ".wheelhouse"), filepath.Join(root, ".deps", "wheelhouse")} {
		if fileExists(filepath.Join(d, ".stepgraph-pyruntime.sha256")) {
			return d
		}
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// waitForGraph waits until the server serves the app's graph: stepgraph
// dev listens before its deployment of the app is built.
func waitForGraph(ctx context.Context, c *client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		v, err := c.post(ctx, "/assistants/search", map[string]any{"graph_id": AppGraph, "limit": 1})
		if l, ok := v.([]any); err == nil && ok && len(l) > 0 {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the app's graph %q was not served within %s (last error: %v)", AppGraph, timeout, last)
		case <-time.After(250 * time.Millisecond): // polling a deployment's build, not synchronising a test
		}
	}
}

// doReact runs the agent on a fresh thread and checks the conversation:
// the question, the model's tool call, the tool's answer, the model's answer.
func doReact(ctx context.Context, c *client, tag, thread string) error {
	question := reactQuestion + " " + tag
	got, err := c.run(ctx, "/threads/"+thread+"/runs/wait", map[string]any{
		"assistant_id": AppGraph,
		"input":        map[string]any{"messages": []any{map[string]any{"role": "user", "content": question}}},
	})
	if err != nil {
		return err
	}
	return checkReact(got, question)
}

func checkReact(got any, question string) error {
	m, _ := got.(map[string]any)
	msgs, _ := m["messages"].([]any)
	want := []struct{ typ, content string }{{"human", question}, {"ai", ""}, {"tool", reactTool}, {"ai", reactAnswer}}
	if len(msgs) != len(want) {
		return fmt.Errorf("react: %d messages, want %d: %s", len(msgs), len(want), clipJSON(got))
	}
	for i, w := range want {
		msg, _ := msgs[i].(map[string]any)
		if msg["type"] != w.typ || msg["content"] != w.content {
			return fmt.Errorf("react: message %d is %v %q, want %s %q: %s", i, msg["type"], msg["content"], w.typ, w.content, clipJSON(got))
		}
	}
	calls, _ := msgs[1].(map[string]any)["tool_calls"].([]any)
	if len(calls) != 1 || calls[0].(map[string]any)["name"] != "get_weather" {
		return fmt.Errorf("react: the model's tool calls are %s, want one get_weather", clipJSON(calls))
	}
	return nil
}

// GraphOwn is the graph's own time: the app's graph invoked in-process, no
// server, no checkpointer, with the server's interpreter.
type GraphOwn struct {
	Runs        int     `json:"runs"`
	P50ms       float64 `json:"p50_ms"`
	MeanMs      float64 `json:"mean_ms"`
	CPUmsPerRun float64 `json:"cpu_ms_per_run"`
	Python      string  `json:"python"`
	Error       string  `json:"error,omitempty"`
}

// measureGraphOwn runs bench/peers/app/graphtime.py on the server's copy of
// the app with python, n timed invocations.
func measureGraphOwn(ctx context.Context, e *env, python, appDir string, n int) *GraphOwn {
	script := filepath.Join(e.root, "bench", "peers", "app", "graphtime.py")
	cmd := exec.CommandContext(ctx, python, script, appDir, AppGraph, fmt.Sprint(n))
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "LANGSMITH_TRACING=false", "LANGCHAIN_TRACING_V2=false")
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += ": " + clip(ee.Stderr)
		}
		return &GraphOwn{Error: "graphtime.py: " + msg}
	}
	var g GraphOwn
	if err := json.Unmarshal(out, &g); err != nil {
		return &GraphOwn{Error: fmt.Sprintf("graphtime.py: %v: %s", err, clip(out))}
	}
	return &g
}

// appServers are the servers of a run that served the app.
func (r *Results) appServers() []*ServerResult {
	var out []*ServerResult
	for i := range r.Servers {
		if r.Servers[i].App {
			out = append(out, &r.Servers[i])
		}
	}
	return out
}

// appSection is the report's LangGraph-app section: per app server and
// concurrency, latency, throughput, server CPU per run, peak RSS, the
// graph's own time and the overhead (latency − own time), then the ratios
// of each stepgraph server to each peer ("" when react was not run).
func appSection(r *Results) string {
	if !r.hasWorkload("react") {
		return ""
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## A LangGraph app: the ReAct agent (issues 16 and 19)\n\n")
	p("The app [`%s`](../../%s) (its graph `%s`: a tool-calling ReAct agent whose chat model is scripted, so no model endpoint: ", AppDir, AppDir, AppGraph)
	p("it calls `get_weather` once, then answers), served as a LangGraph user serves it: `stepgraph dev DIR` (which makes DIR/.venv from the app's dependencies; every run carries its `durability`) and `langgraph dev` on a copy of the same directory. ")
	p("One iteration: `POST /threads/{id}/runs/wait` on a fresh thread with one user message; the answer is checked (question, tool call, tool result, final answer).\n\n")
	p("**Graph's own time**: the same graph invoked in-process (`graph.invoke`, no server, no checkpointer) with each server's interpreter (stepgraph dev: the .venv it made; `langgraph dev`: bench/.venv), ")
	p("by [`bench/peers/app/graphtime.py`](../peers/app/graphtime.py), after the workloads, while the server was idle. **Overhead** = the server's p50 latency − the graph's own p50; CPU overhead = server CPU per run − the graph's own CPU per run.\n\n")
	p("| server | c | n | errors | p50 ms | p99 ms | throughput/s | server CPU ms/run | peak RSS MiB | graph's own p50 ms | graph's own CPU ms/run | overhead ms (p50) | CPU overhead ms/run |\n")
	p("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range r.appServers() {
		for _, conc := range r.Concurrency {
			c := r.cell(s.Name, "react", conc)
			if c == nil {
				continue
			}
			ownP50, ownCPU, over, overCPU := "–", "–", "–", "–"
			if g := s.GraphOwn; g != nil && g.Error == "" && g.Runs > 0 {
				ownP50, ownCPU = f2(g.P50ms), f2(g.CPUmsPerRun)
				over = f2(c.P50ms - g.P50ms)
				if c.ServerCPUmsPerOp > 0 {
					overCPU = f2(c.ServerCPUmsPerOp - g.CPUmsPerRun)
				}
			}
			p("| %s | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Name, conc, c.Requests, c.Errors,
				f2(c.P50ms), f2(c.P99ms), f1(c.Throughput), f2(c.ServerCPUmsPerOp), mib(c.PeakServerKB), ownP50, ownCPU, over, overCPU)
		}
	}
	p("\n")
	for _, s := range r.appServers() {
		if g := s.GraphOwn; g != nil && g.Error != "" {
			p("- %s: the graph's own time was not measured: %s\n", s.Name, g.Error)
		}
	}
	var sgs, peers []*ServerResult
	for _, s := range r.appServers() {
		if s.Peer {
			peers = append(peers, s)
		} else {
			sgs = append(sgs, s)
		}
	}
	if len(sgs) == 0 || len(peers) == 0 {
		p("\n")
		return b.String()
	}
	p("Ratios, stepgraph ÷ peer: throughput (above 1: stepgraph does more), p50 and overhead (below 1: stepgraph adds less), server CPU per run (below 1: stepgraph spends less).\n\n")
	p("| c | stepgraph | peer | throughput | p50 | overhead | server CPU/run |\n|--:|---|---|--:|--:|--:|--:|\n")
	for _, conc := range r.Concurrency {
		for _, sg := range sgs {
			c := r.cell(sg.Name, "react", conc)
			for _, pr := range peers {
				pc := r.cell(pr.Name, "react", conc)
				if c == nil || pc == nil || pc.Throughput == 0 || pc.P50ms == 0 {
					continue
				}
				over := "–"
				if sg.GraphOwn != nil && pr.GraphOwn != nil && sg.GraphOwn.Error == "" && pr.GraphOwn.Error == "" {
					if po := pc.P50ms - pr.GraphOwn.P50ms; po > 0 {
						over = fmt.Sprintf("%.3f", (c.P50ms-sg.GraphOwn.P50ms)/po)
					}
				}
				cpu := "–"
				if c.ServerCPUmsPerOp > 0 && pc.ServerCPUmsPerOp > 0 {
					cpu = fmt.Sprintf("%.2f", c.ServerCPUmsPerOp/pc.ServerCPUmsPerOp)
				}
				p("| %d | %s | %s | %s× | %.3f | %s | %s |\n", conc, sg.Name, pr.Name, ratioText(c.Throughput/pc.Throughput), c.P50ms/pc.P50ms, over, cpu)
			}
		}
	}
	p("\n")
	return b.String()
}

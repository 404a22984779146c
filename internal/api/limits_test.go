package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/assembly"
)

// Bounded work, through the API: the limits of docs/reliability.md
// ("Limits and quotas"), security review 2026-11 findings F1 and F5.

// F1: config.recursion_limit has a server-side maximum (10,000 unless
// configured); above it the request is refused, naming the field and the
// maximum, before a run exists.
func TestRecursionLimitHasAMaximum(t *testing.T) {
	run := func(limit int) map[string]any {
		return map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 1},
			"config": map[string]any{"recursion_limit": limit}, "durability": "exit", "on_completion": "keep"}
	}
	cases := []struct {
		name   string
		max    int // configured maximum; 0: the default
		limit  int
		status int
		detail string
	}{
		{"the review's request", 0, 2000000000, 422, "config.recursion_limit: must be between 1 and 10000 (this server's maximum), got 2000000000"},
		{"just above the default", 0, 10001, 422, "config.recursion_limit: must be between 1 and 10000 (this server's maximum), got 10001"},
		{"zero", 0, 0, 422, "config.recursion_limit: must be between 1 and 10000"},
		{"the default maximum", 0, 10000, 200, ""},
		{"above a configured maximum", 50, 51, 422, "config.recursion_limit: must be between 1 and 50 (this server's maximum), got 51"},
		{"at a configured maximum", 50, 50, 200, ""},
	}
	envs := map[int]*env{
		0:  newEnv(t),
		50: newEnvWith(t, func(o *assembly.Options) { o.Limits.MaxRecursionLimit = 50 }),
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := envs[c.max]
			for _, path := range []string{"/runs/wait", "/runs"} {
				r := e.do("POST", path, e.keyA, run(c.limit))
				if r.Status != c.status {
					t.Fatalf("POST %s: status %d, want %d: %s", path, r.Status, c.status, r.Body)
				}
				if c.status != 200 {
					if d := r.detail(t); !strings.HasPrefix(d, c.detail) {
						t.Errorf("POST %s: detail %q, want %q", path, d, c.detail)
					}
				}
			}
		})
	}
}

// F1: a run with durability "exit" writes one checkpoint when it ends —
// its latest, linked to the thread's previous one — however many steps it
// ran, also when it is cancelled: it never holds (or flushes) every
// checkpoint of the run.
func TestExitDurabilityKeepsOneCheckpoint(t *testing.T) {
	e := newEnvWith(t, longRuns)
	tid := e.newThread(e.keyA)
	history := func() []map[string]any {
		r := e.do("POST", "/threads/"+tid+"/history", e.keyA, map[string]any{"limit": 1000})
		var hist []map[string]any
		if err := json.Unmarshal(r.Body, &hist); err != nil {
			t.Fatalf("history: %d %s", r.Status, r.Body)
		}
		return hist
	}
	exitRun := func(steps int) map[string]any {
		return waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter",
			"input": map[string]any{"steps": steps}, "config": map[string]any{"recursion_limit": 1000}, "durability": "exit"}))
	}

	if got := exitRun(200); fmt.Sprint(got["count"]) != "200" {
		t.Fatalf("first run: %v", got)
	}
	hist := history()
	if len(hist) != 1 {
		t.Fatalf("after an exit run of 200 steps: %d checkpoints, want 1", len(hist))
	}
	first := hist[0]
	if fmt.Sprint(first["values"].(map[string]any)["count"]) != "200" || first["parent_checkpoint"] != nil || len(first["next"].([]any)) != 0 {
		t.Errorf("the run's checkpoint: %v", first)
	}
	firstID := first["checkpoint"].(map[string]any)["checkpoint_id"]

	// The next run's one checkpoint follows the first: the history stays a chain.
	if got := exitRun(300); fmt.Sprint(got["count"]) != "300" {
		t.Fatalf("second run: %v", got)
	}
	hist = history()
	if len(hist) != 2 || hist[0]["parent_checkpoint"].(map[string]any)["checkpoint_id"] != firstID {
		t.Fatalf("after the second exit run: %d checkpoints, newest %v", len(hist), hist[0])
	}

	// Cancelled mid-way: the run ends interrupted with its one checkpoint,
	// from which the thread goes on.
	run := e.must(200, "POST", "/threads/"+tid+"/runs", e.keyA, map[string]any{"assistant_id": "counter",
		"input": map[string]any{"steps": 1000000}, "config": map[string]any{"recursion_limit": 1000000}, "durability": "exit"})
	runPath := fmt.Sprintf("/threads/%s/runs/%s", tid, run["run_id"])
	e.waitFor(e.keyA, runPath, status("running"))
	e.must(202, "POST", runPath+"/cancel", e.keyA, nil)
	e.waitFor(e.keyA, runPath, status("interrupted"))
	if hist = history(); len(hist) != 3 {
		t.Errorf("after a cancelled exit run: %d checkpoints, want 3", len(hist))
	}
}

// minimal documents of the amplifiers of finding F5.
const (
	// (a) an append channel doubled each step by a self-looping transform.
	dupYAML = `state: {xs: {reducer: append, default: []}}
nodes: {dup: {kind: transform, update: {xs: "{{ state.xs }}"}}}
edges: [{from: __start__, to: dup}, {from: dup, to: dup}]
`
	leafYAML = "state: {n: {reducer: add}}\nnodes: {leaf: {kind: transform, update: {n: 1}}}\nedges: [{from: __start__, to: leaf}]\n"
)

// fanYAML runs graph next width times in parallel.
func fanYAML(next string, width int) string {
	var nodes, targets []string
	for i := range width {
		nodes = append(nodes, fmt.Sprintf("s%d: {kind: subgraph, graph: %s}", i, next))
		targets = append(targets, fmt.Sprintf("s%d", i))
	}
	return "state: {n: {reducer: add}}\nnodes: {" + strings.Join(nodes, ", ") + "}\nedges: [{from: __start__, to: [" + strings.Join(targets, ", ") + "]}]\n"
}

// F5: graph documents cannot amplify a request without bound. A state that
// doubles stops at the state limit; a fan-out of subgraphs stops at the
// run's node executions (its subgraphs' count against it); nesting deeper
// than the limit is refused when deployed. Each run ends "error" with a
// message naming the limit, and the server goes on serving.
func TestGraphDocumentsAreBounded(t *testing.T) {
	e := newEnvWith(t, func(o *assembly.Options) {
		o.Limits.MaxStateBytes, o.Limits.MaxNodeExecutions, o.Limits.MaxSubgraphDepth = 64<<10, 100, 3
	})
	repo := gitRepo(t, map[string]string{
		"ok.yaml": "graphs:\n  dup: dup.yaml\n  f0: f0.yaml\n  f1: f1.yaml\n  f2: f2.yaml\n  f3: leaf.yaml\n",
		// 4 + 16 + 64 subgraph nodes and 64 leaves: 148 node executions, 3 deep.
		"dup.yaml": dupYAML, "f0.yaml": fanYAML("f1", 4), "f1.yaml": fanYAML("f2", 4), "f2.yaml": fanYAML("f3", 4), "leaf.yaml": leafYAML,
		// 4 deep: within every other limit, refused for its depth.
		"deep.yaml": "graphs:\n  d0: d0.yaml\n  d1: d1.yaml\n  d2: d2.yaml\n  d3: d3.yaml\n  d4: leaf.yaml\n",
		"d0.yaml":   fanYAML("d1", 1), "d1.yaml": fanYAML("d2", 1), "d2.yaml": fanYAML("d3", 1), "d3.yaml": fanYAML("d4", 1),
	})
	deploy := func(name, config string) map[string]any {
		body := repoDeployment(name, repo)
		body["source_revision_config"] = map[string]any{"repo_ref": "main", "graph_config_path": config}
		d := e.must(201, "POST", "/v2/deployments", e.keyA, body)
		return e.waitFor(e.keyA, fmt.Sprintf("/v2/deployments/%s/revisions/%s", d["id"], d["latest_revision_id"]),
			func(m map[string]any) bool {
				return m["status"] == "DEPLOYED" || strings.HasSuffix(m["status"].(string), "FAILED")
			})
	}
	if rev := deploy("bounded", "ok.yaml"); rev["status"] != "DEPLOYED" {
		t.Fatalf("deploy: %v", rev)
	}
	rev := deploy("deep", "deep.yaml")
	want := `d0.yaml: /nodes/s0/graph: subgraphs nest 4 deep from graph "d0" (d0 → d1 → d2 → d3 → d4), more than the limit of 3 nested subgraphs`
	if rev["status"] != "DEPLOY_FAILED" || rev["status_message"] != want {
		t.Errorf("a graph nesting too deep: %s %q, want DEPLOY_FAILED %q", rev["status"], rev["status_message"], want)
	}

	cases := []struct {
		graph, message string
		input          map[string]any
	}{
		{"dup", "more than the limit of 65536 bytes of state", map[string]any{"xs": []any{"x"}}},
		{"f0", "the run reached its limit of 100 node executions (subgraph nodes included)", map[string]any{}},
	}
	for _, c := range cases {
		t.Run(c.graph, func(t *testing.T) {
			tid := e.newThread(e.keyA)
			out := waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{
				"assistant_id": c.graph, "input": c.input, "config": map[string]any{"recursion_limit": 100}}))
			got, _ := out["__error__"].(map[string]any)
			if got["error"] != "LimitExceededError" || !strings.Contains(fmt.Sprint(got["message"]), c.message) {
				t.Fatalf("__error__ %v, want LimitExceededError %q", out, c.message)
			}
			runs := e.threadRuns(tid)
			if len(runs) != 1 || runs[0]["status"] != "error" {
				t.Errorf("runs of the thread: %v", runs)
			}
			if th := e.must(200, "GET", "/threads/"+tid, e.keyA, nil); th["status"] != "error" {
				t.Errorf("thread after the limit: %v", th["status"])
			}
		})
	}
	// Still serving, the same graphs included.
	waitBody(t, e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{}}}))
}

// Metadata objects are bounded (64 KiB of JSON unless configured): a larger
// one is refused with 422 naming the field and the bound, wherever metadata
// is stored, merges of thread metadata included.
func TestMetadataIsBounded(t *testing.T) {
	e := newEnv(t)
	big := map[string]any{"blob": strings.Repeat("x", 70<<10)}
	half := map[string]any{"a": strings.Repeat("x", 40<<10)}
	tid := e.newThread(e.keyA)
	e.must(200, "PATCH", "/threads/"+tid, e.keyA, map[string]any{"metadata": half})
	cases := []struct {
		name, method, path string
		body               map[string]any
		detail             string
	}{
		{"thread", "POST", "/threads", map[string]any{"metadata": big}, "metadata: must be at most 65536 bytes of JSON, got 71"},
		{"thread patch", "PATCH", "/threads/" + tid, map[string]any{"metadata": big}, "metadata: must be at most 65536 bytes of JSON, got 71"},
		{"thread patch merged", "PATCH", "/threads/" + tid, map[string]any{"metadata": map[string]any{"b": half["a"]}},
			"metadata: must be at most 65536 bytes of JSON once merged into the thread's, would be 819"},
		{"run", "POST", "/runs", map[string]any{"assistant_id": "echo", "input": map[string]any{}, "metadata": big},
			"metadata: must be at most 65536 bytes of JSON, got 71"},
		{"assistant", "POST", "/assistants", map[string]any{"graph_id": "echo", "metadata": big},
			"metadata: must be at most 65536 bytes of JSON, got 71"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(c.method, c.path, e.keyA, c.body)
			if r.Status != 422 || !strings.HasPrefix(r.detail(t), c.detail) {
				t.Errorf("status %d %s, want 422 %q", r.Status, r.Body, c.detail)
			}
		})
	}
	// At the bound is fine.
	e.must(200, "POST", "/threads", e.keyA, map[string]any{"metadata": map[string]any{"a": strings.Repeat("x", 60<<10)}})
}

// F8: storage quotas per organization. Over its quota of threads or of
// stored bytes an organization's writes are refused with 429 naming the
// quota; a run that cannot store its checkpoints ends "error" saying so.
// Other organizations are not affected, and deleting makes room again.
func TestStorageQuotas(t *testing.T) {
	t.Run("threads", func(t *testing.T) {
		e := newEnvWith(t, func(o *assembly.Options) { o.Limits.MaxThreads = 3 })
		var tids []string
		for range 3 {
			tids = append(tids, e.newThread(e.keyA))
		}
		want := "quota exceeded: the organization has 3 threads, its quota is 3 threads (threads per organization); delete threads to make room"
		newTID := "00000000-0000-4000-8000-000000000429"
		cases := []struct {
			name, path string
			body       map[string]any
		}{
			{"a thread", "/threads", map[string]any{}},
			{"a stateless run", "/runs/wait", map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{}}}},
			{"a run creating its thread", "/threads/" + newTID + "/runs", map[string]any{"assistant_id": "echo", "input": map[string]any{}, "if_not_exists": "create"}},
		}
		for _, c := range cases {
			r := e.do("POST", c.path, e.keyA, c.body)
			if r.Status != 429 || r.detail(t) != want {
				t.Errorf("%s at the quota: %d %s, want 429 %q", c.name, r.Status, r.Body, want)
			}
		}
		// Writes that create no thread pass; so does if_exists do_nothing.
		waitBody(t, e.do("POST", "/threads/"+tids[0]+"/runs/wait", e.keyA, map[string]any{"assistant_id": "echo", "input": map[string]any{}, "if_not_exists": "create"}))
		e.must(200, "POST", "/threads", e.keyA, map[string]any{"thread_id": tids[1], "if_exists": "do_nothing"})
		e.must(200, "POST", "/threads", e.keyB, map[string]any{}) // another organization
		e.must(204, "DELETE", "/threads/"+tids[2], e.keyA, nil)
		e.must(200, "POST", "/threads", e.keyA, map[string]any{})
	})

	t.Run("stored bytes", func(t *testing.T) {
		e := newEnvWith(t, func(o *assembly.Options) { o.Limits.MaxStoredBytes = 8000 })
		meta := map[string]any{"notes": strings.Repeat("n", 3000)}
		var tids []string
		// Each write is checked before it is made: the third passes the
		// quota, the fourth is refused.
		for range 3 {
			tids = append(tids, e.must(200, "POST", "/threads", e.keyA, map[string]any{"metadata": meta})["thread_id"].(string))
		}
		for _, c := range []struct{ method, path string }{
			{"POST", "/threads"}, {"PATCH", "/threads/" + tids[0]}, {"POST", "/threads/" + tids[0] + "/runs"},
		} {
			r := e.do(c.method, c.path, e.keyA, map[string]any{"assistant_id": "echo", "input": map[string]any{}, "metadata": map[string]any{"a": 1}})
			if d := r.detail(t); r.Status != 429 || !strings.HasPrefix(d, "quota exceeded: the organization stores 90") ||
				!strings.HasSuffix(d, "its quota is 8000 bytes (stored bytes per organization); delete threads or runs to make room") {
				t.Errorf("%s %s over the quota: %d %s", c.method, c.path, r.Status, r.Body)
			}
		}
		e.must(200, "POST", "/threads", e.keyB, map[string]any{"metadata": meta}) // another organization

		// Room for a run, not for all its checkpoints: it ends "error".
		e.must(204, "DELETE", "/threads/"+tids[1], e.keyA, nil)
		e.must(204, "DELETE", "/threads/"+tids[2], e.keyA, nil)
		out := waitBody(t, e.do("POST", "/threads/"+tids[0]+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter",
			"input": map[string]any{"steps": 1000}, "config": map[string]any{"recursion_limit": 1000}, "durability": "sync"}))
		got, _ := out["__error__"].(map[string]any)
		if msg := fmt.Sprint(got["message"]); got["error"] != "LimitExceededError" || !strings.HasPrefix(msg, "quota exceeded: the organization stores ") ||
			!strings.Contains(msg, "its quota is 8000 bytes (stored bytes per organization)") {
			t.Fatalf("a run over the quota: %v", out)
		}
		if runs := e.threadRuns(tids[0]); len(runs) != 1 || runs[0]["status"] != "error" {
			t.Errorf("runs: %v", runs)
		}
		e.must(204, "DELETE", "/threads/"+tids[0], e.keyA, nil)
		e.must(200, "POST", "/threads", e.keyA, map[string]any{"metadata": meta})
	})
}

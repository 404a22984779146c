package pyapp_test

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
	"github.com/stepgraph/stepgraph/internal/storeapi"
)

// repoRoot is the repository's root (this file is internal/pyapp/…).
func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// python is the .venv's interpreter (scripts/install-test-deps.sh makes it,
// with the runtime's pinned requirements).
func python(t *testing.T) string {
	p := filepath.Join(repoRoot(t), ".venv", "bin", "python")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no %s: run scripts/install-test-deps.sh", p)
	}
	return p
}

// TestRuntimePythonSuite runs the runtime's own pytest suite
// (runtimes/python/tests), so `make test` covers it.
func TestRuntimePythonSuite(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command(python(t), "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider", "runtimes/python/tests")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pytest runtimes/python/tests: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

func startRuntime(t *testing.T, config string) *pyapp.Process {
	t.Helper()
	return startRuntimeTo(t, config, testWriter{t})
}

// startRuntimeTo starts a runtime whose standard error goes to stderr.
func startRuntimeTo(t *testing.T, config string, stderr io.Writer) *pyapp.Process {
	t.Helper()
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := pyapp.Start(ctx, pyapp.ProcessOptions{Python: python(t), RuntimeDir: filepath.Join(root, "runtimes", "python"),
		Config: config, Stderr: stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Logf("runtime: %s", b); return len(b), nil }

func basicApp(t *testing.T) string {
	return filepath.Join(repoRoot(t), "runtimes", "python", "tests", "apps", "basic", "langgraph.json")
}

// app serves the test app's graphs as an organization's deployed graphs.
type app struct {
	graphs map[string]runs.DeployedGraph
}

func (a *app) Current(ctx context.Context, orgID, graphID string) (runs.DeployedGraph, error) {
	g, ok := a.graphs[graphID]
	if !ok {
		return runs.DeployedGraph{}, fail.NotFound("no graph %q", graphID)
	}
	return g, nil
}

func (a *app) At(ctx context.Context, orgID, graphID string, rev runs.GraphRevision) (runs.DeployedGraph, error) {
	return a.Current(ctx, orgID, graphID)
}

func (a *app) Names(context.Context, string) ([]string, error) {
	var out []string
	for k := range a.graphs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}

type env struct {
	runs  *runs.Service
	store *storeapi.Service
	stop  func()
	// deadline bounds a run's wait: a safety net only (default a minute;
	// a runtime started per call, on a loaded machine, needs more).
	deadline time.Duration
}

func newEnv(t *testing.T, dbPath string, p *pyapp.Process) *env {
	t.Helper()
	return newEnvWith(t, dbPath, p.Client, nil)
}

// newEnvWith serves the graphs of runtime rt (each run call bounded by
// yield, when set) from a new database at dbPath.
func newEnvWith(t *testing.T, dbPath string, rt pyapp.Runtime, yield *pyapp.YieldBudget) *env {
	t.Helper()
	db, err := sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	return newEnvOn(t, db, rt, nil, nil, yield)
}

// newEnvOn serves the runtime's graphs from db's runs, with the store API
// and, when auth is set, agent auth behind the bridge (logging to log).
func newEnvOn(t *testing.T, db *sqlite.DB, p pyapp.Runtime, auth pyapp.Authenticator, log *slog.Logger, yield *pyapp.YieldBudget) *env {
	t.Helper()
	return newEnvDispatched(t, db, p, auth, log, yield, nil)
}

// newEnvDispatched is newEnvOn whose runs are executed by the dispatcher
// dispatch makes (nil: by in-process workers).
func newEnvDispatched(t *testing.T, db *sqlite.DB, p pyapp.Runtime, auth pyapp.Authenticator, log *slog.Logger, yield *pyapp.YieldBudget,
	dispatch func(*runs.Service) runs.Dispatcher) *env {
	t.Helper()
	st := &storeapi.Service{Store: db}
	bridge, err := pyapp.StartBridge(st, auth, log)
	if err != nil {
		t.Fatal(err)
	}
	descs, err := p.Describe(context.Background(), "", false)
	if err != nil {
		t.Fatal(err)
	}
	a := &app{graphs: map[string]runs.DeployedGraph{}}
	for id, d := range descs {
		shape, err := pyapp.Shape(id, d)
		if err != nil {
			t.Fatal(err)
		}
		a.graphs[id] = runs.DeployedGraph{Graph: shape, Revision: runs.GraphRevision{DeploymentID: "d1", RevisionID: "r1"},
			Foreign: &pyapp.Graph{ID: id, Runtime: p, Bridge: bridge, Yield: yield}}
	}
	s := &runs.Service{Store: db, Graphs: graph.NewRegistry(), Deployed: a, PollInterval: 5 * time.Millisecond,
		LeaseDuration: 2 * time.Second}
	stop := func() {}
	if dispatch != nil {
		s.Dispatcher = dispatch(s)
	} else {
		stop = s.StartWorkers(4, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	e := &env{runs: s, store: st}
	e.stop = func() { stop(); bridge.Close(); db.Close() }
	t.Cleanup(e.stop)
	for id := range descs {
		if err := s.EnsureDeployedAssistant(context.Background(), "org", id, ""); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func req(t *testing.T, body string) runs.RunRequest {
	t.Helper()
	var r runs.RunRequest
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *env) thread(t *testing.T) string {
	t.Helper()
	th, err := e.runs.CreateThread(context.Background(), "org", runs.ThreadInput{})
	if err != nil {
		t.Fatal(err)
	}
	return th.ThreadID
}

// wait creates a run and answers runs/wait's body.
func (e *env) wait(t *testing.T, thread, body string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(e.deadline, time.Minute))
	defer cancel()
	r, err := e.runs.CreateRun(ctx, "org", thread, req(t, body))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := e.runs.Wait(ctx, "org", thread, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// stream creates a streamed run and gathers its events.
func (e *env) stream(t *testing.T, thread, body string) []runs.StreamEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, rs, err := e.runs.CreateRunStream(ctx, "org", thread, req(t, body))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var all []runs.StreamEvent
	for {
		evs, done, err := rs.Next(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
		if done {
			return all
		}
	}
}

func TestReactAgentStreamsTokensAndPersistsEveryCheckpoint(t *testing.T) {
	p := startRuntime(t, basicApp(t))
	e := newEnv(t, filepath.Join(t.TempDir(), "db"), p)
	th := e.thread(t)
	evs := e.stream(t, th, `{"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "weather in Paris?"}]},
		"stream_mode": ["messages-tuple", "custom", "updates", "values"]}`)
	var tokens []string
	var custom, updates int
	for _, ev := range evs {
		switch ev.Event {
		case "messages":
			var pair []map[string]any
			if err := json.Unmarshal(ev.Data, &pair); err != nil {
				t.Fatal(err)
			}
			if pair[0]["type"] == "AIMessageChunk" && pair[1]["langgraph_node"] == "agent" {
				tokens = append(tokens, pair[0]["content"].(string))
			}
		case "custom":
			custom++
			if string(ev.Data) != `{"tool":"get_weather","city":"Paris"}` {
				t.Errorf("custom event %s", ev.Data)
			}
		case "updates":
			updates++
		case "error":
			t.Fatalf("the run failed: %s", ev.Data)
		}
	}
	if got := strings.Join(tokens, ""); got != "The weather in Paris is sunny today." || len(tokens) < 4 {
		t.Errorf("tokens %q", tokens)
	}
	if custom != 1 || updates != 3 {
		t.Errorf("custom %d, updates %d; want 1 and 3 (agent, tools, agent)", custom, updates)
	}
	st, err := e.runs.ThreadState(context.Background(), "org", th)
	if err != nil {
		t.Fatal(err)
	}
	msgs := st.Values["messages"].([]any)
	if len(msgs) != 4 || msgs[3].(map[string]any)["content"] != "The weather in Paris is sunny today." || len(st.Next) != 0 {
		t.Errorf("state %+v", st)
	}
	hist, err := e.runs.History(context.Background(), "org", th, runs.HistoryQuery{Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	var steps []any
	for _, h := range hist {
		steps = append(steps, h.Metadata["step"])
	}
	if b, _ := json.Marshal(steps); string(b) != "[3,2,1,0,-1]" {
		t.Errorf("history steps %s", b)
	}
}

func TestInterruptResumedByCommandAndUpdateState(t *testing.T) {
	p := startRuntime(t, basicApp(t))
	e := newEnv(t, filepath.Join(t.TempDir(), "db"), p)
	th := e.thread(t)
	out := e.wait(t, th, `{"assistant_id": "hitl", "input": {"topic": "cats"}}`)
	ints, _ := out["__interrupt__"].([]any)
	if len(ints) != 1 || ints[0].(map[string]any)["value"].(map[string]any)["question"] != "Publish cats?" {
		t.Fatalf("wait answered %v", out)
	}
	st, _ := e.runs.ThreadState(context.Background(), "org", th)
	if len(st.Next) != 1 || st.Next[0] != "review" || len(st.Interrupts) != 1 {
		t.Fatalf("interrupted state %+v", st)
	}
	out = e.wait(t, th, `{"assistant_id": "hitl", "command": {"resume": "yes"}}`)
	if out["approved"] != true {
		t.Fatalf("resumed: %v", out)
	}
	// events (astream_events) is not offered for these graphs: refused, naming it
	if _, err := e.runs.CreateRun(context.Background(), "org", th, req(t, `{"assistant_id": "hitl", "input": {"topic": "x"}, "stream_mode": ["events"]}`)); fail.KindOf(err) != fail.KindInvalid || !strings.Contains(err.Error(), "stream_mode") {
		t.Errorf("stream_mode events: %v", err)
	}
	// update_state as a node: LangGraph's reducers and edges
	th2 := e.thread(t)
	e.wait(t, th2, `{"assistant_id": "mapreduce", "input": {"subjects": ["owls"]}}`)
	upd, err := e.runs.UpdateState(context.Background(), "org", th2, runs.StateUpdate{
		Values: json.RawMessage(`{"jokes": ["a pun"]}`), AsNode: ptr("joke")})
	if err != nil {
		t.Fatal(err)
	}
	st, _ = e.runs.ThreadState(context.Background(), "org", th2)
	if *st.CheckpointID != upd.CheckpointID || st.Metadata["source"] != "update" || len(st.Next) != 1 || st.Next[0] != "pick" {
		t.Fatalf("after the update: %+v", st)
	}
	if b, _ := json.Marshal(st.Values["jokes"]); string(b) != `["a joke about owls","a pun"]` {
		t.Errorf("jokes %s", b)
	}
	_, err = e.runs.UpdateState(context.Background(), "org", th2, runs.StateUpdate{
		Values: json.RawMessage(`{"jokes": ["x"]}`), AsNode: ptr("nope")})
	if fail.KindOf(err) != fail.KindInvalid {
		t.Errorf("as_node nope: %v", err)
	}
	out = e.wait(t, th2, `{"assistant_id": "mapreduce"}`)
	if out["best"] != "a joke about owls" {
		t.Errorf("after update, run: %v", out)
	}
}

func TestSubgraphStreamAndStore(t *testing.T) {
	p := startRuntime(t, basicApp(t))
	e := newEnv(t, filepath.Join(t.TempDir(), "db"), p)
	th := e.thread(t)
	evs := e.stream(t, th, `{"assistant_id": "parent", "input": {"text": "hi"}, "stream_mode": ["updates"], "stream_subgraphs": true}`)
	sub := 0
	for _, ev := range evs {
		if strings.HasPrefix(ev.Event, "updates|sub:") {
			sub++
		}
	}
	if sub == 0 {
		t.Errorf("no subgraph events in %v", evs)
	}
	out := e.wait(t, th, `{"assistant_id": "parent", "command": {"resume": "ok"}}`)
	if out["text"] != "hi parent child ok" {
		t.Errorf("resumed inside the subgraph: %v", out)
	}
	for _, fact := range []string{"likes tea", "has a cat"} {
		out = e.wait(t, e.thread(t), `{"assistant_id": "memory", "input": {"user": "u1", "fact": "`+fact+`"}}`)
	}
	if b, _ := json.Marshal(out["known"]); string(b) != `["has a cat","likes tea"]` {
		t.Errorf("known %s (%v)", b, out)
	}
	items, err := e.store.Search(context.Background(), "org", storeapi.SearchInput{NamespacePrefix: []string{"memories", "u1"}})
	if err != nil || len(items) != 2 {
		t.Errorf("the store API sees %v, %v", items, err)
	}
	// another organization's store is another store
	items, _ = e.store.Search(context.Background(), "org2", storeapi.SearchInput{NamespacePrefix: []string{"memories"}})
	if len(items) != 0 {
		t.Errorf("org2 sees %v", items)
	}
}

func ptr[T any](v T) *T { return &v }

// waitFor polls cond; the deadline is a safety net only.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// TestCrashMidRunResumesFromTheLastCheckpoint: the server (its workers and
// its runtime process) stops while the run's second step runs; a new server
// on the same database resumes the run from the checkpoint after the first
// step, which is not run again.
func TestCrashMidRunResumesFromTheLastCheckpoint(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(t.TempDir(), "db")
	p1 := startRuntime(t, basicApp(t))
	e1 := newEnv(t, dbPath, p1)
	th := e1.thread(t)
	in, _ := json.Marshal(map[string]any{"dir": dir})
	r, err := e1.runs.CreateRun(context.Background(), "org", th, req(t, `{"assistant_id": "slow", "input": `+string(in)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second step to start", func() bool { return exists(filepath.Join(dir, "entered")) })
	// The first step's checkpoint is stored in the background (durability
	// async) while the second runs: the crash comes once it is the thread's
	// state (before that, a run rightly runs its first step again).
	waitFor(t, "the first step's checkpoint to be stored", func() bool {
		st, err := e1.runs.ThreadState(context.Background(), "org", th)
		return err == nil && slices.Equal(st.Next, []string{"second"})
	})
	p1.Stop() // the crash: the runtime dies mid-step, the workers with it
	e1.stop()

	p2 := startRuntime(t, basicApp(t))
	e2 := newEnv(t, dbPath, p2)
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw, err := e2.runs.Wait(ctx, "org", th, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if b, _ := json.Marshal(out["steps"]); string(b) != `["first","second"]` {
		t.Fatalf("resumed run answered %s", raw)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "first.log"))
	if string(log) != "first\n" {
		t.Errorf("the first step ran %d times", strings.Count(string(log), "first"))
	}
	got, _ := e2.runs.GetRun(context.Background(), "org", th, r.RunID)
	if got.Status != "success" {
		t.Errorf("run status %s", got.Status)
	}
}

package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/runs"
)

// holdingRuntime is a function runtime whose "work" function answers only
// once released: a run of a graph calling it runs, without using
// any CPU, exactly as long as the test wants.
type holdingRuntime struct {
	url      string
	entered  atomic.Int64 // calls of work so far
	released chan struct{}
	once     sync.Once
}

// release lets every held call, and every later one, answer.
func (rt *holdingRuntime) release() { rt.once.Do(func() { close(rt.released) }) }

func newHoldingRuntime(t *testing.T) *holdingRuntime {
	rt := &holdingRuntime{released: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Node string }
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil || req.Node != "work" {
			http.Error(w, "no such function", http.StatusNotFound)
			return
		}
		rt.entered.Add(1)
		select {
		case <-rt.released:
		case <-r.Context().Done():
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"update": map[string]any{"worked": true}})
	}))
	// Cleanups run last first: the held calls are released before the
	// server waits for them to end.
	t.Cleanup(srv.Close)
	t.Cleanup(rt.release)
	rt.url = srv.URL
	return rt
}

// holdYAML: one function node that holds the run until the runtime lets
// go; its timeout (the largest a document may give) is far beyond the
// test's deadlines, so it never ends a held run during the test.
const holdYAML = `state:
  worked: {}
nodes:
  work: {kind: function, timeout: 900}
edges:
  - {from: __start__, to: work}
  - {from: work, to: __end__}
`

// postWithin posts body and reads the answer, giving up after d (a
// request that never answers must fail the test, not hang it).
func (e *env) postWithin(d time.Duration, path, key string, body any) (int, []byte, error) {
	raw, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", e.url+path, bytes.NewReader(raw))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	res, err := e.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	return res.StatusCode, out, err
}

// TestOneTenantCannotStarveAnother (finding F2): organization alpha queues
// more runs than there are workers, each held until the test lets go; beta's
// echo still completes, because alpha runs at most DefaultMaxRunningPerOrg
// at once and its other runs wait, pending. Once released, every one of
// alpha's runs completes: waiting for a slot loses nothing.
func TestOneTenantCannotStarveAnother(t *testing.T) {
	e := newEnv(t)
	rt := newHoldingRuntime(t)
	repo, commit := gitRepoWriter(t)
	commit(map[string]string{"stepgraph.yaml": "graphs:\n  hold: hold.yaml\n", "hold.yaml": holdYAML})
	body := repoDeployment("hold", repo)
	body["source_revision_config"] = map[string]any{"repo_ref": "main", "graph_config_path": "stepgraph.yaml"}
	body["source_config"] = map[string]any{"repo_url": repo, "custom_url": rt.url}
	e.deployReady(body)

	flood := runs.DefaultWorkers + 8
	type started struct{ thread, run string }
	var floodRuns []started
	for range flood {
		r := e.must(200, "POST", "/runs", e.keyA, map[string]any{"assistant_id": "hold", "input": map[string]any{}, "on_completion": "keep"})
		floodRuns = append(floodRuns, started{r["thread_id"].(string), r["run_id"].(string)})
	}
	// Wait until alpha's runs hold every slot they may take.
	deadline := time.Now().Add(60 * time.Second)
	for rt.entered.Load() < runs.DefaultMaxRunningPerOrg {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of alpha's runs started within a minute, want %d", rt.entered.Load(), runs.DefaultMaxRunningPerOrg)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Beta's run completes at all while the flood holds on. A generous
	// deadline: without the cap it would wait for the held runs (15 min).
	status, raw, err := e.postWithin(60*time.Second, "/runs/wait", e.keyB, map[string]any{
		"assistant_id": "echo", "input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}})
	if err != nil {
		t.Fatalf("beta's echo while alpha floods the workers: %v", err)
	}
	recorder{}.Write(raw)
	if status != http.StatusOK || !strings.Contains(string(raw), `"echo: hi"`) {
		t.Fatalf("beta's echo while alpha floods the workers: status %d, %s", status, raw)
	}

	// The flood was real, and capped: alpha's runs are all still inflight,
	// as many running as its cap, the rest pending.
	count := map[string]int{}
	for _, r := range floodRuns {
		got := e.must(200, "GET", "/threads/"+r.thread+"/runs/"+r.run, e.keyA, nil)
		count[got["status"].(string)]++
	}
	if count["running"] != runs.DefaultMaxRunningPerOrg || count["pending"] != flood-runs.DefaultMaxRunningPerOrg {
		t.Errorf("alpha's runs while held: %v, want %d running and %d pending", count, runs.DefaultMaxRunningPerOrg, flood-runs.DefaultMaxRunningPerOrg)
	}
	if n := rt.entered.Load(); n != runs.DefaultMaxRunningPerOrg {
		t.Errorf("alpha's held calls: %d, want %d", n, runs.DefaultMaxRunningPerOrg)
	}

	rt.release()
	for _, r := range floodRuns {
		out := waitBody(t, e.do("GET", "/threads/"+r.thread+"/runs/"+r.run+"/join", e.keyA, nil))
		if out["worked"] != true {
			t.Fatalf("alpha's run %s after the release: %v", r.run, out)
		}
	}
}

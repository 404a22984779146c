package api_test

import (
	"strings"
	"testing"
)

// TestRunBatchAndCancel: a batch makes stateless runs that finish; a bad
// item refuses the batch naming it; runs/cancel by ids and by status stops
// pending runs and leaves others' alone.
func TestRunBatchAndCancel(t *testing.T) {
	e := newEnv(t)
	hi := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "b"}}}
	runs := list(t, e.do("POST", "/runs/batch", e.keyA, []any{
		map[string]any{"assistant_id": "echo", "input": hi, "on_completion": "keep"},
		map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 2}, "on_completion": "keep"},
	}))
	if len(runs) != 2 || runs[0]["assistant_id"] == runs[1]["assistant_id"] || runs[0]["thread_id"] == runs[1]["thread_id"] {
		t.Fatalf("batch: %v", runs)
	}
	for _, r := range runs {
		out := e.must(200, "GET", "/threads/"+r["thread_id"].(string)+"/runs/"+r["run_id"].(string)+"/join", e.keyA, nil)
		if out == nil || out["__error__"] != nil {
			t.Errorf("batch run output %v", out)
		}
	}
	for _, tc := range []struct {
		body   any
		status int
		detail string
	}{
		{[]any{map[string]any{"assistant_id": "echo"}, map[string]any{"assistant_id": "nope"}}, 422, "item 1"},
		{[]any{map[string]any{"assistant_id": "echo"}, map[string]any{"assistant_id": "echo", "multitask_strategy": "later"}}, 422, "multitask_strategy"},
		{[]any{map[string]any{"assistant_id": "00000000-0000-4000-8000-000000000000"}}, 404, "item 0"},
		{[]any{}, 422, "body"},
	} {
		r := e.do("POST", "/runs/batch", e.keyA, tc.body)
		if r.Status != tc.status || !strings.Contains(r.detail(t), tc.detail) {
			t.Errorf("batch %v: %d %s, want %d naming %q", tc.body, r.Status, r.Body, tc.status, tc.detail)
		}
	}

	// Pending runs (an hour ahead) on two threads of alpha, one of beta.
	later := func(key string) (string, string) {
		tid := e.newThread(key)
		r := e.must(200, "POST", "/threads/"+tid+"/runs", key, map[string]any{"assistant_id": "echo", "input": hi, "after_seconds": 3600})
		return tid, r["run_id"].(string)
	}
	t1, r1 := later(e.keyA)
	t2, r2 := later(e.keyA)
	tb, rb := later(e.keyB)
	status := func(key, tid, rid string) string {
		return e.must(200, "GET", "/threads/"+tid+"/runs/"+rid, key, nil)["status"].(string)
	}
	if r := e.do("POST", "/runs/cancel", e.keyA, map[string]any{"thread_id": t1, "run_ids": []string{r1, r2}}); r.Status != 404 {
		t.Errorf("cancel naming a run of another thread: %d %s", r.Status, r.Body)
	}
	if status(e.keyA, t1, r1) != "pending" {
		t.Errorf("a refused cancel cancelled a run")
	}
	if r := e.do("POST", "/runs/cancel", e.keyA, map[string]any{"thread_id": t1, "run_ids": []string{r1}}); r.Status != 204 {
		t.Fatalf("cancel by ids: %d %s", r.Status, r.Body)
	}
	if got := status(e.keyA, t1, r1); got != "interrupted" {
		t.Errorf("cancelled by id: %s", got)
	}
	if r := e.do("POST", "/runs/cancel?action=rollback", e.keyA, map[string]any{"status": "pending"}); r.Status != 204 {
		t.Fatalf("cancel by status: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/threads/"+t2+"/runs/"+r2, e.keyA, nil); r.Status != 404 {
		t.Errorf("pending run after a rollback by status: %d %s", r.Status, r.Body)
	}
	if got := status(e.keyB, tb, rb); got != "pending" {
		t.Errorf("another organization's run after a cancel by status: %s", got)
	}
	for _, body := range []any{
		map[string]any{"status": "done"},
		map[string]any{"status": "all", "thread_id": t1},
		map[string]any{"thread_id": t1},
		map[string]any{"thread_id": t1, "run_ids": []string{"x"}},
	} {
		if r := e.do("POST", "/runs/cancel", e.keyA, body); r.Status != 422 {
			t.Errorf("cancel %v: %d %s, want 422", body, r.Status, r.Body)
		}
	}
}

package api_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
)

// parallel runs n requests at once and returns their answers in order.
func (e *env) parallel(n int, send func(i int) response) []response {
	out := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = send(i)
		}()
	}
	wg.Wait()
	return out
}

func (e *env) threadRuns(tid string) []map[string]any {
	e.t.Helper()
	r := e.do("GET", "/threads/"+tid+"/runs?limit=1000", e.keyA, nil)
	var list []map[string]any
	if err := json.Unmarshal(r.Body, &list); err != nil {
		e.t.Fatalf("runs: %v %s", err, r.Body)
	}
	return list
}

func TestConcurrentWaitsOnOneThread(t *testing.T) {
	e := newEnv(t)
	const n = 12
	// enqueue: every run adds exactly one step, one after the other. Lost
	// or overlapping runs would leave a count below n or repeat a value.
	tid := e.newThread(e.keyA)
	answers := e.parallel(n, func(int) response {
		return e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 1}})
	})
	var counts []int
	for _, r := range answers {
		var n float64
		fmt.Sscan(fmt.Sprint(waitBody(t, r)["count"]), &n)
		counts = append(counts, int(n))
	}
	sort.Ints(counts)
	for i, c := range counts {
		if c != i+1 {
			t.Fatalf("enqueued outputs %v, want 1..%d each once", counts, n)
		}
	}
	if runs := e.threadRuns(tid); len(runs) != n {
		t.Errorf("%d runs recorded, want %d", len(runs), n)
	}

	// reject: the ones that met a busy thread get 409 and leave no run.
	tid = e.newThread(e.keyA)
	answers = e.parallel(n, func(int) response {
		return e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter",
			"input": map[string]any{"steps": 200}, "config": map[string]any{"recursion_limit": 300}, "multitask_strategy": "reject"})
	})
	ok := 0
	for _, r := range answers {
		switch r.Status {
		case 200:
			ok++
			if got := waitBody(t, r); got["__error__"] != nil {
				t.Errorf("run under reject failed: %v", got)
			}
		case 409:
		default:
			t.Errorf("reject: %d %s", r.Status, r.Body)
		}
	}
	if ok < 1 || len(e.threadRuns(tid)) != ok {
		t.Errorf("%d successes, %d runs recorded", ok, len(e.threadRuns(tid)))
	}

	// interrupt: every run ends success or interrupted; the thread ends idle.
	tid = e.newThread(e.keyA)
	answers = e.parallel(6, func(int) response {
		return e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter",
			"input": map[string]any{"steps": 100}, "config": map[string]any{"recursion_limit": 300}, "multitask_strategy": "interrupt"})
	})
	for _, r := range answers {
		waitBody(t, r)
	}
	for _, run := range e.threadRuns(tid) {
		if s := run["status"]; s != "success" && s != "interrupted" {
			t.Errorf("interrupt strategy left a run %v", s)
		}
	}
	if th := e.must(200, "GET", "/threads/"+tid, e.keyA, nil); th["status"] != "idle" {
		t.Errorf("thread after interrupts: %v", th["status"])
	}
}

func TestHundredsOfThreadsInParallel(t *testing.T) {
	e := newEnv(t)
	const n = 200
	answers := e.parallel(n, func(i int) response {
		return e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "echo",
			"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": fmt.Sprint("m", i)}}}})
	})
	for i, r := range answers {
		msgs, _ := waitBody(t, r)["messages"].([]any)
		if len(msgs) != 2 || msgs[1].(map[string]any)["content"] != fmt.Sprint("echo: m", i) {
			t.Errorf("run %d output %v", i, msgs)
		}
	}
}

package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/assembly"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// waitBody decodes a runs/wait answer (leading keep-alive newlines allowed).
func waitBody(t *testing.T, r response) map[string]any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(r.Body))), &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

func (e *env) newThread(key string) string {
	e.t.Helper()
	return e.must(200, "POST", "/threads", key, map[string]any{})["thread_id"].(string)
}

func TestStatelessWaitEcho(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/runs/wait", e.keyA, map[string]any{
		"assistant_id": "echo", "input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}},
		"raise_error": true, "langsmith_tracer": map[string]any{"project_name": "x"}})
	got := waitBody(t, r)
	want := `{"messages":[{"content":"hi","role":"user"},{"content":"echo: hi","role":"assistant"}]}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("output %s, want %s", b, want)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	loc := r.Header.Get("Content-Location")
	if !strings.HasPrefix(loc, "/threads/") || r.Header.Get("Location") != loc+"/join" {
		t.Fatalf("Content-Location %q, Location %q", loc, r.Header.Get("Location"))
	}
	threadID := strings.Split(loc, "/")[2]
	e.must(404, "GET", "/threads/"+threadID, e.keyA, nil) // on_completion delete is the default

	r = e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "echo", "on_completion": "keep",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "yo"}}}})
	waitBody(t, r)
	kept := e.must(200, "GET", "/threads/"+strings.Split(r.Header.Get("Content-Location"), "/")[2], e.keyA, nil)
	if kept["status"] != "idle" || !strings.Contains(fmt.Sprint(kept["values"]), "echo: yo") {
		t.Errorf("kept thread: %v", kept)
	}
}

func TestThreadWaitCounterHistoryAndState(t *testing.T) {
	e := newEnv(t)
	tid := e.newThread(e.keyA)
	got := waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{
		"assistant_id": "counter", "input": map[string]any{"steps": 5}, "durability": "sync"}))
	if fmt.Sprint(got) != "map[count:5 steps:5]" {
		t.Errorf("output %v", got)
	}
	state := e.must(200, "GET", "/threads/"+tid+"/state", e.keyA, nil)
	if fmt.Sprint(state["values"]) != "map[count:5 steps:5]" || len(state["next"].([]any)) != 0 {
		t.Errorf("state %v", state)
	}
	r := e.do("POST", "/threads/"+tid+"/history", e.keyA, map[string]any{"limit": 3})
	var hist []map[string]any
	if err := json.Unmarshal(r.Body, &hist); err != nil || len(hist) != 3 {
		t.Fatalf("history: %v %s", err, r.Body)
	}
	first := hist[0]["checkpoint"].(map[string]any)["checkpoint_id"]
	if first != state["checkpoint"].(map[string]any)["checkpoint_id"] {
		t.Errorf("history does not start at the latest checkpoint")
	}
	older := e.do("POST", "/threads/"+tid+"/history", e.keyA, map[string]any{"limit": 100, "before": first})
	var rest []map[string]any
	json.Unmarshal(older.Body, &rest)
	if len(rest) < 6 { // input + 5 steps, minus the newest
		t.Errorf("%d older checkpoints, want one per step", len(rest))
	}
	at := e.must(200, "GET", fmt.Sprintf("/threads/%s/state/%s", tid, rest[0]["checkpoint"].(map[string]any)["checkpoint_id"]), e.keyA, nil)
	if fmt.Sprint(at["values"].(map[string]any)["count"]) != "4" {
		t.Errorf("state one step back: %v", at["values"])
	}
}

func TestWaitErrorsAndInterrupts(t *testing.T) {
	e := newEnv(t)
	// Recursion limit.
	tid := e.newThread(e.keyA)
	got := waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 100}}))
	if got["__error__"].(map[string]any)["error"] != "GraphRecursionError" {
		t.Errorf("recursion: %v", got)
	}
	// A node raising.
	tid = e.newThread(e.keyA)
	got = waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "fail", "input": map[string]any{}}))
	if b, _ := json.Marshal(got); string(b) != `{"__error__":{"error":"ValueError","message":"boom"}}` {
		t.Errorf("fail: %s", b)
	}
	if th := e.must(200, "GET", "/threads/"+tid, e.keyA, nil); th["status"] != "error" {
		t.Errorf("thread after error: %v", th["status"])
	}
	runs := e.do("GET", "/threads/"+tid+"/runs", e.keyA, nil)
	if !strings.Contains(string(runs.Body), `"status":"error"`) {
		t.Errorf("runs: %s", runs.Body)
	}
	// Dynamic interrupt, then resume.
	tid = e.newThread(e.keyA)
	got = waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "approval", "input": map[string]any{"request": "x"}}))
	ints, _ := got["__interrupt__"].([]any)
	if got["request"] != "x" || len(ints) != 1 || fmt.Sprint(ints[0].(map[string]any)["value"]) != "map[question:approve x?]" || ints[0].(map[string]any)["id"] == "" {
		t.Fatalf("interrupt: %v", got)
	}
	th := e.must(200, "GET", "/threads/"+tid, e.keyA, nil)
	if th["status"] != "interrupted" || len(th["interrupts"].(map[string]any)) != 1 {
		t.Errorf("thread at interrupt: %v", th)
	}
	got = waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "approval", "command": map[string]any{"resume": "yes"}}))
	if fmt.Sprint(got) != "map[answer:yes request:x]" {
		t.Errorf("resumed: %v", got)
	}
	if th := e.must(200, "GET", "/threads/"+tid, e.keyA, nil); th["status"] != "idle" {
		t.Errorf("thread after resume: %v", th["status"])
	}
	// Static interrupt before a node, then continue with null input.
	tid = e.newThread(e.keyA)
	waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 2}, "interrupt_before": []any{"inc"}}))
	st := e.must(200, "GET", "/threads/"+tid+"/state", e.keyA, nil)
	if fmt.Sprint(st["next"]) != "[inc]" {
		t.Errorf("next at breakpoint: %v", st["next"])
	}
	got = waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter", "input": nil}))
	if fmt.Sprint(got["count"]) != "2" {
		t.Errorf("after breakpoint: %v", got)
	}
}

func TestRunRequestRules(t *testing.T) {
	e := newEnv(t)
	tid := e.newThread(e.keyA)
	missing := uuid.NewString()
	cases := []struct {
		name, path string
		body       any
		status     int
		detail     string
	}{
		{"missing thread", "/threads/" + missing + "/runs/wait", map[string]any{"assistant_id": "echo"}, 404, "Thread or assistant not found."},
		{"thread not a uuid", "/threads/abc/runs/wait", map[string]any{"assistant_id": "echo"}, 422, "Invalid thread ID"},
		{"unknown graph name", "/threads/" + tid + "/runs/wait", map[string]any{"assistant_id": "nope"}, 422, "Invalid assistant: 'nope'"},
		{"unknown assistant uuid", "/threads/" + tid + "/runs/wait", map[string]any{"assistant_id": missing}, 404, "Thread or assistant not found."},
		{"assistant missing", "/runs/wait", map[string]any{"input": map[string]any{}}, 422, "assistant_id"},
		{"bad multitask", "/threads/" + tid + "/runs/wait", map[string]any{"assistant_id": "echo", "multitask_strategy": "x"}, 422, "multitask_strategy"},
		{"bad durability", "/threads/" + tid + "/runs/wait", map[string]any{"assistant_id": "echo", "durability": "never"}, 422, "durability"},
		{"bad stream mode", "/threads/" + tid + "/runs/wait", map[string]any{"assistant_id": "echo", "stream_mode": "loud"}, 422, "stream_mode"},
		{"unknown interrupt node", "/threads/" + tid + "/runs/wait", map[string]any{"assistant_id": "echo", "interrupt_before": []any{"nope"}}, 422, "interrupt_before"},
		{"negative after_seconds", "/threads/" + tid + "/runs/wait", map[string]any{"assistant_id": "echo", "after_seconds": -1}, 422, "after_seconds"},
		{"bad checkpoint id", "/threads/" + tid + "/runs/wait", map[string]any{"assistant_id": "echo", "checkpoint_id": "zz"}, 422, "Invalid checkpoint ID"},
		{"stateless resume", "/runs/wait", map[string]any{"assistant_id": "approval", "command": map[string]any{"resume": "y"}}, 400, "You must provide a thread_id when resuming."},
		{"configurable and context", "/runs/wait", map[string]any{"assistant_id": "echo", "config": map[string]any{"configurable": map[string]any{"a": 1}}, "context": map[string]any{"b": 2}}, 400, "Cannot specify both configurable and context"},
		{"webhook not http", "/runs/wait", map[string]any{"assistant_id": "echo", "webhook": "ftp://example.com/hook"}, 422, "webhook: must be an absolute http"},
		{"if_not_exists reject on stateless", "/runs/wait", map[string]any{"assistant_id": "echo", "if_not_exists": "reject"}, 422, "if_not_exists"},
		{"on_completion on a thread", "/threads/" + tid + "/runs/wait", map[string]any{"assistant_id": "echo", "on_completion": "keep"}, 422, "on_completion"},
		{"not JSON", "/runs/wait", "{", 422, "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", c.path, e.keyA, c.body)
			if r.Status != c.status || !strings.Contains(r.detail(t), c.detail) {
				t.Errorf("%d %s, want %d with %q", r.Status, r.Body, c.status, c.detail)
			}
		})
	}
	if r := e.do("GET", "/threads/"+missing, e.keyA, nil); r.Status != 404 {
		t.Errorf("a rejected run created its thread: %d", r.Status)
	}
	// A stateless run may say if_not_exists create, as RemoteGraph does: its
	// thread is always created.
	waitBody(t, e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "echo", "if_not_exists": "create", "input": map[string]any{"messages": []any{}}}))
	// if_not_exists create makes the thread, with graph and assistant in its metadata.
	waitBody(t, e.do("POST", "/threads/"+missing+"/runs/wait", e.keyA, map[string]any{"assistant_id": "echo", "if_not_exists": "create", "input": map[string]any{"messages": []any{}}}))
	th := e.must(200, "GET", "/threads/"+missing, e.keyA, nil)
	meta := th["metadata"].(map[string]any)
	if meta["graph_id"] != "echo" || meta["assistant_id"] != uuid.NewSHA1(uuid.MustParse("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), []byte("echo")).String() {
		t.Errorf("auto-created thread metadata: %v", meta)
	}
}

func TestMultitaskOnOneThread(t *testing.T) {
	e := newEnv(t)
	tid := e.newThread(e.keyA)
	// A delayed run keeps the thread busy. Its delay is the window in which
	// the two requests below must be made for the enqueued run to start
	// first: long enough for a loaded machine (0.5 s was not), short enough
	// not to slow the suite much.
	first := e.must(200, "POST", "/threads/"+tid+"/runs", e.keyA, map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 3}, "after_seconds": 10})
	if first["status"] != "pending" {
		t.Fatalf("first run: %v", first)
	}
	r := e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 1}, "multitask_strategy": "reject"})
	if r.Status != 409 || r.detail(t) != "Thread is already running a task. Wait for it to finish or choose a different multitask strategy." {
		t.Errorf("reject: %d %s", r.Status, r.Body)
	}
	// enqueue (the default) queues by start time, as upstream orders by
	// created_at = now + after_seconds: this run (no delay) goes first and
	// counts to 6, then the delayed one adds its single step: 7. Overlapping
	// runs would lose or double increments.
	got := waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 6}}))
	if fmt.Sprint(got["count"]) != "6" {
		t.Errorf("enqueued run output %v (the runs overlapped or ran out of order)", got)
	}
	joined := waitBody(t, e.do("GET", fmt.Sprintf("/threads/%s/runs/%s/join", tid, first["run_id"]), e.keyA, nil))
	if fmt.Sprint(joined["count"]) != "7" {
		t.Errorf("first run joined: %v", joined)
	}
	run := e.must(200, "GET", fmt.Sprintf("/threads/%s/runs/%s", tid, first["run_id"]), e.keyA, nil)
	if run["status"] != "success" {
		t.Errorf("first run: %v", run["status"])
	}

	// Cancelling a pending run interrupts it; rollback deletes it.
	slow := e.must(200, "POST", "/threads/"+tid+"/runs", e.keyA, map[string]any{"assistant_id": "echo", "input": map[string]any{}, "after_seconds": 60})
	if r := e.do("POST", fmt.Sprintf("/threads/%s/runs/%s/cancel", tid, slow["run_id"]), e.keyA, nil); r.Status != 202 {
		t.Errorf("cancel: %d %s", r.Status, r.Body)
	}
	if run := e.must(200, "GET", fmt.Sprintf("/threads/%s/runs/%s", tid, slow["run_id"]), e.keyA, nil); run["status"] != "interrupted" {
		t.Errorf("cancelled run: %v", run["status"])
	}
	gone := e.must(200, "POST", "/threads/"+tid+"/runs", e.keyA, map[string]any{"assistant_id": "echo", "input": map[string]any{}, "after_seconds": 60})
	e.do("POST", fmt.Sprintf("/threads/%s/runs/%s/cancel?action=rollback", tid, gone["run_id"]), e.keyA, nil)
	e.must(404, "GET", fmt.Sprintf("/threads/%s/runs/%s", tid, gone["run_id"]), e.keyA, nil)
	if th := e.must(200, "GET", "/threads/"+tid, e.keyA, nil); th["status"] != "idle" {
		t.Errorf("thread after cancels: %v", th["status"])
	}
}

func TestAssistantsAndIsolation(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/assistants/search", e.keyA, map[string]any{"limit": 100})
	var list []map[string]any
	if err := json.Unmarshal(r.Body, &list); err != nil {
		t.Fatal(err, string(r.Body))
	}
	graphs := map[string]bool{}
	for _, a := range list {
		if fmt.Sprint(a["metadata"]) == "map[created_by:system]" {
			graphs[a["graph_id"].(string)] = true
		}
	}
	for _, g := range []string{"echo", "counter", "approval", "fail"} {
		if !graphs[g] {
			t.Errorf("no system assistant for %s in %v", g, list)
		}
	}
	echo := e.must(200, "GET", "/assistants/echo", e.keyA, nil)
	mine := e.must(200, "POST", "/assistants", e.keyA, map[string]any{"graph_id": "echo", "name": "mine", "metadata": map[string]any{"team": "a"}})
	if mine["assistant_id"] == echo["assistant_id"] {
		t.Fatal("new assistant reused the system id")
	}
	waitBody(t, e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": mine["assistant_id"], "input": map[string]any{"messages": []any{}}}))

	tid := e.newThread(e.keyA)
	run := e.must(200, "POST", "/threads/"+tid+"/runs", e.keyA, map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{}}})
	for _, path := range []string{"/threads/" + tid, "/threads/" + tid + "/state", "/assistants/" + mine["assistant_id"].(string),
		fmt.Sprintf("/threads/%s/runs/%s", tid, run["run_id"])} {
		if r := e.do("GET", path, e.keyB, nil); r.Status != 404 {
			t.Errorf("beta GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	if r := e.do("POST", "/threads/"+tid+"/runs/wait", e.keyB, map[string]any{"assistant_id": "echo"}); r.Status != 404 {
		t.Errorf("beta runs on alpha's thread: %d", r.Status)
	}
	r = e.do("POST", "/threads/search", e.keyB, map[string]any{})
	if strings.Contains(string(r.Body), tid) {
		t.Errorf("beta finds alpha's thread")
	}
}

func TestWebhookAfterRun(t *testing.T) {
	e := newEnv(t)
	type delivery struct {
		body   []byte
		header http.Header
	}
	got := make(chan delivery, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{b, r.Header.Clone()}
	}))
	defer recv.Close()
	// The Standard Webhooks reference library verifies, as a receiver would.
	verifier, err := standardwebhooks.NewWebhook(string(e.signingSecret("alpha")))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		graph, status, errText string
	}{{"echo", "success", ""}, {"fail", "error", "ValueError: boom"}} {
		waitBody(t, e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": c.graph, "input": map[string]any{"messages": []any{}}, "webhook": recv.URL + "/hook"}))
		var d delivery
		select {
		case d = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no webhook", c.graph)
		}
		if err := verifier.Verify(d.body, d.header); err != nil {
			t.Errorf("%s: the delivery does not verify: %v (%v)", c.graph, err, d.header)
		}
		var body map[string]any
		if err := json.Unmarshal(d.body, &body); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"run_id", "thread_id", "assistant_id", "run_started_at", "run_ended_at", "webhook_sent_at", "values", "kwargs"} {
			if _, ok := body[k]; !ok {
				t.Errorf("%s: webhook body lacks %s: %s", c.graph, k, d.body)
			}
		}
		if body["status"] != c.status || (c.errText != "" && body["error"] != c.errText) {
			t.Errorf("%s: webhook status %v error %v", c.graph, body["status"], body["error"])
		}
	}
	select {
	case d := <-got:
		t.Errorf("a second delivery: %s", d.body)
	case <-time.After(200 * time.Millisecond):
	}
}

func withRuns(f func(*runs.Service)) envOption {
	return func(c *api.Config) { f(c.Runs) }
}

// slowCount starts a long counter run on tid and waits until it is running
// (its first steps are checkpointed).
func (e *env) slowCount(tid string) map[string]any {
	e.t.Helper()
	run := e.must(200, "POST", "/threads/"+tid+"/runs", e.keyA, map[string]any{"assistant_id": "counter",
		"input": map[string]any{"steps": 100000}, "config": map[string]any{"recursion_limit": 200000}, "durability": "sync"})
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := e.must(200, "GET", "/threads/"+tid+"/state", e.keyA, nil)
		if n, _ := st["values"].(map[string]any)["count"].(float64); n >= 3 {
			return run
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the slow run never started: %v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// longRuns lets a test's counter runs go on for long: above the default
// maxima of recursion limit and node executions.
func longRuns(o *assembly.Options) {
	o.Limits.MaxRecursionLimit, o.Limits.MaxNodeExecutions = 1<<30, 1<<30
}

func TestInterruptAndRollbackRunningRuns(t *testing.T) {
	e := newEnvWith(t, longRuns)
	// interrupt: the running run ends interrupted and keeps its steps.
	tid := e.newThread(e.keyA)
	first := e.slowCount(tid)
	got := waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{
		"assistant_id": "counter", "input": map[string]any{"steps": 1}, "multitask_strategy": "interrupt"}))
	if n, _ := got["count"].(float64); n < 4 {
		t.Errorf("second run did not continue from the interrupted one's steps: %v", got)
	}
	if r := e.must(200, "GET", fmt.Sprintf("/threads/%s/runs/%s", tid, first["run_id"]), e.keyA, nil); r["status"] != "interrupted" {
		t.Errorf("interrupted run: %v", r["status"])
	}
	// rollback: the running run and its checkpoints disappear.
	tid = e.newThread(e.keyA)
	first = e.slowCount(tid)
	got = waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{
		"assistant_id": "counter", "input": map[string]any{"steps": 1}, "multitask_strategy": "rollback"}))
	if fmt.Sprint(got) != "map[count:1 steps:1]" {
		t.Errorf("after rollback the state holds more than the new input: %v", got)
	}
	e.must(404, "GET", fmt.Sprintf("/threads/%s/runs/%s", tid, first["run_id"]), e.keyA, nil)
	r := e.do("POST", "/threads/"+tid+"/history", e.keyA, map[string]any{"limit": 1000})
	var hist []any
	json.Unmarshal(r.Body, &hist)
	if len(hist) > 5 {
		t.Errorf("%d checkpoints after rollback: the rolled-back run's remain", len(hist))
	}
}

func TestKeepAliveAndDisconnect(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.KeepAlive = 20 * time.Millisecond })
	r := e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{}}, "after_seconds": 0.3})
	if !strings.HasPrefix(string(r.Body), "\n") {
		t.Errorf("no keep-alive newline before the result: %q", r.Body)
	}
	waitBody(t, r)

	// on_disconnect cancel: the run is interrupted when the waiter leaves.
	// The waiter leaves once its run exists (not after a fixed time, which
	// a loaded machine may spend before the run is created).
	tid := e.newThread(e.keyA)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/threads/"+tid+"/runs/wait",
		strings.NewReader(`{"assistant_id":"echo","input":{"messages":[]},"after_seconds":60,"on_disconnect":"cancel"}`))
	req.Header.Set("X-Api-Key", e.keyA)
	left := make(chan struct{})
	go func() {
		defer close(left)
		if res, err := e.client.Do(req); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}()
	waitForRuns := func(what, status string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			r := e.do("GET", "/threads/"+tid+"/runs", e.keyA, nil)
			if strings.Contains(string(r.Body), `"status":"`+status+`"`) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s", what, r.Body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitForRuns("the waited run was never created", "pending")
	cancel()
	<-left
	waitForRuns("run not cancelled after the client left", "interrupted")
}

func TestRunTimeoutAndDurability(t *testing.T) {
	e := newEnvWith(t, func(o *assembly.Options) { longRuns(o); o.RunTimeout = 200 * time.Millisecond })
	tid := e.newThread(e.keyA)
	got := waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter",
		"input": map[string]any{"steps": 1000000}, "config": map[string]any{"recursion_limit": 2000000}, "durability": "sync"}))
	if got["__error__"].(map[string]any)["error"] != "TimeoutError" {
		t.Errorf("timeout: %v", got)
	}
	if r := e.do("GET", "/threads/"+tid+"/runs", e.keyA, nil); !strings.Contains(string(r.Body), `"status":"timeout"`) {
		t.Errorf("run after timeout: %s", r.Body)
	}
	// The durability modes on a server with the default run timeout: a
	// 200 ms bound would also end these runs on a loaded machine.
	e = newEnv(t)
	for _, d := range []string{"sync", "async", "exit"} {
		tid := e.newThread(e.keyA)
		got := waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 3}, "durability": d}))
		r := e.do("POST", "/threads/"+tid+"/history", e.keyA, map[string]any{"limit": 100})
		var hist []any
		json.Unmarshal(r.Body, &hist)
		want := 5 // input, __start__ applied, three steps
		if d == "exit" {
			want = 1 // the last one, as LangGraph's "exit" (see TestExitDurabilityKeepsOneCheckpoint)
		}
		if fmt.Sprint(got["count"]) != "3" || len(hist) != want {
			t.Errorf("durability %s: output %v, %d checkpoints (want %d)", d, got, len(hist), want)
		}
	}
	// The older spelling: checkpoint_during false is durability exit, accepted.
	waitBody(t, e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{}}, "checkpoint_during": false}))
}

func TestForkFromCheckpointAndCommandForms(t *testing.T) {
	e := newEnv(t)
	tid := e.newThread(e.keyA)
	waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 5}}))
	r := e.do("POST", "/threads/"+tid+"/history", e.keyA, map[string]any{"limit": 100})
	var hist []map[string]any
	json.Unmarshal(r.Body, &hist)
	var at2 string
	for _, h := range hist {
		if fmt.Sprint(h["values"].(map[string]any)["count"]) == "2" {
			at2 = h["checkpoint"].(map[string]any)["checkpoint_id"].(string)
		}
	}
	if at2 == "" {
		t.Fatalf("no checkpoint with count 2 in %s", r.Body)
	}
	// Forking at count 2 with an update to steps runs on from there.
	got := waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter",
		"checkpoint": map[string]any{"checkpoint_id": at2}, "command": map[string]any{"update": [][]any{{"steps", 3}}}}))
	if fmt.Sprint(got) != "map[count:3 steps:3]" {
		t.Errorf("fork from count 2 with steps 3: %v", got)
	}
	// goto as a name and as a list: inc runs even when the count is reached.
	for i, g := range []any{"inc", []any{"inc"}} {
		got := waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter",
			"command": map[string]any{"update": map[string]any{"steps": 100}, "goto": g}, "config": map[string]any{"recursion_limit": 200}}))
		if want := fmt.Sprint(100 + i); fmt.Sprint(got["count"]) != want {
			t.Errorf("goto %v: %v, want count %s", g, got, want)
		}
	}
}

package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/crons"
)

// cronClock is the crons service's time in a test: it moves when told.
type cronClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *cronClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *cronClock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// withCronClock gives the server's crons service clk and hands the service
// to the test, which fires due crons itself (no scheduler loop runs here).
func withCronClock(clk *cronClock, svc **crons.Service) envOption {
	return func(cfg *api.Config) {
		cfg.Crons.Now = clk.now
		*svc = cfg.Crons
	}
}

func TestCronsAPI(t *testing.T) {
	e := newEnv(t)
	tid := e.newThread(e.keyA)
	c := e.must(200, "POST", "/runs/crons", e.keyA, map[string]any{
		"assistant_id": "echo", "schedule": "0 9 * * 1-5", "timezone": "Europe/Paris",
		"end_time": "2099-01-01T00:00:00Z", "metadata": map[string]any{"team": "ops"},
		"input": map[string]any{"messages": []any{}}, "on_run_completed": "keep",
	})
	id, _ := c["cron_id"].(string)
	if c["thread_id"] != nil || c["on_run_completed"] != "keep" || c["timezone"] != "Europe/Paris" || c["enabled"] != true ||
		c["schedule"] != "0 9 * * 1-5" || c["end_time"] != "2099-01-01T00:00:00Z" || c["user_id"] != nil {
		t.Fatalf("created cron = %v", c)
	}
	next, err := time.Parse(time.RFC3339, c["next_run_date"].(string))
	if err != nil || next.Before(time.Now()) || next.Minute() != 0 {
		t.Fatalf("next_run_date %v (%v)", c["next_run_date"], err)
	}
	if p := c["payload"].(map[string]any); p["assistant_id"] != c["assistant_id"] || p["input"] == nil {
		t.Fatalf("payload = %v", p)
	}
	tc := e.must(200, "POST", "/threads/"+tid+"/runs/crons", e.keyA, map[string]any{
		"assistant_id": "echo", "schedule": "*/30 * * * *", "multitask_strategy": "enqueue", "enabled": false,
	})
	if tc["thread_id"] != tid || tc["on_run_completed"] != nil || tc["enabled"] != false {
		t.Fatalf("thread cron = %v", tc)
	}

	if got := e.must(200, "GET", "/runs/crons/"+id, e.keyA, nil); got["cron_id"] != id {
		t.Fatalf("get = %v", got)
	}
	r := e.do("POST", "/runs/crons/search", e.keyA, map[string]any{"limit": 1})
	var page []map[string]any
	if r.Status != 200 || json.Unmarshal(r.Body, &page) != nil || len(page) != 1 || page[0]["cron_id"] != tc["cron_id"] {
		t.Fatalf("search limit 1: %d %s", r.Status, r.Body)
	}
	if r.Header.Get("X-Pagination-Next") != "1" || r.Header.Get("X-Pagination-Total") != "2" {
		t.Fatalf("pagination headers %v", r.Header)
	}
	r = e.do("POST", "/runs/crons/search", e.keyA, map[string]any{"thread_id": tid, "select": []string{"cron_id", "thread_id"}})
	if r.Status != 200 || strings.TrimSpace(string(r.Body)) != `[{"cron_id":"`+tc["cron_id"].(string)+`","thread_id":"`+tid+`"}]` {
		t.Fatalf("search by thread with select: %d %s", r.Status, r.Body)
	}
	for body, want := range map[string]string{`{}`: "2", `{"metadata": {"team": "ops"}}`: "1", `{"thread_id": "` + tid + `"}`: "1"} {
		if r := e.do("POST", "/runs/crons/count", e.keyA, body); r.Status != 200 || strings.TrimSpace(string(r.Body)) != want {
			t.Fatalf("count %s = %d %s, want %s", body, r.Status, r.Body, want)
		}
	}
	if r := e.do("POST", "/runs/crons/count", e.keyB, `{}`); strings.TrimSpace(string(r.Body)) != "0" {
		t.Fatalf("another organization counts %s", r.Body)
	}

	u := e.must(200, "PATCH", "/runs/crons/"+id, e.keyA, map[string]any{"schedule": "15 * * * *", "timezone": nil,
		"end_time": nil, "metadata": map[string]any{"env": "prod"}, "enabled": false})
	if u["schedule"] != "15 * * * *" || u["end_time"] != nil || u["enabled"] != false ||
		u["metadata"].(map[string]any)["team"] != "ops" || u["metadata"].(map[string]any)["env"] != "prod" {
		t.Fatalf("updated = %v", u)
	}
	if !strings.HasSuffix(u["next_run_date"].(string), ":15:00Z") {
		t.Fatalf("next_run_date after a new schedule: %v", u["next_run_date"])
	}

	// Another organization's cron is missing to it.
	for _, req := range [][2]string{{"GET", ""}, {"PATCH", `{"enabled": true}`}, {"DELETE", ""}} {
		var body any
		if req[1] != "" {
			body = req[1]
		}
		if r := e.do(req[0], "/runs/crons/"+id, e.keyB, body); r.Status != 404 {
			t.Fatalf("%s of another organization's cron: %d %s", req[0], r.Status, r.Body)
		}
	}
	e.must(204, "DELETE", "/runs/crons/"+id, e.keyA, nil)
	e.must(404, "GET", "/runs/crons/"+id, e.keyA, nil)
	e.must(404, "DELETE", "/runs/crons/"+id, e.keyA, nil)
}

func TestCronsAPIRefusals(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		method, path, body string
		status             int
		field              string
	}{
		{"POST", "/runs/crons", `{"assistant_id": "echo", "schedule": "every minute"}`, 422, "schedule"},
		{"POST", "/runs/crons", `{"assistant_id": "echo", "schedule": "* * * * *", "timezone": "Moon/Base"}`, 422, "timezone"},
		{"POST", "/runs/crons", `{"assistant_id": "echo", "schedule": "* * * * *", "end_time": "soon"}`, 422, "end_time"},
		{"POST", "/runs/crons", `{"assistant_id": "echo", "schedule": "* * * * *", "on_run_completed": "never"}`, 422, "on_run_completed"},
		{"POST", "/runs/crons", `{"assistant_id": "echo"}`, 422, "schedule"},
		{"POST", "/runs/crons", `{"assistant_id": "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", "schedule": "* * * * *"}`, 404, "Assistant"},
		{"POST", "/threads/9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d/runs/crons", `{"assistant_id": "echo", "schedule": "* * * * *"}`, 404, "Thread"},
		{"POST", "/runs/crons/search", `{"sort_by": "schedule"}`, 422, "sort_by"},
		{"POST", "/runs/crons/search", `{"assistant_id": "echo"}`, 422, "assistant_id"},
		{"POST", "/runs/crons/count", `{"thread_id": "t1"}`, 422, "thread_id"},
		{"GET", "/runs/crons/not-a-uuid", ``, 422, "cron_id"},
		{"PATCH", "/runs/crons/9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", `{}`, 400, "No fields"},
		{"PATCH", "/runs/crons/9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", `{"enabled": true}`, 404, "Cron"},
	}
	for _, tc := range cases {
		var body any
		if tc.body != "" {
			body = tc.body
		}
		r := e.do(tc.method, tc.path, e.keyA, body)
		if r.Status != tc.status || !strings.Contains(r.detail(t), tc.field) {
			t.Errorf("%s %s %s: %d %s, want %d naming %q", tc.method, tc.path, tc.body, r.Status, r.Body, tc.status, tc.field)
		}
	}
	if r := e.do("POST", "/runs/crons/search", e.keyA, `{}`); strings.TrimSpace(string(r.Body)) != "[]" {
		t.Fatalf("refused creates stored crons: %s", r.Body)
	}
}

// TestCronFiringMakesARun: a firing is a normal run, seen through the API:
// its thread (kept) carries the cron's id, and the run ends with the graph's
// output.
func TestCronFiringMakesARun(t *testing.T) {
	clk := &cronClock{t: time.Date(2026, 5, 4, 8, 58, 0, 0, time.UTC)}
	var svc *crons.Service
	e := newEnv(t, withCronClock(clk, &svc))
	c := e.must(200, "POST", "/runs/crons", e.keyA, map[string]any{
		"assistant_id": "echo", "schedule": "0 * * * *", "on_run_completed": "keep",
		"metadata": map[string]any{"job": "hourly"},
		"input":    map[string]any{"messages": []any{map[string]any{"role": "user", "content": "ping"}}},
	})
	if c["next_run_date"] != "2026-05-04T09:00:00Z" {
		t.Fatalf("next_run_date %v", c["next_run_date"])
	}
	clk.set(time.Date(2026, 5, 4, 9, 0, 1, 0, time.UTC))
	fired, err := svc.FireDue(context.Background())
	if err != nil || len(fired) != 1 || fired[0].Err != nil {
		t.Fatalf("FireDue = %+v, %v", fired, err)
	}
	r := e.do("POST", "/threads/search", e.keyA, map[string]any{"metadata": map[string]any{"cron_id": c["cron_id"]}})
	var threads []map[string]any
	if r.Status != 200 || json.Unmarshal(r.Body, &threads) != nil || len(threads) != 1 {
		t.Fatalf("threads of the cron: %d %s", r.Status, r.Body)
	}
	tid := threads[0]["thread_id"].(string)
	out := e.must(200, "GET", "/threads/"+tid+"/runs/"+fired[0].RunID+"/join", e.keyA, nil)
	msgs, _ := out["messages"].([]any)
	if len(msgs) != 2 || !strings.Contains(mustJSON(t, msgs[1]), "echo: ping") {
		t.Fatalf("the cron's run answered %v", out)
	}
	run := e.must(200, "GET", "/threads/"+tid+"/runs/"+fired[0].RunID, e.keyA, nil)
	if meta := run["metadata"].(map[string]any); meta["job"] != "hourly" || meta["cron_id"] != c["cron_id"] || run["status"] != "success" {
		t.Fatalf("run = %v", run)
	}
	got := e.must(200, "GET", "/runs/crons/"+c["cron_id"].(string), e.keyA, nil)
	if got["next_run_date"] != "2026-05-04T10:00:00Z" {
		t.Fatalf("next_run_date after the firing: %v", got["next_run_date"])
	}
	// The same slot is not fired again.
	if again, _ := svc.FireDue(context.Background()); len(again) != 0 {
		t.Fatalf("fired twice: %+v", again)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

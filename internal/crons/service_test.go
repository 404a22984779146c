package crons

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// clock is the injectable time of a test: it moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// queued is a runs.Dispatcher that leaves runs queued: firings are seen in
// the store, not executed.
type queued struct{}

func (queued) Dispatch(context.Context, store.Run) error     { return nil }
func (queued) Lost(context.Context, store.Run) (bool, error) { return false, nil }

const org = "org-crons"

var t0 = time.Date(2026, 3, 2, 10, 2, 0, 0, time.UTC)

type env struct {
	db    *sqlite.DB
	runs  *runs.Service
	svc   *Service
	clock *clock
}

func newEnv(t *testing.T, path string, clk *clock) *env {
	t.Helper()
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := &runs.Service{Store: db, Graphs: graph.NewRegistry(), Dispatcher: queued{}, Now: clk.Now}
	return &env{db: db, runs: r, clock: clk, svc: &Service{Store: db, Runs: r, Now: clk.Now}}
}

func setup(t *testing.T) *env {
	return newEnv(t, filepath.Join(t.TempDir(), "crons.db"), &clock{t: t0})
}

func body[T any](t *testing.T, js string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func wantKind(t *testing.T, err error, kind fail.Kind, field string) {
	t.Helper()
	if fail.KindOf(err) != kind || !strings.Contains(err.Error(), field) {
		t.Fatalf("error = %v, want kind %v naming %q", err, kind, field)
	}
}

func TestCreateRules(t *testing.T) {
	e := setup(t)
	th, err := e.runs.CreateThread(context.Background(), org, runs.ThreadInput{})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.Limits = Limits{MinInterval: 5 * time.Minute}
	cases := []struct {
		name, thread, body string
		kind               fail.Kind
		field              string
	}{
		{"no schedule", "", `{"assistant_id": "echo"}`, fail.KindInvalid, "schedule"},
		{"no assistant", "", `{"schedule": "*/5 * * * *"}`, fail.KindInvalid, "assistant_id"},
		{"bad schedule", "", `{"assistant_id": "echo", "schedule": "every day"}`, fail.KindInvalid, "schedule"},
		{"too often", "", `{"assistant_id": "echo", "schedule": "* * * * *"}`, fail.KindInvalid, "schedule"},
		{"bad zone", "", `{"assistant_id": "echo", "schedule": "*/5 * * * *", "timezone": "Nowhere/City"}`, fail.KindInvalid, "timezone"},
		{"bad end", "", `{"assistant_id": "echo", "schedule": "*/5 * * * *", "end_time": "tomorrow"}`, fail.KindInvalid, "end_time"},
		{"bad on_run_completed", "", `{"assistant_id": "echo", "schedule": "*/5 * * * *", "on_run_completed": "archive"}`, fail.KindInvalid, "on_run_completed"},
		{"bad stream_mode", "", `{"assistant_id": "echo", "schedule": "*/5 * * * *", "stream_mode": "everything"}`, fail.KindInvalid, "stream_mode"},
		{"bad durability", "", `{"assistant_id": "echo", "schedule": "*/5 * * * *", "durability": "forever"}`, fail.KindInvalid, "durability"},
		{"metadata not an object", "", `{"assistant_id": "echo", "schedule": "*/5 * * * *", "metadata": [1]}`, fail.KindInvalid, "metadata"},
		{"webhook without a sender", "", `{"assistant_id": "echo", "schedule": "*/5 * * * *", "webhook": "https://example.com/h"}`, fail.KindInvalid, "webhook"},
		{"bad multitask on a thread", th.ThreadID, `{"assistant_id": "echo", "schedule": "*/5 * * * *", "multitask_strategy": "later"}`, fail.KindInvalid, "multitask_strategy"},
		{"unknown assistant", "", `{"assistant_id": "5b0e8a43-0b5e-4c39-9a6e-6d0c3c1c8a11", "schedule": "*/5 * * * *"}`, fail.KindNotFound, "Assistant"},
		{"unknown thread", "8d1f7f53-3a7b-4d3c-9f3e-2a1b0c9d8e7f", `{"assistant_id": "echo", "schedule": "*/5 * * * *"}`, fail.KindNotFound, "Thread"},
		{"thread not a UUID", "not-a-uuid", `{"assistant_id": "echo", "schedule": "*/5 * * * *"}`, fail.KindInvalid, "thread_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.Create(context.Background(), org, tc.thread, body[CreateRequest](t, tc.body))
			wantKind(t, err, tc.kind, tc.field)
		})
	}
	if n, err := e.db.CountCrons(context.Background(), org, store.CronFilter{}); err != nil || n != 0 {
		t.Fatalf("refused creates stored %d crons (%v)", n, err)
	}
}

func TestCreateAndLimit(t *testing.T) {
	e := setup(t)
	e.svc.Limits.MaxPerOrg = 2
	ctx := context.Background()
	c, err := e.svc.Create(ctx, org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "0 9 * * *",
		"timezone": "America/New_York", "end_time": "2026-12-31T23:00:00+01:00", "metadata": {"team": "ops"},
		"input": {"messages": [{"role": "user", "content": "hi"}]}, "multitask_strategy": "reject"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.ThreadID != nil || *c.OnRunCompleted != "delete" || !c.Enabled || *c.Timezone != "America/New_York" {
		t.Fatalf("cron = %+v", c)
	}
	if *c.NextRunDate != "2026-03-02T14:00:00Z" || *c.EndTime != "2026-12-31T22:00:00Z" {
		t.Fatalf("next_run_date %s, end_time %s", *c.NextRunDate, *c.EndTime)
	}
	if c.AssistantID != runs.DefaultAssistantID("echo") {
		t.Fatalf("assistant_id %s, want the echo graph's assistant", c.AssistantID)
	}
	var payload map[string]any
	_ = json.Unmarshal(c.Payload, &payload)
	if payload["assistant_id"] != c.AssistantID || payload["input"] == nil || payload["multitask_strategy"] != nil {
		t.Fatalf("payload = %v", payload)
	}
	got, err := e.svc.Get(ctx, org, c.CronID)
	if err != nil || got.CronID != c.CronID || string(got.Metadata) != `{"team": "ops"}` {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	_, err = e.svc.Get(ctx, "another-org", c.CronID)
	wantKind(t, err, fail.KindNotFound, "Cron")
	wantKind(t, e.svc.Delete(ctx, "another-org", c.CronID), fail.KindNotFound, "Cron")

	if _, err := e.svc.Create(ctx, org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "@hourly"}`)); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Create(ctx, org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "@hourly"}`))
	wantKind(t, err, fail.KindQuota, "2 crons")
	if err := e.svc.Delete(ctx, org, c.CronID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Create(ctx, org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "@hourly"}`)); err != nil {
		t.Fatalf("create after a delete freed a place: %v", err)
	}
}

// runsOf lists the runs a cron made (their metadata names it).
func runsOf(t *testing.T, e *env, cronID string) []store.Run {
	t.Helper()
	threads, err := e.db.SearchThreads(context.Background(), org, store.ThreadFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Run
	for _, th := range threads {
		list, err := e.db.ListRuns(context.Background(), org, th.ID, "", 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list {
			var meta map[string]any
			_ = json.Unmarshal(r.Metadata, &meta)
			if meta["cron_id"] == cronID {
				out = append(out, r)
			}
		}
	}
	return out
}

func fireAt(t *testing.T, e *env, at time.Time) []Firing {
	t.Helper()
	e.clock.Set(at)
	fired, err := e.svc.FireDue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fired {
		if f.Err != nil {
			t.Fatalf("firing of %s: %v", f.CronID, f.Err)
		}
	}
	return fired
}

func TestFiringMakesRuns(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	c, err := e.svc.Create(ctx, org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *",
		"end_time": "2026-03-02T10:12:00Z", "metadata": {"team": "ops"}, "on_run_completed": "keep",
		"input": {"messages": [{"role": "user", "content": "tick"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := fireAt(t, e, t0.Add(2*time.Minute)); len(got) != 0 {
		t.Fatalf("fired before the slot: %+v", got)
	}
	fired := fireAt(t, e, t0.Add(3*time.Minute)) // 10:05, the slot
	if len(fired) != 1 || fired[0].RunID == "" || !fired[0].Slot.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("firing at the slot = %+v", fired)
	}
	if again := fireAt(t, e, t0.Add(3*time.Minute)); len(again) != 0 {
		t.Fatalf("the same slot fired twice: %+v", again)
	}
	made := runsOf(t, e, c.CronID)
	if len(made) != 1 || made[0].ID != fired[0].RunID {
		t.Fatalf("runs of the cron = %v", made)
	}
	var meta map[string]any
	_ = json.Unmarshal(made[0].Metadata, &meta)
	if meta["team"] != "ops" {
		t.Fatalf("run metadata %v lacks the cron's", meta)
	}
	if made[0].Temporary {
		t.Fatal("on_run_completed keep made a temporary run")
	}
	got, _ := e.svc.Get(ctx, org, c.CronID)
	if *got.NextRunDate != "2026-03-02T10:10:00Z" {
		t.Fatalf("next_run_date after a firing = %s", *got.NextRunDate)
	}
	// Down from 10:06 to 10:11: the missed 10:10 slot fires once, then
	// the end time stops it.
	if fired := fireAt(t, e, t0.Add(9*time.Minute)); len(fired) != 1 {
		t.Fatalf("missed slot fired %d times, want once", len(fired))
	}
	if fired := fireAt(t, e, t0.Add(14*time.Minute)); len(fired) != 0 {
		t.Fatalf("fired past its end time: %+v", fired)
	}
	if n := len(runsOf(t, e, c.CronID)); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
}

func TestMissedSlotsFireOnce(t *testing.T) {
	e := setup(t)
	c, err := e.svc.Create(context.Background(), org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *"}`))
	if err != nil {
		t.Fatal(err)
	}
	// A day with no scheduler: one firing, and the next slot is after now.
	if fired := fireAt(t, e, t0.Add(24*time.Hour)); len(fired) != 1 {
		t.Fatalf("after a day down: %d firings, want 1", len(fired))
	}
	got, _ := e.svc.Get(context.Background(), org, c.CronID)
	if *got.NextRunDate != "2026-03-03T10:05:00Z" {
		t.Fatalf("next_run_date = %s, want the first slot after now", *got.NextRunDate)
	}
}

func TestStatelessDeleteIsTemporary(t *testing.T) {
	e := setup(t)
	c, err := e.svc.Create(context.Background(), org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *"}`))
	if err != nil {
		t.Fatal(err)
	}
	fireAt(t, e, t0.Add(3*time.Minute))
	made := runsOf(t, e, c.CronID)
	if len(made) != 1 || !made[0].Temporary {
		t.Fatalf("on_run_completed delete: runs %+v, want one temporary run", made)
	}
}

func TestThreadCronUsesMultitask(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	th, err := e.runs.CreateThread(ctx, org, runs.ThreadInput{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.svc.Create(ctx, org, th.ThreadID, body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *",
		"multitask_strategy": "reject", "input": {"messages": []}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.ThreadID == nil || *c.ThreadID != th.ThreadID || c.OnRunCompleted != nil {
		t.Fatalf("thread cron = %+v", c)
	}
	first := fireAt(t, e, t0.Add(3*time.Minute))
	if len(first) != 1 || first[0].RunID == "" {
		t.Fatalf("first firing %+v", first)
	}
	// The first run is still pending (nothing executes here): reject
	// refuses the second, as it would any run on a busy thread.
	e.clock.Set(t0.Add(8 * time.Minute))
	second, err := e.svc.FireDue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 1 || second[0].RunID != "" || fail.KindOf(second[0].Err) != fail.KindConflict {
		t.Fatalf("second firing on a busy thread = %+v, want refused by reject", second)
	}
	list, _ := e.db.ListRuns(ctx, org, th.ThreadID, "", 10, 0)
	if len(list) != 1 {
		t.Fatalf("%d runs on the thread, want 1", len(list))
	}
}

// TestRestartAndRacingSchedulers: processes sharing the store (or one
// restarted) never fire one slot twice.
func TestRestartAndRacingSchedulers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	clk := &clock{t: t0}
	a := newEnv(t, path, clk)
	c, err := a.svc.Create(context.Background(), org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *"}`))
	if err != nil {
		t.Fatal(err)
	}
	others := []*env{a, newEnv(t, path, clk), newEnv(t, path, clk), newEnv(t, path, clk)}
	clk.Set(t0.Add(3 * time.Minute))
	var wg sync.WaitGroup
	counts := make([]int, len(others))
	for i, e := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fired, err := e.svc.FireDue(context.Background())
			if err != nil {
				t.Error(err)
			}
			counts[i] = len(fired)
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range counts {
		total += n
	}
	if total != 1 {
		t.Fatalf("racing schedulers fired the slot %d times (%v), want once", total, counts)
	}
	// A restart: a new process on the same file at the same time.
	restarted := newEnv(t, path, clk)
	if fired, _ := restarted.svc.FireDue(context.Background()); len(fired) != 0 {
		t.Fatalf("after a restart the slot fired again: %+v", fired)
	}
	if n := len(runsOf(t, restarted, c.CronID)); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

func TestDisabledCronDoesNotFire(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	c, err := e.svc.Create(ctx, org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *", "enabled": false}`))
	if err != nil {
		t.Fatal(err)
	}
	if fired := fireAt(t, e, t0.Add(time.Hour)); len(fired) != 0 {
		t.Fatalf("a disabled cron fired: %+v", fired)
	}
	if _, err := e.svc.Update(ctx, org, c.CronID, body[UpdateRequest](t, `{"enabled": true}`)); err != nil {
		t.Fatal(err)
	}
	if fired := fireAt(t, e, t0.Add(time.Hour)); len(fired) != 1 {
		t.Fatalf("re-enabled cron: %d firings, want 1", len(fired))
	}
}

func TestUpdate(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	th, _ := e.runs.CreateThread(ctx, org, runs.ThreadInput{})
	c, err := e.svc.Create(ctx, org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *",
		"end_time": "2027-01-01T00:00:00Z", "metadata": {"a": 1, "b": 2}, "input": {"x": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Set(t0.Add(time.Minute))
	u, err := e.svc.Update(ctx, org, c.CronID, body[UpdateRequest](t, `{"schedule": "0 9 * * *", "timezone": "Europe/Paris",
		"end_time": null, "metadata": {"b": 3}, "input": {"y": 2}, "on_run_completed": "keep", "assistant_id": "counter"}`))
	if err != nil {
		t.Fatal(err)
	}
	var meta, payload map[string]any
	_ = json.Unmarshal(u.Metadata, &meta)
	_ = json.Unmarshal(u.Payload, &payload)
	switch {
	case *u.NextRunDate != "2026-03-03T08:00:00Z":
		t.Fatalf("next_run_date %s after a new schedule in Paris", *u.NextRunDate)
	case u.EndTime != nil:
		t.Fatalf("end_time null did not clear it: %s", *u.EndTime)
	case meta["a"] != 1.0 || meta["b"] != 3.0:
		t.Fatalf("metadata not merged: %v", meta)
	case payload["assistant_id"] != c.AssistantID || payload["input"].(map[string]any)["y"] != 2.0:
		t.Fatalf("payload %v", payload)
	case *u.OnRunCompleted != "keep" || u.UpdatedAt == c.UpdatedAt || u.CreatedAt != c.CreatedAt:
		t.Fatalf("update = %+v", u)
	}
	bad := []struct{ body, field string }{
		{`{"schedule": "nope"}`, "schedule"},
		{`{"timezone": "Nowhere/City"}`, "timezone"},
		{`{"end_time": 5}`, "end_time"},
		{`{"stream_mode": "all"}`, "stream_mode"},
		{`{"on_run_completed": "archive"}`, "on_run_completed"},
	}
	for _, tc := range bad {
		_, err := e.svc.Update(ctx, org, c.CronID, body[UpdateRequest](t, tc.body))
		wantKind(t, err, fail.KindInvalid, tc.field)
	}
	_, err = e.svc.Update(ctx, org, c.CronID, body[UpdateRequest](t, `{}`))
	wantKind(t, err, fail.KindBadRequest, "No fields")
	_, err = e.svc.Update(ctx, "another-org", c.CronID, body[UpdateRequest](t, `{"enabled": false}`))
	wantKind(t, err, fail.KindNotFound, "Cron")

	tc, err := e.svc.Create(ctx, org, th.ThreadID, body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Update(ctx, org, tc.CronID, body[UpdateRequest](t, `{"on_run_completed": "keep"}`))
	wantKind(t, err, fail.KindInvalid, "on_run_completed")
}

func TestSearchAndCount(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	th, _ := e.runs.CreateThread(ctx, org, runs.ThreadInput{})
	var ids []string
	for i, js := range []string{
		`{"assistant_id": "echo", "schedule": "@hourly", "metadata": {"k": "a"}}`,
		`{"assistant_id": "counter", "schedule": "@daily", "metadata": {"k": "b"}, "enabled": false}`,
		`{"assistant_id": "echo", "schedule": "@weekly", "metadata": {"k": "a"}}`,
	} {
		e.clock.Set(t0.Add(time.Duration(i) * time.Second))
		thread := ""
		if i == 2 {
			thread = th.ThreadID
		}
		c, err := e.svc.Create(ctx, org, thread, body[CreateRequest](t, js))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.CronID)
	}
	echo := runs.DefaultAssistantID("echo")
	cases := []struct {
		body string
		want []string
		next int
	}{
		{`{}`, []string{ids[2], ids[1], ids[0]}, -1},
		{`{"sort_order": "asc", "limit": 2}`, []string{ids[0], ids[1]}, 2},
		{`{"assistant_id": "` + echo + `"}`, []string{ids[2], ids[0]}, -1},
		{`{"thread_id": "` + th.ThreadID + `"}`, []string{ids[2]}, -1},
		{`{"enabled": false}`, []string{ids[1]}, -1},
		{`{"metadata": {"k": "a"}, "limit": 1, "offset": 1}`, []string{ids[0]}, -1},
		{`{"sort_by": "next_run_date", "sort_order": "asc"}`, []string{ids[0], ids[1], ids[2]}, -1},
	}
	for _, tc := range cases {
		page, err := e.svc.Search(ctx, org, body[SearchRequest](t, tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		var got []string
		for _, c := range page.Crons {
			got = append(got, c.(Cron).CronID)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") || page.NextOffset != tc.next {
			t.Fatalf("search %s = %v next %d, want %v next %d", tc.body, got, page.NextOffset, tc.want, tc.next)
		}
	}
	page, err := e.svc.Search(ctx, org, body[SearchRequest](t, `{"select": ["cron_id", "enabled"], "limit": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(page.Crons[0])
	if string(b) != `{"cron_id":"`+ids[2]+`","enabled":true}` {
		t.Fatalf("select = %s", b)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"sort_by": "schedule"}`, "sort_by"}, {`{"sort_order": "up"}`, "sort_order"}, {`{"limit": 0}`, "limit"},
		{`{"offset": -1}`, "offset"}, {`{"select": ["secret"]}`, "select"}, {`{"assistant_id": "echo"}`, "assistant_id"},
		{`{"thread_id": "x"}`, "thread_id"}, {`{"metadata": [1]}`, "metadata"},
	} {
		_, err := e.svc.Search(ctx, org, body[SearchRequest](t, tc.body))
		wantKind(t, err, fail.KindInvalid, tc.field)
	}
	for js, want := range map[string]int{`{}`: 3, `{"assistant_id": "` + echo + `"}`: 2, `{"metadata": {"k": "b"}}`: 1, `{"thread_id": "` + th.ThreadID + `"}`: 1} {
		n, err := e.svc.Count(ctx, org, body[CountRequest](t, js))
		if err != nil || n != want {
			t.Fatalf("count %s = %d, %v; want %d", js, n, err, want)
		}
	}
	if n, _ := e.svc.Count(ctx, "another-org", CountRequest{}); n != 0 {
		t.Fatalf("another organization counts %d crons", n)
	}
}

// recordingScheduler is a fake of the Scheduler port (the AWS adapter has
// its own tests on the emulator).
type recordingScheduler struct {
	mu      sync.Mutex
	put     map[string]store.Cron
	removed []string
	failPut error
}

func (r *recordingScheduler) Put(_ context.Context, c store.Cron) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failPut != nil {
		return r.failPut
	}
	r.put[c.ID] = c
	return nil
}

func (r *recordingScheduler) Remove(_ context.Context, _, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.put, id)
	r.removed = append(r.removed, id)
	return nil
}

func TestExternalScheduler(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	sch := &recordingScheduler{put: map[string]store.Cron{}}
	e.svc.Scheduler = sch
	c, err := e.svc.Create(ctx, org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sch.put[c.CronID]; !ok {
		t.Fatal("create put no schedule")
	}
	if _, err := e.svc.Update(ctx, org, c.CronID, body[UpdateRequest](t, `{"schedule": "*/10 * * * *"}`)); err != nil {
		t.Fatal(err)
	}
	if sch.put[c.CronID].Schedule != "*/10 * * * *" {
		t.Fatalf("update did not replace the schedule: %+v", sch.put[c.CronID])
	}
	slot := t0.Add(8 * time.Minute) // 10:10
	// An early delivery (a minute before) fires nothing.
	e.clock.Set(slot.Add(-time.Minute))
	if _, fired, err := e.svc.Fire(ctx, org, c.CronID, slot.Add(-time.Minute)); err != nil || fired {
		t.Fatalf("early delivery fired=%v err=%v", fired, err)
	}
	e.clock.Set(slot.Add(200 * time.Millisecond))
	f, fired, err := e.svc.Fire(ctx, org, c.CronID, slot)
	if err != nil || !fired || f.RunID == "" {
		t.Fatalf("delivery at the slot: %+v fired=%v err=%v", f, fired, err)
	}
	if next := sch.put[c.CronID].NextRunDate; !next.Equal(slot.Add(10 * time.Minute)) {
		t.Fatalf("after a firing the schedule is for %v, want the next slot", next)
	}
	// A schedule left behind (its move failed) is written again by the
	// next delivery of the old slot.
	delete(sch.put, c.CronID)
	if _, fired, err := e.svc.Fire(ctx, org, c.CronID, slot); err != nil || fired || sch.put[c.CronID].NextRunDate.IsZero() {
		t.Fatalf("repeat delivery: fired=%v err=%v, schedule %+v", fired, err, sch.put[c.CronID])
	}
	if err := e.svc.Delete(ctx, org, c.CronID); err != nil {
		t.Fatal(err)
	}
	if _, ok := sch.put[c.CronID]; ok {
		t.Fatal("delete left the schedule")
	}
	// A schedule whose cron is gone removes itself.
	sch.removed = nil
	if _, fired, err := e.svc.Fire(ctx, org, c.CronID, slot); err != nil || fired || len(sch.removed) != 1 {
		t.Fatalf("orphan firing: fired=%v err=%v removed=%v", fired, err, sch.removed)
	}
	// A schedule that cannot be made leaves no cron.
	sch.failPut = fail.Unavailable("scheduler", errors.New("down"))
	_, err = e.svc.Create(ctx, org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *"}`))
	if fail.KindOf(err) != fail.KindUnavailable {
		t.Fatalf("create with a failing scheduler: %v", err)
	}
	if n, _ := e.db.CountCrons(ctx, org, store.CronFilter{}); n != 0 {
		t.Fatalf("a failed create left %d crons", n)
	}
}

func TestRunSchedulerTicks(t *testing.T) {
	e := setup(t)
	c, err := e.svc.Create(context.Background(), org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *"}`))
	if err != nil {
		t.Fatal(err)
	}
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.svc.RunScheduler(ctx, ticks); close(done) }()
	e.clock.Set(t0.Add(3 * time.Minute))
	ticks <- time.Time{} // handled before the next send is taken
	ticks <- time.Time{}
	cancel()
	<-done
	if n := len(runsOf(t, e, c.CronID)); n != 1 {
		t.Fatalf("two ticks at one slot made %d runs, want 1", n)
	}
}

// A thread cron whose thread was deleted goes at its next firing (upstream's
// crons go with their thread); one whose assistant is missing stays.
func TestThreadCronGoesWithItsThread(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	th, err := e.runs.CreateThread(ctx, org, runs.ThreadInput{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.svc.Create(ctx, org, th.ThreadID, body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.runs.DeleteThread(ctx, org, th.ThreadID); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(t0.Add(3 * time.Minute))
	fired, err := e.svc.FireDue(ctx)
	if err != nil || len(fired) != 1 || fail.KindOf(fired[0].Err) != fail.KindNotFound {
		t.Fatalf("firing on a deleted thread: %+v, %v", fired, err)
	}
	_, err = e.svc.Get(ctx, org, c.CronID)
	wantKind(t, err, fail.KindNotFound, "Cron")

	// The assistant gone, the thread there: the cron stays.
	th2, err := e.runs.CreateThread(ctx, org, runs.ThreadInput{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.runs.CreateAssistant(ctx, org, body[runs.AssistantInput](t, `{"graph_id": "echo"}`))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := e.svc.Create(ctx, org, th2.ThreadID, body[CreateRequest](t, `{"assistant_id": "`+a.AssistantID+`", "schedule": "*/5 * * * *"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.runs.DeleteAssistant(ctx, org, a.AssistantID); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(t0.Add(8 * time.Minute))
	fired, err = e.svc.FireDue(ctx)
	if err != nil || len(fired) != 1 || fired[0].Err == nil {
		t.Fatalf("firing without its assistant: %+v, %v", fired, err)
	}
	if _, err := e.svc.Get(ctx, org, kept.CronID); err != nil {
		t.Fatalf("a cron whose assistant is gone was deleted: %v", err)
	}
}

// With if_not_exists create, a thread cron's firing makes its thread again.
func TestThreadCronIfNotExistsCreate(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	th, err := e.runs.CreateThread(ctx, org, runs.ThreadInput{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.svc.Create(ctx, org, th.ThreadID, body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "*/5 * * * *", "if_not_exists": "create"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.runs.DeleteThread(ctx, org, th.ThreadID); err != nil {
		t.Fatal(err)
	}
	fired := fireAt(t, e, t0.Add(3*time.Minute))
	if len(fired) != 1 || fired[0].RunID == "" {
		t.Fatalf("firing = %+v", fired)
	}
	if _, err := e.runs.GetThread(ctx, org, th.ThreadID); err != nil {
		t.Fatalf("the thread was not made again: %v", err)
	}
	if _, err := e.svc.Get(ctx, org, c.CronID); err != nil {
		t.Fatalf("the cron went: %v", err)
	}
	// Not a field of a stateless cron: left out of its payload.
	sc, err := e.svc.Create(ctx, org, "", body[CreateRequest](t, `{"assistant_id": "echo", "schedule": "@hourly", "if_not_exists": "create"}`))
	if err != nil || strings.Contains(string(sc.Payload), "if_not_exists") {
		t.Fatalf("stateless cron payload %s, %v", sc.Payload, err)
	}
}

package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestThreadHistoryGet: upstream's GET form of the history reads limit
// (default 1, as upstream's server) and before from the query string and
// answers what the POST form answers; bad values are 422 naming the
// parameter; another organization's thread is 404.
func TestThreadHistoryGet(t *testing.T) {
	e := newEnv(t)
	tid := e.newThread(e.keyA)
	if got := list(t, e.do("GET", "/threads/"+tid+"/history", e.keyA, nil)); len(got) != 0 {
		t.Errorf("history of a thread without checkpoints: %v", got)
	}
	waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{
		"assistant_id": "counter", "input": map[string]any{"steps": 3}}))
	all := list(t, e.do("POST", "/threads/"+tid+"/history", e.keyA, map[string]any{"limit": 100}))
	if len(all) < 3 {
		t.Fatalf("a 3-step run left %d checkpoints", len(all))
	}
	one := list(t, e.do("GET", "/threads/"+tid+"/history", e.keyA, nil))
	if len(one) != 1 || cpID(one[0]) != cpID(all[0]) {
		t.Errorf("GET history without limit: %d states, want the latest only (upstream reads limit 1)", len(one))
	}
	got := list(t, e.do("GET", "/threads/"+tid+"/history?limit=100", e.keyA, nil))
	if len(got) != len(all) {
		t.Fatalf("GET history limit=100: %d states, POST %d", len(got), len(all))
	}
	for i := range all {
		a, _ := json.Marshal(all[i])
		g, _ := json.Marshal(got[i])
		if string(a) != string(g) {
			t.Errorf("state %d differs between GET and POST:\n GET %s\nPOST %s", i, g, a)
		}
	}
	before := list(t, e.do("GET", "/threads/"+tid+"/history?limit=2&before="+cpID(all[0]), e.keyA, nil))
	if len(before) != 2 || cpID(before[0]) != cpID(all[1]) || cpID(before[1]) != cpID(all[2]) {
		t.Errorf("GET history before the latest: %v", before)
	}
	for q, field := range map[string]string{"limit=0": "limit", "limit=x": "limit", "limit=1001": "limit", "before=nope": "before", "before=": "before"} {
		if r := e.do("GET", "/threads/"+tid+"/history?"+q, e.keyA, nil); r.Status != 422 || !strings.Contains(r.detail(t), field) {
			t.Errorf("GET history?%s: %d %s, want 422 naming %s", q, r.Status, r.Body, field)
		}
	}
	if r := e.do("GET", "/threads/"+tid+"/history", e.keyB, nil); r.Status != 404 {
		t.Errorf("another organization's thread: %d", r.Status)
	}
	if r := e.do("GET", "/threads/not-a-uuid/history", e.keyA, nil); r.Status != 422 {
		t.Errorf("a thread id that is no UUID: %d", r.Status)
	}
}

// TestThreadStorage: the bytes of a thread's checkpoints in upstream's
// shape, growing with the thread's runs; the sections add up; another
// organization's thread is 404.
func TestThreadStorage(t *testing.T) {
	e := newEnv(t)
	tid := e.newThread(e.keyA)
	empty := e.must(200, "GET", "/threads/"+tid+"/storage", e.keyA, nil)
	if fmt.Sprint(empty) != fmt.Sprintf("map[channel_values:map[by_channel:map[] bytes:0 count:0] checkpoints:map[bytes:0 count:0] pending_writes:map[bytes:0 count:0] thread_id:%s total_bytes:0]", tid) {
		t.Errorf("storage of a thread without checkpoints: %v", empty)
	}
	waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{
		"assistant_id": "counter", "input": map[string]any{"steps": 2}}))
	hist := list(t, e.do("POST", "/threads/"+tid+"/history", e.keyA, map[string]any{"limit": 100}))
	st := e.must(200, "GET", "/threads/"+tid+"/storage", e.keyA, nil)
	cps := st["checkpoints"].(map[string]any)
	if cps["count"] != float64(len(hist)) {
		t.Errorf("storage counts %v checkpoints, history has %d", cps["count"], len(hist))
	}
	total := st["total_bytes"].(float64)
	sum := cps["bytes"].(float64) + st["channel_values"].(map[string]any)["bytes"].(float64) + st["pending_writes"].(map[string]any)["bytes"].(float64)
	if total <= 0 || total != sum {
		t.Errorf("total_bytes %v, sections add to %v", total, sum)
	}
	waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{
		"assistant_id": "counter", "input": map[string]any{"steps": 4}}))
	grown := e.must(200, "GET", "/threads/"+tid+"/storage", e.keyA, nil)
	if grown["total_bytes"].(float64) <= total || grown["checkpoints"].(map[string]any)["count"].(float64) <= cps["count"].(float64) {
		t.Errorf("storage after a second run: %v, was %v", grown, st)
	}
	if r := e.do("GET", "/threads/"+tid+"/storage", e.keyB, nil); r.Status != 404 {
		t.Errorf("another organization's thread: %d", r.Status)
	}
	if r := e.do("GET", "/threads/not-a-uuid/storage", e.keyA, nil); r.Status != 422 {
		t.Errorf("a thread id that is no UUID: %d", r.Status)
	}
}

// TestMetrics: /metrics needs a key and answers the caller organization's
// run queue and requests only, in Prometheus' text format or JSON.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	if r := e.do("GET", "/metrics", "", nil); r.Status != 401 {
		t.Errorf("without a key: %d, want 401", r.Status)
	}
	tid := e.newThread(e.keyA)
	e.must(200, "GET", "/threads/"+tid, e.keyA, nil)
	e.must(200, "GET", "/threads/"+tid, e.keyA, nil)
	e.do("GET", "/threads/"+tid, e.keyB, nil) // B's 404, not A's
	bTid := e.newThread(e.keyB)

	js := e.must(200, "GET", "/metrics?format=json", e.keyA, nil)
	q := js["queue"].(map[string]any)
	if q["n_pending"] != float64(0) || q["n_running"] != float64(0) || q["pending_runs_wait_time_max_secs"] != nil {
		t.Errorf("an idle organization's queue: %v", q)
	}
	reqs := js["api"].(map[string]any)["http_requests_total"].([]any)
	found := false
	for _, x := range reqs {
		m := x.(map[string]any)
		if strings.Contains(m["path"].(string), tid) || strings.Contains(m["path"].(string), bTid) {
			t.Errorf("a series names a thread id (want the path template): %v", m)
		}
		if m["method"] == "GET" && m["path"] == "/threads/{thread_id}" {
			if m["status"] == float64(404) {
				t.Errorf("organization A sees B's request: %v", m)
			}
			if m["status"] == float64(200) {
				found = m["count"] == float64(2)
			}
		}
		if m["path"] == "/metrics" {
			t.Errorf("/metrics counts itself (upstream leaves it out): %v", m)
		}
	}
	if !found {
		t.Errorf("A's two GET /threads/{thread_id} are not counted as 2: %v", reqs)
	}

	r := e.do("GET", "/metrics", e.keyA, nil)
	text := string(r.Body)
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("prometheus format: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		"# TYPE lg_api_num_pending_runs gauge\nlg_api_num_pending_runs 0\n",
		"lg_api_num_running_runs 0\n",
		`lg_api_http_requests_total{method="GET",path="/threads/{thread_id}",status="200"} 2`,
		`lg_api_http_requests_latency_seconds_bucket{method="GET",path="/threads/{thread_id}",le="+Inf"} 2`,
		`lg_api_http_requests_latency_seconds_count{method="GET",path="/threads/{thread_id}"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("prometheus text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, `status="404"`) {
		t.Errorf("A's metrics show B's 404:\n%s", text)
	}
	// A run waiting (after_seconds) is A's pending run, unblocked (its
	// thread runs nothing), with its wait; B's queue stays empty.
	e.must(200, "POST", "/threads/"+tid+"/runs", e.keyA, map[string]any{"assistant_id": "echo", "input": map[string]any{}, "after_seconds": 3600})
	q = e.must(200, "GET", "/metrics?format=json", e.keyA, nil)["queue"].(map[string]any)
	if q["n_pending"] != float64(1) || q["n_running"] != float64(0) {
		t.Errorf("A's queue with a scheduled run: %v", q)
	}
	for _, k := range []string{"pending_runs_wait_time_max_secs", "pending_runs_wait_time_med_secs", "pending_unblocked_runs_wait_time_max_secs"} {
		if w, ok := q[k].(float64); !ok || w < 0 {
			t.Errorf("%s = %v, want the run's wait in seconds", k, q[k])
		}
	}
	if qb := e.must(200, "GET", "/metrics?format=json", e.keyB, nil)["queue"].(map[string]any); qb["n_pending"] != float64(0) {
		t.Errorf("B sees A's pending run: %v", qb)
	}
	if text := string(e.do("GET", "/metrics", e.keyA, nil).Body); !strings.Contains(text, "lg_api_num_pending_runs 1\n") ||
		!strings.Contains(text, "# TYPE lg_api_pending_runs_wait_time_max gauge\n") {
		t.Errorf("prometheus text with a pending run:\n%s", text)
	}
	// An unknown format is read as prometheus, as upstream does.
	if r := e.do("GET", "/metrics?format=xml", e.keyA, nil); r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("format=xml: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
}

// TestUIComponent: POST /ui/{graph_id} (the JS SDK's
// client["~ui"].getComponent) answers as upstream does for a graph without
// a generative UI bundle, which every stepgraph graph is: 404 naming it;
// behind the API key.
func TestUIComponent(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/ui/echo", e.keyA, map[string]any{"name": "weather"}, "Accept", "text/html")
	if r.Status != 404 || !strings.Contains(r.detail(t), `UI not found for graph "echo"`) {
		t.Errorf("POST /ui/echo: %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/ui/echo", "", map[string]any{"name": "weather"}); r.Status != 401 {
		t.Errorf("without a key: %d", r.Status)
	}
	if r := e.do("POST", "/ui/echo", e.keyA, `["not an object"]`); r.Status != 422 {
		t.Errorf("a body that is no object: %d %s", r.Status, r.Body)
	}
}

package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// list decodes a JSON array answer.
func list(t *testing.T, r response) []map[string]any {
	t.Helper()
	var out []map[string]any
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("not a JSON array (%d): %s", r.Status, r.Body)
	}
	return out
}

func cpID(st map[string]any) string {
	cp, _ := st["checkpoint"].(map[string]any)
	id, _ := cp["checkpoint_id"].(string)
	return id
}

// TestUpdateStateForkAndPatch: a run stamps its thread; update_state writes
// through the reducers as the node, with source "update"; forking from an
// older checkpoint continues from there; patch_state adds checkpoint
// metadata that history can filter by; the rules answer 400/409/422.
func TestUpdateStateForkAndPatch(t *testing.T) {
	e := newEnv(t)
	tid := e.newThread(e.keyA)
	empty := e.must(200, "GET", "/threads/"+tid+"/state", e.keyA, nil)
	if empty["checkpoint"] != nil || empty["checkpoint_id"] != nil || empty["metadata"] != nil || empty["created_at"] != nil {
		t.Errorf("state of a thread without checkpoints: %v", empty)
	}
	if r := e.do("POST", "/threads/"+tid+"/state", e.keyA, map[string]any{"values": map[string]any{"count": 1}}); r.Status != 400 || !strings.Contains(r.detail(t), "no assigned graph ID") {
		t.Errorf("update_state without a graph: %d %s", r.Status, r.Body)
	}
	waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{
		"assistant_id": "counter", "input": map[string]any{"steps": 2}, "metadata": map[string]any{"who": "run"}}))
	th := e.must(200, "GET", "/threads/"+tid, e.keyA, nil)
	meta := th["metadata"].(map[string]any)
	if meta["graph_id"] != "counter" || meta["assistant_id"] == nil || meta["who"] != nil {
		t.Errorf("thread metadata after a run: %v (want graph_id and assistant_id stamped, not the run's metadata)", meta)
	}
	latest := e.must(200, "GET", "/threads/"+tid+"/state", e.keyA, nil)

	up := e.must(200, "POST", "/threads/"+tid+"/state", e.keyA, map[string]any{"values": map[string]any{"count": 10}, "as_node": "inc"})
	newID := up["checkpoint"].(map[string]any)["checkpoint_id"]
	if up["checkpoint_id"] != newID || up["checkpoint"].(map[string]any)["thread_id"] != tid {
		t.Errorf("update answer %v", up)
	}
	st := e.must(200, "GET", "/threads/"+tid+"/state", e.keyA, nil)
	if cpID(st) != newID || fmt.Sprint(st["values"]) != "map[count:12 steps:2]" || st["metadata"].(map[string]any)["source"] != "update" ||
		st["parent_checkpoint"].(map[string]any)["checkpoint_id"] != cpID(latest) || fmt.Sprint(st["next"]) != "[]" {
		t.Errorf("state after update_state as inc (count is an add reducer, inc's route ends at 12 >= 2): %v", st)
	}

	// Fork from the first checkpoint of the run (its input): the new
	// checkpoint's parent is that one.
	hist := list(t, e.do("POST", "/threads/"+tid+"/history", e.keyA, map[string]any{"limit": 100}))
	first := hist[len(hist)-1]
	fork := e.must(200, "POST", "/threads/"+tid+"/state", e.keyA, map[string]any{
		"values": map[string]any{"steps": 5}, "as_node": "__start__", "checkpoint": map[string]any{"checkpoint_id": cpID(first)}})
	forked := e.must(200, "GET", "/threads/"+tid+"/state/"+fork["checkpoint_id"].(string), e.keyA, nil)
	if forked["parent_checkpoint"].(map[string]any)["checkpoint_id"] != cpID(first) || fmt.Sprint(forked["next"]) != "[inc]" {
		t.Errorf("forked state %v", forked)
	}

	// The POST form of state at a checkpoint, with the JS shape of before.
	at := e.must(200, "POST", "/threads/"+tid+"/state/checkpoint", e.keyA, map[string]any{"checkpoint": map[string]any{"checkpoint_id": cpID(first)}})
	if cpID(at) != cpID(first) {
		t.Errorf("state/checkpoint answered %s, want %s", cpID(at), cpID(first))
	}
	older := list(t, e.do("POST", "/threads/"+tid+"/history", e.keyA, map[string]any{"limit": 1,
		"before": map[string]any{"configurable": map[string]any{"checkpoint_id": newID}}}))
	if len(older) != 1 || cpID(older[0]) != cpID(latest) {
		t.Errorf("history before (JS config shape) %v", older)
	}

	// patch_state: metadata on the latest checkpoint, then filtered history.
	if r := e.do("PATCH", "/threads/"+tid+"/state", e.keyA, map[string]any{"metadata": map[string]any{"label": "good", "source": "mine"}}); r.Status != 204 {
		t.Fatalf("patch state: %d %s", r.Status, r.Body)
	}
	patched := e.must(200, "GET", "/threads/"+tid+"/state", e.keyA, nil)
	if m := patched["metadata"].(map[string]any); m["label"] != "good" || m["source"] != "update" {
		t.Errorf("patched metadata %v (label added, source kept the engine's)", m)
	}
	labelled := list(t, e.do("POST", "/threads/"+tid+"/history", e.keyA, map[string]any{"metadata": map[string]any{"label": "good"}}))
	if len(labelled) != 1 || cpID(labelled[0]) != fork["checkpoint_id"] {
		t.Errorf("history filtered by metadata: %d states", len(labelled))
	}
	updates := list(t, e.do("POST", "/threads/"+tid+"/history", e.keyA, map[string]any{"metadata": map[string]any{"source": "update"}, "limit": 100}))
	if len(updates) != 2 {
		t.Errorf("history of source update: %d states, want 2", len(updates))
	}

	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		detail       string
	}{
		{"POST", "/threads/" + tid + "/state", map[string]any{"values": 3}, 422, "values"},
		{"POST", "/threads/" + tid + "/state", map[string]any{"values": map[string]any{"count": 1}, "as_node": "nope"}, 422, "as_node"},
		{"POST", "/threads/" + tid + "/state", map[string]any{"values": map[string]any{"count": "x"}, "as_node": "inc"}, 422, "values"},
		{"POST", "/threads/" + tid + "/state", map[string]any{"checkpoint_id": "not-a-uuid"}, 422, "checkpoint_id"},
		{"POST", "/threads/" + tid + "/state", map[string]any{"checkpoint": map[string]any{"checkpoint_id": "00000000-0000-7000-8000-000000000000"}}, 404, "checkpoint"},
		{"PATCH", "/threads/" + tid + "/state", map[string]any{}, 422, "metadata"},
		{"POST", "/threads/" + tid + "/history", map[string]any{"before": map[string]any{"x": 1}}, 422, "before"},
		{"POST", "/threads/" + tid + "/state/checkpoint", map[string]any{}, 422, "checkpoint"},
	} {
		r := e.do(tc.method, tc.path, e.keyA, tc.body)
		if r.Status != tc.status || !strings.Contains(r.detail(t), tc.detail) {
			t.Errorf("%s %s %v: %d %s, want %d naming %s", tc.method, tc.path, tc.body, r.Status, r.Body, tc.status, tc.detail)
		}
	}
	// Another organization's thread is missing.
	for _, op := range [][2]string{{"POST", "/state"}, {"PATCH", "/state"}, {"POST", "/copy"}, {"POST", "/state/checkpoint"}} {
		body := map[string]any{"metadata": map[string]any{"a": 1}, "checkpoint": map[string]any{}}
		if r := e.do(op[0], "/threads/"+tid+op[1], e.keyB, body); r.Status != 404 {
			t.Errorf("%s %s of another organization's thread: %d %s", op[0], op[1], r.Status, r.Body)
		}
	}
}

// TestCountCopyPruneSelectSupersteps covers the thread collection's
// operations.
func TestCountCopyPruneSelectSupersteps(t *testing.T) {
	e := newEnv(t)
	mk := func(meta map[string]any) string {
		return e.must(200, "POST", "/threads", e.keyA, map[string]any{"metadata": meta})["thread_id"].(string)
	}
	a := mk(map[string]any{"team": "red"})
	mk(map[string]any{"team": "red"})
	mk(map[string]any{"team": "blue"})
	count := func(key string, body any) string {
		return strings.TrimSpace(string(e.do("POST", "/threads/count", key, body).Body))
	}
	if got := count(e.keyA, map[string]any{}); got != "3" {
		t.Errorf("count all: %s", got)
	}
	if got := count(e.keyA, map[string]any{"metadata": map[string]any{"team": "red"}, "status": "idle"}); got != "2" {
		t.Errorf("count red: %s", got)
	}
	if got := count(e.keyB, map[string]any{}); got != "0" {
		t.Errorf("count in another organization: %s", got)
	}
	if r := e.do("POST", "/threads/count", e.keyA, map[string]any{"status": "sleeping"}); r.Status != 422 || !strings.Contains(r.detail(t), "status") {
		t.Errorf("count with a bad status: %d %s", r.Status, r.Body)
	}

	sel := list(t, e.do("POST", "/threads/search", e.keyA, map[string]any{"select": []string{"thread_id", "metadata"}, "limit": 1}))
	if len(sel) != 1 || len(sel[0]) != 2 || sel[0]["thread_id"] == nil || sel[0]["metadata"] == nil {
		t.Errorf("search with select: %v", sel)
	}
	if r := e.do("POST", "/threads/search", e.keyA, map[string]any{"select": []string{"thread_id", "secret"}}); r.Status != 422 || !strings.Contains(r.detail(t), "select") {
		t.Errorf("select of an unknown field: %d %s", r.Status, r.Body)
	}

	// Supersteps: the new thread starts with the updates' state and history.
	ss := e.must(200, "POST", "/threads", e.keyA, map[string]any{"metadata": map[string]any{"graph_id": "counter"},
		"supersteps": []any{
			map[string]any{"updates": []any{map[string]any{"values": map[string]any{"steps": 3}, "as_node": "__start__"}}},
			map[string]any{"updates": []any{map[string]any{"command": map[string]any{"update": map[string]any{"count": 2}}, "as_node": "inc"}}},
		}})
	sid := ss["thread_id"].(string)
	if fmt.Sprint(ss["values"]) != "map[count:2 steps:3]" {
		t.Errorf("thread made with supersteps: values %v", ss["values"])
	}
	if h := list(t, e.do("POST", "/threads/"+sid+"/history", e.keyA, map[string]any{})); len(h) != 2 || fmt.Sprint(h[0]["next"]) != "[inc]" {
		t.Errorf("history of supersteps: %v", h)
	}
	// Continuing it runs from that state: one more increment to 3.
	out := waitBody(t, e.do("POST", "/threads/"+sid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter", "input": nil}))
	if fmt.Sprint(out["count"]) != "3" {
		t.Errorf("run after supersteps: %v", out)
	}
	for _, body := range []map[string]any{
		{"supersteps": []any{map[string]any{"updates": []any{map[string]any{"values": map[string]any{"count": 1}}}}}},
		{"metadata": map[string]any{"graph_id": "nope"}, "supersteps": []any{map[string]any{"updates": []any{}}}},
		{"metadata": map[string]any{"graph_id": "counter"}, "supersteps": []any{map[string]any{"updates": []any{map[string]any{"values": map[string]any{"count": 1}, "as_node": "ghost"}}}}},
	} {
		if r := e.do("POST", "/threads", e.keyA, body); r.Status != 422 {
			t.Errorf("supersteps %v: %d %s, want 422", body, r.Status, r.Body)
		}
	}
	if got := count(e.keyA, map[string]any{}); got != "4" {
		t.Errorf("refused supersteps left threads behind: %s threads, want 4", got)
	}

	// Copy: same state and history, a new id, none of the runs.
	cp := e.must(200, "POST", "/threads/"+sid+"/copy", e.keyA, nil)
	cid := cp["thread_id"].(string)
	if cid == sid || fmt.Sprint(cp["values"]) != "map[count:3 steps:3]" || cp["metadata"].(map[string]any)["graph_id"] != "counter" {
		t.Errorf("copy %v", cp)
	}
	orig := list(t, e.do("POST", "/threads/"+sid+"/history", e.keyA, map[string]any{"limit": 100}))
	copied := list(t, e.do("POST", "/threads/"+cid+"/history", e.keyA, map[string]any{"limit": 100}))
	if len(copied) != len(orig) || cpID(copied[0]) != cpID(orig[0]) || copied[0]["checkpoint"].(map[string]any)["thread_id"] != cid {
		t.Errorf("copied history: %d states (want %d) %v", len(copied), len(orig), copied[0]["checkpoint"])
	}
	if runs := list(t, e.do("GET", "/threads/"+cid+"/runs", e.keyA, nil)); len(runs) != 0 {
		t.Errorf("a copy has %d runs, want none", len(runs))
	}

	// Prune: keep_latest keeps one checkpoint; delete removes; others'
	// and missing threads are not counted.
	pr := e.must(200, "POST", "/threads/prune", e.keyA, map[string]any{"thread_ids": []string{cid}, "strategy": "keep_latest"})
	if pr["pruned_count"] != 1.0 {
		t.Errorf("prune keep_latest: %v", pr)
	}
	if h := list(t, e.do("POST", "/threads/"+cid+"/history", e.keyA, map[string]any{"limit": 100})); len(h) != 1 || cpID(h[0]) != cpID(orig[0]) {
		t.Errorf("after keep_latest: %d states", len(h))
	}
	pr = e.must(200, "POST", "/threads/prune", e.keyB, map[string]any{"thread_ids": []string{a}})
	if pr["pruned_count"] != 0.0 {
		t.Errorf("prune of another organization's thread: %v", pr)
	}
	pr = e.must(200, "POST", "/threads/prune", e.keyA, map[string]any{"thread_ids": []string{a, cid, "00000000-0000-4000-8000-000000000000"}})
	if pr["pruned_count"] != 2.0 {
		t.Errorf("prune delete: %v", pr)
	}
	if r := e.do("GET", "/threads/"+a, e.keyA, nil); r.Status != 404 {
		t.Errorf("pruned thread: %d", r.Status)
	}
	for _, body := range []any{map[string]any{}, map[string]any{"thread_ids": []string{"x"}}, map[string]any{"thread_ids": []string{}, "strategy": "all"}} {
		if r := e.do("POST", "/threads/prune", e.keyA, body); r.Status != 422 {
			t.Errorf("prune %v: %d %s", body, r.Status, r.Body)
		}
	}
}

// TestThreadStateUpdatedAtAndSort: state_updated_at moves with the thread's
// state (a run's end, a state update), not with its metadata; threads/search
// sorts by it and by the other keys, both ways, and refuses unknown ones; a
// run gives its thread upstream's config (its config less configurable, the
// thread's configurable kept).
func TestThreadStateUpdatedAtAndSort(t *testing.T) {
	e := newEnv(t)
	mk := func() map[string]any {
		return e.must(200, "POST", "/threads", e.keyA, map[string]any{"metadata": map[string]any{"graph_id": "counter"}})
	}
	a, b, c := mk(), mk(), mk()
	for _, th := range []map[string]any{a, b, c} {
		if th["state_updated_at"] == nil || th["state_updated_at"] != th["created_at"] {
			t.Errorf("new thread: state_updated_at %v, created_at %v", th["state_updated_at"], th["created_at"])
		}
	}
	id := func(th map[string]any) string { return th["thread_id"].(string) }
	waitBody(t, e.do("POST", "/threads/"+id(a)+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter",
		"input": map[string]any{"steps": 1}, "config": map[string]any{"recursion_limit": 7, "configurable": map[string]any{"x": 1}}}))
	patched := e.must(200, "PATCH", "/threads/"+id(b), e.keyA, map[string]any{"metadata": map[string]any{"k": 1}})
	if patched["state_updated_at"] != b["state_updated_at"] {
		t.Errorf("a metadata patch moved state_updated_at: %v, was %v", patched["state_updated_at"], b["state_updated_at"])
	}
	ran := e.must(200, "GET", "/threads/"+id(a), e.keyA, nil)
	if ran["state_updated_at"] == a["state_updated_at"] || ran["state_updated_at"] != ran["updated_at"] {
		t.Errorf("after a run: state_updated_at %v (was %v), updated_at %v", ran["state_updated_at"], a["state_updated_at"], ran["updated_at"])
	}
	if got := fmt.Sprint(ran["config"]); got != "map[configurable:map[] recursion_limit:7]" {
		t.Errorf("thread config after a run: %s, want the run's config less its configurable", got)
	}
	if got := fmt.Sprint(e.must(200, "GET", "/threads/"+id(b), e.keyA, nil)["config"]); got != "map[]" {
		t.Errorf("config of a thread without runs: %s", got)
	}

	order := func(body map[string]any) string {
		t.Helper()
		r := e.do("POST", "/threads/search", e.keyA, body)
		var names []string
		for _, th := range list(t, r) {
			names = append(names, map[string]string{id(a): "a", id(b): "b", id(c): "c"}[th["thread_id"].(string)])
		}
		return strings.Join(names, "")
	}
	// States: a (its run) after c after b; updates: b (its patch) after a after c.
	for _, tc := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{}, "cba"},
		{map[string]any{"sort_by": "state_updated_at"}, "acb"},
		{map[string]any{"sort_by": "state_updated_at", "sort_order": "asc"}, "bca"},
		{map[string]any{"sort_by": "updated_at", "sort_order": "desc"}, "bac"},
		{map[string]any{"sort_by": "created_at", "sort_order": "asc"}, "abc"},
		{map[string]any{"sort_by": "state_updated_at", "limit": 1, "offset": 1}, "c"},
	} {
		if got := order(tc.body); got != tc.want {
			t.Errorf("search %v: %s, want %s", tc.body, got, tc.want)
		}
	}
	e.must(200, "POST", "/threads/"+id(c)+"/state", e.keyA, map[string]any{"values": map[string]any{"count": 5},
		"as_node": "inc"})
	if got := order(map[string]any{"sort_by": "state_updated_at"}); got != "cab" {
		t.Errorf("after a state update of c: %s, want cab", got)
	}
	sel := list(t, e.do("POST", "/threads/search", e.keyA, map[string]any{"select": []string{"state_updated_at"}, "limit": 1}))
	if len(sel) != 1 || len(sel[0]) != 1 || sel[0]["state_updated_at"] == nil {
		t.Errorf("select state_updated_at: %v", sel)
	}
	for _, body := range []map[string]any{{"sort_by": "values"}, {"sort_order": "up"}} {
		if r := e.do("POST", "/threads/search", e.keyA, body); r.Status != 422 {
			t.Errorf("search %v: %d %s, want 422", body, r.Status, r.Body)
		}
	}
}

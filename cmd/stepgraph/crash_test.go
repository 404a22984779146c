package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestKillDuringRunsLosesNothing kills the server (SIGKILL) while runs are
// in flight, several times, restarts it, and checks that every acknowledged run ends
// exactly once, with the right output, and that no super-step was executed
// twice past its checkpoint.
func TestKillDuringRunsLosesNothing(t *testing.T) {
	const kills, runs, steps = 3, 8, 150
	dir := t.TempDir()
	s := startNew(t, dir, "-run-lease", "1s")
	key := s.FirstKey()
	type acked struct{ thread, run string }
	var all []acked
	// Kill cycles: each acknowledges a batch of runs, waits for progress,
	// then kills the server mid-flight and starts it again. Earlier cycles'
	// unfinished runs resume while the next batch is created.
	for cycle := range kills {
		var batch []acked
		for i := range runs {
			body := fmt.Sprintf(`{"assistant_id":"counter","input":{"steps":%d},"config":{"recursion_limit":200},"durability":"sync","if_not_exists":"create"}`, steps)
			thread := fmt.Sprintf("00000000-0000-4000-8%03d-%012d", cycle, i)
			code, out := s.call("POST", "/threads/"+thread+"/runs", key, body)
			if code != 200 {
				t.Fatalf("create run: %d %s", code, out)
			}
			var r struct {
				RunID string `json:"run_id"`
			}
			json.Unmarshal([]byte(out), &r)
			batch = append(batch, acked{thread, r.RunID})
		}
		all = append(all, batch...)
		// Kill once a run of this batch made progress.
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, out := s.call("GET", "/threads/"+batch[0].thread+"/state", key, "")
			if strings.Contains(out, `"count":`) || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		unfinished := 0
		for _, a := range batch {
			_, out := s.call("GET", "/threads/"+a.thread+"/runs/"+a.run, key, "")
			if !strings.Contains(out, `"status":"success"`) {
				unfinished++
			}
		}
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
		if unfinished == 0 {
			t.Fatalf("cycle %d: every run had finished before the kill: the test proves nothing (raise steps)", cycle)
		}
		t.Logf("cycle %d: killed with %d of %d new runs unfinished", cycle, unfinished, runs)
		if cycle < kills-1 {
			s = startServer(t, dir, "-run-lease", "1s")
		}
	}

	again := startServer(t, dir, "-run-lease", "1s")
	for _, a := range all {
		code, out := again.call("GET", "/threads/"+a.thread+"/runs/"+a.run+"/join", key, "")
		var result map[string]any
		if code != 200 || json.Unmarshal([]byte(strings.TrimSpace(out)), &result) != nil {
			t.Fatalf("join %s: %d %s", a.run, code, out)
		}
		if fmt.Sprint(result["count"]) != fmt.Sprint(steps) {
			t.Errorf("run %s output %v, want count %d", a.run, result, steps)
		}
		code, out = again.call("GET", "/threads/"+a.thread+"/runs", key, "")
		if code != 200 || strings.Count(out, `"run_id"`) != 1 || !strings.Contains(out, `"status":"success"`) {
			t.Errorf("thread %s runs after restart: %d %s", a.thread, code, out)
		}
		code, out = again.call("POST", "/threads/"+a.thread+"/history", key, `{"limit":1000}`)
		var hist []struct {
			Metadata struct{ Step int } `json:"metadata"`
		}
		if code != 200 || json.Unmarshal([]byte(out), &hist) != nil {
			t.Fatalf("history: %d %s", code, out)
		}
		seen := map[int]bool{}
		for _, h := range hist {
			if seen[h.Metadata.Step] {
				t.Errorf("thread %s has two checkpoints for step %d: a step ran twice", a.thread, h.Metadata.Step)
			}
			seen[h.Metadata.Step] = true
		}
		if len(hist) != steps+2 { // input, one per increment, and the start step
			t.Errorf("thread %s: %d checkpoints, want %d", a.thread, len(hist), steps+2)
		}
	}
	if err := again.Stop(); err != nil {
		t.Errorf("restarted server did not stop cleanly (%v):\n%s", err, again.Logs())
	}
	// The database survived the kill intact.
	out, err := exec.Command(binary, "db", "check", "-data", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Errorf("integrity check after SIGKILL: %v %s", err, out)
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/runs"
)

// The limit flags: defaults, environment defaults, and a clear error
// naming the flag for every bad value.
func TestLimitFlags(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want func(limitsConfig) bool
		err  string
	}{
		{name: "defaults", want: func(c limitsConfig) bool {
			return c.Limits == runs.Limits{MaxRecursionLimit: 10000, MaxStateBytes: 16 << 20, MaxNodeExecutions: 25000,
				MaxSubgraphDepth: 8, MaxAttempts: 10, MaxMetadataBytes: 64 << 10} && c.RunTimeout == time.Hour
		}},
		{name: "flags", args: []string{"-max-recursion-limit", "50", "-max-threads-per-org", "3", "-max-stored-bytes-per-org", "10000000000", "-max-run-time", "5m"},
			want: func(c limitsConfig) bool {
				return c.Limits.MaxRecursionLimit == 50 && c.Limits.MaxThreads == 3 && c.Limits.MaxStoredBytes == 10000000000 && c.RunTimeout == 5*time.Minute
			}},
		{name: "environment", env: map[string]string{"STEPGRAPH_MAX_NODE_EXECUTIONS": "7", "STEPGRAPH_MAX_RUN_TIME": "90s"},
			want: func(c limitsConfig) bool { return c.Limits.MaxNodeExecutions == 7 && c.RunTimeout == 90*time.Second }},
		{name: "a flag wins over the environment", env: map[string]string{"STEPGRAPH_MAX_SUBGRAPH_DEPTH": "2"}, args: []string{"-max-subgraph-depth", "3"},
			want: func(c limitsConfig) bool { return c.Limits.MaxSubgraphDepth == 3 }},
		{name: "zero recursion limit", args: []string{"-max-recursion-limit", "0"}, err: "-max-recursion-limit: must be at least 1"},
		{name: "negative quota", args: []string{"-max-threads-per-org", "-1"}, err: "-max-threads-per-org: must be at least 0"},
		{name: "tiny state", args: []string{"-max-state-bytes", "10"}, err: "-max-state-bytes: must be at least 1024"},
		{name: "huge limit", args: []string{"-max-node-executions", "99999999999"}, err: "-max-node-executions: must be at most 2147483647"},
		{name: "bad environment", env: map[string]string{"STEPGRAPH_MAX_METADATA_BYTES": "lots"}, err: "STEPGRAPH_MAX_METADATA_BYTES: must be an integer"},
		{name: "short run time", args: []string{"-max-run-time", "10ms"}, err: "-max-run-time: must be at least 1s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := parseServeFlags(c.args)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.want(cfg.Limits) {
				t.Errorf("limits %+v", cfg.Limits)
			}
		})
	}
}

// runStatus reads a run's status and error message.
func (s *server) runStatus(key, thread, run string) (status, message string) {
	s.t.Helper()
	_, out := s.call("GET", "/threads/"+thread+"/runs/"+run, key, "")
	var r struct{ Status string }
	json.Unmarshal([]byte(out), &r)
	_, out = s.call("GET", "/threads/"+thread, key, "")
	var th struct {
		Error struct{ Message string } `json:"error"`
	}
	json.Unmarshal([]byte(out), &th)
	return r.Status, th.Error.Message
}

// waitStatus waits (generously) until the run is in one of statuses.
func (s *server) waitStatus(key, thread, run string, statuses ...string) (string, string) {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, msg := s.runStatus(key, thread, run)
		for _, want := range statuses {
			if st == want {
				return st, msg
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("run %s is %q, never %v\n%s", run, st, statuses, s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// count reads the thread's count (its latest checkpoint's).
func (s *server) count(key, thread string) int {
	_, out := s.call("GET", "/threads/"+thread+"/state", key, "")
	var st struct{ Values struct{ Count int } }
	json.Unmarshal([]byte(out), &st)
	return st.Values.Count
}

// F1: a run whose process keeps dying under it is not resumed forever:
// once it was started -max-run-attempts times, the next start ends it
// "error" with a message, and the server comes up and serves.
func TestCrashLoopingRunIsEnded(t *testing.T) {
	dir := t.TempDir()
	flags := []string{"-run-lease", "1s", "-max-run-attempts", "2", "-max-recursion-limit", "100000000", "-max-node-executions", "100000000"}
	s := startNew(t, dir, flags...)
	key := s.FirstKey()
	thread := "00000000-0000-4000-8000-00000000c0de"
	code, out := s.call("POST", "/threads/"+thread+"/runs", key,
		`{"assistant_id":"counter","input":{"steps":100000000},"config":{"recursion_limit":100000000},"durability":"sync","if_not_exists":"create","stream_resumable":true}`)
	if code != 200 {
		t.Fatalf("create run: %d %s", code, out)
	}
	var r struct {
		RunID string `json:"run_id"`
	}
	json.Unmarshal([]byte(out), &r)
	// Two starts, each killed once the run made progress in it (past what
	// was stored when the server started: then this server executes it).
	last := 0
	for attempt := 1; attempt <= 2; attempt++ {
		stored := s.count(key, thread)
		deadline := time.Now().Add(60 * time.Second)
		for s.count(key, thread) <= stored {
			if time.Now().After(deadline) {
				t.Fatalf("attempt %d: the run made no progress\n%s", attempt, s.Logs())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
		s = startServer(t, dir, flags...)
		last = s.count(key, thread)
	}
	st, msg := s.waitStatus(key, thread, r.RunID, "error", "success")
	want := "the run was started 2 times without finishing, the limit of attempts"
	if st != "error" || !strings.HasPrefix(msg, want) {
		t.Fatalf("run %s %q, want error %q", st, msg, want)
	}
	if n := s.count(key, thread); n < last {
		t.Errorf("the thread lost steps: count %d, was %d", n, last)
	}
	// The start that ended it still ended its stream: the kept stream has
	// that attempt's metadata and, last, the error.
	req, _ := http.NewRequest("GET", s.URL()+"/threads/"+thread+"/runs/"+r.RunID+"/stream", nil)
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Last-Event-ID", "-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	events := strings.Split(strings.TrimSpace(string(body)), "\n\n")
	lastEvent := events[len(events)-1]
	if res.StatusCode != 200 || !strings.Contains(string(body), `"attempt":3`) ||
		!strings.Contains(lastEvent, "event: error") || !strings.Contains(lastEvent, want) {
		t.Errorf("the run's stream: %d, want its third attempt's metadata and, last, the error %q:\n%s", res.StatusCode, want, body)
	}
	if code, out := s.call("POST", "/runs/wait", key, `{"assistant_id":"echo","input":{"messages":[]}}`); code != 200 {
		t.Errorf("serving after: %d %s", code, out)
	}
}

// F1: runs stored before the maximum recursion limit (here: by a server
// allowing more, killed mid-run) end at the next start with an error naming
// the limit instead of resuming without bound; a run that ended on a limit
// stays ended across restarts; the server comes up and serves each time.
func TestStoredRunsAboveTheLimitsEndAtStart(t *testing.T) {
	dir := t.TempDir()
	s := startNew(t, dir, "-run-lease", "1s", "-max-recursion-limit", "2000000000", "-max-node-executions", "2000000000")
	key := s.FirstKey()
	thread := "00000000-0000-4000-8000-0000000f1f1f"
	// The review's run: durability exit, no end in sight.
	code, out := s.call("POST", "/threads/"+thread+"/runs", key,
		`{"assistant_id":"counter","input":{"steps":1e15},"config":{"recursion_limit":2000000000},"durability":"exit","if_not_exists":"create"}`)
	if code != 200 {
		t.Fatalf("create run: %d %s", code, out)
	}
	var r struct {
		RunID string `json:"run_id"`
	}
	json.Unmarshal([]byte(out), &r)
	s.waitStatus(key, thread, r.RunID, "running")
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}

	s = startServer(t, dir, "-run-lease", "1s")
	st, msg := s.waitStatus(key, thread, r.RunID, "error", "success")
	want := "config.recursion_limit 2000000000 is above this server's maximum of 10000"
	if st != "error" || msg != want {
		t.Fatalf("run %s %q, want error %q", st, msg, want)
	}
	_, before := s.call("GET", fmt.Sprintf("/threads/%s/runs/%s", thread, r.RunID), key, "")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	s = startServer(t, dir, "-run-lease", "1s")
	if code, out := s.call("POST", "/runs/wait", key, `{"assistant_id":"echo","input":{"messages":[]}}`); code != 200 {
		t.Fatalf("serving after the restart: %d %s", code, out)
	}
	if _, after := s.call("GET", fmt.Sprintf("/threads/%s/runs/%s", thread, r.RunID), key, ""); after != before {
		t.Errorf("the ended run changed across a restart:\n%s\n%s", before, after)
	}
}

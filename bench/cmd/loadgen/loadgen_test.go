package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	p50, p95, p99, mean, maxv := latencyStats(d)
	if p50 != 50 || p95 != 95 || p99 != 99 || mean != 50.5 || maxv != 100 {
		t.Fatalf("got p50 %v p95 %v p99 %v mean %v max %v", p50, p95, p99, mean, maxv)
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Fatalf("one sample: %v", got)
	}
}

func TestParseCounts(t *testing.T) {
	m, levels, err := parseCounts("50=300, 1=30,10=150")
	if err != nil || len(levels) != 3 || levels[0] != 1 || levels[2] != 50 || m[10] != 150 {
		t.Fatalf("got %v %v %v", m, levels, err)
	}
	for _, bad := range []string{"", "1", "x=3", "1=0", "-1=3"} {
		if _, _, err := parseCounts(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestProcParsers(t *testing.T) {
	stat := []byte("123 (a (weird) name) S 45 123 123 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0")
	if got := parseStatPPID(stat); got != 45 {
		t.Errorf("ppid %d", got)
	}
	if got := parseStatCPU(stat); got != 325 {
		t.Errorf("cpu %d", got)
	}
	if got := parseStatusKB([]byte("Name:\tx\nVmHWM:\t  1234 kB\nVmRSS:\t 1000 kB\n"), "VmHWM"); got != 1234 {
		t.Errorf("VmHWM %d", got)
	}
	if got := parseProcStatBusy("cpu  100 5 50 1000 20 3 2 1 0 0"); got != 161 {
		t.Errorf("busy %d", got)
	}
	table := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 100 0 0 10 0
`)
	if got := parseListenInodes(table, 8080); len(got) != 1 || got[0] != "4242" {
		t.Errorf("inodes %v", got)
	}
	// This process is its own descendant list's first entry.
	if d := descendants(os.Getpid()); len(d) == 0 || d[0] != os.Getpid() {
		t.Errorf("descendants %v", d)
	}
	if rssKB(os.Getpid()) <= 0 {
		t.Error("no RSS for this process")
	}
}

// fakeServer answers like the servers do; jsStyle drops the values from an
// interrupted run's answer, as the JS server does.
func fakeServer(t *testing.T, jsStyle bool, corrupt string) *httptest.Server {
	t.Helper()
	threads := map[string]string{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		out := map[string]any{}
		switch {
		case r.URL.Path == "/threads":
			id := "t" + time.Now().Format("150405.000000000")
			threads[id] = ""
			out["thread_id"] = id
		case r.URL.Path == "/runs/wait":
			msgs := body["input"].(map[string]any)["messages"].([]any)
			last := msgs[len(msgs)-1].(map[string]any)
			reply := map[string]any{"role": "assistant", "content": "echo: " + last["content"].(string)}
			if corrupt == "echo" {
				reply["content"] = "echo: something else"
			}
			out["messages"] = append(msgs, reply)
		case strings.HasSuffix(r.URL.Path, "/runs/wait"):
			tid := strings.Split(r.URL.Path, "/")[2]
			switch body["assistant_id"] {
			case "counter":
				out["count"], out["steps"] = 20, 20
			case "approval":
				if in, ok := body["input"].(map[string]any); ok {
					req := in["request"].(string)
					threads[tid] = req
					out["__interrupt__"] = []any{map[string]any{"id": "x", "value": map[string]any{"question": "approve " + req + "?"}}}
					if !jsStyle {
						out["request"] = req
					}
				} else {
					out["request"] = threads[tid]
					out["answer"] = body["command"].(map[string]any)["resume"]
				}
			}
		}
		if r.Header.Get("X-Api-Key") != "k" {
			w.WriteHeader(401)
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
}

func TestWorkloadsCheckAnswers(t *testing.T) {
	ctx := context.Background()
	for _, js := range []bool{false, true} {
		srv := fakeServer(t, js, "")
		c := newClient(srv.URL, "k", map[string]any{"durability": "sync"}, 5*time.Second)
		for _, w := range workloads {
			tid := ""
			if w.needsThread {
				var err error
				if tid, err = c.createThread(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.do(ctx, c, "t1", tid); err != nil {
				t.Errorf("js=%v %s: %v", js, w.Name, err)
			}
		}
		srv.Close()
	}

	srv := fakeServer(t, false, "echo")
	defer srv.Close()
	c := newClient(srv.URL, "k", nil, 5*time.Second)
	if err := doEcho(ctx, c, "t", ""); err == nil || !strings.Contains(err.Error(), "echo: something else") {
		t.Errorf("a wrong echo passed: %v", err)
	}
	c.key = "wrong"
	if err := doEcho(ctx, c, "t", ""); err == nil || !strings.Contains(err.Error(), "status 401") {
		t.Errorf("a 401 passed: %v", err)
	}
}

func TestCheckInterrupt(t *testing.T) {
	q := map[string]any{"question": "approve deploy 1?"}
	ok := []any{
		map[string]any{"__interrupt__": []any{map[string]any{"value": q, "id": "a"}}},
		map[string]any{"__interrupt__": []any{map[string]any{"value": q, "id": "a", "response_schema": nil}}, "request": "deploy 1"},
	}
	for _, v := range ok {
		if err := checkInterrupt(v, "deploy 1"); err != nil {
			t.Errorf("%v: %v", v, err)
		}
	}
	bad := []any{
		map[string]any{"request": "deploy 1"},
		map[string]any{"__interrupt__": []any{map[string]any{"value": q}}, "request": "deploy 2"},
		map[string]any{"__interrupt__": []any{map[string]any{"value": q}}, "answer": "yes"},
		map[string]any{"__interrupt__": []any{map[string]any{"value": map[string]any{"question": "approve deploy 2?"}}}},
	}
	for _, v := range bad {
		if err := checkInterrupt(v, "deploy 1"); err == nil {
			t.Errorf("%v passed", v)
		}
	}
}

func TestFontGlyphs(t *testing.T) {
	for r, g := range glyphs {
		for i, row := range g {
			if len(row) != glyphW || strings.Trim(row, "01") != "" {
				t.Errorf("glyph %q row %d: %q", r, i, row)
			}
		}
	}
}

func sampleResults() *Results {
	r := &Results{Date: "2026-01-02", Command: "go run ./bench/cmd/loadgen", Machine: Machine{Cores: 2, MemTotalKB: 24 << 20},
		Iterations: map[int]int{1: 30, 10: 150}, WarmupRounds: 2, Concurrency: []int{1, 10}, CounterSteps: 20}
	add := func(name string, peer bool, scale float64, rss int64) {
		s := ServerResult{Name: name, Label: name, Peer: peer, PeakServerKB: rss, GracefulStop: true}
		for _, w := range workloads {
			for _, c := range r.Concurrency {
				s.Cells = append(s.Cells, Cell{Workload: w.Name, Concurrency: c, Requests: r.Iterations[c],
					P50ms: 2 * scale, P95ms: 3 * scale, P99ms: 4 * scale, MaxMs: 5 * scale,
					Throughput: float64(c) * 1000 / (2 * scale), OtherCPUPercent: -1})
			}
		}
		r.Servers = append(r.Servers, s)
	}
	add("stepgraph-async", false, 1, 30<<10)
	r.Servers[0].Fairness = &Fairness{Requests: 100, FloodRuns: 128, FloodSteps: 100000, FloodRunning: 16, FloodPending: 112,
		Alone: Latency{P50ms: 5, P99ms: 9}, UnderFlood: Latency{P50ms: 40, P99ms: 120.5}}
	add("stepgraph-sync", false, 1.2, 31<<10)
	add("python", true, 500, 130<<10)
	add("js", true, 280, 200<<10)
	return r
}

func TestReportAndChart(t *testing.T) {
	r := sampleResults()
	md := markdown(r)
	for _, want := range []string{
		"| stepgraph-async: echo p50 ≤ 5 ms at c=1 | 2.00 ms | **met** |",
		"= 280.0× | **met** |",
		"not in this report: `make bench-aws-cost` measures it | **not measured** |",
		"![latency and throughput per server and concurrency](2026-01-02.png)",
		"| stepgraph-async | 5.00 ms | 9.00 ms | 40.00 ms | 120.50 ms | 16 / 112 | 0 | 0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	b, err := renderChart(r)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != chartW || img.Bounds().Dy() < 3*panelH {
		t.Errorf("chart is %v", img.Bounds())
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
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
			case AppGraph:
				out["messages"] = reactConversation(body["input"].(map[string]any)["messages"].([]any)[0].(map[string]any)["content"].(string))
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
			_ = json.NewEncoder(w).Encode(out)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/runs/stream") {
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			for _, e := range fakeStream(body, jsStyle, corrupt) {
				fmt.Fprintf(w, "event: %s\r\ndata: %s\r\n\r\n", e[0], e[1])
			}
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
}

// fakeStream is a run's stream as the servers send it: the counter's 20
// steps, echo's one, the chat answer in token chunks (jsStyle: typed "ai",
// then the whole message again, as the JS server does; else
// AIMessageChunk, as the Python server) or, for stepgraph-style
// ("whole" in corrupt), the whole message once. corrupt names the defect.
func fakeStream(body map[string]any, jsStyle bool, corrupt string) [][2]string {
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	out := [][2]string{{"metadata", `{"run_id":"r1","attempt":1}`}}
	if corrupt == "no-metadata" {
		out = out[:0]
	}
	switch body["assistant_id"] {
	case "counter":
		n := CounterSteps
		if corrupt == "counter-short" {
			n--
		}
		out = append(out, [2]string{"values", j(map[string]any{"count": 0, "steps": CounterSteps})})
		for i := 1; i <= n; i++ {
			out = append(out, [2]string{"updates", `{"inc":{"count":1}}`},
				[2]string{"values", j(map[string]any{"count": i, "steps": CounterSteps})})
		}
	case "echo":
		msgs := body["input"].(map[string]any)["messages"].([]any)
		reply := map[string]any{"role": "assistant", "content": "echo: " + msgs[0].(map[string]any)["content"].(string)}
		out = append(out, [2]string{"values", j(map[string]any{"messages": msgs})},
			[2]string{"updates", j(map[string]any{"echo": map[string]any{"messages": reply}})},
			[2]string{"values", j(map[string]any{"messages": append(msgs, reply)})})
	case "chat":
		q := body["input"].(map[string]any)["messages"].([]any)[0].(map[string]any)["content"].(string)
		toks := modelAnswer(q, 3)
		if corrupt == "chat-token" {
			toks[1] = " wrong"
		}
		human := map[string]any{"type": "human", "content": q, "id": "h1"}
		ai := map[string]any{"type": "ai", "content": strings.Join(toks, ""), "id": "a1"}
		meta := map[string]any{"langgraph_node": "model"}
		out = append(out, [2]string{"values", j(map[string]any{"messages": []any{human}})})
		switch {
		case corrupt == "whole":
			out = append(out, [2]string{"messages", j([]any{ai, meta})})
		default:
			typ := "AIMessageChunk"
			if jsStyle {
				typ = "ai"
			}
			out = append(out, [2]string{"messages", j([]any{map[string]any{"type": typ, "content": "", "id": "a1"}, meta})})
			for _, t := range toks {
				out = append(out, [2]string{"messages", j([]any{map[string]any{"type": typ, "content": t, "id": "a1"}, meta})})
			}
			if jsStyle {
				out = append(out, [2]string{"messages", j([]any{ai, meta})})
			}
		}
		out = append(out, [2]string{"values", j(map[string]any{"messages": []any{human, ai}})})
	}
	if corrupt == "error-event" {
		out = append(out, [2]string{"error", `{"error":"ValueError","message":"boom"}`})
	}
	return out
}

func TestWorkloadsCheckAnswers(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		js    bool
		style string // "whole": the chat answer in one messages event
	}{{false, ""}, {true, ""}, {false, "whole"}} {
		srv := fakeServer(t, c.js, c.style)
		cl := newClient(srv.URL, "k", map[string]any{"durability": "sync"}, 5*time.Second)
		cl.modelChunks = 3
		for _, w := range workloads {
			tid := ""
			if w.needsThread {
				var err error
				if tid, err = cl.createThread(ctx); err != nil {
					t.Fatal(err)
				}
			}
			obs, err := w.iterate(ctx, cl, "t1", tid)
			if err != nil {
				t.Errorf("js=%v %s %s: %v", c.js, c.style, w.Name, err)
				continue
			}
			if w.stream == nil {
				continue
			}
			if obs.events < 4 || obs.firstEvent <= 0 || obs.end < obs.firstEvent {
				t.Errorf("js=%v %s %s: observed %+v", c.js, c.style, w.Name, obs)
			}
			wantTokens := 0
			switch {
			case w.needsModel && c.style == "whole":
				wantTokens = 1
			case w.needsModel:
				wantTokens = 3
			}
			if obs.tokens != wantTokens || (wantTokens > 0) != (obs.firstToken > 0) {
				t.Errorf("js=%v %s %s: %d token events, first token %v; want %d", c.js, c.style, w.Name, obs.tokens, obs.firstToken, wantTokens)
			}
		}
		srv.Close()
	}

	// Each defect of a stream fails its workload, naming it.
	for _, c := range []struct{ corrupt, workload, want string }{
		{"no-metadata", "stream", "want metadata"},
		{"counter-short", "stream", "19 updates events, want 20"},
		{"error-event", "stream-stateless", "error event"},
		{"chat-token", "stream-chat", "want one ai message"},
		{"error-event", "stream-chat", "error event"},
	} {
		srv := fakeServer(t, false, c.corrupt)
		cl := newClient(srv.URL, "k", nil, 5*time.Second)
		cl.modelChunks = 3
		w := workloadByName(c.workload)
		_, err := w.iterate(ctx, cl, "t2", "th")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want an error naming %q", c.corrupt, c.workload, err, c.want)
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
				cell := Cell{Workload: w.Name, Concurrency: c, Requests: r.Iterations[c],
					P50ms: 2 * scale, P95ms: 3 * scale, P99ms: 4 * scale, MaxMs: 5 * scale,
					Throughput: float64(c) * 1000 / (2 * scale), OtherCPUPercent: -1}
				if w.stream != nil {
					cell.Stream = &StreamStats{FirstEventP50ms: scale, FirstEventP99ms: 2 * scale, EventsPerStream: 42}
					if w.needsModel {
						cell.Stream.FirstTokenP50ms, cell.Stream.FirstTokenP99ms, cell.Stream.TokenEvents = 1.5*scale, 3*scale, 1
					}
				}
				s.Cells = append(s.Cells, cell)
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
		"| stepgraph-async | 5.00 ms | 9.00 ms | 40.00 ms | 120.50 ms | 100 / 100 | 16 / 112 | 0 | 0 |",
		"| stepgraph-async stream: first event p50 ≤ 5 ms at c=1 | 1.00 ms | **met** |",
		"| stepgraph-sync stream-chat: first event p50 ≤ 5 ms at c=1 | 1.20 ms | **met** |",
		"| stepgraph-async stream-stateless: streamed runs/s ≥ 10× best peer at c=10 | 5000/s vs js 17.9/s = 280× | **met** |",
		"| 1 | stepgraph-async | 30 | 0 | 1.00 | 2.00 | 1.50 | 3.00 | 2.00 | 4.00 | 42.0 |",
		"| stream-chat | 1 | async | 0.002 | 0.002 | 0.002 | 500× | 0.004 | 0.004 | 0.004 | 280× |",
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

// The local model answers the same text whole or streamed (SSE chunks, the
// role first, [DONE] last), and refuses another key.
func TestFakeModel(t *testing.T) {
	m, err := startFakeModel(4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	want := "re: hi w1 w2 w3"
	call := func(key string, stream bool) *http.Response {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"model": modelName, "stream": stream,
			"stream_options": map[string]any{"include_usage": true},
			"messages":       []any{map[string]any{"role": "system", "content": "s"}, map[string]any{"role": "user", "content": "hi"}}})
		req, _ := http.NewRequest("POST", m.url+"/chat/completions", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := call(modelAPIKey, false)
	var whole struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&whole); err != nil || len(whole.Choices) != 1 || whole.Choices[0].Message.Content != want {
		t.Errorf("whole answer %+v %v, want %q", whole, err, want)
	}
	resp.Body.Close()

	resp = call(modelAPIKey, true)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var text strings.Builder
	var lines []string
	for _, l := range strings.Split(string(raw), "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			lines = append(lines, d)
		}
	}
	if len(lines) != 1+4+1+1+1 || lines[len(lines)-1] != "[DONE]" || !strings.Contains(lines[0], `"role":"assistant"`) {
		t.Fatalf("stream %q", raw)
	}
	for _, d := range lines[:len(lines)-1] {
		var c struct {
			Choices []struct{ Delta struct{ Content string } }
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if text.String() != want {
		t.Errorf("streamed %q, want %q", text.String(), want)
	}
	if resp := call("wrong", true); resp.StatusCode != 401 {
		t.Errorf("a wrong key: %d", resp.StatusCode)
	}
}

func TestStreamStats(t *testing.T) {
	ms := time.Millisecond
	s := streamStats([]streamObs{
		{firstEvent: 1 * ms, firstToken: 4 * ms, end: 10 * ms, events: 10, tokens: 3},
		{firstEvent: 3 * ms, firstToken: 6 * ms, end: 20 * ms, events: 10, tokens: 3},
		{}, // a failed iteration
	}, time.Second)
	if s.FirstEventP50ms != 1 || s.FirstEventP99ms != 3 || s.FirstTokenP50ms != 4 || s.FirstTokenP99ms != 6 ||
		s.EventsPerStream != 10 || s.EventsPerSecStreamP50 != 500 || s.EventsPerSecTotal != 20 || s.TokenEvents != 3 {
		t.Errorf("%+v", s)
	}
}

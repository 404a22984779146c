package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// client sends the same requests to every server: JSON over one keep-alive
// HTTP client, an X-Api-Key only where the server has keys (stepgraph), and
// the server's extra run fields (stepgraph's durability) merged into every
// run request.
type client struct {
	base      string
	key       string
	runFields map[string]any
	hc        *http.Client
	tr        *http.Transport
	// modelChunks: the tokens of the local model's answers (stream-chat).
	modelChunks int
}

func newClient(base, key string, runFields map[string]any, timeout time.Duration) *client {
	tr := &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &client{base: base, key: key, runFields: runFields, tr: tr,
		hc: &http.Client{Transport: tr, Timeout: timeout}}
}

// post sends body as JSON and decodes the answer's JSON, which must have
// status want (default 200).
func (c *client) post(ctx context.Context, path string, body map[string]any, want ...int) (any, error) {
	status := 200
	if len(want) > 0 {
		status = want[0]
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("X-Api-Key", c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("POST %s: reading the answer: %w", path, err)
	}
	if resp.StatusCode != status {
		return nil, fmt.Errorf("POST %s: status %d: %s", path, resp.StatusCode, clip(raw))
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("POST %s: not JSON (%v): %s", path, err, clip(raw))
	}
	return v, nil
}

// run posts a run request with the server's extra run fields.
func (c *client) run(ctx context.Context, path string, body map[string]any) (any, error) {
	for k, v := range c.runFields {
		body[k] = v
	}
	return c.post(ctx, path, body)
}

func (c *client) createThread(ctx context.Context) (string, error) {
	v, err := c.post(ctx, "/threads", map[string]any{})
	if err != nil {
		return "", err
	}
	m, _ := v.(map[string]any)
	id, _ := m["thread_id"].(string)
	if id == "" {
		return "", fmt.Errorf("POST /threads: no thread_id in %s", clipJSON(v))
	}
	return id, nil
}

func clip(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

func clipJSON(v any) string {
	b, _ := json.Marshal(v)
	return clip(b)
}

// A workload is one kind of timed iteration. tag makes every iteration's
// input unique, so an answer meant for another request is caught.
type workload struct {
	Name        string
	Title       string
	needsThread bool
	// do (a request answered whole) or stream (a streamed run).
	do     func(ctx context.Context, c *client, tag, thread string) error
	stream func(ctx context.Context, c *client, tag, thread string) (streamObs, error)
	// needsModel: the workload runs the chat graph (local model endpoint,
	// and on stepgraph the graph deployed first).
	needsModel bool
	// app: the workload runs the LangGraph app (app.go), served by the app
	// servers only.
	app bool
}

// iterate runs one iteration of w.
func (w *workload) iterate(ctx context.Context, c *client, tag, thread string) (streamObs, error) {
	if w.stream != nil {
		return w.stream(ctx, c, tag, thread)
	}
	return streamObs{}, w.do(ctx, c, tag, thread)
}

// CounterSteps is the counter workload's `steps`: 20 super-steps, each
// checkpointed; within the default recursion limit of 25.
const CounterSteps = 20

var workloads = []*workload{
	{Name: "echo", Title: "echo: stateless POST /runs/wait", do: doEcho},
	{Name: "counter", Title: fmt.Sprintf("counter/%d: POST /threads/{id}/runs/wait", CounterSteps),
		needsThread: true, do: doCounter},
	{Name: "approval", Title: "approval: interrupt, then resume, on a thread (2 runs/wait)",
		needsThread: true, do: doApproval},
	{Name: "stream", Title: fmt.Sprintf("stream: counter/%d, POST /threads/{id}/runs/stream, stream_mode values+updates", CounterSteps),
		needsThread: true, stream: doStreamCounter},
	{Name: "stream-stateless", Title: "stream-stateless: echo, POST /runs/stream, stream_mode values+updates",
		stream: doStreamEcho},
	{Name: "stream-chat", Title: "stream-chat: one chat model call, POST /threads/{id}/runs/stream, stream_mode messages-tuple+values",
		needsThread: true, stream: doStreamChat, needsModel: true},
	{Name: "react", Title: "react: a LangGraph app's ReAct agent (fake model, one tool call), POST /threads/{id}/runs/wait",
		needsThread: true, do: doReact, app: true},
}

func workloadByName(name string) *workload {
	for _, w := range workloads {
		if w.Name == name {
			return w
		}
	}
	return nil
}

func doEcho(ctx context.Context, c *client, tag, _ string) error {
	content := "hi " + tag
	got, err := c.run(ctx, "/runs/wait", map[string]any{
		"assistant_id": "echo",
		"input":        map[string]any{"messages": []any{map[string]any{"role": "user", "content": content}}},
	})
	if err != nil {
		return err
	}
	return expectEqual("echo", got, map[string]any{"messages": []any{
		map[string]any{"role": "user", "content": content},
		map[string]any{"role": "assistant", "content": "echo: " + content},
	}})
}

func doCounter(ctx context.Context, c *client, _, thread string) error {
	got, err := c.run(ctx, "/threads/"+thread+"/runs/wait", map[string]any{
		"assistant_id": "counter",
		"input":        map[string]any{"steps": CounterSteps},
	})
	if err != nil {
		return err
	}
	return expectEqual("counter", got, map[string]any{"count": CounterSteps, "steps": CounterSteps})
}

func doApproval(ctx context.Context, c *client, tag, thread string) error {
	request, answer := "deploy "+tag, "yes "+tag
	path := "/threads/" + thread + "/runs/wait"
	got, err := c.run(ctx, path, map[string]any{
		"assistant_id": "approval",
		"input":        map[string]any{"request": request},
	})
	if err != nil {
		return err
	}
	if err := checkInterrupt(got, request); err != nil {
		return err
	}
	got, err = c.run(ctx, path, map[string]any{
		"assistant_id": "approval",
		"command":      map[string]any{"resume": answer},
	})
	if err != nil {
		return err
	}
	return expectEqual("approval resume", got, map[string]any{"request": request, "answer": answer})
}

// checkInterrupt accepts the interrupted run's output: exactly one
// interrupt whose value is the question, and no answer yet. The values
// before the interrupt ("request") must be right when present: the Python
// server and stepgraph return them, the JS server returns only
// __interrupt__.
func checkInterrupt(got any, request string) error {
	m, ok := got.(map[string]any)
	if !ok {
		return fmt.Errorf("approval interrupt: want an object, got %s", clipJSON(got))
	}
	list, _ := m["__interrupt__"].([]any)
	if len(list) != 1 {
		return fmt.Errorf("approval interrupt: want one __interrupt__, got %s", clipJSON(got))
	}
	first, _ := list[0].(map[string]any)
	want := map[string]any{"question": "approve " + request + "?"}
	if !jsonEqual(first["value"], want) {
		return fmt.Errorf("approval interrupt: value %s, want %s", clipJSON(first["value"]), clipJSON(want))
	}
	for k, v := range m {
		switch k {
		case "__interrupt__":
		case "request":
			if v != request {
				return fmt.Errorf("approval interrupt: request %s, want %q", clipJSON(v), request)
			}
		default:
			return fmt.Errorf("approval interrupt: unexpected key %q in %s", k, clipJSON(got))
		}
	}
	return nil
}

// expectEqual compares decoded JSON with want (normalized through JSON).
func expectEqual(what string, got, want any) error {
	if jsonEqual(got, want) {
		return nil
	}
	return fmt.Errorf("%s: got %s, want %s", what, clipJSON(got), clipJSON(want))
}

func jsonEqual(got, want any) bool {
	b, err := json.Marshal(want)
	if err != nil {
		return false
	}
	var w any
	if err := json.Unmarshal(b, &w); err != nil {
		return false
	}
	return reflect.DeepEqual(got, w)
}

// Cell is one workload at one concurrency on one server.
type Cell struct {
	Workload    string   `json:"workload"`
	Concurrency int      `json:"concurrency"`
	Requests    int      `json:"requests"`
	Warmup      int      `json:"warmup"`
	Errors      int      `json:"errors"`
	ErrorSample []string `json:"error_sample,omitempty"`
	P50ms       float64  `json:"p50_ms"`
	P95ms       float64  `json:"p95_ms"`
	P99ms       float64  `json:"p99_ms"`
	MeanMs      float64  `json:"mean_ms"`
	MaxMs       float64  `json:"max_ms"`
	Throughput  float64  `json:"throughput_per_s"`
	WallSeconds float64  `json:"wall_s"`
	// Peak resident set during the cell, kB: the server process (the one
	// listening, with its children) and every process of the start.
	PeakServerKB int64 `json:"peak_rss_server_kb"`
	PeakAllKB    int64 `json:"peak_rss_all_kb"`
	// CPU during the timed part: the server's processes' CPU time per
	// iteration, and the busy share of the machine (all cores) taken by
	// processes that are neither the server nor the load generator (-1: the
	// timed part was too short to tell).
	ServerCPUmsPerOp float64 `json:"server_cpu_ms_per_op"`
	OtherCPUPercent  float64 `json:"other_cpu_percent"`
	// Stream: the streaming workloads' figures (stream.go); their latency
	// above is the time to the end of the stream.
	Stream *StreamStats `json:"stream,omitempty"`
}

// runCell prepares threads (untimed), warms up, then times n iterations at
// concurrency conc.
func runCell(ctx context.Context, s *runningServer, c *client, w *workload, conc, n, warmup int, cellTag string) Cell {
	cell := Cell{Workload: w.Name, Concurrency: conc, Requests: n, Warmup: warmup}
	var errMu sync.Mutex
	record := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		cell.Errors++
		if len(cell.ErrorSample) < 5 {
			cell.ErrorSample = append(cell.ErrorSample, err.Error())
		}
	}

	total := warmup + n
	threads := make([]string, total)
	if w.needsThread {
		parallel(ctx, conc, total, func(i int) {
			id, err := c.createThread(ctx)
			if err != nil {
				record(err)
				return
			}
			threads[i] = id
		})
		if cell.Errors > 0 {
			cell.Errors = total // nothing ran
			return cell
		}
	}
	c.tr.CloseIdleConnections()
	// Warm-up: same iterations, not recorded (errors still count).
	parallel(ctx, conc, warmup, func(i int) {
		if _, err := w.iterate(ctx, c, fmt.Sprintf("%s-w%d", cellTag, i), threads[i]); err != nil {
			record(err)
		}
	})

	s.mem.cellStart()
	cpu0 := s.mem.cpuSnapshot()
	lat := make([]time.Duration, n)
	obs := make([]streamObs, n)
	began := time.Now()
	parallel(ctx, conc, n, func(i int) {
		t0 := time.Now()
		o, err := w.iterate(ctx, c, fmt.Sprintf("%s-%d", cellTag, i), threads[warmup+i])
		lat[i] = time.Since(t0)
		if err != nil {
			record(err)
			return
		}
		obs[i] = o
		if w.stream != nil {
			lat[i] = o.end // without the checks that followed
		}
	})
	wall := time.Since(began)
	cpu1 := s.mem.cpuSnapshot()
	cell.PeakAllKB, cell.PeakServerKB = s.mem.cellPeaks()
	if ctx.Err() != nil {
		record(ctx.Err())
	}

	cell.WallSeconds = wall.Seconds()
	cell.Throughput = float64(n) / wall.Seconds()
	cell.P50ms, cell.P95ms, cell.P99ms, cell.MeanMs, cell.MaxMs = latencyStats(lat)
	if w.stream != nil {
		cell.Stream = streamStats(obs, wall)
	}
	if n > 0 {
		cell.ServerCPUmsPerOp = float64(cpu1.server-cpu0.server) * 1000 / clockTick / float64(n)
	}
	// CPU times tick at 10 ms: a share of a shorter timed part means little.
	cell.OtherCPUPercent = -1
	if capacity := wall.Seconds() * clockTick * float64(readCores()); wall >= time.Second {
		other := float64((cpu1.machine - cpu0.machine) - (cpu1.server - cpu0.server) - (cpu1.self - cpu0.self))
		cell.OtherCPUPercent = min(100, max(0, 100*other/capacity))
	}
	return cell
}

var coresOnce = sync.OnceValue(func() int { return readMachine().Cores })

func readCores() int { return coresOnce() }

// parallel calls f(0..n-1) from conc goroutines; it stops handing out work
// once ctx is done.
func parallel(ctx context.Context, conc, n int, f func(i int)) {
	if n <= 0 {
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}

// latencyStats returns p50, p95, p99 (nearest rank), mean and max in ms.
func latencyStats(d []time.Duration) (p50, p95, p99, mean, maxv float64) {
	if len(d) == 0 {
		return
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	ms := func(v time.Duration) float64 { return float64(v) / float64(time.Millisecond) }
	return ms(percentile(s, 50)), ms(percentile(s, 95)), ms(percentile(s, 99)),
		ms(sum / time.Duration(len(s))), ms(s[len(s)-1])
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(float64(len(sorted)) * p / 100))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

func newGet(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, "GET", url, nil)
}

// Command ckptbench measures how the cost of a step grows with the state
// (issue 19): the growing conversation (one thread, -turns turns of the
// echo graph, each adding about 2 KB of messages) and the large state (a
// run with a 1 MB state and 20 super-steps). It serves the whole API in
// process on the SQLite store (the same assembly as `stepgraph serve`) on
// 127.0.0.1 and drives it over HTTP, one request at a time; the bytes
// written are counted in the store adapter (sqlite.WriteMeter: every value
// bound to a write statement, by table), not estimated.
//
// It writes bench/results/<date>-checkpoints.{md,json,svg}.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/stepgraph/stepgraph/bench/internal/growth"
	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/assembly"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/sources/git"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

func main() {
	turns := flag.Int("turns", 200, "turns of the growing conversation")
	msgBytes := flag.Int("message-bytes", 1000, "bytes of each user message (the echo doubles them)")
	stateMB := flag.Int("state-mb", 1, "size of the large state, in MB")
	steps := flag.Int("steps", 20, "super-steps of the large-state run")
	out := flag.String("out", "bench/results", "directory of the report")
	tag := flag.String("tag", "", "suffix of the report's name (after the date)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole bench to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "ckptbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*turns, *msgBytes, *stateMB, *steps, *out, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "ckptbench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// server is the API in process with its store's meter.
type server struct {
	url, key string
	meter    *sqlite.WriteMeter
	client   *http.Client
	probe    *probe
	close    func()
}

func start(durability string) (*server, error) {
	dir, err := os.MkdirTemp("", "ckptbench-")
	if err != nil {
		return nil, err
	}
	db, err := sqlite.Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		return nil, err
	}
	meter := &sqlite.WriteMeter{}
	db.SetWriteMeter(meter)
	sec, err := local.Open(dir)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := assembly.Assemble(assembly.Adapters{Store: db, Events: db, Secrets: sec,
		Sources: &git.Checker{}, Outbound: weburl.GuardedClient(false, 0), AgentAuth: db},
		assembly.Options{Log: log}) // workers are woken by new runs; the poll is the default
	p := &probe{meter: meter}
	if err := svc.Runs.Graphs.Register(bigStateGraph(p)); err != nil {
		return nil, err
	}
	ctx := context.Background()
	org, _, err := svc.Keys.EnsureOrganization(ctx, "bench")
	if err != nil {
		return nil, err
	}
	key, err := svc.Keys.Create(ctx, org.ID)
	if err != nil {
		return nil, err
	}
	stop := svc.Runs.StartWorkers(runs.DefaultWorkers, log)
	h, err := api.New(svc.APIConfig())
	if err != nil {
		return nil, err
	}
	ts := httptest.NewServer(h) // 127.0.0.1
	return &server{url: ts.URL, key: key, meter: meter, client: ts.Client(), probe: p, close: func() {
		ts.Close()
		stop()
		db.Close()
		os.RemoveAll(dir)
	}}, nil
}

// post sends a request and decodes its answer; the time returned is to
// the last byte of the answer, not counting the client's decoding.
func (s *server) post(path string, body any) (map[string]any, error) {
	m, _, err := s.timedPost(path, body)
	return m, err
}

func (s *server) timedPost(path string, body any) (map[string]any, time.Duration, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequest(http.MethodPost, s.url+path, bytes.NewReader(b))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", s.key)
	t0 := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	took := time.Since(t0)
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, raw)
	}
	var m map[string]any
	return m, took, json.Unmarshal(raw, &m)
}

// Point and Series are the results' shapes (bench/internal/growth, which
// loadgen's report reads them with).
type (
	Point  = growth.Point
	Series = growth.Series
)

func diff(after, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// conversation: one thread, turns runs/wait of echo, each with a user
// message of msgBytes; the answer is checked (the whole conversation).
func conversation(s *server, durability string, turns, msgBytes int) (Series, error) {
	th, err := s.post("/threads", map[string]any{})
	if err != nil {
		return Series{}, err
	}
	id, _ := th["thread_id"].(string)
	sr := Series{Workload: growth.Conversation, Durability: durability}
	for turn := 1; turn <= turns; turn++ {
		content := fmt.Sprintf("turn %d ", turn) + strings.Repeat("a", msgBytes)
		before, tables, cpu := s.meter.Bytes(), s.meter.ByTable(), cpuTime()
		res, lat, err := s.timedPost("/threads/"+id+"/runs/wait", map[string]any{"assistant_id": "echo", "durability": durability,
			"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": content}}}})
		if err != nil {
			return sr, err
		}
		msgs, _ := res["messages"].([]any)
		if len(msgs) != 2*turn {
			return sr, fmt.Errorf("turn %d: %d messages in the answer, want %d", turn, len(msgs), 2*turn)
		}
		last, _ := msgs[len(msgs)-1].(map[string]any)
		if last["content"] != "echo: "+content {
			return sr, fmt.Errorf("turn %d: wrong answer", turn)
		}
		state, _ := json.Marshal(res)
		sr.Points = append(sr.Points, Point{N: turn, LatencyMS: ms(lat), CPUMS: ms(cpuTime() - cpu), Bytes: s.meter.Bytes() - before,
			ByTable: diff(s.meter.ByTable(), tables), StateKB: float64(len(state)) / 1024})
	}
	return sr, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuTime is the process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// probe records, at the start of each super-step of the big-state graph,
// the time and the meter: a step's cost is the difference to the next
// (with durability sync the previous step's checkpoint is written by then).
type probe struct {
	meter *sqlite.WriteMeter
	marks []mark
}

type mark struct {
	at     time.Time
	bytes  int64
	tables map[string]int64
}

func (p *probe) mark() {
	p.marks = append(p.marks, mark{time.Now(), p.meter.Bytes(), p.meter.ByTable()})
}

// bigStateGraph: "blob" holds the large value (set by the input), each
// super-step appends a small entry to "log" and adds 1 to "count", until
// count reaches "steps".
func bigStateGraph(p *probe) *graph.Graph {
	return graph.NewBuilder("bigstate").
		AddChannel("blob", graph.Channel{}).
		AddChannel("log", graph.Channel{Reducer: graph.Append}).
		AddChannel("count", graph.Channel{Reducer: graph.Add, Default: 0}).
		AddChannel("steps", graph.Channel{}).
		AddNode("step", func(_ context.Context, state map[string]any, _ *graph.Runtime) (*graph.Command, error) {
			p.mark()
			n, _ := graph.Int(state["count"])
			return graph.Update(map[string]any{"count": 1, "log": map[string]any{"step": n + 1}}), nil
		}).
		AddEdge(graph.Start, "step").
		AddConditionalEdges("step", func(state map[string]any) ([]string, error) {
			c, _ := graph.Int(state["count"])
			s, _ := graph.Int(state["steps"])
			if c < s {
				return []string{"step"}, nil
			}
			return []string{graph.End}, nil
		}, "step", graph.End).
		MustCompile()
}

func largeState(s *server, durability string, mb, steps int) (Series, error) {
	th, err := s.post("/threads", map[string]any{})
	if err != nil {
		return Series{}, err
	}
	id, _ := th["thread_id"].(string)
	s.probe.marks = nil
	before := s.meter.Bytes()
	res, took, err := s.timedPost("/threads/"+id+"/runs/wait", map[string]any{"assistant_id": "bigstate", "durability": durability,
		"input": map[string]any{"blob": strings.Repeat("b", mb<<20), "steps": steps}})
	if err != nil {
		return Series{}, err
	}
	sr := Series{Workload: growth.LargeState, Durability: durability, RunMS: ms(took), RunBytes: s.meter.Bytes() - before}
	if c, _ := graph.Int(res["count"]); c != int64(steps) {
		return sr, fmt.Errorf("large state: count %v, want %d", res["count"], steps)
	}
	if b, _ := res["blob"].(string); len(b) != mb<<20 {
		return sr, errors.New("large state: the blob did not come back whole")
	}
	m := s.probe.marks
	for i := 1; i < len(m); i++ {
		sr.Points = append(sr.Points, Point{N: i, LatencyMS: ms(m[i].at.Sub(m[i-1].at)), Bytes: m[i].bytes - m[i-1].bytes,
			ByTable: diff(m[i].tables, m[i-1].tables), StateKB: float64(mb << 10)})
	}
	return sr, nil
}

func run(turns, msgBytes, stateMB, steps int, out, tag string) error {
	var all []Series
	for _, d := range []string{"sync", "async"} {
		s, err := start(d)
		if err != nil {
			return err
		}
		c, err := conversation(s, d, turns, msgBytes)
		if err == nil {
			all = append(all, c)
			var l Series
			l, err = largeState(s, d, stateMB, steps)
			all = append(all, l)
		}
		s.close()
		if err != nil {
			return err
		}
	}
	return write(all, out, tag, turns, msgBytes, stateMB, steps)
}

func write(all []Series, out, tag string, turns, msgBytes, stateMB, steps int) error {
	name := time.Now().UTC().Format("2006-01-02") + "-checkpoints" + tag
	js, err := json.MarshalIndent(all, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, name+".json"), js, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, name+".svg"), chart(all), 0o644); err != nil {
		return err
	}
	md := report(all, name, turns, msgBytes, stateMB, steps)
	if err := os.WriteFile(filepath.Join(out, name+".md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	return nil
}

func tables(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", k, kb(m[k])))
	}
	return strings.Join(parts, ", ")
}

func kb(n int64) string { return fmt.Sprintf("%.1f KB", float64(n)/1024) }

package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Fairness is the fairness figure of one server with organizations (issue
// 12, finding F2; stepgraph, and Aegra with its two users): the latency of another organization's stateless echo, one
// request at a time, alone and while one organization floods the workers
// with long runs (more than there are workers, each resubmitted as soon as
// it ends, as a tenant who wants the whole server would).
type Fairness struct {
	Requests   int `json:"requests"`    // timed echo runs per phase
	FloodRuns  int `json:"flood_runs"`  // the flooding organization's runs kept inflight
	FloodSteps int `json:"flood_steps"` // counter steps of each flood run
	// The flood's runs by status when the measurement under flood began
	// (the server's cap shows here: the rest wait, pending).
	FloodRunning int     `json:"flood_running"`
	FloodPending int     `json:"flood_pending"`
	Alone        Latency `json:"alone"`
	UnderFlood   Latency `json:"under_flood"`
	// TimedAlone and TimedUnderFlood are the echo runs actually timed in
	// each phase (fewer than Requests when the phase budget ran out).
	TimedAlone      int `json:"timed_alone,omitempty"`
	TimedUnderFlood int `json:"timed_under_flood,omitempty"`
	// FloodEnded counts flood runs that ended during the measurement
	// (resubmitted at once); 0 means the flood held for all of it.
	FloodEnded  int      `json:"flood_ended"`
	Errors      int      `json:"errors"`
	ErrorSample []string `json:"error_sample,omitempty"`
}

// Latency of a series of timed requests, ms.
type Latency struct {
	P50ms  float64 `json:"p50_ms"`
	P95ms  float64 `json:"p95_ms"`
	P99ms  float64 `json:"p99_ms"`
	MeanMs float64 `json:"mean_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// fairnessOpts are the -fairness-* flags.
type fairnessOpts struct {
	requests, floodRuns, floodSteps int
	saturateTimeout                 time.Duration
	// phaseBudget bounds each phase's timed requests: a server whose echo
	// takes seconds under the flood stops being timed after it (the
	// count actually timed is reported); 0: no bound.
	phaseBudget time.Duration
}

// measureFairness measures s's Fairness: a second organization's key is
// made with `stepgraph keys create` on the server's data directory; its
// echo runs are timed alone, then under the first organization's flood of
// counter runs (steps floodSteps, recursion_limit to match), once the flood
// holds every slot the server gives it and has runs waiting.
func measureFairness(ctx context.Context, e *env, s *runningServer, o fairnessOpts, timeout time.Duration) *Fairness {
	f := &Fairness{Requests: o.requests, FloodRuns: o.floodRuns, FloodSteps: o.floodSteps}
	var mu sync.Mutex
	record := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		f.Errors++
		if len(f.ErrorSample) < 5 {
			f.ErrorSample = append(f.ErrorSample, err.Error())
		}
	}
	otherKey := s.otherKey // a peer's second user, made by loadgen at start
	if otherKey == "" {
		out, err := exec.CommandContext(ctx, e.stepgraphBin, "keys", "create", "--org", "fairness-other",
			"--data", filepath.Join(s.dir, "data")).Output()
		if err != nil {
			record(fmt.Errorf("stepgraph keys create: %w", err))
			return f
		}
		otherKey = strings.TrimSpace(string(out))
	}
	other := newClient(s.base, otherKey, s.spec.RunFields, timeout)
	defer other.tr.CloseIdleConnections()
	echoes := func(phase string) (Latency, int) {
		// The budget covers the warm-up too: on a server that takes minutes
		// per echo under the flood, the warm-up alone would otherwise.
		began := time.Now()
		for i := range 3 { // warm-up
			if o.phaseBudget > 0 && time.Since(began) > o.phaseBudget {
				break
			}
			if err := doEcho(ctx, other, fmt.Sprintf("fair-%s-w%d", phase, i), ""); err != nil {
				record(err)
			}
		}
		lat := make([]time.Duration, 0, o.requests)
		for i := 0; i < o.requests && ctx.Err() == nil; i++ {
			if o.phaseBudget > 0 && time.Since(began) > o.phaseBudget {
				break
			}
			t0 := time.Now()
			err := doEcho(ctx, other, fmt.Sprintf("fair-%s-%d", phase, i), "")
			lat = append(lat, time.Since(t0))
			if err != nil {
				record(err)
			}
		}
		var l Latency
		l.P50ms, l.P95ms, l.P99ms, l.MeanMs, l.MaxMs = latencyStats(lat)
		return l, len(lat)
	}
	f.Alone, f.TimedAlone = echoes("alone")

	// The flood: floodRuns threads of the first organization, each running
	// counter runs back to back. A client without a timeout: its runs last
	// as long as they last; the flood ends with floodCtx.
	flooder := newClient(s.base, s.key, s.spec.RunFields, 0)
	defer flooder.tr.CloseIdleConnections()
	floodCtx, stopFlood := context.WithCancel(ctx)
	defer stopFlood()
	threads := make([]string, o.floodRuns)
	for i := range threads {
		var err error
		if threads[i], err = flooder.createThread(ctx); err != nil {
			record(err)
			return f
		}
	}
	var ended sync.WaitGroup
	var measuring bool
	for _, th := range threads {
		ended.Add(1)
		go func() {
			defer ended.Done()
			for floodCtx.Err() == nil {
				_, err := flooder.run(floodCtx, "/threads/"+th+"/runs/wait", map[string]any{
					"assistant_id": "counter", "input": map[string]any{"steps": o.floodSteps},
					"config": map[string]any{"recursion_limit": o.floodSteps + 10}})
				switch {
				case floodCtx.Err() != nil:
				case err != nil:
					record(fmt.Errorf("flood: %w", err))
					return
				default:
					mu.Lock()
					if measuring {
						f.FloodEnded++
					}
					mu.Unlock()
				}
			}
		}()
	}
	defer ended.Wait()
	defer stopFlood()

	// Saturated: every flood run is inflight, some running, some waiting
	// (stepgraph's per-organization cap; a peer without one may run them
	// all at once, and then none waits).
	deadline := time.Now().Add(o.saturateTimeout)
	for {
		running, pending, err := floodStatus(ctx, flooder, threads)
		if err != nil {
			record(err)
			return f
		}
		if running > 0 && (pending > 0 || s.spec.Peer) && running+pending == len(threads) {
			f.FloodRunning, f.FloodPending = running, pending
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			record(fmt.Errorf("the flood did not saturate within %v: %d running, %d pending of %d", o.saturateTimeout, running, pending, len(threads)))
			return f
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	measuring = true
	mu.Unlock()
	f.UnderFlood, f.TimedUnderFlood = echoes("flood")
	mu.Lock()
	measuring = false
	mu.Unlock()
	return f
}

// floodStatus counts the latest runs of threads by status.
func floodStatus(ctx context.Context, c *client, threads []string) (running, pending int, err error) {
	for _, th := range threads {
		v, err := c.get(ctx, "/threads/"+th+"/runs?limit=1")
		if err != nil {
			return 0, 0, err
		}
		list, ok := v.([]any)
		if !ok {
			return 0, 0, errors.New("GET /threads/{id}/runs: not a list: " + clipJSON(v))
		}
		if len(list) == 0 {
			continue
		}
		switch m, _ := list[0].(map[string]any); m["status"] {
		case "running":
			running++
		case "pending":
			pending++
		}
	}
	return running, pending, nil
}

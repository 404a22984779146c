package api_test

import (
	"fmt"
	"runtime"
	"testing"
)

// TestMemoryFlatUnderSustainedLoad drives a steady load of runs and checks
// that the heap in use after the second half is not meaningfully above
// what it was after the first: nothing grows per request.
func TestMemoryFlatUnderSustainedLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	e := newEnv(t)
	tid := e.newThread(e.keyA)
	batch := func(n int) {
		for i := range n {
			body := map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": fmt.Sprint(i)}}}}
			waitBody(t, e.do("POST", "/runs/wait", e.keyA, body))
			if i%10 == 0 {
				waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 1}}))
			}
		}
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	// The suite's own record of responses and logs (for the leak scan)
	// lives in this heap too and grows on purpose; it is discounted.
	recorded := func() uint64 {
		exposure.Lock()
		defer exposure.Unlock()
		return uint64(exposure.said.Cap())
	}
	const runs = 400
	batch(200) // warm up: pools, caches, the thread's first checkpoints
	first, firstRec := heap(), recorded()
	batch(runs)
	second, secondRec := heap(), recorded()
	growth := int64(second) - int64(first) - int64(secondRec-firstRec)
	t.Logf("heap in use: %d KiB after warm-up, %d KiB after %d more runs; %d bytes per run beyond the test's own records",
		first/1024, second/1024, runs, growth/runs)
	if growth > 256<<10+runs*256 {
		t.Errorf("heap grew by %d KiB over %d runs (more than 256 bytes a run)", growth/1024, runs)
	}
}

package api_test

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// processCPU is the CPU time (user and system) the test process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds the process's CPU time per iteration since start (server
// and client: they share the process) as cpu-ms/op: on a shared machine
// it moves less than the time per iteration.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(processCPU(b)-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// BenchmarkEchoWait is the bench's echo workload in-process (stateless
// POST /runs/wait, durability async and sync, 10 concurrent clients): for
// profiling the CPU of a run with -cpuprofile (bench/results/2026-12-07-cpu.md).
func BenchmarkEchoWait(b *testing.B) {
	for _, durability := range []string{"async", "sync"} {
		b.Run(durability, func(b *testing.B) {
			e := newEnv(b)
			b.SetParallelism(5) // × GOMAXPROCS 2 = 10 clients
			b.ReportAllocs()
			b.ResetTimer()
			start := processCPU(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "echo",
						"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "durability": durability})
					if r.Status != http.StatusOK {
						b.Errorf("status %d", r.Status)
					}
				}
			})
			reportCPU(b, start)
		})
	}
}

// BenchmarkCounterWait is the bench's counter/20 workload in-process (the
// whole API on SQLite, durability async and sync, 50 concurrent clients): for
// profiling with -cpuprofile; `make bench` has the figures.
func BenchmarkCounterWait(b *testing.B) {
	for _, durability := range []string{"async", "sync"} {
		b.Run(durability, func(b *testing.B) {
			e := newEnv(b)
			b.SetParallelism(25) // × GOMAXPROCS 2 = 50 clients
			b.ReportAllocs()
			b.ResetTimer()
			start := processCPU(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					path := fmt.Sprintf("/threads/%s/runs/wait", uuid.NewString())
					r := e.do("POST", path, e.keyA, map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 20},
						"if_not_exists": "create", "durability": durability})
					if r.Status != http.StatusOK {
						b.Errorf("status %d", r.Status)
					}
				}
			})
			reportCPU(b, start)
		})
	}
}

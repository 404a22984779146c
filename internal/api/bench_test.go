package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"
)

// BenchmarkCounterWait is the bench's counter/20 workload in-process (the
// whole API on SQLite, durability async and sync, 50 concurrent clients): for
// profiling with -cpuprofile; `make bench` has the figures.
func BenchmarkCounterWait(b *testing.B) {
	for _, durability := range []string{"async", "sync"} {
		b.Run(durability, func(b *testing.B) {
			e := newEnv(b)
			b.SetParallelism(25) // × GOMAXPROCS 2 = 50 clients
			b.ResetTimer()
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
		})
	}
}

package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkStreamFirstEvent is the bench's `stream` workload in-process
// (counter/20 streamed on a fresh thread, stream_mode values+updates, one
// client, durability async and sync): the time from sending the request to
// the metadata event (ms/first-event) and to the end of the stream, for
// profiling with -cpuprofile; `make bench` has the figures beside the peers.
func BenchmarkStreamFirstEvent(b *testing.B) {
	for _, durability := range []string{"async", "sync"} {
		b.Run(durability, func(b *testing.B) {
			e := newEnv(b)
			threads := make([]string, b.N)
			for i := range threads {
				threads[i] = e.newThread(e.keyA)
			}
			body, _ := json.Marshal(map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 20},
				"stream_mode": []string{"values", "updates"}, "durability": durability})
			var first time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req, _ := http.NewRequest("POST", e.url+"/threads/"+threads[i]+"/runs/stream", bytes.NewReader(body))
				req.Header.Set("X-Api-Key", e.keyA)
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				res, err := e.client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				sc := bufio.NewScanner(res.Body)
				events, sawFirst := 0, false
				for sc.Scan() {
					line := sc.Text()
					if line == "" {
						if !sawFirst {
							first += time.Since(t0)
							sawFirst = true
						}
						events++
					} else if events == 0 && strings.HasPrefix(line, "event: ") && line != "event: metadata" {
						b.Fatalf("first event %q", line)
					}
				}
				res.Body.Close()
				if res.StatusCode != http.StatusOK || events != 42 {
					b.Fatalf("status %d, %d events", res.StatusCode, events)
				}
			}
			b.ReportMetric(float64(first)/float64(time.Millisecond)/float64(b.N), "ms/first-event")
		})
	}
}

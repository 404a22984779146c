package lambdaapp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkBufferedAnswer is the CPU a wait function spends on its answer
// besides waiting: the API's answer recorded by the buffered handler, and
// the response event encoded as the Lambda runtime sends it — what 256 MB
// (about a seventh of a vCPU) must do within a request (review #19).
// Timings for bench/results, not a pass/fail test:
//
//	go test -run '^$' -bench BufferedAnswer ./internal/lambdaapp/
func BenchmarkBufferedAnswer(b *testing.B) {
	for _, size := range []int{50_000, 1_000_000, 5_000_000} {
		// A state of chat messages, as a runs/wait answer carries it.
		msg := `{"role":"assistant","content":"` + strings.Repeat("lorem ipsum dolor sit amet ", 40) + `"},`
		body := []byte(`{"messages":[` + strings.Repeat(msg, size/len(msg)) + `{"role":"user","content":"end"}]}`)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
		})
		a := NewHTTPHandler(h)
		b.Run(fmt.Sprintf("%dKB", len(body)/1000), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				resp, err := a.Handle(context.Background(), request("POST", "/runs/wait"))
				if err != nil || resp.StatusCode != 200 {
					b.Fatal(resp.StatusCode, err)
				}
				if _, err := json.Marshal(resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

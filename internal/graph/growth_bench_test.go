package graph

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkEchoTurn is one turn of the growing conversation (issue 19,
// bench/cmd/ckptbench) in the engine alone: the echo graph run on a
// thread of turn-1 earlier turns, each a 1000-byte user message and its
// echo, under a state-size limit. What a turn costs beyond turn 1 is what
// grows with the state (bench/results/2026-12-07-cpu.md).
func BenchmarkEchoTurn(b *testing.B) {
	g := echoGraph()
	opts := Options{Limits: Limits{MaxStateBytes: 64 << 20}}
	msg := strings.Repeat("x", 1000)
	for _, turn := range []int{1, 200} {
		b.Run(fmt.Sprintf("turn-%d", turn), func(b *testing.B) {
			var from *Checkpoint
			for range turn - 1 {
				cp, out, err := Run(context.Background(), g, from, map[string]any{"messages": []any{map[string]any{"role": "user", "content": msg}}}, opts, nil)
				if err != nil || out.Status != Done {
					b.Fatal(err, out)
				}
				from = &cp
			}
			input := map[string]any{"messages": []any{map[string]any{"role": "user", "content": msg}}}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, out, err := Run(context.Background(), g, from, input, opts, nil); err != nil || out.Status != Done {
					b.Fatal(err, out)
				}
			}
		})
	}
}

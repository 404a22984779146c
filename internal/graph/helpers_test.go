package graph

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
)

// recorder is a Sink that keeps every checkpoint it is handed.
type recorder struct {
	mu  sync.Mutex
	cps []Checkpoint
}

func (r *recorder) sink(_ context.Context, cp Checkpoint) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cps = append(r.cps, cp)
	return nil
}

func run(t *testing.T, g *Graph, from *Checkpoint, input any, opts Options) (Checkpoint, Outcome) {
	t.Helper()
	cp, out, err := Run(context.Background(), g, from, input, opts, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return cp, out
}

// assertJSON compares got's JSON encoding with want (any formatting).
func assertJSON(t *testing.T, got any, want string) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("marshal %v: %v", got, err)
	}
	var canonical any // struct fields come out in declaration order; maps sorted
	if err := decodeJSON(g, &canonical); err != nil {
		t.Fatal(err)
	}
	g, _ = json.Marshal(canonical)
	var w any
	if err := decodeJSON([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	wb, _ := json.Marshal(w)
	if string(g) != string(wb) {
		t.Errorf("got  %s\nwant %s", g, wb)
	}
}

func assertStatus(t *testing.T, out Outcome, want Status) {
	t.Helper()
	if out.Status != want {
		t.Fatalf("status = %s (error %v), want %s", out.Status, out.Error, want)
	}
}

func assertError(t *testing.T, out Outcome, kind, message string) {
	t.Helper()
	assertStatus(t, out, Failed)
	if out.Error.Kind != kind || (message != "" && out.Error.Message != message) {
		t.Fatalf("error = %s: %q, want %s: %q", out.Error.Kind, out.Error.Message, kind, message)
	}
}

// logNode appends its name to the "log" channel.
func logNode(name string) NodeFunc {
	return func(context.Context, map[string]any, *Runtime) (*Command, error) {
		return Update(map[string]any{"log": name}), nil
	}
}

// chain builds __start__ -> names[0] -> ... -> __end__ over an append "log".
func chain(names ...string) *Builder {
	b := NewBuilder("chain").AddChannel("log", Channel{Reducer: Append})
	prev := Start
	for _, n := range names {
		b.AddNode(n, logNode(n)).AddEdge(prev, n)
		prev = n
	}
	return b.AddEdge(prev, End)
}

package graph

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// doublingGraph is the amplifier of a graph document: an append channel
// that a self-looping node writes back into itself, doubling it each step.
func doublingGraph() *Graph {
	return NewBuilder("dup").
		AddChannel("xs", Channel{Reducer: Append, Default: []any{}}).
		AddNode("dup", func(_ context.Context, state map[string]any, _ *Runtime) (*Command, error) {
			return Update(map[string]any{"xs": state["xs"]}), nil
		}).
		AddEdge(Start, "dup").
		AddEdge("dup", "dup").
		MustCompile()
}

// wideGraph runs n nodes in each step, forever.
func wideGraph(n int) *Graph {
	b := NewBuilder("wide").AddChannel("n", Channel{Reducer: Add, Default: 0})
	for i := range n {
		name := string(rune('a' + i))
		b.AddNode(name, func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return Update(map[string]any{"n": 1}), nil
		}).AddEdge(Start, name).AddEdge(name, name)
	}
	return b.MustCompile()
}

func TestLimits(t *testing.T) {
	big := strings.Repeat("x", 2000)
	cases := []struct {
		name    string
		g       *Graph
		input   any
		opts    Options
		message string // the error's message starts with it
		steps   int    // the step of the returned checkpoint
	}{
		{"the input is too large", doublingGraph(), map[string]any{"xs": []any{big}},
			Options{Limits: Limits{MaxStateBytes: 1000}},
			"the input is more than 1000 bytes of JSON, more than the limit of 1000 bytes of state", -2},
		{"a command's update is too large", doublingGraph(), Command{Update: Writes{{Key: "xs", Value: big}}},
			Options{Limits: Limits{MaxStateBytes: 1000}},
			"the command's update is more than 1000 bytes", -2},
		// 10 bytes doubled each step: the update of step 6 would make 640.
		{"a doubling state stops at the limit", doublingGraph(), map[string]any{"xs": []any{"12345678"}},
			Options{RecursionLimit: 100, Limits: Limits{MaxStateBytes: 500}},
			"the state after step 6 is more than 500 bytes of JSON", 5},
		{"node executions, one a step", doublingGraph(), map[string]any{"xs": []any{}},
			Options{RecursionLimit: 100, Limits: Limits{MaxNodeExecutions: 7}},
			"the run reached its limit of 7 node executions (subgraph nodes included)", 7},
		{"node executions, three a step", wideGraph(3), map[string]any{},
			Options{RecursionLimit: 100, Limits: Limits{MaxNodeExecutions: 7}},
			"the run reached its limit of 7 node executions", 2},
		{"within every limit", doublingGraph(), map[string]any{"xs": []any{"a"}},
			Options{RecursionLimit: 3, Limits: Limits{MaxStateBytes: 1 << 20, MaxNodeExecutions: 3}},
			"Recursion limit of 3 reached", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cp, out := run(t, c.g, nil, c.input, c.opts)
			assertStatus(t, out, Failed)
			if !strings.HasPrefix(out.Error.Message, c.message) {
				t.Fatalf("error %s: %q, want it to start with %q", out.Error.Kind, out.Error.Message, c.message)
			}
			if c.name != "within every limit" && out.Error.Kind != KindLimit {
				t.Errorf("kind %s, want %s", out.Error.Kind, KindLimit)
			}
			if cp.Metadata.Step != c.steps {
				t.Errorf("stopped at step %d, want %d", cp.Metadata.Step, c.steps)
			}
			if max := c.opts.Limits.MaxStateBytes; max > 0 {
				if b, _ := json.Marshal(cp.Values); len(b) > max {
					t.Errorf("the state is %d bytes, over the limit of %d", len(b), max)
				}
			}
		})
	}
}

// A run continued from its own checkpoint (after a crash, or a yield)
// keeps counting: its limits hold across any number of resumptions, where
// a new run on the same checkpoint starts counting again.
func TestContinueKeepsTheRunsCounts(t *testing.T) {
	g := counterGraph()
	opts := Options{RecursionLimit: 10, Limits: Limits{MaxNodeExecutions: 8}}
	stop := errors.New("crash")
	for _, c := range []struct {
		name string
		opts Options
		want string
	}{
		{"recursion limit", Options{RecursionLimit: 6}, "Recursion limit of 6 reached"},
		{"node executions", opts, "the run reached its limit of 8 node executions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var last Checkpoint
			steps := 0
			// The run "crashes" after its 4th checkpoint, then continues,
			// crashing again after each 2 more: 5 resumptions.
			for resumption := 0; resumption <= 5; resumption++ {
				sink := func(_ context.Context, cp Checkpoint) error {
					last = cp
					steps++
					if steps%2 == 0 && steps >= 4 {
						return stop
					}
					return nil
				}
				var out Outcome
				var err error
				if resumption == 0 {
					_, out, err = Run(context.Background(), g, nil, map[string]any{"steps": 1000}, c.opts, sink)
				} else {
					_, out, err = Continue(context.Background(), g, last, c.opts, sink)
				}
				if err == nil {
					if out.Status != Failed || !strings.HasPrefix(out.Error.Message, c.want) {
						t.Fatalf("outcome %+v, want %q", out, c.want)
					}
					if n, _ := Int(last.Values["count"]); n > 8 {
						t.Errorf("count %d: the run went past its limit", n)
					}
					return
				}
				if !errors.Is(err, stop) {
					t.Fatal(err)
				}
			}
			t.Fatal("the run never met its limit")
		})
	}
}

// jsonSize measures what encoding/json writes, and stops early.
func TestJSONSize(t *testing.T) {
	values := []any{
		nil, true, false, "", "plain", "quote\" back\\slash", "<html> & \u2028", "tab\tnl\n", "héllo wörld ✓",
		json.Number("12345"), json.Number("-1.5e10"), []any{}, []any{"a", json.Number("1"), nil},
		map[string]any{}, map[string]any{"a": []any{map[string]any{"b": "c"}}, "k\"ey": true},
		map[string]int{"go": 1}, []string{"typed"},
	}
	for _, v := range values {
		b, _ := json.Marshal(v)
		got := jsonSize(v, 0)
		if got < len(b) || got > len(b)+12 {
			t.Errorf("jsonSize(%s) = %d, encoding is %d bytes", b, got, len(b))
		}
		if !strings.ContainsAny(string(b), `\<>&`) && got != len(b) {
			t.Errorf("jsonSize(%s) = %d, want exactly %d", b, got, len(b))
		}
	}
	huge := make([]any, 1<<20)
	for i := range huge {
		huge[i] = "xxxxxxxx"
	}
	if got := jsonSize(huge, 100); got <= 100 || got > 200 {
		t.Errorf("jsonSize of a 10 MB list, bound 100 = %d: it should stop right past the bound", got)
	}
}

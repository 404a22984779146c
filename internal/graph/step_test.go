package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestParallelNodesMergeInNameOrder(t *testing.T) {
	var mu sync.Mutex
	var finished []string
	cDone, bDone := make(chan struct{}), make(chan struct{})
	node := func(name string, wait <-chan struct{}, done chan struct{}) NodeFunc {
		return func(context.Context, map[string]any, *Runtime) (*Command, error) {
			if wait != nil {
				<-wait
			}
			defer func() {
				mu.Lock()
				finished = append(finished, name)
				mu.Unlock()
				if done != nil {
					close(done)
				}
			}()
			return &Command{Update: Writes{{"log", name + "1"}, {"log", name + "2"}}}, nil
		}
	}
	// a waits for b, b waits for c: they finish c, b, a.
	g := NewBuilder("parallel").
		AddChannel("log", Channel{Reducer: Append}).
		AddNode("a", node("a", bDone, nil)).
		AddNode("b", node("b", cDone, bDone)).
		AddNode("c", node("c", nil, cDone)).
		AddEdge(Start, "a").AddEdge(Start, "b").AddEdge(Start, "c").
		MustCompile()
	cp, out := run(t, g, nil, map[string]any{}, Options{})
	assertStatus(t, out, Done)
	if !reflect.DeepEqual(finished, []string{"c", "b", "a"}) {
		t.Fatalf("finish order = %v, the test did not force reverse completion", finished)
	}
	assertJSON(t, cp.Values, `{"log":["a1","a2","b1","b2","c1","c2"]}`)
	assertJSON(t, cp.Metadata.Writes, `{"a":{"log":"a2"},"b":{"log":"b2"},"c":{"log":"c2"}}`)
}

func TestParallelLastValueConflict(t *testing.T) {
	write := func(context.Context, map[string]any, *Runtime) (*Command, error) {
		return Update(map[string]any{"x": 1}), nil
	}
	g := NewBuilder("conflict").AddChannel("x", Channel{}).
		AddNode("a", write).AddNode("b", write).
		AddEdge(Start, "a").AddEdge(Start, "b").MustCompile()
	_, out := run(t, g, nil, map[string]any{}, Options{})
	assertError(t, out, KindInvalidUpdate, "")
	if !strings.Contains(out.Error.Message, "At key 'x': Can receive only one value per step") {
		t.Fatalf("message = %q", out.Error.Message)
	}
}

func TestConditionalEdges(t *testing.T) {
	// decide writes sign; its router reads it (its own write) and picks a branch.
	decide := func(_ context.Context, s map[string]any, _ *Runtime) (*Command, error) {
		n, _ := Float(s["n"])
		sign := "neg"
		if n > 0 {
			sign = "pos"
		}
		return Update(map[string]any{"sign": sign}), nil
	}
	route := func(s map[string]any) ([]string, error) {
		switch s["sign"] {
		case "pos":
			return []string{"pos"}, nil
		case "neg":
			return []string{"neg", "log2"}, nil
		}
		return []string{End}, nil
	}
	b := NewBuilder("branch").
		AddChannel("n", Channel{}).AddChannel("sign", Channel{}).
		AddChannel("log", Channel{Reducer: Append}).
		AddNode("decide", decide).
		AddNode("pos", logNode("pos")).AddNode("neg", logNode("neg")).AddNode("log2", logNode("log2")).
		AddEdge(Start, "decide").
		AddConditionalEdges("decide", route, "pos", "neg", "log2", End)
	g := b.MustCompile()
	tests := []struct {
		n    int
		want string
	}{
		{1, `["pos"]`},
		{-1, `["log2","neg"]`},
	}
	for _, tt := range tests {
		cp, out := run(t, g, nil, map[string]any{"n": tt.n}, Options{})
		assertStatus(t, out, Done)
		assertJSON(t, cp.Values["log"], tt.want)
	}

	stray := NewBuilder("stray").AddChannel("log", Channel{Reducer: Append}).
		AddNode("a", logNode("a")).AddNode("b", logNode("b")).AddEdge(Start, "a").
		AddConditionalEdges("a", func(map[string]any) ([]string, error) { return []string{"b"}, nil }, End).
		MustCompile()
	_, out := run(t, stray, nil, map[string]any{}, Options{})
	assertError(t, out, KindInvalidUpdate, "")
}

func TestRouterSeesOnlyItsNodesWrites(t *testing.T) {
	var seen atomic.Value
	g := NewBuilder("local").
		AddChannel("a", Channel{}).AddChannel("b", Channel{}).
		AddNode("a", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return Update(map[string]any{"a": "A"}), nil
		}).
		AddNode("b", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return Update(map[string]any{"b": "B"}), nil
		}).
		AddEdge(Start, "a").AddEdge(Start, "b").
		AddConditionalEdges("a", func(s map[string]any) ([]string, error) {
			seen.Store(text(s))
			return []string{End}, nil
		}).
		MustCompile()
	cp, _ := run(t, g, nil, map[string]any{}, Options{})
	if got := seen.Load(); got != `{"a":"A"}` {
		t.Fatalf("router saw %v", got)
	}
	assertJSON(t, cp.Values, `{"a":"A","b":"B"}`)
}

func TestNodeCommandGotoAndUpdate(t *testing.T) {
	// a has an edge to b and also jumps to c: edges and goto both apply.
	jumper := func(gotos ...string) *Graph {
		return NewBuilder("goto").AddChannel("log", Channel{Reducer: Append}).
			AddNode("a", func(context.Context, map[string]any, *Runtime) (*Command, error) {
				return &Command{Update: Writes{{"log", "a1"}, {"log", "a2"}}, Goto: gotos}, nil
			}).
			AddNode("b", logNode("b")).AddNode("c", logNode("c")).
			AddEdge(Start, "a").AddEdge("a", "b").
			MustCompile()
	}
	r := &recorder{}
	cp, out, err := Run(context.Background(), jumper("c", End), nil, map[string]any{}, Options{}, r.sink)
	if err != nil {
		t.Fatal(err)
	}
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values["log"], `["a1","a2","b","c"]`)
	// input, after __start__, after a (next b and c), after b and c.
	if n := len(r.cps); n != 4 {
		t.Fatalf("%d checkpoints", n)
	}
	assertJSON(t, r.cps[2].Next, `["b","c"]`)
	assertJSON(t, r.cps[2].Metadata.Writes, `{"a":{"log":"a2"}}`)

	_, out = run(t, jumper("nowhere"), nil, map[string]any{}, Options{})
	assertError(t, out, KindInvalidUpdate, "")
}

func TestInputCommandUpdateAndGoto(t *testing.T) {
	g := chain("a", "b").MustCompile()
	done, _ := run(t, g, nil, map[string]any{"log": "in"}, Options{})
	assertJSON(t, done.Values["log"], `["in","a","b"]`)

	var cmd Command
	if err := json.Unmarshal([]byte(`{"update": [["log","x"],["log","y"]], "goto": "b"}`), &cmd); err != nil {
		t.Fatal(err)
	}
	cp, out := run(t, g, &done, cmd, Options{})
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values["log"], `["in","a","b","x","y","b"]`)

	// An update alone writes and runs nothing.
	cp, out = run(t, g, &done, &Command{Update: WritesOf(map[string]any{"log": "z"})}, Options{})
	assertStatus(t, out, Done)
	if cp.ID == done.ID || cp.Metadata.Source != SourceInput {
		t.Fatalf("no new input checkpoint: %+v", cp.Metadata)
	}
	assertJSON(t, cp.Values["log"], `["in","a","b","z"]`)
}

func TestStaticInterrupts(t *testing.T) {
	type stop struct {
		next string // JSON
		log  string // JSON
	}
	tests := []struct {
		name  string
		opts  Options
		stops []stop
	}{
		{"before b", Options{InterruptBefore: Nodes{"b"}}, []stop{{`["b"]`, `["a"]`}}},
		{"after b", Options{InterruptAfter: Nodes{"b"}}, []stop{{`["c"]`, `["a","b"]`}}},
		{"before all", Options{InterruptBefore: All},
			[]stop{{`["a"]`, `null`}, {`["b"]`, `["a"]`}, {`["c"]`, `["a","b"]`}}},
		{"after all", Options{InterruptAfter: All}, // nothing is left after c
			[]stop{{`["b"]`, `["a"]`}, {`["c"]`, `["a","b"]`}}},
		{"before and after", Options{InterruptBefore: Nodes{"c"}, InterruptAfter: Nodes{"a"}},
			[]stop{{`["b"]`, `["a"]`}, {`["c"]`, `["a","b"]`}}},
	}
	g := chain("a", "b", "c").MustCompile()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var input any = map[string]any{}
			var from *Checkpoint
			for _, want := range tt.stops {
				cp, out := run(t, g, from, input, tt.opts)
				assertStatus(t, out, Interrupted)
				if len(out.Interrupts) != 0 || len(cp.PendingInterrupts()) != 0 {
					t.Fatalf("static interrupt reported dynamic ones: %v", out.Interrupts)
				}
				assertJSON(t, cp.Next, want.next)
				assertJSON(t, cp.Values["log"], want.log)
				from, input = &cp, nil
			}
			cp, out := run(t, g, from, nil, tt.opts)
			assertStatus(t, out, Done)
			assertJSON(t, cp.Values["log"], `["a","b","c"]`)
		})
	}
}

func TestStaticInterruptFiresAgainOnNewInput(t *testing.T) {
	g := chain("a").MustCompile()
	opts := Options{InterruptBefore: Nodes{"a"}}
	cp, out := run(t, g, nil, map[string]any{}, opts)
	assertStatus(t, out, Interrupted)
	cp, out = run(t, g, &cp, map[string]any{"log": "again"}, opts)
	assertStatus(t, out, Interrupted)
	assertJSON(t, cp.Values["log"], `["again"]`)
}

// twoQuestions interrupts twice and stores both answers.
func twoQuestions(calls *atomic.Int32) NodeFunc {
	return func(_ context.Context, _ map[string]any, rt *Runtime) (*Command, error) {
		calls.Add(1)
		first := rt.Interrupt("first?")
		second := rt.Interrupt("second?")
		return Update(map[string]any{"answers": []any{first, second}}), nil
	}
}

func TestDynamicInterruptResume(t *testing.T) {
	var calls atomic.Int32
	g := NewBuilder("q").AddChannel("answers", Channel{}).
		AddNode("ask", twoQuestions(&calls)).AddEdge(Start, "ask").MustCompile()

	cp, out := run(t, g, nil, map[string]any{}, Options{})
	assertStatus(t, out, Interrupted)
	if len(out.Interrupts) != 1 || out.Interrupts[0].Value != "first?" || len(out.Interrupts[0].ID) != 32 {
		t.Fatalf("interrupts = %v", out.Interrupts)
	}
	first := out.Interrupts[0].ID
	assertJSON(t, cp.Next, `["ask"]`)
	if got := cp.InterruptsByTask(); len(got[cp.Tasks[0].ID]) != 1 {
		t.Fatalf("by task = %v", got)
	}

	// Resume with a single value: the node reruns, gets "x", asks again.
	cp, out = run(t, g, &cp, Command{Resume: "x"}, Options{})
	assertStatus(t, out, Interrupted)
	second := out.Interrupts[0].ID
	if out.Interrupts[0].Value != "second?" || second == first {
		t.Fatalf("interrupts = %v (first id %s)", out.Interrupts, first)
	}

	// Resume by id.
	cp, out = run(t, g, &cp, Command{Resume: map[string]any{second: "y"}}, Options{})
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values, `{"answers":["x","y"]}`)
	if calls.Load() != 3 {
		t.Fatalf("node ran %d times, want 3 (it reruns from its start)", calls.Load())
	}
}

func TestParallelInterruptsReuseCompletedWork(t *testing.T) {
	var asks, steady atomic.Int32
	ask := func(_ context.Context, _ map[string]any, rt *Runtime) (*Command, error) {
		asks.Add(1)
		return Update(map[string]any{"log": rt.Interrupt(rt.Node)}), nil
	}
	g := NewBuilder("pi").AddChannel("log", Channel{Reducer: Append}).
		AddNode("p", ask).AddNode("q", ask).
		AddNode("r", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			steady.Add(1)
			return Update(map[string]any{"log": "r"}), nil
		}).
		AddEdge(Start, "p").AddEdge(Start, "q").AddEdge(Start, "r").MustCompile()

	cp, out := run(t, g, nil, map[string]any{}, Options{})
	assertStatus(t, out, Interrupted)
	assertJSON(t, cp.Next, `["p","q"]`)
	if len(out.Interrupts) != 2 || out.Interrupts[0].Value != "p" || out.Interrupts[1].Value != "q" {
		t.Fatalf("interrupts = %v", out.Interrupts)
	}
	ids := []string{out.Interrupts[0].ID, out.Interrupts[1].ID}

	// A single value answers the first pending interrupt; q asks again,
	// with the same id since it is the same task and call.
	cp, out = run(t, g, &cp, Command{Resume: "P"}, Options{})
	assertStatus(t, out, Interrupted)
	if len(out.Interrupts) != 1 || out.Interrupts[0].ID != ids[1] {
		t.Fatalf("interrupts = %v, want q's %s", out.Interrupts, ids[1])
	}

	_, out = run(t, g, &cp, Command{Resume: map[string]any{ids[0]: "again"}}, Options{})
	assertError(t, out, KindInvalidUpdate, "")

	cp, out = run(t, g, &cp, Command{Resume: map[string]any{ids[1]: "Q"}}, Options{})
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values["log"], `["P","Q","r"]`)
	if steady.Load() != 1 || asks.Load() != 5 {
		t.Fatalf("r ran %d times (want 1), p and q %d (want 5)", steady.Load(), asks.Load())
	}
}

func TestRecursionLimit(t *testing.T) {
	counter := counterGraph()
	tests := []struct {
		name  string
		steps int
		limit int
		count string
	}{
		{"exactly the default limit", 25, 0, "25"},
		{"one over the default", 26, 0, ""},
		{"custom limit", 5, 4, ""},
		{"custom limit met", 4, 4, "4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp, out := run(t, counter, nil, map[string]any{"steps": tt.steps}, Options{RecursionLimit: tt.limit})
			if tt.count != "" {
				assertStatus(t, out, Done)
				assertJSON(t, cp.Values["count"], tt.count)
				return
			}
			limit := tt.limit
			if limit == 0 {
				limit = DefaultRecursionLimit
			}
			assertError(t, out, KindRecursion, "")
			prefix := "Recursion limit of " + text(limit) + " reached without hitting a stop condition. " +
				"You can increase the limit by setting the `recursion_limit` config key."
			if !strings.HasPrefix(out.Error.Message, prefix) {
				t.Fatalf("message = %q", out.Error.Message)
			}
			assertJSON(t, cp.Values["count"], text(limit))
			assertJSON(t, cp.Next, `["inc"]`)
		})
	}
	_, out := run(t, counter, nil, map[string]any{}, Options{RecursionLimit: -1})
	assertError(t, out, KindValue, "")
}

func TestRecursionLimitCountsPerRun(t *testing.T) {
	// Each resumed run gets the full budget again.
	counter := counterGraph()
	opts := Options{RecursionLimit: 3}
	cp, out := run(t, counter, nil, map[string]any{"steps": 7}, opts)
	assertError(t, out, KindRecursion, "")
	cp, out = run(t, counter, &cp, nil, opts)
	assertError(t, out, KindRecursion, "")
	assertJSON(t, cp.Values["count"], "6")
	cp, out = run(t, counter, &cp, nil, opts)
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values["count"], "7")
}

func TestNodeErrors(t *testing.T) {
	tests := []struct {
		name    string
		node    NodeFunc
		kind    string
		message string
	}{
		{"typed", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return nil, Errorf("ValueError", "boom")
		}, "ValueError", "boom"},
		{"wrapped typed", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return nil, fmt.Errorf("calling: %w", Errorf("KeyError", "k"))
		}, "KeyError", "k"},
		{"plain", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return nil, errors.New("plain")
		}, KindGeneric, "plain"},
		{"panic", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			panic("oops")
		}, KindPanic, `node "n" panicked: oops`},
		{"unknown key", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return Update(map[string]any{"nope": 1}), nil
		}, KindInvalidUpdate, ""},
		{"resume from a node", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return &Command{Resume: 1}, nil
		}, KindInvalidUpdate, ""},
		{"unserializable", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return Update(map[string]any{"log": func() {}}), nil
		}, KindInvalidUpdate, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewBuilder("e").AddChannel("log", Channel{Reducer: Append}).
				AddNode("n", tt.node).AddEdge(Start, "n").MustCompile()
			cp, out := run(t, g, nil, map[string]any{}, Options{})
			assertError(t, out, tt.kind, tt.message)
			assertJSON(t, cp.Next, `["n"]`)
			if cp.Tasks[0].Error == nil || *cp.Tasks[0].Error != *out.Error {
				t.Fatalf("task error = %v", cp.Tasks[0].Error)
			}
		})
	}
}

func TestRetryAfterErrorRerunsOnlyFailedTasks(t *testing.T) {
	var okRuns, flakyRuns atomic.Int32
	g := NewBuilder("retry").AddChannel("log", Channel{Reducer: Append}).
		AddNode("ok", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			okRuns.Add(1)
			return Update(map[string]any{"log": "ok"}), nil
		}).
		AddNode("flaky", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			if flakyRuns.Add(1) == 1 {
				return nil, Errorf("ConnectionError", "try again")
			}
			return Update(map[string]any{"log": "flaky"}), nil
		}).
		AddEdge(Start, "ok").AddEdge(Start, "flaky").MustCompile()
	cp, out := run(t, g, nil, map[string]any{}, Options{})
	assertError(t, out, "ConnectionError", "try again")
	assertJSON(t, cp.Next, `["flaky"]`)
	cp, out = run(t, g, &cp, nil, Options{})
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values["log"], `["flaky","ok"]`)
	if okRuns.Load() != 1 {
		t.Fatalf("ok ran %d times", okRuns.Load())
	}
}

func TestEmptyInput(t *testing.T) {
	g := chain("a").MustCompile()
	for _, input := range []any{nil, Command{Resume: "x"}} {
		cp, out := Begin(g, nil, input, Options{})
		assertError(t, out, KindEmptyInput, "Received no input for __start__")
		if out.Changed || cp.ID != "" {
			t.Fatalf("a failed start produced a checkpoint: %+v", cp)
		}
	}
	_, out := Begin(g, nil, "text", Options{})
	assertError(t, out, KindInvalidUpdate, "Expected an object as input, got a string")
	_, out = Begin(g, nil, map[string]any{}, Options{InterruptBefore: Nodes{"zz"}})
	assertError(t, out, KindValue, "")
	if err := g.CheckOptions(Options{InterruptAfter: Nodes{"zz"}}); err == nil {
		t.Fatal("CheckOptions accepted an unknown node")
	}
}

func TestCancellationStopsBetweenSteps(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	g := NewBuilder("loop").AddChannel("n", Channel{Reducer: Add, Default: 0}).
		AddNode("inc", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			if calls.Add(1) == 3 {
				cancel() // the step in progress finishes; no further step starts
			}
			return Update(map[string]any{"n": 1}), nil
		}).
		AddEdge(Start, "inc").AddEdge("inc", "inc").MustCompile()
	r := &recorder{}
	cp, _, err := Run(ctx, g, nil, map[string]any{}, Options{RecursionLimit: 100}, r.sink)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if calls.Load() != 3 {
		t.Fatalf("inc ran %d times", calls.Load())
	}
	// The interrupted step is abandoned: the run continues from the last
	// checkpoint, which holds two increments.
	assertJSON(t, cp.Values["n"], "2")
	if last := r.cps[len(r.cps)-1]; last.ID != cp.ID {
		t.Fatalf("returned checkpoint %s is not the last one stored (%s)", cp.ID, last.ID)
	}
}

func TestNodesSeeCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	g := NewBuilder("wait").AddChannel("x", Channel{}).
		AddNode("wait", func(ctx context.Context, _ map[string]any, _ *Runtime) (*Command, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}).AddEdge(Start, "wait").MustCompile()
	go func() {
		<-started
		cancel()
	}()
	_, _, err := Run(ctx, g, nil, map[string]any{}, Options{}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestSinkErrorStopsRun(t *testing.T) {
	g := chain("a", "b").MustCompile()
	boom := errors.New("disk full")
	calls := 0
	_, _, err := Run(context.Background(), g, nil, map[string]any{}, Options{}, func(context.Context, Checkpoint) error {
		calls++
		if calls == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls != 2 {
		t.Fatalf("err = %v after %d calls", err, calls)
	}
}

func TestTypedNilErrorIsStillAnError(t *testing.T) {
	g := NewBuilder("nil").AddChannel("x", Channel{}).
		AddNode("n", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			var e *Error
			return nil, e
		}).AddEdge(Start, "n").MustCompile()
	_, out := run(t, g, nil, map[string]any{}, Options{})
	assertError(t, out, KindGeneric, "")
}

func TestResumeAfterCrashAtInputCheckpoint(t *testing.T) {
	// The process died right after storing the input checkpoint.
	g := counterGraph()
	opts := Options{RecursionLimit: 3}
	input, out := Begin(g, nil, map[string]any{"steps": 3}, opts)
	assertStatus(t, out, Running)
	cp, out := run(t, g, &input, nil, opts)
	assertStatus(t, out, Done) // applying the input does not eat the budget
	assertJSON(t, cp.Values, `{"count":3,"steps":3}`)
}

func TestInputCommandKeepsInterruptedTasks(t *testing.T) {
	g := approvalGraph()
	cp, out := run(t, g, nil, map[string]any{"request": "x"}, Options{})
	id := out.Interrupts[0].ID

	// An update alone: the pending task reruns and asks again, same id.
	edited, out := run(t, g, &cp, Command{Update: WritesOf(map[string]any{"request": "y"})}, Options{})
	assertStatus(t, out, Interrupted)
	assertJSON(t, out.Interrupts, `[{"id":"`+id+`","value":{"question":"approve y?"}}]`)

	// Resume and update together; goto to an already pending node adds nothing.
	done, out := run(t, g, &edited, Command{Resume: "ok", Update: WritesOf(map[string]any{"request": "z"}), Goto: []string{"ask"}}, Options{})
	assertStatus(t, out, Done)
	assertJSON(t, done.Values, `{"request":"z","answer":"ok"}`)
}

func TestAbnormalNodeExits(t *testing.T) {
	tests := []struct {
		name string
		node NodeFunc
		kind string
	}{
		{"interrupt value is not JSON", func(_ context.Context, _ map[string]any, rt *Runtime) (*Command, error) {
			rt.Interrupt(make(chan int))
			return nil, nil
		}, KindValue},
		{"goexit", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			runtime.Goexit()
			return nil, nil
		}, KindGeneric},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewBuilder("x").AddChannel("x", Channel{}).AddNode("n", tt.node).AddEdge(Start, "n").MustCompile()
			_, out := run(t, g, nil, map[string]any{}, Options{})
			assertError(t, out, tt.kind, "")
		})
	}
}

// Review #16: a step of several tasks reports each completed task while
// the others run (Options.Pending, LangGraph's pending writes); replayed
// from the last report after being cut short (here its context ends, as a
// Lambda's time limit would end it), the step runs only the task that had
// not completed.
func TestPendingWritesSkipCompletedTasksOnReplay(t *testing.T) {
	var fastRuns, slowRuns atomic.Int32
	var cutShort atomic.Bool
	cutShort.Store(true)
	fast := func(name string) NodeFunc {
		return func(context.Context, map[string]any, *Runtime) (*Command, error) {
			fastRuns.Add(1)
			return Update(map[string]any{"log": name}), nil
		}
	}
	g := NewBuilder("pending").AddChannel("log", Channel{Reducer: Append}).
		AddNode("fast1", fast("fast1")).AddNode("fast2", fast("fast2")).
		AddNode("slow", func(ctx context.Context, _ map[string]any, _ *Runtime) (*Command, error) {
			slowRuns.Add(1)
			if cutShort.Load() {
				<-ctx.Done() // runs past the time limit
				return nil, ctx.Err()
			}
			return Update(map[string]any{"log": "slow"}), nil
		}).
		AddEdge(Start, "fast1").AddEdge(Start, "fast2").AddEdge(Start, "slow").MustCompile()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var reports []Checkpoint
	opts := Options{Pending: func(cp Checkpoint) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, cp)
		if len(reports) == 2 {
			cancel() // both fast tasks are recorded: the step is cut short
		}
	}}
	var stored []Checkpoint
	_, _, err := Run(ctx, g, nil, map[string]any{}, opts, func(_ context.Context, cp Checkpoint) error {
		stored = append(stored, cp)
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the step cut short", err)
	}
	mu.Lock()
	if len(reports) != 2 {
		t.Fatalf("%d reports, want one per fast task while slow runs", len(reports))
	}
	last := reports[1]
	mu.Unlock()
	step := stored[len(stored)-1] // the step's checkpoint, as stored before it
	if last.ID != step.ID {
		t.Fatalf("the report is checkpoint %s, want the step's own %s (it replaces it)", last.ID, step.ID)
	}
	done := map[string]bool{}
	for _, task := range last.Tasks {
		done[task.Name] = task.Result != nil
	}
	if !done["fast1"] || !done["fast2"] || done["slow"] {
		t.Fatalf("completed tasks in the report: %v, want fast1 and fast2", done)
	}
	assertJSON(t, last.Next, `["slow"]`)

	// Replayed from the report (a retried Lambda resumes from the stored
	// checkpoint): only slow runs again.
	cutShort.Store(false)
	cp, out, err := Continue(context.Background(), g, last, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values["log"], `["fast1","fast2","slow"]`)
	if fastRuns.Load() != 2 || slowRuns.Load() != 2 {
		t.Fatalf("fast tasks ran %d times, slow %d: want 2 (once each) and 2", fastRuns.Load(), slowRuns.Load())
	}

	// A step of one task reports nothing: the next checkpoint records it.
	reports = nil
	one := NewBuilder("one").AddChannel("log", Channel{Reducer: Append}).AddNode("a", fast("a")).
		AddEdge(Start, "a").MustCompile()
	if _, _, err := Run(context.Background(), one, nil, map[string]any{}, opts, nil); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 0 {
		t.Fatalf("%d reports for steps of one task", len(reports))
	}
}

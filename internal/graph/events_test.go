package graph

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// observed collects a run's events.
type observed struct {
	mu     sync.Mutex
	events []Event
}

func (o *observed) observe(e Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

// lines renders the events one per line: namespace, kind, step and what
// identifies them (a checkpoint's source and outcome, a task's name and how
// it ended).
func (o *observed) lines() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, e := range o.events {
		ns := strings.Join(e.Namespace, "|")
		if ns != "" {
			// task ids are derived from checkpoint ids: keep only the node
			parts := []string{}
			for _, p := range e.Namespace {
				parts = append(parts, strings.SplitN(p, ":", 2)[0])
			}
			ns = strings.Join(parts, "|") + " "
		}
		line := fmt.Sprintf("%s%s %d", ns, e.Kind, e.Step)
		switch e.Kind {
		case EventCheckpoint:
			line += fmt.Sprintf(" %s %s next=%v", e.Checkpoint.Metadata.Source, e.Outcome.Status, e.Checkpoint.Next)
		case EventTaskStart:
			line += " " + e.Task.Name
		case EventTaskEnd:
			line += " " + e.Task.Name
			switch {
			case e.Cached:
				line += " cached"
			case e.Task.Error != nil:
				line += " error " + e.Task.Error.Kind
			case len(e.Task.Interrupts) > 0:
				line += fmt.Sprintf(" interrupt %v", e.Task.Interrupts[0].Value)
			default:
				line += fmt.Sprintf(" wrote %v", e.Task.Result.Writes.Map())
			}
		case EventCustom, EventMessageChunk:
			line += fmt.Sprintf(" %s %v", e.Task.Name, e.Data)
		case EventCallStart, EventCallEnd:
			line += fmt.Sprintf(" %s %s %s %s in=%v out=%v meta=%v", e.Task.Name, e.Call.Type, e.Call.Name, e.Call.ID, e.Call.Input, e.Call.Output, e.Call.Metadata)
		}
		out = append(out, line)
	}
	return out
}

func assertLines(t *testing.T, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestObserveReportsTasksAndCheckpointsInOrder(t *testing.T) {
	var o observed
	rec := &recorder{}
	_, out, err := Run(context.Background(), chain("a", "b").MustCompile(), nil, map[string]any{}, Options{Observe: o.observe}, rec.sink)
	if err != nil {
		t.Fatal(err)
	}
	assertStatus(t, out, Done)
	assertLines(t, o.lines(), []string{
		"checkpoint -1 input running next=[__start__]",
		"checkpoint 0 loop running next=[a]",
		"task_start 1 a",
		"task_end 1 a wrote map[log:a]",
		"checkpoint 1 loop running next=[b]",
		"task_start 2 b",
		"task_end 2 b wrote map[log:b]",
		"checkpoint 2 loop done next=[]",
	})
	// Every checkpoint reported is one the sink got, in the same order.
	var cps []string
	for _, e := range o.events {
		if e.Kind == EventCheckpoint {
			cps = append(cps, e.Checkpoint.ID)
		}
	}
	var stored []string
	for _, cp := range rec.cps {
		stored = append(stored, cp.ID)
	}
	if !reflect.DeepEqual(cps, stored) {
		t.Fatalf("reported checkpoints %v, stored %v", cps, stored)
	}
}

func TestObserveTaskStartGetsTheNodesState(t *testing.T) {
	var o observed
	g := chain("a", "b").MustCompile()
	run(t, g, nil, map[string]any{"log": []any{"in"}}, Options{Observe: o.observe})
	for _, e := range o.events {
		if e.Kind == EventTaskStart && e.Task.Name == "b" {
			assertJSON(t, e.Values, `{"log":["in","a"]}`)
			return
		}
	}
	t.Fatal("no task_start for b")
}

func TestObserveInterruptAndCachedResult(t *testing.T) {
	// a and b run in one step; b interrupts. On resume a's recorded result
	// is reused (reported as cached) and only b runs again.
	g := NewBuilder("hitl").
		AddChannel("log", Channel{Reducer: Append}).
		AddNode("a", logNode("a")).
		AddNode("b", func(_ context.Context, _ map[string]any, rt *Runtime) (*Command, error) {
			answer := rt.Interrupt("ok?")
			return Update(map[string]any{"log": answer}), nil
		}).
		AddEdge(Start, "a").AddEdge(Start, "b").MustCompile()
	var first observed
	cp, out := run(t, g, nil, map[string]any{}, Options{Observe: first.observe})
	assertStatus(t, out, Interrupted)
	assertLines(t, first.lines(), []string{
		"checkpoint -1 input running next=[__start__]",
		"checkpoint 0 loop running next=[a b]",
		"task_start 1 a",
		"task_start 1 b",
		"task_end 1 a wrote map[log:a]",
		"task_end 1 b interrupt ok?",
		"checkpoint 0 loop interrupted next=[b]",
	})
	var second observed
	_, out = run(t, g, &cp, Command{Resume: "yes"}, Options{Observe: second.observe})
	assertStatus(t, out, Done)
	assertLines(t, second.lines(), []string{
		"checkpoint 0 loop running next=[b]",
		"task_end 1 a cached",
		"task_start 1 b",
		"task_end 1 b wrote map[log:yes]",
		"checkpoint 1 loop done next=[]",
	})
}

func TestObserveStaticInterruptRunsNoTask(t *testing.T) {
	var o observed
	_, out := run(t, chain("a", "b").MustCompile(), nil, map[string]any{}, Options{Observe: o.observe, InterruptBefore: Nodes{"b"}})
	assertStatus(t, out, Interrupted)
	got := o.lines()
	assertLines(t, got[len(got)-2:], []string{
		"checkpoint 1 loop running next=[b]",
		"checkpoint 1 loop interrupted next=[b]",
	})
}

func TestObserveNodeError(t *testing.T) {
	var o observed
	g := NewBuilder("boom").AddChannel("x", Channel{}).
		AddNode("a", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return nil, Errorf(KindValue, "boom")
		}).AddEdge(Start, "a").MustCompile()
	_, out := run(t, g, nil, map[string]any{}, Options{Observe: o.observe})
	assertError(t, out, KindValue, "boom")
	got := o.lines()
	assertLines(t, got[len(got)-2:], []string{
		"task_end 1 a error ValueError",
		"checkpoint 0 loop error next=[a]",
	})
}

func TestEmitAndSubgraphEventsCarryTheNamespace(t *testing.T) {
	child := NewBuilder("child").AddChannel("log", Channel{Reducer: Append}).
		AddNode("inner", func(_ context.Context, _ map[string]any, rt *Runtime) (*Command, error) {
			if err := rt.Emit(map[string]any{"progress": 1}); err != nil {
				return nil, err
			}
			return Update(map[string]any{"log": "inner"}), nil
		}).
		AddEdge(Start, "inner").MustCompile()
	var taskID string
	parent := NewBuilder("parent").AddChannel("log", Channel{Reducer: Append}).
		AddNode("sub", func(ctx context.Context, state map[string]any, rt *Runtime) (*Command, error) {
			taskID = rt.TaskID
			cp, out, err := Run(ctx, child, nil, map[string]any{}, rt.Subgraph(Options{}), nil)
			if err != nil || out.Status != Done {
				return nil, fmt.Errorf("child: %v %v", err, out.Error)
			}
			return Update(map[string]any{"log": cp.Values["log"]}), nil
		}).
		AddEdge(Start, "sub").MustCompile()
	var o observed
	_, out := run(t, parent, nil, map[string]any{}, Options{Observe: o.observe})
	assertStatus(t, out, Done)
	assertLines(t, o.lines(), []string{
		"checkpoint -1 input running next=[__start__]",
		"checkpoint 0 loop running next=[sub]",
		"task_start 1 sub",
		"sub checkpoint -1 input running next=[__start__]",
		"sub checkpoint 0 loop running next=[inner]",
		"sub task_start 1 inner",
		"sub custom 1 inner map[progress:1]",
		"sub task_end 1 inner wrote map[log:inner]",
		"sub checkpoint 1 loop done next=[]",
		"task_end 1 sub wrote map[log:[inner]]",
		"checkpoint 1 loop done next=[]",
	})
	for _, e := range o.events {
		if len(e.Namespace) > 0 && e.Namespace[0] != "sub:"+taskID {
			t.Fatalf("namespace %v, want [sub:%s]", e.Namespace, taskID)
		}
	}
}

func TestEmitWithoutObserverIsANoOpAndRefusesNonJSON(t *testing.T) {
	rt := &Runtime{Node: "n"}
	if err := rt.Emit(func() {}); err != nil {
		t.Fatalf("unobserved Emit: %v", err)
	}
	var o observed
	rt.opts.Observe = o.observe
	if err := rt.Emit(func() {}); err == nil {
		t.Fatal("Emit of a func: no error")
	}
	if len(o.events) != 0 {
		t.Fatalf("events %v", o.events)
	}
}

func TestMessageChunksAndCallsAreReportedInOrder(t *testing.T) {
	g := NewBuilder("g").AddChannel("messages", Channel{Reducer: Messages}).
		AddNode("model", func(_ context.Context, _ map[string]any, rt *Runtime) (*Command, error) {
			if !rt.Observed() {
				return nil, fmt.Errorf("not observed")
			}
			if err := rt.StartCall(Call{ID: "c1", Type: "chat_model", Name: "ChatOpenAI", Input: []any{"hi"},
				Metadata: map[string]any{"ls_temperature": 0.5}}); err != nil {
				return nil, err
			}
			for _, piece := range []string{"Hel", "lo"} {
				if err := rt.EmitMessageChunk(map[string]any{"type": "AIMessageChunk", "id": "m1", "content": piece}); err != nil {
					return nil, err
				}
			}
			msg := map[string]any{"type": "ai", "id": "m1", "content": "Hello"}
			if err := rt.EndCall(Call{ID: "c1", Type: "chat_model", Name: "ChatOpenAI", Output: msg}); err != nil {
				return nil, err
			}
			return Update(map[string]any{"messages": msg}), nil
		}).
		AddEdge(Start, "model").MustCompile()
	var o observed
	_, out := run(t, g, nil, map[string]any{}, Options{Observe: o.observe})
	assertStatus(t, out, Done)
	assertLines(t, o.lines(), []string{
		"checkpoint -1 input running next=[__start__]",
		"checkpoint 0 loop running next=[model]",
		"task_start 1 model",
		"call_start 1 model chat_model ChatOpenAI c1 in=[hi] out=<nil> meta=map[ls_temperature:0.5]",
		"message_chunk 1 model map[content:Hel id:m1 type:AIMessageChunk]",
		"message_chunk 1 model map[content:lo id:m1 type:AIMessageChunk]",
		"call_end 1 model chat_model ChatOpenAI c1 in=<nil> out=map[content:Hello id:m1 type:ai] meta=map[]",
		"task_end 1 model wrote map[messages:map[content:Hello id:m1 type:ai]]",
		"checkpoint 1 loop done next=[]",
	})
}

func TestChunksAndCallsWithoutObserverAreNoOpsAndRefuseNonJSON(t *testing.T) {
	rt := &Runtime{Node: "n"}
	if rt.Observed() || rt.EmitMessageChunk(map[string]any{"f": func() {}}) != nil || rt.StartCall(Call{Input: func() {}}) != nil {
		t.Fatal("unobserved: observed or an error")
	}
	var o observed
	rt.opts.Observe = o.observe
	if err := rt.EmitMessageChunk(map[string]any{"f": func() {}}); err == nil {
		t.Fatal("a chunk holding a func: no error")
	}
	if err := rt.EndCall(Call{Output: func() {}}); err == nil {
		t.Fatal("a call holding a func: no error")
	}
	if len(o.events) != 0 {
		t.Fatalf("events %v", o.events)
	}
}

func TestNodeMessagesGetTheirStateIDInTheWrites(t *testing.T) {
	g := NewBuilder("chat").AddChannel("messages", Channel{Reducer: Messages}).
		AddNode("bot", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return Update(map[string]any{"messages": []any{map[string]any{"type": "ai", "content": "hi"}}}), nil
		}).AddEdge(Start, "bot").MustCompile()
	var o observed
	cp, out := run(t, g, nil, map[string]any{"messages": []any{}}, Options{Observe: o.observe})
	assertStatus(t, out, Done)
	var written string
	for _, e := range o.events {
		if e.Kind == EventTaskEnd {
			msg := e.Task.Result.Writes.Map()["messages"].([]any)[0].(map[string]any)
			written, _ = msg["id"].(string)
		}
	}
	state := cp.Values["messages"].([]any)[0].(map[string]any)
	if written == "" || state["id"] != written {
		t.Fatalf("written message id %q, state's %v", written, state["id"])
	}
}

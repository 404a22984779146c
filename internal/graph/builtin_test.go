package graph

import (
	"context"
	"encoding/json"
	"testing"
)

func builtin(t *testing.T, name string) *Graph {
	t.Helper()
	g, ok := NewRegistry().Get(name)
	if !ok {
		t.Fatalf("built-in graph %q is not registered", name)
	}
	return g
}

func TestEcho(t *testing.T) {
	var input map[string]any
	if err := decodeJSON([]byte(`{"messages": [{"role": "user", "content": "hi"}]}`), &input); err != nil {
		t.Fatal(err)
	}
	cp, out := run(t, builtin(t, "echo"), nil, input, Options{})
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values, `{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "echo: hi"}]}`)

	// A second turn on the same thread answers the newest message.
	cp, _ = run(t, builtin(t, "echo"), &cp, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "again"}}}, Options{})
	assertJSON(t, cp.Values["messages"].([]any)[3], `{"role": "assistant", "content": "echo: again"}`)
}

func TestCounter(t *testing.T) {
	g := builtin(t, "counter")
	cp, out := run(t, g, nil, map[string]any{"steps": 5}, Options{})
	assertStatus(t, out, Done)
	b, _ := json.Marshal(cp.Values)
	if string(b) != `{"count":5,"steps":5}` {
		t.Fatalf("values = %s", b)
	}

	// Input decoded without UseNumber still counts in integers.
	cp, _ = run(t, g, nil, map[string]any{"steps": float64(3)}, Options{})
	if b, _ := json.Marshal(cp.Values); string(b) != `{"count":3,"steps":3}` {
		t.Fatalf("values = %s", b)
	}

	cp, out = run(t, g, nil, map[string]any{}, Options{})
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values, `{"count": 10}`)

	_, out = run(t, g, nil, map[string]any{"steps": 100}, Options{})
	assertError(t, out, "GraphRecursionError", "")

	_, out = run(t, g, nil, map[string]any{"steps": "many"}, Options{})
	assertError(t, out, "ValueError", "steps must be a number, got a string")
}

func TestApproval(t *testing.T) {
	g := builtin(t, "approval")
	cp, out := run(t, g, nil, map[string]any{"request": "x"}, Options{})
	assertStatus(t, out, Interrupted)
	assertJSON(t, cp.Values, `{"request": "x"}`)
	if len(out.Interrupts) != 1 || out.Interrupts[0].ID == "" {
		t.Fatalf("interrupts = %v", out.Interrupts)
	}
	id := out.Interrupts[0].ID
	assertJSON(t, out.Interrupts, `[{"id": "`+id+`", "value": {"question": "approve x?"}}]`)
	assertJSON(t, cp.PendingInterrupts(), `[{"id": "`+id+`", "value": {"question": "approve x?"}}]`)
	assertJSON(t, cp.Next, `["ask"]`)

	// The resume arrives as the API decodes it.
	var cmd Command
	if err := json.Unmarshal([]byte(`{"resume": "yes"}`), &cmd); err != nil {
		t.Fatal(err)
	}
	done, out := run(t, g, &cp, cmd, Options{})
	assertStatus(t, out, Done)
	assertJSON(t, done.Values, `{"request": "x", "answer": "yes"}`)
	assertJSON(t, done.Next, `[]`)

	// By interrupt id, from the same interrupted checkpoint.
	done, out = run(t, g, &cp, Command{Resume: map[string]any{id: map[string]any{"ok": true}}}, Options{})
	assertStatus(t, out, Done)
	assertJSON(t, done.Values, `{"request": "x", "answer": {"ok": true}}`)
}

func TestFail(t *testing.T) {
	cp, out := run(t, builtin(t, "fail"), nil, map[string]any{}, Options{})
	assertError(t, out, "ValueError", "boom")
	assertJSON(t, map[string]any{"__error__": out.Error}, `{"__error__": {"error": "ValueError", "message": "boom"}}`)
	assertJSON(t, cp.Next, `["fail"]`)
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	assertJSON(t, r.Names(), `["approval", "counter", "echo", "fail"]`)
	if err := r.Register(counterGraph()); err == nil {
		t.Fatal("a built-in was shadowed")
	}
	mine := chain("a").MustCompile()
	if err := r.Register(mine); err != nil {
		t.Fatal(err)
	}
	if g, ok := r.Get("chain"); !ok || g != mine {
		t.Fatal("registered graph not found")
	}
	if NewRegistry().Names()[1] != "counter" || len(NewRegistry().Names()) != 4 {
		t.Fatal("registries share state")
	}
	if _, ok := r.Get("nope"); ok {
		t.Fatal("found a graph that does not exist")
	}
}

func TestInfo(t *testing.T) {
	info := builtin(t, "counter").Info()
	assertJSON(t, info.Nodes, `[
		{"id": "__start__", "type": "schema", "data": "__start__"},
		{"id": "inc", "type": "runnable", "data": {"name": "inc"}},
		{"id": "__end__", "type": "schema", "data": "__end__"}]`)
	assertJSON(t, info.Edges, `[
		{"source": "__start__", "target": "inc"},
		{"source": "inc", "target": "__end__", "conditional": true},
		{"source": "inc", "target": "inc", "conditional": true}]`)
	assertJSON(t, info.StateSchema, `{"title": "counter", "type": "object", "properties": {
		"count": {"type": "number", "default": 0},
		"steps": {"type": "integer"}}}`)
	if info.Name != "counter" || info.Description == "" {
		t.Fatalf("info = %+v", info)
	}

	echo := builtin(t, "echo").Info()
	assertJSON(t, echo.StateSchema, `{"title": "echo", "type": "object", "properties": {
		"messages": {"type": "array", "items": {"type": "object"}}}}`)

	// A router without declared targets may go anywhere.
	open := NewBuilder("open").AddChannel("x", Channel{}).
		AddNode("a", logNode("a")).AddNode("b", logNode("b")).AddEdge(Start, "a").
		AddConditionalEdges("a", func(map[string]any) ([]string, error) { return nil, nil }).
		MustCompile().Info()
	assertJSON(t, open.Edges, `[
		{"source": "__start__", "target": "a"},
		{"source": "a", "target": "__end__", "conditional": true},
		{"source": "a", "target": "a", "conditional": true},
		{"source": "a", "target": "b", "conditional": true}]`)
}

func TestCompileRejectsBadGraphs(t *testing.T) {
	noop := func(context.Context, map[string]any, *Runtime) (*Command, error) { return nil, nil }
	tests := map[string]*Builder{
		"no name":          NewBuilder("").AddNode("a", noop).AddEdge(Start, "a"),
		"no nodes":         NewBuilder("g"),
		"no entry":         NewBuilder("g").AddNode("a", noop),
		"reserved name":    NewBuilder("g").AddNode("__x", noop).AddEdge(Start, "__x"),
		"duplicate node":   NewBuilder("g").AddNode("a", noop).AddNode("a", noop).AddEdge(Start, "a"),
		"nil node":         NewBuilder("g").AddNode("a", nil).AddEdge(Start, "a"),
		"edge to unknown":  NewBuilder("g").AddNode("a", noop).AddEdge(Start, "a").AddEdge("a", "b"),
		"edge from end":    NewBuilder("g").AddNode("a", noop).AddEdge(Start, "a").AddEdge(End, "a"),
		"edge to start":    NewBuilder("g").AddNode("a", noop).AddEdge(Start, "a").AddEdge("a", Start),
		"branch target":    NewBuilder("g").AddNode("a", noop).AddEdge(Start, "a").AddConditionalEdges("a", func(map[string]any) ([]string, error) { return nil, nil }, "zz"),
		"nil router":       NewBuilder("g").AddNode("a", noop).AddEdge(Start, "a").AddConditionalEdges("a", nil),
		"channel reserved": NewBuilder("g").AddChannel("__c", Channel{}).AddNode("a", noop).AddEdge(Start, "a"),
		"channel twice":    NewBuilder("g").AddChannel("c", Channel{}).AddChannel("c", Channel{}).AddNode("a", noop).AddEdge(Start, "a"),
		"bad reducer":      NewBuilder("g").AddChannel("c", Channel{Reducer: "max"}).AddNode("a", noop).AddEdge(Start, "a"),
	}
	for name, b := range tests {
		if _, err := b.Compile(); err == nil {
			t.Errorf("%s: compiled", name)
		}
	}
}

func TestCompiledGraphIsFrozen(t *testing.T) {
	b := chain("a")
	g := b.MustCompile()
	b.AddNode("late", logNode("late")).AddEdge("a", "late")
	cp, _ := run(t, g, nil, map[string]any{}, Options{})
	assertJSON(t, cp.Values["log"], `["a"]`)
	if len(g.Nodes()) != 1 {
		t.Fatalf("nodes = %v", g.Nodes())
	}
}

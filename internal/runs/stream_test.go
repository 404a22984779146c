package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// gate lets a test hold a node until it says so.
type gate struct {
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 16), release: make(chan struct{})} }

// streamGraphs are the graphs the stream tests run besides the built-ins:
//
//   - chat: bot answers with an AI message (messages reducer, no id given),
//     then tail writes nothing;
//   - nested: sub runs the graph child as a subgraph; child's inner writes
//     a message and emits a custom event;
//   - held: hold waits at the gate, then writes.
func streamGraphs(t *testing.T, g *gate) *graph.Registry {
	reg := graph.NewRegistry()
	chat := graph.NewBuilder("chat").
		AddChannel("messages", graph.Channel{Reducer: graph.Messages}).
		AddNode("bot", func(context.Context, map[string]any, *graph.Runtime) (*graph.Command, error) {
			return graph.Update(map[string]any{"messages": map[string]any{"type": "ai", "content": "hello"}}), nil
		}).
		AddNode("tail", func(context.Context, map[string]any, *graph.Runtime) (*graph.Command, error) { return nil, nil }).
		AddEdge(graph.Start, "bot").AddEdge("bot", "tail").MustCompile()
	child := graph.NewBuilder("child").
		AddChannel("messages", graph.Channel{Reducer: graph.Messages}).
		AddNode("inner", func(_ context.Context, _ map[string]any, rt *graph.Runtime) (*graph.Command, error) {
			if err := rt.Emit(map[string]any{"progress": "half"}); err != nil {
				return nil, err
			}
			return graph.Update(map[string]any{"messages": map[string]any{"type": "ai", "content": "from inside", "id": "m-inner"}}), nil
		}).
		AddEdge(graph.Start, "inner").MustCompile()
	nested := graph.NewBuilder("nested").
		AddChannel("messages", graph.Channel{Reducer: graph.Messages}).
		AddNode("sub", func(ctx context.Context, state map[string]any, rt *graph.Runtime) (*graph.Command, error) {
			cp, out, err := graph.Run(ctx, child, nil, map[string]any{"messages": state["messages"]}, rt.Subgraph(graph.Options{}), nil)
			if err != nil || out.Status != graph.Done {
				return nil, fmt.Errorf("child: %v %v", err, out.Error)
			}
			return graph.Update(map[string]any{"messages": cp.Values["messages"]}), nil
		}).
		AddEdge(graph.Start, "sub").MustCompile()
	held := graph.NewBuilder("held").
		AddChannel("log", graph.Channel{Reducer: graph.Append}).
		AddNode("first", func(context.Context, map[string]any, *graph.Runtime) (*graph.Command, error) {
			return graph.Update(map[string]any{"log": "first"}), nil
		}).
		AddNode("hold", func(ctx context.Context, _ map[string]any, _ *graph.Runtime) (*graph.Command, error) {
			g.entered <- struct{}{}
			select {
			case <-g.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return graph.Update(map[string]any{"log": "held"}), nil
		}).
		AddEdge(graph.Start, "first").AddEdge("first", "hold").MustCompile()
	tokens := graph.NewBuilder("tokens").
		AddChannel("messages", graph.Channel{Reducer: graph.Messages}).
		AddChannel("n", graph.Channel{}).AddChannel("hold", graph.Channel{}).
		AddNode("model", func(ctx context.Context, state map[string]any, rt *graph.Runtime) (*graph.Command, error) {
			return tokensNode(ctx, state, rt, g)
		}).
		AddEdge(graph.Start, "model").MustCompile()
	agent := graph.NewBuilder("agent").
		AddChannel("messages", graph.Channel{Reducer: graph.Messages}).
		AddNode("model", func(ctx context.Context, _ map[string]any, rt *graph.Runtime) (*graph.Command, error) {
			return agentModel(ctx, rt, g)
		}).
		AddNode("act", agentTool).
		AddEdge(graph.Start, "model").AddEdge("model", "act").MustCompile()
	for _, gr := range []*graph.Graph{chat, nested, held, tokens, agent} {
		if err := reg.Register(gr); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// tokensNode is a chat model node: it streams n chunks (2 by default),
// the first two with fragments of a tool call, then writes the message
// they make. With hold it waits at the gate after the chunks.
func tokensNode(ctx context.Context, state map[string]any, rt *graph.Runtime, g *gate) (*graph.Command, error) {
	n := 2
	if v, ok := state["n"].(json.Number); ok {
		i, _ := v.Int64()
		n = int(i)
	}
	call := graph.Call{ID: "call-run-1", Type: "chat_model", Name: "ChatOpenAI", Input: map[string]any{"messages": []any{[]any{}}},
		Metadata: map[string]any{"ls_provider": "openai", "ls_model_name": "m"}}
	if err := rt.StartCall(call); err != nil {
		return nil, err
	}
	args := []string{`{"order`, `": "42"}`}
	content := ""
	for i := range n {
		piece := fmt.Sprintf("t%d ", i)
		content += piece
		toolChunks := []any{}
		if i < len(args) {
			tc := map[string]any{"type": "tool_call_chunk", "index": 0, "id": nil, "name": nil, "args": args[i]}
			if i == 0 {
				tc["id"], tc["name"] = "call_1", "lookup"
			}
			toolChunks = append(toolChunks, tc)
		}
		calls, invalid := graph.ToolCallsOfChunks(toolChunks)
		if err := rt.EmitMessageChunk(map[string]any{"type": "AIMessageChunk", "id": "m-tok", "content": piece,
			"tool_call_chunks": toolChunks, "tool_calls": calls, "invalid_tool_calls": invalid}); err != nil {
			return nil, err
		}
	}
	if state["hold"] == true {
		g.entered <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	msg := map[string]any{"type": "ai", "id": "m-tok", "content": content, "invalid_tool_calls": []any{},
		"tool_calls": []any{map[string]any{"type": "tool_call", "id": "call_1", "name": "lookup", "args": map[string]any{"order": "42"}}}}
	call.Output = msg
	if err := rt.EndCall(call); err != nil {
		return nil, err
	}
	return graph.Update(map[string]any{"messages": msg}), nil
}

// agentModel is a chat model node as graphdoc's streams: text pieces,
// then a tool call in fragments; it waits at the gate before its call ends
// (so a test sees the pieces while the model is still answering).
func agentModel(ctx context.Context, rt *graph.Runtime, g *gate) (*graph.Command, error) {
	call := graph.Call{ID: "call-run-2", Type: "chat_model", Name: "ChatOpenAI", Metadata: map[string]any{"ls_provider": "openai", "ls_model_name": "m"}}
	if err := rt.StartCall(call); err != nil {
		return nil, err
	}
	chunk := func(content string, toolChunks ...any) error {
		if toolChunks == nil {
			toolChunks = []any{}
		}
		calls, invalid := graph.ToolCallsOfChunks(toolChunks)
		return rt.EmitMessageChunk(map[string]any{"type": "AIMessageChunk", "id": "m-agent", "content": content,
			"tool_call_chunks": toolChunks, "tool_calls": calls, "invalid_tool_calls": invalid})
	}
	for _, piece := range []string{"Let ", "me ", "look."} {
		if err := chunk(piece); err != nil {
			return nil, err
		}
	}
	for i, args := range []string{`{"q":`, ` "x"}`} {
		tc := map[string]any{"type": "tool_call_chunk", "index": 0, "id": nil, "name": nil, "args": args}
		if i == 0 {
			tc["id"], tc["name"] = "call_9", "search"
		}
		if err := chunk("", tc); err != nil {
			return nil, err
		}
	}
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	msg := map[string]any{"type": "ai", "id": "m-agent", "content": "Let me look.", "invalid_tool_calls": []any{},
		"tool_calls": []any{map[string]any{"type": "tool_call", "id": "call_9", "name": "search", "args": map[string]any{"q": "x"}}}}
	call.Output = msg
	if err := rt.EndCall(call); err != nil {
		return nil, err
	}
	return graph.Update(map[string]any{"messages": msg}), nil
}

// agentTool runs the tool call (reporting its run) and emits a named and
// an unnamed custom event.
func agentTool(_ context.Context, _ map[string]any, rt *graph.Runtime) (*graph.Command, error) {
	call := graph.Call{ID: "tool-run-1", Type: "tool", Name: "search", ToolCallID: "call_9", Input: map[string]any{"q": "x"}}
	if err := rt.StartCall(call); err != nil {
		return nil, err
	}
	if err := rt.Emit(map[string]any{"name": "progress", "payload": map[string]any{"done": 1}}); err != nil {
		return nil, err
	}
	if err := rt.Emit(map[string]any{"note": "unnamed"}); err != nil {
		return nil, err
	}
	msg := map[string]any{"type": "tool", "id": "m-tool", "content": "found x", "tool_call_id": "call_9"}
	call.Output = msg
	if err := rt.EndCall(call); err != nil {
		return nil, err
	}
	return graph.Update(map[string]any{"messages": msg}), nil
}

// newStreamService is a service with in-process workers and the SQLite
// event log.
func newStreamService(t *testing.T, tune func(*Service)) (*Service, *gate) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	g := newGate()
	s := &Service{Store: db, Events: db, Graphs: streamGraphs(t, g), PollInterval: 5 * time.Millisecond}
	if tune != nil {
		tune(s)
	}
	stop := s.StartWorkers(2, slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		close(g.release)
		stop()
	})
	return s, g
}

const org = "org-1"

func newThreadID() string { return uuid.NewString() }

// collect reads rs to its end.
func collect(t *testing.T, rs *RunStream) []StreamEvent {
	t.Helper()
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a guard, not a timing assertion
	defer cancel()
	var all []StreamEvent
	for {
		evs, done, err := rs.Next(ctx, time.Second)
		if err != nil {
			t.Fatalf("Next after %d events: %v", len(all), err)
		}
		all = append(all, evs...)
		if done {
			return all
		}
	}
}

func names(evs []StreamEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Event
		if mode, ns, ok := strings.Cut(e.Event, "|"); ok {
			out[i] = mode + "|" + strings.SplitN(ns, ":", 2)[0]
		}
	}
	return out
}

func data(t *testing.T, e StreamEvent) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(e.Data, &v); err != nil {
		t.Fatalf("event %s: data %s: %v", e.Event, e.Data, err)
	}
	return v
}

func jsonOf(t *testing.T, e StreamEvent) string {
	t.Helper()
	b, _ := json.Marshal(data(t, e))
	return string(b)
}

func wantNames(t *testing.T, evs []StreamEvent, want ...string) {
	t.Helper()
	if got := names(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v\nwant   %v", got, want)
	}
}

func streamRun(t *testing.T, s *Service, thread, body string) (Run, []StreamEvent) {
	t.Helper()
	run, rs, err := s.CreateRunStream(context.Background(), org, thread, request(t, body))
	if err != nil {
		t.Fatalf("CreateRunStream: %v", err)
	}
	return run, collect(t, rs)
}

func TestStreamValuesAndUpdates(t *testing.T) {
	s, _ := newStreamService(t, nil)
	run, evs := streamRun(t, s, "", `{"assistant_id":"counter","input":{"steps":2},"stream_mode":["values","updates"]}`)
	wantNames(t, evs, "metadata", "values", "updates", "values", "updates", "values")
	if got := jsonOf(t, evs[0]); got != fmt.Sprintf(`{"attempt":1,"run_id":"%s"}`, run.RunID) {
		t.Errorf("metadata %s", got)
	}
	want := []string{`{"count":0,"steps":2}`, `{"inc":{"count":1}}`, `{"count":1,"steps":2}`, `{"inc":{"count":1}}`, `{"count":2,"steps":2}`}
	for i, w := range want {
		if got := jsonOf(t, evs[i+1]); got != w {
			t.Errorf("event %d (%s) = %s, want %s", i+1, evs[i+1].Event, got, w)
		}
	}
	for _, e := range evs {
		if e.ID != -1 {
			t.Errorf("event %s has id %d: a run that is not resumable sends none", e.Event, e.ID)
		}
	}
}

func TestStreamMessages(t *testing.T) {
	s, _ := newStreamService(t, nil)
	thread := newThreadID()
	_, evs := streamRun(t, s, thread, `{"assistant_id":"chat","input":{"messages":[{"type":"human","content":"hi","id":"h1"}]},
		"stream_mode":["messages-tuple","messages","updates"],"if_not_exists":"create","metadata":{"who":"test"}}`)
	wantNames(t, evs, "metadata", "updates", "messages", "messages/metadata", "messages/complete", "updates")
	state, err := s.ThreadState(context.Background(), org, thread)
	if err != nil {
		t.Fatal(err)
	}
	msgs := state.Values["messages"].([]any)
	stateID := msgs[1].(map[string]any)["id"].(string)

	tuple := data(t, evs[2]).([]any)
	msg, meta := tuple[0].(map[string]any), tuple[1].(map[string]any)
	if msg["id"] != stateID || msg["content"] != "hello" || msg["type"] != "ai" {
		t.Errorf("message %v, want the state's AI message %s", msg, stateID)
	}
	if meta["langgraph_node"] != "bot" || meta["langgraph_step"] != 1.0 || meta["who"] != "test" || meta["thread_id"] != thread ||
		!strings.HasPrefix(meta["langgraph_checkpoint_ns"].(string), "bot:") || meta["graph_id"] != "chat" {
		t.Errorf("metadata %v", meta)
	}
	described := data(t, evs[3]).(map[string]any)
	if _, ok := described[stateID].(map[string]any)["metadata"]; !ok {
		t.Errorf("messages/metadata %v, want {%s: {metadata}}", described, stateID)
	}
	complete := data(t, evs[4]).([]any)
	if len(complete) != 1 || complete[0].(map[string]any)["id"] != stateID {
		t.Errorf("messages/complete %v", complete)
	}
	// The input's human message is not the node's output: not streamed.
	if got := jsonOf(t, evs[5]); got != `{"tail":null}` {
		t.Errorf("update of a node that wrote nothing: %s, want {\"tail\":null}", got)
	}
}

func TestStreamDynamicInterrupt(t *testing.T) {
	s, _ := newStreamService(t, nil)
	in := `{"assistant_id":"approval","input":{"request":"refund"},"if_not_exists":"create"`

	_, evs := streamRun(t, s, newThreadID(), in+`}`)
	// Without updates the interrupt still comes, as a values event (the
	// Python server's rule), then the state with it.
	wantNames(t, evs, "metadata", "values", "values", "values")
	values := jsonOf(t, evs[3])
	interrupt := jsonOf(t, evs[2])
	if !strings.HasPrefix(interrupt, `{"__interrupt__":[{"id":"`) || !strings.Contains(interrupt, `"value":{"question":"approve refund?"}`) {
		t.Errorf("interrupt %s", interrupt)
	}
	if !strings.Contains(values, `"request":"refund"`) || !strings.Contains(values, `"__interrupt__":[{"id"`) {
		t.Errorf("values with the interrupt %s", values)
	}

	thread := newThreadID()
	_, evs = streamRun(t, s, thread, in+`,"stream_mode":["updates"]}`)
	wantNames(t, evs, "metadata", "updates")
	if !strings.HasPrefix(jsonOf(t, evs[1]), `{"__interrupt__":[{"id":"`) {
		t.Errorf("updates %s", jsonOf(t, evs[1]))
	}
	// Resuming shows the state it starts from, then the step.
	_, evs = streamRun(t, s, thread, `{"assistant_id":"approval","command":{"resume":"yes"},"stream_mode":["values","updates"]}`)
	wantNames(t, evs, "metadata", "values", "updates", "values")
	if got := jsonOf(t, evs[2]); got != `{"ask":{"answer":"yes"}}` {
		t.Errorf("update %s", got)
	}
}

func TestStreamStaticInterrupt(t *testing.T) {
	s, _ := newStreamService(t, nil)
	_, evs := streamRun(t, s, newThreadID(), `{"assistant_id":"chat","input":{"messages":[]},"if_not_exists":"create",
		"interrupt_before":["tail"],"stream_mode":["updates"]}`)
	wantNames(t, evs, "metadata", "updates", "updates")
	if got := jsonOf(t, evs[2]); got != `{"__interrupt__":[]}` {
		t.Errorf("static interrupt %s", got)
	}
}

func TestStreamErrorEndsTheStream(t *testing.T) {
	s, _ := newStreamService(t, nil)
	_, evs := streamRun(t, s, "", `{"assistant_id":"fail","input":{"messages":[]},"stream_mode":["values","tasks"]}`)
	wantNames(t, evs, "metadata", "values", "tasks", "tasks", "error")
	if got := jsonOf(t, evs[len(evs)-1]); got != `{"error":"ValueError","message":"boom"}` {
		t.Errorf("error %s", got)
	}
	if got := jsonOf(t, evs[3]); !strings.Contains(got, `"error":{"error":"ValueError","message":"boom"}`) || !strings.Contains(got, `"name":"fail"`) {
		t.Errorf("task result %s", got)
	}
}

// The stream's fallback poll can see the run ended in the store before the
// subscription was read (a loaded machine schedules the reader late, and
// select picks either ready case): every event the worker published, which
// it does before it stores the run terminal, is still delivered.
func TestStreamEndSeenInTheStoreFirstLosesNoEvent(t *testing.T) {
	s, _ := newStreamService(t, nil)
	_, rs, err := s.CreateRunStream(context.Background(), org, "", request(t,
		`{"assistant_id":"fail","input":{"messages":[]},"stream_mode":["values","tasks"]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a guard, not a timing assertion
	defer cancel()
	// Wait for the run's end on its subscription (announced after the run
	// is stored terminal) without taking the queued events.
	for ended := false; !ended; {
		select {
		case <-rs.sub.Ready():
		case <-ctx.Done():
			t.Fatal("the run did not end")
		}
		rs.sub.mu.Lock()
		ended = rs.sub.ended
		rs.sub.mu.Unlock()
	}
	rs.sub.signal()                            // the token this loop took
	if err := rs.checkEnded(ctx); err != nil { // what the poll does when it wins
		t.Fatal(err)
	}
	if !rs.ended {
		t.Fatal("checkEnded did not see the run ended")
	}
	wantNames(t, collect(t, rs), "metadata", "values", "tasks", "tasks", "error")
}

func TestStreamTasksCheckpointsDebug(t *testing.T) {
	s, _ := newStreamService(t, nil)
	thread := newThreadID()
	_, evs := streamRun(t, s, thread, `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hi"}]},
		"if_not_exists":"create","stream_mode":["tasks","checkpoints","debug"]}`)
	wantNames(t, evs, "metadata",
		"checkpoints", "debug", // the input checkpoint
		"checkpoints", "debug", // after __start__
		"tasks", "debug", "tasks", "debug", // echo runs
		"checkpoints", "debug") // the last
	start := data(t, evs[5]).(map[string]any)
	if start["name"] != "echo" || !reflect.DeepEqual(start["triggers"], []any{"branch:to:echo"}) || start["input"] == nil {
		t.Errorf("task start %v", start)
	}
	result := data(t, evs[7]).(map[string]any)
	if result["error"] != nil || !reflect.DeepEqual(result["interrupts"], []any{}) ||
		result["result"].(map[string]any)["messages"].(map[string]any)["content"] != "echo: hi" {
		t.Errorf("task result %v", result)
	}
	last := data(t, evs[9]).(map[string]any)
	state, err := s.ThreadState(context.Background(), org, thread)
	if err != nil {
		t.Fatal(err)
	}
	if state.CheckpointID == nil || last["checkpoint"].(map[string]any)["checkpoint_id"] != *state.CheckpointID ||
		last["config"].(map[string]any)["configurable"].(map[string]any)["thread_id"] != thread ||
		!reflect.DeepEqual(last["next"], []any{}) || last["metadata"].(map[string]any)["source"] != "loop" {
		t.Errorf("last checkpoint %v, state checkpoint %v", last, state.Checkpoint)
	}
	first := data(t, evs[1]).(map[string]any)
	if first["parent_config"] != nil || !reflect.DeepEqual(first["next"], []any{"__start__"}) {
		t.Errorf("input checkpoint %v", first)
	}
	dbg := data(t, evs[10]).(map[string]any)
	if dbg["type"] != "checkpoint" || dbg["step"] != 1.0 || !reflect.DeepEqual(dbg["payload"], last) {
		t.Errorf("debug checkpoint %v", dbg)
	}
	if d := data(t, evs[6]).(map[string]any); d["type"] != "task" || d["step"] != 1.0 {
		t.Errorf("debug task %v", d)
	}
	if d := data(t, evs[8]).(map[string]any); d["type"] != "task_result" {
		t.Errorf("debug task result %v", d)
	}
}

func TestStreamSubgraphs(t *testing.T) {
	s, _ := newStreamService(t, nil)
	body := `{"assistant_id":"nested","input":{"messages":[]},"stream_mode":["updates","custom","messages-tuple"]`
	_, evs := streamRun(t, s, "", body+`,"stream_subgraphs":true}`)
	wantNames(t, evs, "metadata", "custom|sub", "updates|sub", "messages|sub", "updates")
	sub := evs[1].Event[len("custom|"):]
	if !strings.HasPrefix(sub, "sub:") || evs[2].Event != "updates|"+sub {
		t.Errorf("namespaces %s, %s", evs[1].Event, evs[2].Event)
	}
	if got := jsonOf(t, evs[1]); got != `{"progress":"half"}` {
		t.Errorf("custom %s", got)
	}
	meta := data(t, evs[3]).([]any)[1].(map[string]any)
	if meta["langgraph_checkpoint_ns"] != sub+"|inner:"+strings.TrimPrefix(meta["langgraph_checkpoint_ns"].(string), sub+"|inner:") ||
		meta["langgraph_node"] != "inner" {
		t.Errorf("subgraph message metadata %v", meta)
	}

	// Without stream_subgraphs only the graph's own events come; the
	// message the subgraph made is the node's output there.
	_, evs = streamRun(t, s, "", body+`}`)
	wantNames(t, evs, "metadata", "updates", "messages")
}

func TestStreamResumableReplay(t *testing.T) {
	s, _ := newStreamService(t, nil)
	thread := newThreadID()
	run, evs := streamRun(t, s, thread, `{"assistant_id":"counter","input":{"steps":3},"if_not_exists":"create",
		"stream_mode":["values","updates"],"stream_resumable":true}`)
	for i, e := range evs {
		if e.ID != int64(i) {
			t.Fatalf("event %d has id %d: ids of a resumable run count from 0", i, e.ID)
		}
	}
	join := func(last string, modes ...string) ([]StreamEvent, error) {
		_, rs, err := s.JoinRunStream(context.Background(), org, thread, run.RunID, last, modes)
		if err != nil {
			return nil, err
		}
		return collect(t, rs), nil
	}
	all, err := join("-1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(all, evs) {
		t.Fatalf("replay of everything differs:\n%v\n%v", names(all), names(evs))
	}
	rest, err := join("3")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rest, evs[4:]) {
		t.Fatalf("replay after 3: %v, want %v", names(rest), names(evs[4:]))
	}
	// stream_mode narrows a join (metadata always passes).
	onlyUpdates, err := join("-1", "updates")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range onlyUpdates {
		if e.Event != "updates" && e.Event != "metadata" {
			t.Fatalf("a join asking for updates got %s", e.Event)
		}
	}
	// A finished run joined without Last-Event-ID has nothing new.
	if none, err := join(""); err != nil || len(none) != 0 {
		t.Fatalf("live join of a finished run: %v %v", names(none), err)
	}
	// Ids that are not this run's.
	for _, bad := range []string{fmt.Sprint(len(evs)), "1717-0", "abc", "-2"} {
		_, err := join(bad)
		if fail.KindOf(err) != fail.KindInvalid || !strings.Contains(err.Error(), "Last-Event-ID") {
			t.Errorf("Last-Event-ID %q: %v, want a 422 naming Last-Event-ID", bad, err)
		}
	}
}

func TestStreamJoinLiveThenReplayNoGapNoDuplicate(t *testing.T) {
	s, g := newStreamService(t, nil)
	thread := newThreadID()
	run, first, err := s.CreateRunStream(context.Background(), org, thread, request(t,
		`{"assistant_id":"held","input":{"log":[]},"if_not_exists":"create","stream_mode":["values","updates"],"stream_resumable":true}`))
	if err != nil {
		t.Fatal(err)
	}
	first.Close() // the creator leaves; the run goes on
	<-g.entered   // the run waits in hold, its first events logged
	_, rs, err := s.JoinRunStream(context.Background(), org, thread, run.RunID, "-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	g.release <- struct{}{}
	evs := collect(t, rs)
	wantNames(t, evs, "metadata", "values", "updates", "values", "updates", "values")
	for i, e := range evs {
		if e.ID != int64(i) {
			t.Fatalf("event %d has id %d", i, e.ID)
		}
	}
}

func TestStreamSlowReaderIsDroppedAndResumes(t *testing.T) {
	s, _ := newStreamService(t, func(s *Service) { s.StreamBufferEvents = 3 })
	thread := newThreadID()
	run, rs, err := s.CreateRunStream(context.Background(), org, thread, request(t,
		`{"assistant_id":"counter","input":{"steps":5},"if_not_exists":"create","stream_mode":["values"],"stream_resumable":true}`))
	if err != nil {
		t.Fatal(err)
	}
	// The reader reads nothing until the run is over: far more than 3
	// events pile up.
	waitBody(t, s, org, thread, run.RunID)
	_, _, err = rs.Next(context.Background(), time.Second)
	rs.Close()
	if !errors.Is(err, ErrStreamDropped) {
		t.Fatalf("Next of a reader that fell behind: %v, want ErrStreamDropped", err)
	}
	// It reconnects from what it had (nothing) and gets everything.
	_, again, err := s.JoinRunStream(context.Background(), org, thread, run.RunID, "-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, again)
	wantNames(t, evs, "metadata", "values", "values", "values", "values", "values", "values")
}

func TestStreamJoinErrors(t *testing.T) {
	s, _ := newStreamService(t, nil)
	thread := newThreadID()
	run, _ := streamRun(t, s, thread, `{"assistant_id":"echo","input":{"messages":[]},"if_not_exists":"create"}`)
	ctx := context.Background()
	if _, _, err := s.JoinRunStream(ctx, "other-org", thread, run.RunID, "", nil); fail.KindOf(err) != fail.KindNotFound {
		t.Errorf("another organization's run: %v, want not found", err)
	}
	if _, _, err := s.JoinRunStream(ctx, org, thread, uuid.NewString(), "", nil); fail.KindOf(err) != fail.KindNotFound {
		t.Errorf("unknown run: %v, want not found", err)
	}
	if _, _, err := s.JoinRunStream(ctx, org, thread, run.RunID, "", []string{"values", "tokens"}); fail.KindOf(err) != fail.KindInvalid ||
		!strings.Contains(err.Error(), "stream_mode") {
		t.Errorf("unknown stream mode: %v, want a 422 naming stream_mode", err)
	}
	// A run that keeps no events takes any well-formed id and is live.
	_, rs, err := s.JoinRunStream(ctx, org, thread, run.RunID, "7", nil)
	if err != nil {
		t.Fatalf("Last-Event-ID on a run that is not resumable: %v", err)
	}
	if evs := collect(t, rs); len(evs) != 0 {
		t.Errorf("a finished run that keeps no events streamed %v", names(evs))
	}
	if _, _, err := s.CreateRunStream(ctx, org, "", request(t, `{"assistant_id":"echo","stream_mode":["values","tokens"]}`)); fail.KindOf(err) != fail.KindInvalid {
		t.Errorf("unknown stream mode on create: %v", err)
	}
	if _, err := s.JoinThreadStream(ctx, org, thread, "3", nil); fail.KindOf(err) != fail.KindInvalid {
		t.Errorf("Last-Event-ID on a thread stream: %v, want invalid", err)
	}
	if _, err := s.JoinThreadStream(ctx, org, thread, "", []string{"values"}); fail.KindOf(err) != fail.KindInvalid {
		t.Errorf("a run stream mode on a thread stream: %v, want invalid", err)
	}
	if _, err := s.JoinThreadStream(ctx, "other-org", thread, "", nil); fail.KindOf(err) != fail.KindNotFound {
		t.Errorf("another organization's thread: %v, want not found", err)
	}
}

func TestStreamResumableNeedsAnEventLog(t *testing.T) {
	s, _ := newStreamService(t, func(s *Service) { s.Events = nil })
	_, err := s.CreateRun(context.Background(), org, "", request(t, `{"assistant_id":"echo","stream_resumable":true}`))
	if fail.KindOf(err) != fail.KindInvalid || !strings.Contains(err.Error(), "stream_resumable") {
		t.Fatalf("stream_resumable without an event log: %v, want a 422 naming it", err)
	}
}

func TestThreadStreamFollowsEveryRun(t *testing.T) {
	s, _ := newStreamService(t, nil)
	thread := newThreadID()
	if _, err := s.CreateThread(context.Background(), org, ThreadInput{ThreadID: &thread}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all, err := s.JoinThreadStream(ctx, org, thread, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	life, err := s.JoinThreadStream(ctx, org, thread, "", []string{ThreadModeLifecycle})
	if err != nil {
		t.Fatal(err)
	}
	defer life.Close()
	var runIDs []string
	for range 2 {
		run, err := s.CreateRun(ctx, org, thread, request(t, `{"assistant_id":"echo","input":{"messages":[]},"stream_resumable":true}`))
		if err != nil {
			t.Fatal(err)
		}
		waitBody(t, s, org, thread, run.RunID)
		runIDs = append(runIDs, run.RunID)
	}
	read := func(rs *RunStream, n int) []StreamEvent {
		var out []StreamEvent
		for len(out) < n {
			evs, done, err := rs.Next(ctx, time.Second)
			if err != nil || done {
				t.Fatalf("thread stream: %v (done %v) after %v", err, done, names(out))
			}
			out = append(out, evs...)
		}
		return out
	}
	evs := read(all, 8)
	// Each run: its metadata, its values after the input and after echo,
	// and its end (run_done).
	wantNames(t, evs, "metadata", "values", "values", "metadata", "metadata", "values", "values", "metadata")
	for _, e := range evs {
		if e.ID != -1 {
			t.Errorf("thread stream event %s has id %d", e.Event, e.ID)
		}
	}
	evs = read(life, 4)
	want := []string{
		fmt.Sprintf(`{"attempt":1,"run_id":"%s"}`, runIDs[0]), fmt.Sprintf(`{"run_id":"%s","status":"run_done"}`, runIDs[0]),
		fmt.Sprintf(`{"attempt":1,"run_id":"%s"}`, runIDs[1]), fmt.Sprintf(`{"run_id":"%s","status":"run_done"}`, runIDs[1]),
	}
	for i, w := range want {
		if got := jsonOf(t, evs[i]); got != w {
			t.Errorf("lifecycle %d: %s, want %s", i, got, w)
		}
	}
}

func TestStreamOfAPendingRunEndsWhenItIsCancelled(t *testing.T) {
	// Polling the store would take 25 minutes here: the end must come
	// through the hub.
	s, _ := newStreamService(t, func(s *Service) { s.PollInterval = time.Minute })
	thread := newThreadID()
	ctx := context.Background()
	run, err := s.CreateRun(ctx, org, thread, request(t, `{"assistant_id":"echo","if_not_exists":"create","after_seconds":3600}`))
	if err != nil {
		t.Fatal(err)
	}
	_, rs, err := s.JoinRunStream(ctx, org, thread, run.RunID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelRun(ctx, org, thread, run.RunID, "interrupt"); err != nil {
		t.Fatal(err)
	}
	if evs := collect(t, rs); len(evs) != 0 {
		t.Errorf("a run cancelled before it started streamed %v", names(evs))
	}
	if body := waitBody(t, s, org, thread, run.RunID); body != nil {
		t.Errorf("wait of the cancelled run: %v, want null", body)
	}
}

func TestStreamLiveJoinMidRunGetsWhatHappensFromThen(t *testing.T) {
	s, g := newStreamService(t, nil)
	thread := newThreadID()
	ctx := context.Background()
	run, err := s.CreateRun(ctx, org, thread, request(t, `{"assistant_id":"held","input":{"log":[]},"if_not_exists":"create","stream_mode":["values","updates"]}`))
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered // no one watched the run so far: it made no events
	_, rs, err := s.JoinRunStream(ctx, org, thread, run.RunID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	g.release <- struct{}{}
	evs := collect(t, rs)
	wantNames(t, evs, "updates", "values")
	if got := jsonOf(t, evs[1]); got != `{"log":["first","held"]}` {
		t.Errorf("values %s", got)
	}
}

// flakyEvents fails one append, the failAt-th, then works again.
type flakyEvents struct {
	store.Events
	mu     sync.Mutex
	calls  int
	failAt int
}

func (f *flakyEvents) AppendRunEvents(ctx context.Context, orgID, runID string, evs []store.RunEvent, expires time.Time) (int64, error) {
	f.mu.Lock()
	f.calls++
	fail := f.calls == f.failAt
	f.mu.Unlock()
	if fail {
		return 0, errors.New("disk full")
	}
	return f.Events.AppendRunEvents(ctx, orgID, runID, evs, expires)
}

func TestStreamEventLogFailureStopsTheRunWhichResumesWithoutAGap(t *testing.T) {
	var flaky *flakyEvents
	s, _ := newStreamService(t, func(s *Service) {
		flaky = &flakyEvents{Events: s.Events, failAt: 4}
		s.Events, s.LeaseDuration = flaky, time.Second
	})
	thread := newThreadID()
	ctx := context.Background()
	run, err := s.CreateRun(ctx, org, thread, request(t,
		`{"assistant_id":"counter","input":{"steps":4},"if_not_exists":"create","stream_mode":["values"],"stream_resumable":true}`))
	if err != nil {
		t.Fatal(err)
	}
	// The fourth append fails: the attempt stops there, its lease expires
	// and a second attempt finishes the run from its last checkpoint.
	if body := waitBody(t, s, org, thread, run.RunID); body["count"] != 4.0 {
		t.Fatalf("the run ended with %v", body)
	}
	_, rs, err := s.JoinRunStream(ctx, org, thread, run.RunID, "-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, rs)
	attempts := 0
	for i, e := range evs {
		if e.ID != int64(i) {
			t.Fatalf("event %d has id %d: the log has a gap", i, e.ID)
		}
		if e.Event == "metadata" {
			attempts++
		}
	}
	if attempts != 2 || jsonOf(t, evs[len(evs)-1]) != `{"count":4,"steps":4}` {
		t.Fatalf("events %v: want two attempts' metadata and the final state last", names(evs))
	}
}

func TestStreamTokenChunks(t *testing.T) {
	s, _ := newStreamService(t, nil)
	run, evs := streamRun(t, s, "", `{"assistant_id":"tokens","input":{"n":3},
		"stream_mode":["messages-tuple","messages","events","updates"]}`)
	wantNames(t, evs, "metadata", "events", "events", "events",
		"messages", "messages/metadata", "messages/partial", "events",
		"messages", "messages/partial", "events",
		"messages", "messages/partial", "events",
		"events", "updates", "events", "events")
	// messages-tuple: each chunk as it is, with the model's metadata; the
	// message the node writes in the end is not sent again.
	tuple := data(t, evs[4]).([]any)
	chunk, meta := tuple[0].(map[string]any), tuple[1].(map[string]any)
	if chunk["type"] != "AIMessageChunk" || chunk["content"] != "t0 " || chunk["id"] != "m-tok" ||
		meta["langgraph_node"] != "model" || meta["ls_model_name"] != "m" {
		t.Errorf("first chunk %v %v", chunk, meta)
	}
	// messages: metadata once, then the message so far, as a message.
	last := data(t, evs[12]).([]any)[0].(map[string]any)
	want := `{"additional_kwargs":{},"content":"t0 t1 t2 ","id":"m-tok","invalid_tool_calls":[],"response_metadata":{},"tool_calls":[{"args":{"order":"42"},"id":"call_1","name":"lookup","type":"tool_call"}],"type":"ai"}`
	if b, _ := json.Marshal(last); string(b) != want {
		t.Errorf("last messages/partial\n%s\nwant\n%s", b, want)
	}
	first := data(t, evs[6]).([]any)[0].(map[string]any)
	if first["content"] != "t0 " || jsonOfValue(first["tool_calls"]) != `[{"args":{},"id":"call_1","name":"lookup","type":"tool_call"}]` {
		t.Errorf("first messages/partial %v", first)
	}
	// events: astream_events v2 of the chat model, nested in the node.
	wantEvent := func(i int, event, name string) map[string]any {
		t.Helper()
		e := data(t, evs[i]).(map[string]any)
		if e["event"] != event || e["name"] != name {
			t.Fatalf("event %d: %v %v, want %s %s", i, e["event"], e["name"], event, name)
		}
		return e
	}
	start := wantEvent(3, "on_chat_model_start", "ChatOpenAI")
	if start["run_id"] != "call-run-1" || jsonOfValue(start["parent_ids"]) != fmt.Sprintf(`["%s","%s"]`, run.RunID, meta["langgraph_checkpoint_ns"].(string)[len("model:"):]) {
		t.Errorf("on_chat_model_start %v", start)
	}
	stream := wantEvent(7, "on_chat_model_stream", "ChatOpenAI")
	if stream["data"].(map[string]any)["chunk"].(map[string]any)["content"] != "t0 " {
		t.Errorf("on_chat_model_stream %v", stream)
	}
	end := wantEvent(14, "on_chat_model_end", "ChatOpenAI")
	if end["data"].(map[string]any)["output"].(map[string]any)["content"] != "t0 t1 t2 " {
		t.Errorf("on_chat_model_end %v", end)
	}
	wantEvent(16, "on_chain_end", "model")
}

func jsonOfValue(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// countingEvents counts the event-log writes.
type countingEvents struct {
	store.Events
	mu      sync.Mutex
	appends int
	largest int // events in the largest append
}

func (c *countingEvents) AppendRunEvents(ctx context.Context, orgID, runID string, evs []store.RunEvent, expires time.Time) (int64, error) {
	c.mu.Lock()
	c.appends++
	c.largest = max(c.largest, len(evs))
	c.mu.Unlock()
	return c.Events.AppendRunEvents(ctx, orgID, runID, evs, expires)
}

func (c *countingEvents) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.appends
}

func TestStreamResumableChunksAreWrittenInBatches(t *testing.T) {
	var counting *countingEvents
	s, _ := newStreamService(t, func(s *Service) {
		counting = &countingEvents{Events: s.Events}
		s.Events, s.ChunkBatch, s.ChunkWindow = counting, 4, time.Hour
	})
	thread := newThreadID()
	run, evs := streamRun(t, s, thread, `{"assistant_id":"tokens","input":{"n":10},"if_not_exists":"create",
		"stream_mode":["messages-tuple"],"stream_resumable":true}`)
	want := []string{"metadata"}
	for range 10 {
		want = append(want, "messages")
	}
	wantNames(t, evs, want...)
	for i, e := range evs {
		if e.ID != int64(i) {
			t.Fatalf("event %d has id %d", i, e.ID)
		}
		if i > 0 && !strings.Contains(string(e.Data), fmt.Sprintf(`"t%d "`, i-1)) {
			t.Fatalf("event %d is not chunk %d: %s", i, i-1, e.Data)
		}
	}
	// The metadata, two full batches of 4 chunks, and the last 2 chunks
	// when the run ends: 4 writes for 11 events.
	if n := counting.count(); n != 4 {
		t.Errorf("%d event-log writes, want 4", n)
	}
	_, rs, err := s.JoinRunStream(context.Background(), org, thread, run.RunID, "-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if replay := collect(t, rs); !reflect.DeepEqual(replay, evs) {
		t.Fatalf("the replay differs from the live stream: %v", names(replay))
	}
}

// Many chunks waiting at once are written in appends the event log takes
// (DynamoDB: 100 items a transaction).
func TestStreamResumableChunksAreWrittenInBoundedAppends(t *testing.T) {
	var counting *countingEvents
	s, _ := newStreamService(t, func(s *Service) {
		counting = &countingEvents{Events: s.Events}
		s.Events, s.ChunkBatch, s.ChunkWindow = counting, 100000, time.Hour
	})
	_, evs := streamRun(t, s, "", `{"assistant_id":"tokens","input":{"n":150},"stream_mode":["messages-tuple"],"stream_resumable":true}`)
	if len(evs) != 151 {
		t.Fatalf("%d events, want the metadata and 150 chunks", len(evs))
	}
	for i, e := range evs {
		if e.ID != int64(i) {
			t.Fatalf("event %d has id %d", i, e.ID)
		}
	}
	// The metadata, then 150 chunks at the end: 64 + 64 + 22.
	if counting.count() != 4 || counting.largest != maxAppendEvents {
		t.Errorf("%d appends, the largest of %d events; want 4, at most %d", counting.count(), counting.largest, maxAppendEvents)
	}
}

func TestStreamResumableChunksWaitAtMostTheWindow(t *testing.T) {
	s, g := newStreamService(t, func(s *Service) { s.ChunkBatch, s.ChunkWindow = 1000, time.Millisecond })
	run, rs, err := s.CreateRunStream(context.Background(), org, "", request(t,
		`{"assistant_id":"tokens","input":{"n":3,"hold":true},"stream_mode":["messages-tuple"],"stream_resumable":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	<-g.entered
	// The node holds after its chunks: nothing else is sent, so only the
	// window's timer can have written them.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a guard
	defer cancel()
	var got []StreamEvent
	for len(got) < 4 {
		evs, done, err := rs.Next(ctx, time.Second)
		if err != nil || done {
			t.Fatalf("run %s: after %v: done %v, %v", run.RunID, names(got), done, err)
		}
		got = append(got, evs...)
	}
	wantNames(t, got, "metadata", "messages", "messages", "messages")
	g.release <- struct{}{}
}

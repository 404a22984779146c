package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// The thread event protocol in the use case: what protocol runs stream
// (the mapping), the commands, and the thread's event stream with since.
// The HTTP framing is tested in internal/api, the official clients in
// test/conformance.

// protoEv is a protocol event as a client reads it.
type protoEv struct {
	Type    string `json:"type"`
	EventID string `json:"event_id"`
	Seq     int64  `json:"seq"`
	Method  string `json:"method"`
	Params  struct {
		Namespace []string       `json:"namespace"`
		Timestamp int64          `json:"timestamp"`
		Node      string         `json:"node"`
		Data      map[string]any `json:"data"`
	} `json:"params"`
}

func (e protoEv) label() string {
	l := e.Method
	if ev, _ := e.Params.Data["event"].(string); ev != "" {
		l += ":" + ev
	}
	if len(e.Params.Namespace) > 0 {
		l += "@" + segmentName(e.Params.Namespace[0])
	}
	return l
}

func labels(evs []protoEv) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.label()
	}
	return out
}

func command(t *testing.T, s *Service, thread string, id int64, method, params string) map[string]any {
	t.Helper()
	reply, err := s.ThreadCommand(context.Background(), org, thread, Command{ID: &id, Method: method, Params: json.RawMessage(params)})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return reply
}

// readUntil reads ts until stop says so (a guard deadline, not a timing
// assertion).
func readUntil(t *testing.T, ts *ThreadEventStream, stop func(protoEv) bool) []protoEv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var all []protoEv
	for {
		evs, err := ts.Next(ctx, time.Second)
		if err != nil {
			t.Fatalf("Next after %v: %v", labels(all), err)
		}
		for _, e := range evs {
			var ev protoEv
			if err := json.Unmarshal(e.Data, &ev); err != nil {
				t.Fatalf("event %s is not JSON: %v", e.Data, err)
			}
			if ev.Seq != e.ID || ev.Method != e.Event || ev.Type != "event" || ev.EventID == "" {
				t.Fatalf("event framed %d %q, reads %+v", e.ID, e.Event, ev)
			}
			all = append(all, ev)
			if stop(ev) {
				return all
			}
		}
	}
}

func rootTerminal(e protoEv) bool {
	ev, _ := e.Params.Data["event"].(string)
	return e.Method == "lifecycle" && len(e.Params.Namespace) == 0 && (ev == "completed" || ev == "failed" || ev == "interrupted")
}

func open(t *testing.T, s *Service, thread, body string) *ThreadEventStream {
	t.Helper()
	var req EventStreamRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	ts, err := s.OpenThreadEvents(context.Background(), org, thread, req)
	if err != nil {
		t.Fatalf("OpenThreadEvents %s: %v", body, err)
	}
	t.Cleanup(ts.Close)
	return ts
}

var allChannels = `["values","updates","messages","tools","lifecycle","input","checkpoints","tasks","custom"]`

func TestProtocolRunStreamsEveryChannel(t *testing.T) {
	s, _ := newStreamService(t, nil)
	thread := newThreadID()
	reply := command(t, s, thread, 1, "run.start", `{"assistant_id":"chat","input":{"messages":[{"type":"human","content":"hi","id":"h1"}]}}`)
	if reply["type"] != "success" || reply["id"] != int64(1) {
		t.Fatalf("run.start: %v", reply)
	}
	runID, _ := reply["result"].(map[string]any)["run_id"].(string)
	if runID == "" || reply["meta"].(map[string]any)["applied_through_seq"] != int64(0) {
		t.Fatalf("run.start result: %v", reply)
	}
	evs := readUntil(t, open(t, s, thread, `{"channels":`+allChannels+`}`), rootTerminal)
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d (%s) has seq %d: a thread's seqs count from 1 without a gap", i, e.label(), e.Seq)
		}
	}
	got := labels(evs)
	want := []string{"lifecycle:running", "checkpoints", "values", "checkpoints", "tasks",
		"updates", "messages:message-start", "messages:content-block-start", "messages:content-block-delta",
		"messages:content-block-finish", "messages:message-finish", "tasks", "values", "checkpoints", "tasks",
		"updates", "tasks", "checkpoints", "lifecycle:completed"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	start := evs[0].Params.Data
	if start["graph_name"] != "chat" || evs[0].Params.Timestamp == 0 {
		t.Errorf("lifecycle running: %+v", evs[0].Params)
	}
	var msgStart, delta protoEv
	for _, e := range evs {
		switch e.label() {
		case "messages:message-start":
			msgStart = e
		case "messages:content-block-delta":
			delta = e
		}
	}
	if msgStart.Params.Data["role"] != "ai" || msgStart.Params.Node != "bot" {
		t.Errorf("message-start: %+v", msgStart.Params)
	}
	if d, _ := delta.Params.Data["delta"].(map[string]any); d["type"] != "text-delta" || d["text"] != "hello" {
		t.Errorf("content-block-delta: %+v", delta.Params.Data)
	}
	for _, e := range evs {
		if e.Method == "updates" && e.Params.Node == "bot" {
			if msgs, ok := e.Params.Data["messages"]; !ok || msgs == nil {
				t.Errorf("updates of bot carry its writes as data: %+v", e.Params.Data)
			}
		}
	}
	// The filter: lifecycle only, and messages only.
	only := readUntil(t, open(t, s, thread, `{"channels":["lifecycle"]}`), rootTerminal)
	if l := labels(only); !reflect.DeepEqual(l, []string{"lifecycle:running", "lifecycle:completed"}) {
		t.Errorf("lifecycle channel: %v", l)
	}
	// since resumes after a seq: the rest, the same events.
	rest := readUntil(t, open(t, s, thread, `{"channels":`+allChannels+`,"since":7}`), rootTerminal)
	if len(rest) != len(evs)-7 || rest[0].Seq != 8 || !reflect.DeepEqual(labels(rest), got[7:]) {
		t.Errorf("since 7: %v", labels(rest))
	}
}

func TestProtocolSubgraphLifecycleAndNamespaceFilter(t *testing.T) {
	s, _ := newStreamService(t, nil)
	thread := newThreadID()
	command(t, s, thread, 1, "run.start", `{"assistant_id":"nested","input":{"messages":[]}}`)
	evs := readUntil(t, open(t, s, thread, `{"channels":["lifecycle","custom","messages"]}`), rootTerminal)
	got := labels(evs)
	want := []string{"lifecycle:running", "lifecycle:started@sub", "custom@sub",
		"messages:message-start@sub", "messages:content-block-start@sub", "messages:content-block-delta@sub",
		"messages:content-block-finish@sub", "messages:message-finish@sub", "lifecycle:completed@sub",
		"lifecycle:completed"} // the subgraph's message, which sub returns, is not streamed twice
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	if p, _ := evs[2].Params.Data["payload"].(map[string]any); p["progress"] != "half" {
		t.Errorf("custom event: %+v", evs[2].Params.Data)
	}
	// namespaces: the subgraph by its node's name (any task id), depth 0.
	sub := readUntil(t, open(t, s, thread, `{"channels":["messages"],"namespaces":[["sub"]],"depth":0}`),
		func(e protoEv) bool { return e.Params.Data["event"] == "message-finish" })
	for _, e := range sub {
		if len(e.Params.Namespace) != 1 || segmentName(e.Params.Namespace[0]) != "sub" {
			t.Errorf("namespace filter let through %s at %v", e.label(), e.Params.Namespace)
		}
	}
	if len(sub) != 5 {
		t.Errorf("the subgraph's message: %v", labels(sub))
	}
}

func TestProtocolInterruptAndRespond(t *testing.T) {
	s, _ := newStreamService(t, nil)
	thread := newThreadID()
	command(t, s, thread, 1, "run.start", `{"assistant_id":"approval","input":{"request":"leave"}}`)
	ts := open(t, s, thread, `{"channels":["lifecycle","input","values"]}`)
	evs := readUntil(t, ts, rootTerminal)
	var asked protoEv
	for _, e := range evs {
		if e.Method == "input.requested" {
			asked = e
		}
		if e.Method == "values" {
			if _, has := e.Params.Data[interruptKey]; has {
				t.Errorf("values carry __interrupt__: %+v", e.Params.Data)
			}
		}
	}
	last := evs[len(evs)-1]
	if last.Params.Data["event"] != "interrupted" {
		t.Fatalf("the run ends interrupted: %v", labels(evs))
	}
	interruptID, _ := asked.Params.Data["interrupt_id"].(string)
	payload, _ := asked.Params.Data["payload"].(map[string]any)
	if interruptID == "" || payload["question"] != "approve leave?" {
		t.Fatalf("input.requested: %+v", asked.Params.Data)
	}
	// An interrupt the thread does not have is refused.
	if r := command(t, s, thread, 2, "input.respond", `{"interrupt_id":"0123456789abcdef0123456789abcdef","response":"yes","namespace":[]}`); r["error"] != protoNoSuchInterrupt {
		t.Errorf("input.respond to an unknown interrupt: %v", r)
	}
	if r := command(t, s, thread, 3, "input.respond", `{"response":"yes"}`); r["error"] != protoInvalidArgument ||
		!strings.Contains(r["message"].(string), "interrupt_id") {
		t.Errorf("input.respond without an interrupt_id: %v", r)
	}
	r := command(t, s, thread, 4, "input.respond", `{"interrupt_id":"`+interruptID+`","response":"yes","namespace":[]}`)
	applied, _ := r["meta"].(map[string]any)["applied_through_seq"].(int64)
	if r["type"] != "success" || applied < last.Seq {
		t.Fatalf("input.respond: %v (the last event read was %d)", r, last.Seq)
	}
	more := readUntil(t, ts, rootTerminal)
	if l := labels(more); l[0] != "lifecycle:running" || l[len(l)-1] != "lifecycle:completed" || more[0].Seq <= applied {
		t.Fatalf("the resumed run: %v from %d (applied through %d)", l, more[0].Seq, applied)
	}
	var answered bool
	for _, e := range more {
		if e.Method == "values" && e.Params.Data["answer"] == "yes" {
			answered = true
		}
	}
	if !answered {
		t.Errorf("the resumed run's state has no answer: %v", more)
	}
	// The same interrupt again: it was consumed.
	if r := command(t, s, thread, 5, "input.respond", `{"interrupt_id":"`+interruptID+`","response":"no"}`); r["error"] != protoNoSuchInterrupt {
		t.Errorf("answering a consumed interrupt: %v", r)
	}
}

func TestProtocolRunStartResumesAnInterruptedThread(t *testing.T) {
	s, _ := newStreamService(t, nil)
	thread := newThreadID()
	reply := command(t, s, thread, 1, "run.start", `{"assistant_id":"approval","input":{"request":"x"}}`)
	ts := open(t, s, thread, `{"channels":["lifecycle","values"]}`)
	readUntil(t, ts, rootTerminal)
	// The interrupted lifecycle comes as the node interrupts; the thread is
	// interrupted once the run ended.
	waitBody(t, s, org, thread, reply["result"].(map[string]any)["run_id"].(string))
	// run.start with input on an interrupted thread answers it.
	command(t, s, thread, 2, "run.start", `{"assistant_id":"approval","input":"granted"}`)
	more := readUntil(t, ts, rootTerminal)
	if more[len(more)-1].Params.Data["event"] != "completed" || more[len(more)-2].Params.Data["answer"] != "granted" {
		t.Errorf("run.start on an interrupted thread: %v", more)
	}
}

func TestProtocolCommandErrors(t *testing.T) {
	s, _ := newStreamService(t, nil)
	thread := newThreadID()
	cases := []struct {
		method, params, code, names string
	}{
		{"run.halt", `{}`, protoUnknownCommand, "run.halt"},
		{"subscription.subscribe", `{"channels":["values"]}`, protoNotSupported, "subscription.subscribe"},
		{"agent.getTree", `{}`, protoNotSupported, "agent.getTree"},
		{"run.start", `{}`, protoInvalidArgument, "assistant_id"},
		{"run.start", `{"assistant_id":7}`, protoInvalidArgument, "assistant_id"},
		{"run.start", `{"assistant_id":"echo","multitaskStrategy":"later"}`, protoInvalidArgument, "multitaskStrategy"},
		{"run.start", `{"assistant_id":"nope"}`, protoInvalidArgument, "assistant"},
		{"run.start", `{"assistant_id":"echo","config":{"recursion_limit":0}}`, protoInvalidArgument, "recursion_limit"},
		{"run.start", `[1]`, protoInvalidArgument, "params"},
		{"input.respond", `{"responses":[]}`, protoInvalidArgument, "responses"},
		{"input.respond", `{"interrupt_id":"a","namespace":"root"}`, protoInvalidArgument, "namespace"},
	}
	for i, c := range cases {
		r := command(t, s, thread, int64(10+i), c.method, c.params)
		if r["type"] != "error" || r["error"] != c.code || r["id"] != int64(10+i) || !strings.Contains(r["message"].(string), c.names) {
			t.Errorf("%s %s: %v, want %s naming %s", c.method, c.params, r, c.code, c.names)
		}
	}
	ctx := context.Background()
	id := int64(1)
	// input.respond on a thread that is not there (or another
	// organization's) is not found; a thread id that is no UUID invalid.
	if _, err := s.ThreadCommand(ctx, org, thread, Command{ID: &id, Method: "input.respond", Params: json.RawMessage(`{"interrupt_id":"a"}`)}); fail.KindOf(err) != fail.KindNotFound {
		t.Errorf("input.respond on a missing thread: %v", err)
	}
	if _, err := s.ThreadCommand(ctx, org, "not-a-uuid", Command{ID: &id, Method: "run.start", Params: json.RawMessage(`{"assistant_id":"echo"}`)}); fail.KindOf(err) != fail.KindInvalid {
		t.Errorf("run.start on a thread id that is no UUID: %v", err)
	}
}

func TestProtocolStreamErrors(t *testing.T) {
	s, _ := newStreamService(t, nil)
	thread := newThreadID()
	command(t, s, thread, 1, "run.start", `{"assistant_id":"echo","input":{"messages":[]}}`)
	readUntil(t, open(t, s, thread, `{"channels":["lifecycle"]}`), rootTerminal)
	last, err := s.Events.LastThreadEventSeq(context.Background(), org, thread)
	if err != nil || last == 0 {
		t.Fatalf("LastThreadEventSeq = %d, %v", last, err)
	}
	ctx := context.Background()
	seq := func(n int64) *int64 { return &n }
	depth := -1
	cases := []struct {
		name   string
		org    string
		thread string
		req    EventStreamRequest
		kind   fail.Kind
		field  string
	}{
		{"no channel", org, thread, EventStreamRequest{}, fail.KindInvalid, "channels"},
		{"unknown channel", org, thread, EventStreamRequest{Channels: []string{"values", "debug"}}, fail.KindInvalid, "channels"},
		{"empty custom name", org, thread, EventStreamRequest{Channels: []string{"custom:"}}, fail.KindInvalid, "channels"},
		{"since past the last event", org, thread, EventStreamRequest{Channels: []string{"values"}, Since: seq(last + 1)}, fail.KindInvalid, "since"},
		{"negative since", org, thread, EventStreamRequest{Channels: []string{"values"}, Since: seq(-1)}, fail.KindInvalid, "since"},
		{"negative depth", org, thread, EventStreamRequest{Channels: []string{"values"}, Depth: &depth}, fail.KindInvalid, "depth"},
		{"another organization's thread", "other-org", thread, EventStreamRequest{Channels: []string{"values"}}, fail.KindNotFound, ""},
		{"a thread id that is no UUID", org, "x", EventStreamRequest{Channels: []string{"values"}}, fail.KindInvalid, "thread_id"},
	}
	for _, c := range cases {
		_, err := s.OpenThreadEvents(ctx, c.org, c.thread, c.req)
		if fail.KindOf(err) != c.kind || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want kind %d naming %q", c.name, err, c.kind, c.field)
		}
	}
	// since at the last event is fine: nothing to replay.
	if ts, err := s.OpenThreadEvents(ctx, org, thread, EventStreamRequest{Channels: []string{"custom:progress"}, Since: seq(last)}); err != nil {
		t.Errorf("since at the last event: %v", err)
	} else {
		ts.Close()
	}
}

func TestProtocolSlowReaderIsDroppedAndResumes(t *testing.T) {
	s, _ := newStreamService(t, func(s *Service) { s.StreamBufferEvents = 3 })
	thread := newThreadID()
	// The stream is opened before the second run exists (the first made
	// the thread) and reads nothing until that run is over.
	reply := command(t, s, thread, 1, "run.start", `{"assistant_id":"echo","input":{"messages":[]}}`)
	waitBody(t, s, org, thread, reply["result"].(map[string]any)["run_id"].(string))
	ts := open(t, s, thread, `{"channels":`+allChannels+`}`)
	first := readUntil(t, ts, rootTerminal) // the first run, from the log
	reply = command(t, s, thread, 2, "run.start", `{"assistant_id":"counter","input":{"steps":4}}`)
	runID := reply["result"].(map[string]any)["run_id"].(string)
	waitBody(t, s, org, thread, runID)
	var err error
	for err == nil {
		_, err = ts.Next(context.Background(), time.Second)
	}
	if !errors.Is(err, ErrStreamDropped) {
		t.Fatalf("Next of a reader that fell behind: %v, want ErrStreamDropped", err)
	}
	// It resumes after the last seq it had and misses nothing.
	rest := readUntil(t, open(t, s, thread, `{"channels":`+allChannels+`,"since":`+jsonInt(first[len(first)-1].Seq)+`}`), rootTerminal)
	if rest[0].Seq != first[len(first)-1].Seq+1 || rest[0].label() != "lifecycle:running" || rest[len(rest)-1].label() != "lifecycle:completed" {
		t.Fatalf("resumed: %v", labels(rest))
	}
	for i := 1; i < len(rest); i++ {
		if rest[i].Seq != rest[i-1].Seq+1 {
			t.Fatalf("a gap after seq %d", rest[i-1].Seq)
		}
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// The mapping of run-stream events, rule by rule.
func TestProtocolMapper(t *testing.T) {
	ev := func(name, data string) StreamEvent { return StreamEvent{Event: name, Data: json.RawMessage(data)} }
	cases := []struct {
		name string
		in   []StreamEvent
		want []string // method:event@namespace node=... data=...
	}{
		{"values without interrupts", []StreamEvent{ev("values", `{"a":1}`)}, []string{`values {"a":1}`}},
		{"values with an interrupt", []StreamEvent{ev("values", `{"a":1,"__interrupt__":[{"id":"i1","value":{"q":"?"}}]}`)},
			[]string{`input.requested {"interrupt_id":"i1","payload":{"q":"?"}}`, `lifecycle {"event":"interrupted","graph_name":"g"}`, `values {"a":1}`}},
		{"an interrupt alone, twice", []StreamEvent{ev("updates", `{"__interrupt__":[{"id":"i1","value":1}]}`), ev("values", `{"__interrupt__":[{"id":"i1","value":1}]}`)},
			[]string{`input.requested {"interrupt_id":"i1","payload":1}`, `lifecycle {"event":"interrupted","graph_name":"g"}`}},
		{"updates name their node", []StreamEvent{ev("updates", `{"n":{"x":2}}`)}, []string{`updates node=n {"x":2}`}},
		{"a node that wrote nothing", []StreamEvent{ev("updates", `{"n":null}`)}, []string{`updates node=n {"value":null}`}},
		{"subgraph started and completed", []StreamEvent{ev("values|sub:t1", `{"a":1}`), ev("updates", `{"sub":{"a":1}}`)},
			[]string{`lifecycle@sub:t1 {"event":"started","graph_name":"sub"}`, `values@sub:t1 {"a":1}`, `updates node=sub {"a":1}`,
				`lifecycle@sub:t1 {"event":"completed","graph_name":"sub"}`}},
		{"custom", []StreamEvent{ev("custom", `{"p":1}`)}, []string{`custom {"payload":{"p":1}}`}},
		{"checkpoints", []StreamEvent{ev("checkpoints", `{"checkpoint":{"checkpoint_id":"c2"},"parent_checkpoint":{"checkpoint_id":"c1"},"metadata":{"step":3,"source":"loop"}}`)},
			[]string{`checkpoints {"id":"c2","parent_id":"c1","source":"loop","step":3}`}},
		{"an AI message with a tool call", []StreamEvent{ev("messages", `[{"type":"ai","id":"m1","content":"","tool_calls":[{"id":"c1","name":"add","args":{"a":1}}]},{"langgraph_node":"agent"}]`)},
			[]string{
				`messages node=agent {"event":"message-start","id":"m1","metadata":{"langgraph_node":"agent","run_id":"r","thread_id":"t"},"role":"ai"}`,
				`messages node=agent {"content":{"args":"","id":"c1","name":"add","type":"tool_call_chunk"},"event":"content-block-start","index":0,"message_id":"m1"}`,
				`messages node=agent {"delta":{"args":"{\"a\":1}","type":"tool-call-delta"},"event":"content-block-delta","index":0,"message_id":"m1"}`,
				`messages node=agent {"content":{"args":{"a":1},"id":"c1","name":"add","type":"tool_call"},"event":"content-block-finish","index":0,"message_id":"m1"}`,
				`messages node=agent {"event":"message-finish","message_id":"m1"}`}}, // tools come from the tool's own run (TestProtocolMapperCalls)
		{"a named custom event", []StreamEvent{ev("custom", `{"name":"progress","payload":{"done":1}}`)}, []string{`custom {"name":"progress","payload":{"done":1}}`}},
		{"a custom event with more than a name and a payload", []StreamEvent{ev("custom", `{"name":"progress","payload":1,"at":2}`)},
			[]string{`custom {"payload":{"name":"progress","payload":1,"at":2}}`}},
		{"a custom event whose name is no name", []StreamEvent{ev("custom", `{"name":"","payload":1}`), ev("custom", `{"name":7,"payload":1}`), ev("custom", `{"name":"x","value":1}`)},
			[]string{`custom {"payload":{"name":"","payload":1}}`, `custom {"payload":{"name":7,"payload":1}}`, `custom {"payload":{"name":"x","value":1}}`}},
		{"an error ends the run failed", []StreamEvent{ev("values|sub:t1", `{"a":1}`), ev("error", `{"error":"ValueError","message":"boom"}`)},
			[]string{`lifecycle@sub:t1 {"event":"started","graph_name":"sub"}`, `values@sub:t1 {"a":1}`,
				`lifecycle@sub:t1 {"event":"completed","graph_name":"sub"}`, `lifecycle {"error":"ValueError: boom","event":"failed","graph_name":"g"}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newProtocolMapper("r", "t", func() string { return "g" })
			var got []string
			for _, e := range m.mapEvents(c.in) {
				l := e.method
				if len(e.ns) > 0 {
					l += "@" + strings.Join(e.ns, "|")
				}
				if e.node != "" {
					l += " node=" + e.node
				}
				b, _ := json.Marshal(e.data)
				got = append(got, l+" "+string(b))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

// protoLine renders a protocol event compactly for the streamed message
// tests: messages events by their lifecycle step, others as method and
// data.
func protoLine(e protoEvent) string {
	data, _ := e.data.(map[string]any)
	at := ""
	if len(e.ns) > 0 {
		at = "@" + strings.Join(e.ns, "|")
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if e.method != "messages" {
		if e.node != "" {
			at += " node=" + e.node
		}
		return e.method + at + " " + js(e.data)
	}
	id, _ := data["message_id"].(string)
	switch data["event"] {
	case "message-start":
		md, _ := data["metadata"].(map[string]any)
		return fmt.Sprintf("start%s %v %v node=%s/%v", at, data["id"], data["role"], e.node, md["langgraph_node"])
	case "content-block-start":
		return fmt.Sprintf("block-start %s %v %s", id, data["index"], js(data["content"]))
	case "content-block-delta":
		d, _ := data["delta"].(map[string]any)
		switch d["type"] {
		case "text-delta":
			return fmt.Sprintf("text %s %v %q", id, data["index"], d["text"])
		case "tool-call-delta":
			return fmt.Sprintf("args %s %v %q", id, data["index"], d["args"])
		}
		return "delta " + js(data)
	case "content-block-finish":
		return fmt.Sprintf("block-finish %s %v %s", id, data["index"], js(data["content"]))
	case "message-finish":
		return fmt.Sprintf("finish %s %s", id, js(data["usage"]))
	case "error":
		return fmt.Sprintf("error %s %v", id, data["message"])
	}
	return "messages " + js(data)
}

// Streamed messages (AIMessageChunk in messages-tuple) and the calls the
// engine reports, step by step.
func TestProtocolMapperStreamedMessages(t *testing.T) {
	type step struct {
		ev     *StreamEvent // a run-stream event
		call   *graph.Call  // or a call's start (Output nil, start) or end
		start  bool
		node   string
		msgID  string
		finish string // or the end of the run with this status
	}
	ev := func(name, data string) step { return step{ev: &StreamEvent{Event: name, Data: json.RawMessage(data)}} }
	chunk := func(node, id, content, toolChunks string, usage string) step {
		if toolChunks == "" {
			toolChunks = "[]"
		}
		if usage == "" {
			usage = "null"
		}
		return ev("messages", `[{"type":"AIMessageChunk","id":"`+id+`","content":`+strconv.Quote(content)+
			`,"tool_call_chunks":`+toolChunks+`,"usage_metadata":`+usage+`},{"langgraph_node":"`+node+`","ls_provider":"openai","ls_model_name":"gpt"}]`)
	}
	modelEnd := func(node, id string, ok bool) step {
		c := graph.Call{ID: "run-" + id, Type: "chat_model", Name: "ChatOpenAI"}
		if ok {
			c.Output = map[string]any{"type": "ai", "id": id}
		}
		return step{call: &c, node: node, msgID: id}
	}
	tool := func(start bool, output any) step {
		return step{call: &graph.Call{ID: "lc-run", Type: "tool", Name: "add", ToolCallID: "c1", Input: map[string]any{"a": 1}, Output: output},
			start: start, node: "tools"}
	}
	cases := []struct {
		name  string
		steps []step
		want  []string
	}{
		{"text chunks, then the model call's end",
			[]step{chunk("agent", "m1", "Hel", "", ""), chunk("agent", "m1", "lo", "", ""),
				chunk("agent", "m1", "", "", `{"input_tokens":3,"output_tokens":2,"total_tokens":5}`), modelEnd("agent", "m1", true),
				ev("updates", `{"agent":{"messages":[]}}`)},
			[]string{"start m1 ai node=agent/agent", `block-start m1 0 {"text":"","type":"text"}`, `text m1 0 "Hel"`, `text m1 0 "lo"`,
				`block-finish m1 0 {"text":"Hello","type":"text"}`, `finish m1 {"input_tokens":3,"output_tokens":2,"total_tokens":5}`,
				`updates node=agent {"messages":[]}`}},
		{"text, then two tool calls in fragments, ended by the node's update",
			[]step{chunk("agent", "m1", "Let me add.", "", ""),
				chunk("agent", "m1", "", `[{"type":"tool_call_chunk","index":0,"id":"c1","name":"add","args":"{\"a\""}]`, ""),
				chunk("agent", "m1", "", `[{"type":"tool_call_chunk","index":0,"id":null,"name":null,"args":": 1}"}]`, ""),
				chunk("agent", "m1", "", `[{"type":"tool_call_chunk","index":1,"id":"c2","name":"mul","args":""}]`, ""),
				chunk("agent", "m1", "", `[{"type":"tool_call_chunk","index":1,"id":null,"name":null,"args":"oops"}]`, ""),
				ev("updates", `{"agent":{"n":1}}`)},
			[]string{"start m1 ai node=agent/agent", `block-start m1 0 {"text":"","type":"text"}`, `text m1 0 "Let me add."`,
				`block-finish m1 0 {"text":"Let me add.","type":"text"}`,
				`block-start m1 1 {"args":"","id":"c1","index":0,"name":"add","type":"tool_call_chunk"}`, `args m1 1 "{\"a\""`, `args m1 1 ": 1}"`,
				`block-finish m1 1 {"args":{"a":1},"id":"c1","name":"add","type":"tool_call"}`,
				`block-start m1 2 {"args":"","id":"c2","index":1,"name":"mul","type":"tool_call_chunk"}`, `args m1 2 "oops"`,
				`block-finish m1 2 {"args":"oops","error":null,"id":"c2","name":"mul","type":"invalid_tool_call"}`,
				"finish m1 null", `updates node=agent {"n":1}`}},
		{"two nodes streaming at once, each ended by its update",
			[]step{chunk("a", "m1", "one ", "", ""), chunk("b", "m2", "two ", "", ""), chunk("a", "m1", "more", "", ""),
				ev("updates", `{"b":{"x":1}}`), ev("updates", `{"a":{"x":2}}`)},
			[]string{"start m1 ai node=a/a", `block-start m1 0 {"text":"","type":"text"}`, `text m1 0 "one "`,
				"start m2 ai node=b/b", `block-start m2 0 {"text":"","type":"text"}`, `text m2 0 "two "`, `text m1 0 "more"`,
				`block-finish m2 0 {"text":"two ","type":"text"}`, "finish m2 null", `updates node=b {"x":1}`,
				`block-finish m1 0 {"text":"one more","type":"text"}`, "finish m1 null", `updates node=a {"x":2}`}},
		{"a node's next message ends the one before",
			[]step{chunk("a", "m1", "first", "", ""), chunk("a", "m2", "second", "", ""),
				ev("messages", `[{"type":"tool","id":"t1","content":"ok","tool_call_id":"c1"},{"langgraph_node":"a"}]`)},
			[]string{"start m1 ai node=a/a", `block-start m1 0 {"text":"","type":"text"}`, `text m1 0 "first"`,
				`block-finish m1 0 {"text":"first","type":"text"}`, "finish m1 null",
				"start m2 ai node=a/a", `block-start m2 0 {"text":"","type":"text"}`, `text m2 0 "second"`,
				`block-finish m2 0 {"text":"second","type":"text"}`, "finish m2 null",
				"start t1 tool node=a/a", `block-start t1 0 {"text":"","type":"text"}`, `text t1 0 "ok"`,
				`block-finish t1 0 {"text":"ok","type":"text"}`, "finish t1 null"}},
		{"the streamed message written whole is not sent again",
			[]step{chunk("a", "m1", "hi", "", ""), ev("messages", `[{"type":"ai","id":"m1","content":"hi"},{"langgraph_node":"a"}]`)},
			[]string{"start m1 ai node=a/a", `block-start m1 0 {"text":"","type":"text"}`, `text m1 0 "hi"`,
				`block-finish m1 0 {"text":"hi","type":"text"}`, "finish m1 null"}},
		{"a subgraph's streamed message keeps its namespace",
			[]step{ev("messages|sub:t1", `[{"type":"AIMessageChunk","id":"m1","content":"in"},{"langgraph_node":"inner"}]`), {finish: "completed"}},
			[]string{`lifecycle@sub:t1 {"event":"started","graph_name":"sub"}`, "start@sub:t1 m1 ai node=inner/inner",
				`block-start m1 0 {"text":"","type":"text"}`, `text m1 0 "in"`, `block-finish m1 0 {"text":"in","type":"text"}`, "finish m1 null",
				`lifecycle@sub:t1 {"event":"completed","graph_name":"sub"}`, `lifecycle {"event":"completed","graph_name":"g"}`}},
		{"the run fails mid-message",
			[]step{chunk("a", "m1", "half an ans", "", ""), ev("error", `{"error":"ValueError","message":"boom"}`)},
			[]string{"start m1 ai node=a/a", `block-start m1 0 {"text":"","type":"text"}`, `text m1 0 "half an ans"`,
				"error m1 ValueError: boom", `lifecycle {"error":"ValueError: boom","event":"failed","graph_name":"g"}`}},
		{"the model call fails mid-message",
			[]step{chunk("a", "m1", "half", "", ""), modelEnd("a", "m1", false), {finish: "failed"}},
			[]string{"start m1 ai node=a/a", `block-start m1 0 {"text":"","type":"text"}`, `text m1 0 "half"`,
				"error m1 the chat model call failed", `lifecycle {"event":"failed","graph_name":"g"}`}},
		{"the run stops for input mid-message",
			[]step{chunk("a", "m1", "so far", "", ""), {finish: "interrupted"}},
			[]string{"start m1 ai node=a/a", `block-start m1 0 {"text":"","type":"text"}`, `text m1 0 "so far"`,
				`block-finish m1 0 {"text":"so far","type":"text"}`, "finish m1 null", `lifecycle {"event":"interrupted","graph_name":"g"}`}},
		{"a tool's run", []step{tool(true, nil), tool(false, map[string]any{"type": "tool", "content": "2", "tool_call_id": "c1"})},
			[]string{`tools node=tools {"event":"tool-started","input":{"a":1},"tool_call_id":"c1","tool_name":"add"}`,
				`tools node=tools {"event":"tool-finished","output":"2","tool_call_id":"c1"}`}},
		{"a tool that answers an error", []step{tool(true, nil), tool(false, map[string]any{"type": "tool", "content": "Error: no", "status": "error"})},
			[]string{`tools node=tools {"event":"tool-started","input":{"a":1},"tool_call_id":"c1","tool_name":"add"}`,
				`tools node=tools {"event":"tool-error","message":"Error: no","tool_call_id":"c1"}`}},
		{"a tool that failed", []step{tool(true, nil), tool(false, nil)},
			[]string{`tools node=tools {"event":"tool-started","input":{"a":1},"tool_call_id":"c1","tool_name":"add"}`,
				`tools node=tools {"event":"tool-error","message":"tool add failed","tool_call_id":"c1"}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newProtocolMapper("r", "t", func() string { return "g" })
			var evs []protoEvent
			for _, s := range c.steps {
				switch {
				case s.ev != nil:
					evs = append(evs, m.mapEvents([]StreamEvent{*s.ev})...)
				case s.call != nil:
					evs = append(evs, m.call(nil, s.node, s.start, *s.call, s.msgID)...)
				default:
					evs = m.finish(evs, s.finish, "")
				}
			}
			var got []string
			for _, e := range evs {
				if e.method == "messages" {
					if data := e.data.(map[string]any); data["event"] != "message-start" && data["message_id"] == nil {
						t.Errorf("%s names no message_id", protoLine(e))
					}
				}
				got = append(got, protoLine(e))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

// A protocol run of a streaming chat model and a tool: the model's pieces
// arrive as deltas while it is still answering, the message finishes whole
// when its call ends; the tools channel follows the tool's run; a named
// custom event reaches custom:<name>.
func TestProtocolStreamsTokensToolsAndNamedCustomEvents(t *testing.T) {
	s, g := newStreamService(t, nil)
	thread := newThreadID()
	command(t, s, thread, 1, "run.start", `{"assistant_id":"agent","input":{"messages":[{"type":"human","content":"find x","id":"h1"}]}}`)
	ts := open(t, s, thread, `{"channels":["messages","lifecycle"]}`)
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second): // a guard, not a timing assertion
		t.Fatal("the model never streamed")
	}
	delta := func(e protoEv, key string) string {
		d, _ := e.Params.Data["delta"].(map[string]any)
		s, _ := d[key].(string)
		return s
	}
	early := readUntil(t, ts, func(e protoEv) bool { return delta(e, "args") == ` "x"}` })
	var text, args string
	for _, e := range early {
		switch ev := e.Params.Data["event"]; {
		case ev == "message-finish" || rootTerminal(e):
			t.Fatalf("%s before the model's call ended: %v", e.label(), labels(early))
		case ev == "content-block-delta":
			text += delta(e, "text")
			args += delta(e, "args")
			if e.Params.Data["message_id"] != "m-agent" || e.Params.Node != "model" {
				t.Errorf("delta of %v at node %q", e.Params.Data["message_id"], e.Params.Node)
			}
		}
	}
	if text != "Let me look." || args != `{"q": "x"}` {
		t.Errorf("the pieces so far: text %q, args %q", text, args)
	}
	start := early[1] // after the root's running
	md, _ := start.Params.Data["metadata"].(map[string]any)
	if start.label() != "messages:message-start" || start.Params.Data["id"] != "m-agent" || md["provider"] != "openai" || md["model"] != "m" {
		t.Errorf("message-start: %+v", start.Params)
	}
	g.release <- struct{}{}
	rest := readUntil(t, ts, rootTerminal)
	want := []string{"messages:content-block-finish", "messages:message-finish", // the model's message, whole
		"messages:message-start", "messages:content-block-start", "messages:content-block-delta", // the tool's message
		"messages:content-block-finish", "messages:message-finish", "lifecycle:completed"}
	if got := labels(rest); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the model's call ended\n got %v\nwant %v", got, want)
	}
	final, _ := rest[0].Params.Data["content"].(map[string]any)
	if final["type"] != "tool_call" || final["id"] != "call_9" || !reflect.DeepEqual(final["args"], map[string]any{"q": "x"}) {
		t.Errorf("the tool call block finishes parsed: %+v", final)
	}
	if rest[2].Params.Data["id"] != "m-tool" || rest[2].Params.Data["role"] != "tool" {
		t.Errorf("the tool message: %+v", rest[2].Params.Data)
	}
	// The tools channel follows the tool's run; custom:progress gets the
	// named event only, custom both.
	tools := readUntil(t, open(t, s, thread, `{"channels":["tools","custom:progress"]}`),
		func(e protoEv) bool { return e.Params.Data["event"] == "tool-finished" })
	if got := labels(tools); !reflect.DeepEqual(got, []string{"tools:tool-started", "custom", "tools:tool-finished"}) {
		t.Fatalf("tools and custom:progress: %v", got)
	}
	if d := tools[0].Params.Data; d["tool_call_id"] != "call_9" || d["tool_name"] != "search" || tools[0].Params.Node != "act" {
		t.Errorf("tool-started: %+v", tools[0].Params)
	}
	if d := tools[1].Params.Data; d["name"] != "progress" || !reflect.DeepEqual(d["payload"], map[string]any{"done": float64(1)}) {
		t.Errorf("the named custom event: %+v", d)
	}
	if d := tools[2].Params.Data; d["tool_call_id"] != "call_9" || d["output"] != "found x" {
		t.Errorf("tool-finished: %+v", d)
	}
	custom := readUntil(t, open(t, s, thread, `{"channels":["custom"]}`), func(e protoEv) bool { return e.Params.Data["name"] == nil })
	if len(custom) != 2 || custom[0].Params.Data["name"] != "progress" || !reflect.DeepEqual(custom[1].Params.Data["payload"], map[string]any{"note": "unnamed"}) {
		t.Errorf("custom: %+v", custom)
	}
}

// threadAppends records the thread event-log writes: how many deltas each
// holds.
type threadAppends struct {
	store.Events
	mu     sync.Mutex
	deltas []int // per append that holds any
}

func (c *threadAppends) AppendThreadEvents(ctx context.Context, orgID, threadID string, evs []store.ThreadEvent, expires time.Time) (int64, error) {
	n := 0
	for _, e := range evs {
		if e.Event == "messages" && strings.Contains(string(e.Data), `"content-block-delta"`) {
			n++
		}
	}
	if n > 0 {
		c.mu.Lock()
		c.deltas = append(c.deltas, n)
		c.mu.Unlock()
	}
	return c.Events.AppendThreadEvents(ctx, orgID, threadID, evs, expires)
}

// A protocol run's token chunks are coalesced before their protocol
// events are written to the thread's log, as a resumable run's: one write
// for many tokens.
func TestProtocolChunksAreWrittenInBatches(t *testing.T) {
	var counting *threadAppends
	s, _ := newStreamService(t, func(s *Service) {
		counting = &threadAppends{Events: s.Events}
		s.Events, s.ChunkBatch, s.ChunkWindow = counting, 4, time.Hour
	})
	thread := newThreadID()
	command(t, s, thread, 1, "run.start", `{"assistant_id":"tokens","input":{"n":10}}`)
	evs := readUntil(t, open(t, s, thread, `{"channels":["messages","lifecycle"]}`), rootTerminal)
	var text string
	for _, e := range evs {
		if d, ok := e.Params.Data["delta"].(map[string]any); ok && d["type"] == "text-delta" {
			text += d["text"].(string)
		}
	}
	if text != "t0 t1 t2 t3 t4 t5 t6 t7 t8 t9 " {
		t.Errorf("the text deltas make %q", text)
	}
	// Chunks 1-4 and 5-8 fill a batch each; 9-10 go with the model call's
	// end: three writes hold every delta.
	counting.mu.Lock()
	defer counting.mu.Unlock()
	if len(counting.deltas) != 3 {
		t.Errorf("deltas written in %d appends (%v), want 3", len(counting.deltas), counting.deltas)
	}
}

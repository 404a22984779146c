package runs

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
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
				`messages node=agent {"content":{"args":"","id":"c1","name":"add","type":"tool_call_chunk"},"event":"content-block-start","index":0}`,
				`messages node=agent {"delta":{"args":"{\"a\":1}","type":"tool-call-delta"},"event":"content-block-delta","index":0}`,
				`messages node=agent {"content":{"args":{"a":1},"id":"c1","name":"add","type":"tool_call"},"event":"content-block-finish","index":0}`,
				`messages node=agent {"event":"message-finish"}`,
				`tools node=agent {"event":"tool-started","input":{"a":1},"tool_call_id":"c1","tool_name":"add"}`}},
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

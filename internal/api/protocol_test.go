package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The thread event protocol over HTTP: POST /threads/{id}/commands and POST
// /threads/{id}/stream/events. What protocol runs stream is tested in
// internal/runs; here the wire: replies, the SSE framing (id = seq, event =
// method, data = the event), since, and the errors before the stream.

// protocolEvent is one frame of a thread event stream.
type protocolEvent struct {
	id, event string
	body      struct {
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
}

// readEvents opens a thread event stream with body and reads it until stop
// says so, then leaves (the stream ends only with its client).
func (e *env) readEvents(t *testing.T, key, thread string, body any, stop func(protocolEvent) bool) (*http.Response, []protocolEvent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a guard, not a timing assertion
	defer cancel()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/threads/"+thread+"/stream/events", bytes.NewReader(b))
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("stream/events: status %d", res.StatusCode)
	}
	var out []protocolEvent
	var cur protocolEvent
	var data string
	rd := bufio.NewReader(res.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended after %d events: %v", len(out), err)
		}
		if !strings.HasSuffix(line, "\r\n") {
			t.Fatalf("a line not ended by CRLF: %q", line)
		}
		line = strings.TrimSuffix(line, "\r\n")
		switch {
		case line == "":
			if cur.event == "" {
				continue // after a comment
			}
			if err := json.Unmarshal([]byte(data), &cur.body); err != nil {
				t.Fatalf("data %q: %v", data, err)
			}
			out = append(out, cur)
			if stop(cur) {
				return res, out
			}
			cur, data = protocolEvent{}, ""
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
}

func runEnded(ev protocolEvent) bool {
	s, _ := ev.body.Params.Data["event"].(string)
	return ev.body.Method == "lifecycle" && len(ev.body.Params.Namespace) == 0 && (s == "completed" || s == "failed" || s == "interrupted")
}

var everyChannel = []string{"values", "updates", "messages", "tools", "lifecycle", "input", "checkpoints", "tasks", "custom"}

func TestProtocolCommandAndEventFraming(t *testing.T) {
	e := newEnv(t)
	thread := uuid.NewString() // run.start makes it
	reply := e.must(200, "POST", "/threads/"+thread+"/commands", e.keyA, map[string]any{"id": 7, "method": "run.start",
		"params": map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}}})
	result, _ := reply["result"].(map[string]any)
	if reply["type"] != "success" || reply["id"] != float64(7) || result["run_id"] == "" || reply["meta"] == nil {
		t.Fatalf("run.start reply: %v", reply)
	}
	res, evs := e.readEvents(t, e.keyA, thread, map[string]any{"channels": everyChannel}, runEnded)
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type %q", ct)
	}
	var messages []string
	for i, ev := range evs {
		b := ev.body
		if b.Type != "event" || b.Seq != int64(i+1) || ev.id != fmt.Sprint(b.Seq) || b.EventID != ev.id || ev.event != b.Method || b.Params.Timestamp == 0 || b.Params.Namespace == nil {
			t.Fatalf("frame %d: id %q event %q data %+v", i, ev.id, ev.event, b)
		}
		if b.Method == "messages" {
			messages = append(messages, b.Params.Data["event"].(string))
			if d, ok := b.Params.Data["delta"].(map[string]any); ok && d["text"] != "echo: hi" {
				t.Errorf("the reply's text: %v", d)
			}
		}
	}
	if first := evs[0].body; first.Method != "lifecycle" || first.Params.Data["event"] != "running" || first.Params.Data["graph_name"] != "echo" {
		t.Errorf("the first event: %+v", first)
	}
	if evs[len(evs)-1].body.Params.Data["event"] != "completed" {
		t.Errorf("the last event: %+v", evs[len(evs)-1].body)
	}
	want := []string{"message-start", "content-block-start", "content-block-delta", "content-block-finish", "message-finish"}
	if strings.Join(messages, ",") != strings.Join(want, ",") {
		t.Errorf("messages events %v, want %v", messages, want)
	}
	// since: the events after it, the same frames.
	_, rest := e.readEvents(t, e.keyA, thread, map[string]any{"channels": everyChannel, "since": 3}, runEnded)
	if len(rest) != len(evs)-3 || rest[0].body.Seq != 4 || rest[0].id != evs[3].id || rest[len(rest)-1].id != evs[len(evs)-1].id {
		t.Errorf("since 3 replayed %d events from %d, want %d from 4", len(rest), rest[0].body.Seq, len(evs)-3)
	}
	// A channel filter: lifecycle only.
	_, life := e.readEvents(t, e.keyA, thread, map[string]any{"channels": []string{"lifecycle"}}, runEnded)
	if len(life) != 2 {
		t.Errorf("the lifecycle channel: %d events", len(life))
	}
}

func TestProtocolInterruptOverHTTP(t *testing.T) {
	e := newEnv(t)
	thread := uuid.NewString()
	e.must(200, "POST", "/threads/"+thread+"/commands", e.keyA, map[string]any{"id": 1, "method": "run.start",
		"params": map[string]any{"assistant_id": "approval", "input": map[string]any{"request": "a day off"}}})
	_, evs := e.readEvents(t, e.keyA, thread, map[string]any{"channels": []string{"lifecycle", "input"}}, runEnded)
	var interruptID string
	for _, ev := range evs {
		if ev.body.Method == "input.requested" {
			interruptID, _ = ev.body.Params.Data["interrupt_id"].(string)
		}
	}
	if interruptID == "" || evs[len(evs)-1].body.Params.Data["event"] != "interrupted" {
		t.Fatalf("want input.requested, then interrupted: %+v", evs)
	}
	last := evs[len(evs)-1].body.Seq
	reply := e.must(200, "POST", "/threads/"+thread+"/commands", e.keyA, map[string]any{"id": 2, "method": "input.respond",
		"params": map[string]any{"interrupt_id": interruptID, "response": "yes", "namespace": []string{}}})
	if reply["type"] != "success" {
		t.Fatalf("input.respond: %v", reply)
	}
	_, more := e.readEvents(t, e.keyA, thread, map[string]any{"channels": []string{"lifecycle", "values"}, "since": last}, runEnded)
	end := more[len(more)-1].body
	if more[0].body.Seq <= last || end.Params.Data["event"] != "completed" {
		t.Fatalf("after the answer: %+v", more)
	}
	state := e.must(200, "GET", "/threads/"+thread+"/state", e.keyA, nil)
	if state["values"].(map[string]any)["answer"] != "yes" {
		t.Errorf("the thread's state after input.respond: %v", state["values"])
	}
}

func TestProtocolErrors(t *testing.T) {
	e := newEnv(t)
	thread := uuid.NewString()
	e.must(200, "POST", "/threads/"+thread+"/commands", e.keyA, map[string]any{"id": 1, "method": "run.start",
		"params": map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{}}}})
	e.readEvents(t, e.keyA, thread, map[string]any{"channels": []string{"lifecycle"}}, runEnded)

	// Protocol errors are replies.
	replies := []struct {
		body       map[string]any
		code, name string
	}{
		{map[string]any{"id": 3, "method": "run.teleport", "params": map[string]any{}}, "unknown_command", "run.teleport"},
		{map[string]any{"id": 4, "method": "subscription.subscribe", "params": map[string]any{"channels": []string{"values"}}}, "not_supported", "subscription.subscribe"},
		{map[string]any{"id": 5, "method": "run.start", "params": map[string]any{}}, "invalid_argument", "assistant_id"},
		{map[string]any{"id": 6, "method": "input.respond", "params": map[string]any{"interrupt_id": "0123456789abcdef0123456789abcdef", "response": 1}}, "no_such_interrupt", "0123456789abcdef0123456789abcdef"},
	}
	for _, c := range replies {
		r := e.must(200, "POST", "/threads/"+thread+"/commands", e.keyA, c.body)
		if r["type"] != "error" || r["error"] != c.code || r["id"] != float64(c.body["id"].(int)) || !strings.Contains(r["message"].(string), c.name) {
			t.Errorf("%v: %v, want %s naming %s", c.body, r, c.code, c.name)
		}
	}
	// What is not a command, or not a stream request, is a 422 naming the
	// field; another organization's thread is not found.
	cases := []struct {
		name, path, key string
		body            any
		status          int
		field           string
	}{
		{"a command without an id", "/commands", e.keyA, map[string]any{"method": "run.start"}, 422, "id"},
		{"a command id that is a string", "/commands", e.keyA, map[string]any{"id": "one", "method": "run.start"}, 422, "id"},
		{"a negative command id", "/commands", e.keyA, map[string]any{"id": -1, "method": "run.start"}, 422, "id"},
		{"a command without a method", "/commands", e.keyA, map[string]any{"id": 1}, 422, "method"},
		{"since that is a string", "/stream/events", e.keyA, map[string]any{"channels": []string{"values"}, "since": "4"}, 422, "since"},
		{"a negative since", "/stream/events", e.keyA, map[string]any{"channels": []string{"values"}, "since": -1}, 422, "since"},
		{"since past the last event", "/stream/events", e.keyA, map[string]any{"channels": []string{"values"}, "since": 100000}, 422, "since"},
		{"no channels", "/stream/events", e.keyA, map[string]any{"channels": []string{}}, 422, "channels"},
		{"an unknown channel", "/stream/events", e.keyA, map[string]any{"channels": []string{"debug"}}, 422, "channels"},
		{"another organization's thread", "/stream/events", e.keyB, map[string]any{"channels": []string{"values"}}, 404, ""},
		{"input.respond on another organization's thread", "/commands", e.keyB,
			map[string]any{"id": 1, "method": "input.respond", "params": map[string]any{"interrupt_id": "x"}}, 404, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/threads/"+thread+c.path, c.key, c.body)
			if r.Status != c.status || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("status %d (%s), want %d JSON: %s", r.Status, r.Header.Get("Content-Type"), c.status, r.Body)
			}
			if c.field != "" && !strings.Contains(r.detail(t), c.field) {
				t.Errorf("detail %q does not name %s", r.detail(t), c.field)
			}
		})
	}
	if r := e.do("POST", "/threads/not-a-uuid/stream/events", e.keyA, map[string]any{"channels": []string{"values"}}); r.Status != 422 || !strings.Contains(r.detail(t), "thread_id") {
		t.Errorf("a thread id that is no UUID: %d %s", r.Status, r.Body)
	}
	// The other organization starting a run on the same id makes its own
	// thread: it sees none of the first organization's events.
	e.must(200, "POST", "/threads/"+thread+"/commands", e.keyB, map[string]any{"id": 1, "method": "run.start",
		"params": map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{}}}})
	_, theirs := e.readEvents(t, e.keyB, thread, map[string]any{"channels": []string{"lifecycle"}}, runEnded)
	if len(theirs) != 2 || theirs[0].body.Seq != 1 {
		t.Errorf("the other organization's stream of its own thread: %+v", theirs)
	}
}

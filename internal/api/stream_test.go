package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/api"
)

// The wire format of run streams. What each stream mode carries is tested
// in internal/runs and, with the official SDKs, in test/conformance; here
// the HTTP side: status, headers, the SSE framing (CRLF, as the Python
// server writes it), heartbeats, errors before the stream and
// on_disconnect.

func TestStreamRunFraming(t *testing.T) {
	e := newEnv(t)
	thread := e.newThread(e.keyA)
	r := e.do("POST", "/threads/"+thread+"/runs/stream", e.keyA, map[string]any{"assistant_id": "echo",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}})
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type %q", ct)
	}
	loc := r.Header.Get("Content-Location")
	if !strings.HasPrefix(loc, "/threads/"+thread+"/runs/") || r.Header.Get("Location") != loc+"/stream" {
		t.Errorf("Content-Location %q, Location %q", loc, r.Header.Get("Location"))
	}
	runID := strings.TrimPrefix(loc, "/threads/"+thread+"/runs/")
	want := fmt.Sprintf("event: metadata\r\ndata: {\"attempt\":1,\"run_id\":\"%s\"}\r\n\r\n", runID)
	if !bytes.HasPrefix(r.Body, []byte(want)) {
		t.Fatalf("the stream does not open with the metadata event:\n%q", r.Body)
	}
	if !bytes.HasSuffix(r.Body, []byte("{\"content\":\"echo: hi\",\"role\":\"assistant\"}]}\r\n\r\n")) || bytes.Count(r.Body, []byte("event: values\r\n")) != 2 {
		t.Errorf("want two values events, the last with the reply:\n%q", r.Body)
	}
	if bytes.Contains(r.Body, []byte("\nid: ")) {
		t.Errorf("a run that is not resumable sent event ids:\n%q", r.Body)
	}
	// The stream ended with the run: it is terminal.
	if got := e.must(200, "GET", loc, e.keyA, nil)["status"]; got != "success" {
		t.Errorf("run status after its stream %v", got)
	}
}

func TestStreamStatelessRunAndError(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/runs/stream", e.keyA, map[string]any{"assistant_id": "fail", "input": map[string]any{"messages": []any{}}})
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if !strings.HasPrefix(r.Header.Get("Content-Location"), "/threads/") {
		t.Errorf("Content-Location %q", r.Header.Get("Content-Location"))
	}
	if !bytes.HasSuffix(r.Body, []byte("event: error\r\ndata: {\"error\":\"ValueError\",\"message\":\"boom\"}\r\n\r\n")) {
		t.Errorf("the stream of a failing run does not end with its error:\n%q", r.Body)
	}
}

func TestStreamBadInputIsRefusedBeforeTheStream(t *testing.T) {
	e := newEnv(t)
	thread := e.newThread(e.keyA)
	cases := []struct {
		name, method, path string
		body               any
		headers            []string
		status             int
		field              string
	}{
		{"unknown stream mode", "POST", "/threads/" + thread + "/runs/stream",
			map[string]any{"assistant_id": "echo", "stream_mode": []string{"values", "tokens"}}, nil, 422, "stream_mode"},
		{"no assistant", "POST", "/runs/stream", map[string]any{}, nil, 422, "assistant_id"},
		{"unknown thread", "POST", "/threads/6a2f41a3-c54c-4ce8-92d2-0324e1c32e22/runs/stream",
			map[string]any{"assistant_id": "echo"}, nil, 404, ""},
		{"unknown run", "GET", "/threads/" + thread + "/runs/6a2f41a3-c54c-4ce8-92d2-0324e1c32e22/stream", nil, nil, 404, ""},
		{"join with an unknown mode", "GET", "/threads/" + thread + "/runs/6a2f41a3-c54c-4ce8-92d2-0324e1c32e22/stream?stream_mode=tokens",
			nil, nil, 422, "stream_mode"},
		{"thread stream with Last-Event-ID", "GET", "/threads/" + thread + "/stream", nil, []string{"Last-Event-ID", "4"}, 422, "Last-Event-ID"},
		{"thread stream with a run mode", "GET", "/threads/" + thread + "/stream?stream_mode=values", nil, nil, 422, "stream_mode"},
		{"unknown thread's stream", "GET", "/threads/6a2f41a3-c54c-4ce8-92d2-0324e1c32e22/stream", nil, nil, 404, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(c.method, c.path, e.keyA, c.body, c.headers...)
			if r.Status != c.status || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("status %d (%s), want %d JSON: %s", r.Status, r.Header.Get("Content-Type"), c.status, r.Body)
			}
			if c.field != "" && !strings.Contains(r.detail(t), c.field) {
				t.Errorf("detail %q does not name %s", r.detail(t), c.field)
			}
		})
	}
}

func TestStreamResumableJoinWithLastEventID(t *testing.T) {
	e := newEnv(t)
	thread := e.newThread(e.keyA)
	r := e.do("POST", "/threads/"+thread+"/runs/stream", e.keyA, map[string]any{"assistant_id": "counter",
		"input": map[string]any{"steps": 3}, "stream_mode": []string{"values", "updates"}, "stream_resumable": true})
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	all := sseEvents(t, r.Body)
	for i, ev := range all {
		if ev.id != fmt.Sprint(i) {
			t.Fatalf("event %d (%s) has id %q: a resumable run's ids count from 0", i, ev.event, ev.id)
		}
	}
	loc := r.Header.Get("Location")
	again := e.do("GET", loc, e.keyA, nil, "Last-Event-ID", "3")
	if again.Status != http.StatusOK {
		t.Fatalf("join: %d %s", again.Status, again.Body)
	}
	rest := sseEvents(t, again.Body)
	if len(rest) != len(all)-4 || rest[0] != all[4] || rest[len(rest)-1] != all[len(all)-1] {
		t.Fatalf("replay after 3: %+v\nthe stream: %+v", rest, all)
	}
	// The JS SDK sends joinStream's streamMode list as JSON in one
	// parameter: stream_mode=["updates"] narrows as a repeated one does.
	narrowed := sseEvents(t, e.do("GET", loc+"?stream_mode="+url.QueryEscape(`["updates"]`), e.keyA, nil, "Last-Event-ID", "-1").Body)
	for _, ev := range narrowed {
		if ev.event != "metadata" && ev.event != "updates" {
			t.Fatalf("a join narrowed to [\"updates\"] sent %s: %+v", ev.event, narrowed)
		}
	}
	if len(narrowed) < 2 {
		t.Fatalf("a join narrowed to [\"updates\"]: %+v", narrowed)
	}
	bad := e.do("GET", loc, e.keyA, nil, "Last-Event-ID", fmt.Sprint(len(all)+5))
	if bad.Status != 422 || !strings.Contains(bad.detail(t), "Last-Event-ID") {
		t.Errorf("an id past the stream: %d %s", bad.Status, bad.Body)
	}
	other := e.do("GET", loc, e.keyB, nil, "Last-Event-ID", "-1")
	if other.Status != 404 {
		t.Errorf("another organization joining: %d %s", other.Status, other.Body)
	}
}

func TestStreamHeartbeatWhileTheRunWaits(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.StreamHeartbeat = 10 * time.Millisecond })
	// The run cannot start before 0.3 s: the stream has nothing to say
	// for far longer than the heartbeat interval.
	r := e.do("POST", "/runs/stream", e.keyA, map[string]any{"assistant_id": "echo", "after_seconds": 0.3,
		"input": map[string]any{"messages": []any{}}})
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if !bytes.HasPrefix(r.Body, []byte(": heartbeat\r\n\r\n")) || !bytes.Contains(r.Body, []byte("event: metadata\r\n")) {
		t.Errorf("want heartbeats, then the run's events:\n%q", r.Body)
	}
}

func TestStreamOnDisconnect(t *testing.T) {
	e := newEnv(t)
	// Each stream's run waits an hour to start: its client leaves first.
	leave := func(onDisconnect string) string {
		thread := e.newThread(e.keyA)
		body, _ := json.Marshal(map[string]any{"assistant_id": "echo", "after_seconds": 3600, "on_disconnect": onDisconnect})
		req, _ := http.NewRequest("POST", e.url+"/threads/"+thread+"/runs/stream", bytes.NewReader(body))
		req.Header.Set("X-Api-Key", e.keyA)
		req.Header.Set("Content-Type", "application/json")
		res, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.Header.Get("Content-Location")
	}
	// A join asks with cancel_on_disconnect.
	joinAndLeave := func() string {
		thread := e.newThread(e.keyA)
		run := e.must(200, "POST", "/threads/"+thread+"/runs", e.keyA, map[string]any{"assistant_id": "echo", "after_seconds": 3600})
		path := "/threads/" + thread + "/runs/" + run["run_id"].(string)
		req, _ := http.NewRequest("GET", e.url+path+"/stream?cancel_on_disconnect=true", nil)
		req.Header.Set("X-Api-Key", e.keyA)
		res, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return path
	}
	kept := leave("continue")
	for _, cancelled := range []string{leave("cancel"), joinAndLeave()} {
		status := ""
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && status != "interrupted"; time.Sleep(10 * time.Millisecond) {
			status, _ = e.must(200, "GET", cancelled, e.keyA, nil)["status"].(string)
		}
		if status != "interrupted" {
			t.Fatalf("%s: the run is %q after its client left, want interrupted", cancelled, status)
		}
	}
	// The other client left first: its run was not cancelled.
	if got := e.must(200, "GET", kept, e.keyA, nil)["status"]; got != "pending" {
		t.Errorf("on_disconnect continue: the run is %v after its client left, want pending", got)
	}
	e.must(202, "POST", kept+"/cancel", e.keyA, nil)
}

// sseEvent is one event of a stream, as framed on the wire.
type sseEvent struct{ event, data, id string }

// sseEvents splits a stream's bytes into its events: lines end with CRLF,
// events with a blank line; comments are skipped.
func sseEvents(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case line == "":
			if cur.event != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	return out
}

// threadStream joins a thread's stream (GET /threads/{id}/stream) with the
// query; it is subscribed once the answer's headers have come.
func (e *env) threadStream(t *testing.T, thread, query string) *bufio.Reader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a guard, not a timing assertion
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/threads/"+thread+"/stream?"+query, nil)
	req.Header.Set("X-Api-Key", e.keyA)
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		t.Fatalf("thread stream: status %d", res.StatusCode)
	}
	return bufio.NewReader(res.Body)
}

// nextSSE reads the stream's next event (comments skipped).
func nextSSE(t *testing.T, rd *bufio.Reader) sseEvent {
	t.Helper()
	var cur sseEvent
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended: %v", err)
		}
		line = strings.TrimSuffix(line, "\r\n")
		switch {
		case line == "" && cur.event != "":
			return cur
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// A client's update of a thread's state reaches the thread's stream
// followers as a state_update event {state, thread_id} (the Python
// server's): the state as GET .../state shows it. Only the followers that
// asked for state_update get it; run_modes does not pass it.
func TestThreadStreamSendsStateUpdates(t *testing.T) {
	e := newEnv(t)
	thread := e.newThread(e.keyA)
	e.must(200, "POST", "/threads/"+thread+"/runs/wait", e.keyA, map[string]any{"assistant_id": "echo",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}})
	updates := e.threadStream(t, thread, "stream_mode=state_update")
	runs := e.threadStream(t, thread, "stream_mode=run_modes")

	e.must(200, "POST", "/threads/"+thread+"/state", e.keyA, map[string]any{
		"values": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "edited", "id": "u2"}}}})
	got := nextSSE(t, updates)
	if got.event != "state_update" {
		t.Fatalf("event %q: %s", got.event, got.data)
	}
	var data struct {
		State    map[string]any `json:"state"`
		ThreadID string         `json:"thread_id"`
	}
	if err := json.Unmarshal([]byte(got.data), &data); err != nil {
		t.Fatalf("data %s: %v", got.data, err)
	}
	state := e.must(200, "GET", "/threads/"+thread+"/state", e.keyA, nil)
	if data.ThreadID != thread || !reflect.DeepEqual(data.State, state) {
		t.Errorf("state_update %s\nwant {state: %v, thread_id: %s}", got.data, state, thread)
	}

	// The run_modes follower: the next run's events come, and nothing of
	// the update before them (the hub keeps the order).
	e.must(200, "POST", "/threads/"+thread+"/runs/wait", e.keyA, map[string]any{"assistant_id": "echo", "input": nil})
	if first := nextSSE(t, runs); first.event != "metadata" || !strings.Contains(first.data, `"run_id"`) {
		t.Errorf("run_modes follower's first event %q %s, want the next run's metadata", first.event, first.data)
	}
}

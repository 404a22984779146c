package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"
	"time"

	sse "github.com/tmaxmax/go-sse"
)

// Streaming workloads (issue 13): a run created and streamed in one request
// (POST /threads/{id}/runs/stream, POST /runs/stream), read to its end.
// Each iteration records when the first event arrived (it must be
// `metadata`), when the first token arrived (the first `messages` event
// carrying ai text, stream-chat only), when the stream ended, and how many
// events it had. Every stream is checked: only the expected events, the
// metadata first, no error, and the right final values (and, for
// stream-chat, the whole answer assembled from the messages events).

// streamObs is what one streamed run measured; times from just before the
// request was sent.
type streamObs struct {
	firstEvent time.Duration
	firstToken time.Duration // 0: no token (not a chat workload)
	end        time.Duration
	events     int
	tokens     int // messages events carrying ai text
}

// sseEvent is one received event, decoded after the stream ended (so the
// decoding does not delay the reading).
type sseEvent struct {
	name string
	raw  string
	data any
	at   time.Duration
}

// maxEventBytes bounds one event (the largest here is a values event of a
// few hundred bytes).
const maxEventBytes = 1 << 20

// stream posts a run request with the server's run fields and reads its
// event stream to the end. t0 is taken just before the request is sent.
func (c *client) stream(ctx context.Context, path string, body map[string]any) ([]sseEvent, time.Duration, error) {
	for k, v := range c.runFields {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if c.key != "" {
		req.Header.Set("X-Api-Key", c.key)
	}
	t0 := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, 0, fmt.Errorf("POST %s: status %d: %s", path, resp.StatusCode, clip(raw))
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return nil, 0, fmt.Errorf("POST %s: Content-Type %q, want text/event-stream", path, resp.Header.Get("Content-Type"))
	}
	var events []sseEvent
	for ev, err := range sse.Read(resp.Body, &sse.ReadConfig{MaxEventSize: maxEventBytes}) {
		if err != nil {
			return nil, 0, fmt.Errorf("POST %s: reading the stream after %d events: %w", path, len(events), err)
		}
		events = append(events, sseEvent{name: ev.Type, raw: ev.Data, at: time.Since(t0)})
	}
	end := time.Since(t0)
	for i := range events {
		if err := json.Unmarshal([]byte(events[i].raw), &events[i].data); err != nil {
			return nil, 0, fmt.Errorf("POST %s: event %d (%s) is not JSON: %s", path, i, events[i].name, clip([]byte(events[i].raw)))
		}
	}
	return events, end, nil
}

// checkEvents holds what every stream must satisfy: metadata first (with a
// run id) and only once, no error event, only the names allowed. It returns
// the events by name.
func checkEvents(what string, events []sseEvent, allowed ...string) (map[string][]sseEvent, error) {
	if len(events) == 0 {
		return nil, fmt.Errorf("%s: the stream had no event", what)
	}
	if events[0].name != "metadata" {
		return nil, fmt.Errorf("%s: first event %q, want metadata", what, events[0].name)
	}
	if m, _ := events[0].data.(map[string]any); m == nil || m["run_id"] == nil || m["run_id"] == "" {
		return nil, fmt.Errorf("%s: metadata without run_id: %s", what, clip([]byte(events[0].raw)))
	}
	by := map[string][]sseEvent{}
	for i, e := range events {
		switch {
		case e.name == "error":
			return nil, fmt.Errorf("%s: error event: %s", what, clip([]byte(e.raw)))
		case e.name == "metadata" && i > 0:
			return nil, fmt.Errorf("%s: a second metadata event at %d", what, i)
		}
		ok := e.name == "metadata"
		for _, a := range allowed {
			ok = ok || e.name == a
		}
		if !ok {
			return nil, fmt.Errorf("%s: unexpected event %q: %s", what, e.name, clip([]byte(e.raw)))
		}
		by[e.name] = append(by[e.name], e)
	}
	return by, nil
}

func lastData(evs []sseEvent) any {
	if len(evs) == 0 {
		return nil
	}
	return evs[len(evs)-1].data
}

func observe(events []sseEvent, end time.Duration) streamObs {
	return streamObs{firstEvent: events[0].at, end: end, events: len(events)}
}

// doStreamCounter: counter/20 streamed on a fresh thread, stream_mode
// values and updates: 20 updates {"inc": {"count": 1}}, the values after
// each step, the last one {"count": 20, "steps": 20}.
func doStreamCounter(ctx context.Context, c *client, _, thread string) (streamObs, error) {
	events, end, err := c.stream(ctx, "/threads/"+thread+"/runs/stream", map[string]any{
		"assistant_id": "counter",
		"input":        map[string]any{"steps": CounterSteps},
		"stream_mode":  []any{"values", "updates"},
	})
	if err != nil {
		return streamObs{}, err
	}
	by, err := checkEvents("stream counter", events, "values", "updates")
	if err != nil {
		return streamObs{}, err
	}
	want := map[string]any{"inc": map[string]any{"count": 1}}
	for _, u := range by["updates"] {
		if !jsonEqual(u.data, want) {
			return streamObs{}, fmt.Errorf("stream counter: updates %s, want %s", clip([]byte(u.raw)), clipJSON(want))
		}
	}
	if n := len(by["updates"]); n != CounterSteps {
		return streamObs{}, fmt.Errorf("stream counter: %d updates events, want %d", n, CounterSteps)
	}
	if n := len(by["values"]); n < CounterSteps {
		return streamObs{}, fmt.Errorf("stream counter: %d values events, want at least %d", n, CounterSteps)
	}
	if err := expectEqual("stream counter: last values", lastData(by["values"]),
		map[string]any{"count": CounterSteps, "steps": CounterSteps}); err != nil {
		return streamObs{}, err
	}
	return observe(events, end), nil
}

// doStreamEcho: echo streamed statelessly (POST /runs/stream), stream_mode
// values and updates: one update from the echo node, the last values the
// run's output.
func doStreamEcho(ctx context.Context, c *client, tag, _ string) (streamObs, error) {
	content := "hi " + tag
	events, end, err := c.stream(ctx, "/runs/stream", map[string]any{
		"assistant_id": "echo",
		"input":        map[string]any{"messages": []any{map[string]any{"role": "user", "content": content}}},
		"stream_mode":  []any{"values", "updates"},
	})
	if err != nil {
		return streamObs{}, err
	}
	by, err := checkEvents("stream echo", events, "values", "updates")
	if err != nil {
		return streamObs{}, err
	}
	reply := map[string]any{"role": "assistant", "content": "echo: " + content}
	if len(by["updates"]) != 1 {
		return streamObs{}, fmt.Errorf("stream echo: %d updates events, want 1", len(by["updates"]))
	}
	// What the node wrote: stepgraph's echo writes the message, the peers'
	// a list of it (both append it).
	upd := by["updates"][0].data
	if !jsonEqual(upd, map[string]any{"echo": map[string]any{"messages": []any{reply}}}) &&
		!jsonEqual(upd, map[string]any{"echo": map[string]any{"messages": reply}}) {
		return streamObs{}, fmt.Errorf("stream echo: updates %s, want {\"echo\": {\"messages\": %s}}", clipJSON(upd), clipJSON(reply))
	}
	if err := expectEqual("stream echo: last values", lastData(by["values"]), map[string]any{"messages": []any{
		map[string]any{"role": "user", "content": content}, reply}}); err != nil {
		return streamObs{}, err
	}
	return observe(events, end), nil
}

// doStreamChat: the chat graph (one chat model call) streamed on a fresh
// thread, stream_mode messages-tuple and values. Time to first token is
// the arrival of the first `messages` event carrying ai text: a token
// chunk where the server streams the model's tokens, the whole message
// where it sends it when the node ends. The ai text of the messages events
// (per message id, chunks appended; a whole message repeating what its
// chunks made is not added again) must be the model's whole answer, and so
// must the last values' ai message.
func doStreamChat(ctx context.Context, c *client, tag, thread string) (streamObs, error) {
	question := "hello " + tag
	events, end, err := c.stream(ctx, "/threads/"+thread+"/runs/stream", map[string]any{
		"assistant_id": "chat",
		"input":        map[string]any{"messages": []any{map[string]any{"role": "user", "content": question}}},
		"stream_mode":  []any{"messages-tuple", "values"},
	})
	if err != nil {
		return streamObs{}, err
	}
	by, err := checkEvents("stream chat", events, "values", "messages")
	if err != nil {
		return streamObs{}, err
	}
	answer := strings.Join(modelAnswer(question, c.modelChunks), "")
	obs := observe(events, end)
	texts := map[string]string{}
	var order []string
	for _, e := range by["messages"] {
		pair, _ := e.data.([]any)
		if len(pair) != 2 {
			return streamObs{}, fmt.Errorf("stream chat: messages event %s is not [message, metadata]", clip([]byte(e.raw)))
		}
		msg, _ := pair[0].(map[string]any)
		if _, ok := pair[1].(map[string]any); !ok || msg == nil {
			return streamObs{}, fmt.Errorf("stream chat: messages event %s is not [message, metadata]", clip([]byte(e.raw)))
		}
		if !isAI(msg) {
			if s, _ := msg["content"].(string); s != question {
				return streamObs{}, fmt.Errorf("stream chat: a non-ai message %s", clip([]byte(e.raw)))
			}
			continue
		}
		text, ok := msg["content"].(string)
		if !ok {
			return streamObs{}, fmt.Errorf("stream chat: ai message content is not text: %s", clip([]byte(e.raw)))
		}
		id, _ := msg["id"].(string)
		if _, seen := texts[id]; !seen {
			order = append(order, id)
			texts[id] = ""
		}
		// Chunks (AIMessageChunk in Python, "ai" in JS) add to their
		// message's text; a whole message sent after its chunks repeats it.
		if text == "" || text == texts[id] {
			continue
		}
		texts[id] += text
		obs.tokens++
		if obs.firstToken == 0 {
			obs.firstToken = e.at
		}
	}
	if len(order) != 1 || texts[order[0]] != answer {
		got := make([]string, 0, len(order))
		for _, id := range order {
			got = append(got, fmt.Sprintf("%s: %q", id, texts[id]))
		}
		sample := ""
		if m := by["messages"]; len(m) > 0 {
			sample = "; the last messages event: " + clip([]byte(m[len(m)-1].raw))
		}
		return streamObs{}, fmt.Errorf("stream chat: the messages events make %v, want one ai message %q%s", got, answer, sample)
	}
	final, _ := lastData(by["values"]).(map[string]any)
	msgs, _ := final["messages"].([]any)
	if len(msgs) != 2 {
		return streamObs{}, fmt.Errorf("stream chat: last values %s, want 2 messages", clipJSON(final))
	}
	first, _ := msgs[0].(map[string]any)
	last, _ := msgs[1].(map[string]any)
	if first == nil || isAI(first) || first["content"] != question {
		return streamObs{}, fmt.Errorf("stream chat: last values' first message %s, want the question %q", clipJSON(msgs[0]), question)
	}
	if last == nil || !isAI(last) || last["content"] != answer {
		return streamObs{}, fmt.Errorf("stream chat: last values' answer %s, want %q", clipJSON(msgs[1]), answer)
	}
	return obs, nil
}

// isAI: a LangChain ai message or chunk (type) or an OpenAI-style one
// (role).
func isAI(m map[string]any) bool {
	switch m["type"] {
	case "ai", "AIMessageChunk", "AIMessage":
		return true
	}
	return m["role"] == "assistant" || m["role"] == "ai"
}

// StreamStats are a streaming cell's figures beside the cell's latency
// (which, for a stream, is the time to its end).
type StreamStats struct {
	FirstEventP50ms float64 `json:"first_event_p50_ms"`
	FirstEventP95ms float64 `json:"first_event_p95_ms"`
	FirstEventP99ms float64 `json:"first_event_p99_ms"`
	// First token: stream-chat only (0 elsewhere).
	FirstTokenP50ms float64 `json:"first_token_p50_ms,omitempty"`
	FirstTokenP95ms float64 `json:"first_token_p95_ms,omitempty"`
	FirstTokenP99ms float64 `json:"first_token_p99_ms,omitempty"`
	// TokenEvents: messages events carrying ai text per stream (mean): 1
	// where the server sends the whole message when the node ends, about
	// the model's token count where it streams the tokens.
	TokenEvents float64 `json:"token_events_per_stream,omitempty"`
	// Events per stream (mean), events per second within one stream
	// (events ÷ time to its end; p50 over the streams), and all events
	// received per second of the cell's wall time.
	EventsPerStream       float64 `json:"events_per_stream"`
	EventsPerSecStreamP50 float64 `json:"events_per_s_per_stream_p50"`
	EventsPerSecTotal     float64 `json:"events_per_s_total"`
}

// streamStats summarizes the timed iterations' observations (failed
// iterations, whose obs is zero, are left out).
func streamStats(obs []streamObs, wall time.Duration) *StreamStats {
	var first, token []time.Duration
	var rate []float64
	events, tokens := 0, 0
	for _, o := range obs {
		if o.end == 0 {
			continue
		}
		first = append(first, o.firstEvent)
		if o.firstToken > 0 {
			token = append(token, o.firstToken)
		}
		events += o.events
		tokens += o.tokens
		rate = append(rate, float64(o.events)/o.end.Seconds())
	}
	s := &StreamStats{}
	if len(first) == 0 {
		return s
	}
	s.FirstEventP50ms, s.FirstEventP95ms, s.FirstEventP99ms, _, _ = latencyStats(first)
	if len(token) > 0 {
		s.FirstTokenP50ms, s.FirstTokenP95ms, s.FirstTokenP99ms, _, _ = latencyStats(token)
	}
	s.EventsPerStream = float64(events) / float64(len(first))
	s.TokenEvents = float64(tokens) / float64(len(first))
	sort.Float64s(rate)
	s.EventsPerSecStreamP50 = rate[(len(rate)-1)/2]
	if wall > 0 {
		s.EventsPerSecTotal = float64(events) / wall.Seconds()
	}
	return s
}

package runs

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// A run's stream. While a worker executes a run, the engine reports what
// happens (graph.Event) to the run's streamer, which turns it into the
// events of the stream modes the run asked for, with the upstream Python
// server's names and payload shapes (langgraph_api/stream.py astream_state
// and langgraph's pregel loop, _loop.py and debug.py), and hands them to
// the run's followers (feeds). A resumable run's events are written to the
// event log (Service.Events) first, each batch before anyone sees it, so
// every event a client was sent can be replayed to it.
//
// Part of the streaming design (docs/streaming.md): this is the seam later
// parts plug into. Token chunks of chat models and custom events of
// function nodes arrive here as engine events (graph.Runtime.Emit); a
// worker on AWS uses the same streamer with the event log as the only
// channel to followers in other processes.

// Token chunks of a resumable run are written to the event log in batches
// (Service.ChunkWindow, ChunkBatch), so a long answer is not one write per
// token; see streamer.sendChunks.
const (
	DefaultChunkWindow = 50 * time.Millisecond
	DefaultChunkBatch  = 64
)

// One event-log write holds at most this many events and bytes of data
// (within what every adapter takes at once: DynamoDB's transactions hold
// 100 items and 4 MB); more is written in several.
const (
	maxAppendEvents = 64
	maxAppendBytes  = 1 << 20
)

// DefaultEventRetention is how long a resumable run's events are kept after
// the run can last have ended (see Service.EventRetention).
const DefaultEventRetention = 10 * time.Minute

// The stream modes of a run (RunCreate.stream_mode).
const (
	modeValues        = "values"
	modeUpdates       = "updates"
	modeMessages      = "messages"
	modeMessagesTuple = "messages-tuple"
	modeCustom        = "custom"
	modeTasks         = "tasks"
	modeCheckpoints   = "checkpoints"
	modeDebug         = "debug"
	modeEvents        = "events"
)

// interruptKey is LangGraph's name for interrupts in values and updates.
const interruptKey = "__interrupt__"

// streamer turns one execution attempt's engine events into stream events.
type streamer struct {
	s         *Service
	ctx       context.Context // for the event log: outlives the run's cancellation
	log       *slog.Logger
	run       store.Run
	kw        kwargs
	modes     map[string]bool
	resumable bool
	expires   time.Time
	graphID   string

	mu        sync.Mutex
	err       error           // the first event-log failure; the run stops on it
	seen      map[string]bool // checkpoint ids reported, by namespace
	started   map[string]bool // namespaces whose first checkpoint was seen
	messages  map[string]bool // message ids sent (messages modes)
	described map[string]bool // message ids whose messages/metadata was sent
	resuming  bool            // the run continues its thread (no new input)

	// Token chunks (messages modes, events mode).
	partial map[string]map[string]any // message id → its chunks so far (messages mode)
	calls   map[string]modelCall      // task id → the chat model call it is making
	taskMsg map[string]string         // task id → the message its chat model streams (protocol runs)

	// Chunk events of a resumable run waiting for their event-log write
	// (sendChunks); any other event, the window's timer or the end of the
	// attempt sends them first.
	pending      []StreamEvent
	pendingBytes int
	timer        *time.Timer

	proto *protocolMapper // a protocol run's second framing (protocol.go); nil for others
}

// modelCall is the chat model call a task is making: what its chunks'
// events carry.
type modelCall struct {
	id   string         // the call's LangChain run id
	name string         // the model's class name
	meta map[string]any // the call's metadata (the node's and the model's)
}

// newStreamer prepares the stream of an execution of run. It never fails:
// a run whose kwargs cannot be read streams only its metadata and error.
func (s *Service) newStreamer(ctx context.Context, run store.Run, log *slog.Logger) *streamer {
	st := &streamer{s: s, ctx: context.WithoutCancel(ctx), log: log, run: run, modes: map[string]bool{},
		seen: map[string]bool{}, started: map[string]bool{}, messages: map[string]bool{}, described: map[string]bool{},
		partial: map[string]map[string]any{}, calls: map[string]modelCall{}, taskMsg: map[string]string{}}
	if json.Unmarshal(run.Kwargs, &st.kw) == nil {
		for _, m := range st.kw.StreamMode {
			st.modes[m] = true
		}
		st.resumable = st.kw.Resumable && s.Events != nil
		if st.kw.Protocol && s.Events != nil {
			st.proto = newProtocolMapper(run.ID, run.ThreadID, st.graphName)
		}
		in, err := st.kw.input()
		_, isCommand := in.(*graph.Command)
		st.resuming = err == nil && (in == nil || isCommand)
	}
	st.expires = s.now().Add(s.runTimeout() + s.eventRetention())
	return st
}

func (s *Service) runTimeout() time.Duration {
	if s.RunTimeout > 0 {
		return s.RunTimeout
	}
	return time.Hour
}

func (s *Service) eventRetention() time.Duration {
	if s.EventRetention > 0 {
		return s.EventRetention
	}
	return DefaultEventRetention
}

// failed returns the event log's failure, if any: the run must stop (its
// lease expires and another attempt resumes it), since a resumable stream
// must not go on with a gap.
func (st *streamer) failed() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}

// start sends the metadata event that opens every attempt's stream.
func (st *streamer) start() {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []StreamEvent
	out = st.add(out, "metadata", nil, map[string]any{"run_id": st.run.ID, "attempt": st.run.Attempt})
	if st.modes[modeEvents] {
		out = st.add(out, modeEvents, nil, st.chainEvent("on_chain_start", "LangGraph", st.run.ID, nil,
			map[string]any{"input": json.RawMessage(rawOr(st.kw.Input, "null"))}))
	}
	st.send(out)
}

// end sends what closes an attempt that finished the run: the error of a
// run that failed, timed out or was cancelled.
func (st *streamer) end(f store.FinishedRun, cp *graph.Checkpoint) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []StreamEvent
	if st.modes[modeEvents] && f.Status == store.RunSuccess && cp != nil {
		out = st.add(out, modeEvents, nil, st.chainEvent("on_chain_end", "LangGraph", st.run.ID, nil,
			map[string]any{"output": cp.Values}))
	}
	var body struct {
		Error json.RawMessage `json:"__error__"`
	}
	if f.Status != store.RunSuccess && json.Unmarshal(f.Result, &body) == nil && len(body.Error) > 0 {
		out = append(out, StreamEvent{ID: -1, Event: "error", Data: body.Error})
	}
	st.send(out)
	if st.proto != nil && st.err == nil {
		// The root's terminal lifecycle (a failure was sent with the error).
		status := "completed"
		switch {
		case f.Status == store.RunSuccess && f.ThreadStatus == store.ThreadInterrupted:
			status = "interrupted"
		case f.Status != store.RunSuccess:
			status = "failed"
		}
		st.sendProtocol(st.proto.finish(nil, status, ""))
	}
}

// graphName is the run's graph as the protocol's lifecycle names the root.
func (st *streamer) graphName() string {
	if st.kw.ProtocolGraph != "" {
		return st.kw.ProtocolGraph
	}
	if st.graphID != "" {
		return st.graphID
	}
	return st.run.AssistantID
}

// protocolAppendBatch bounds one append to the thread's log (DynamoDB
// takes 98 events per transaction).
const protocolAppendBatch = 50

// sendProtocol writes a protocol run's events to the thread's event log,
// then publishes them, numbered, on the thread's protocol feed. Called with
// st.mu held. A failure stops the run (st.err), as for a resumable run:
// a client must never be told of an event it could not resume after.
func (st *streamer) sendProtocol(evs []protoEvent) {
	now := st.s.now()
	for len(evs) > 0 && st.err == nil {
		batch := evs[:min(len(evs), protocolAppendBatch)]
		evs = evs[len(batch):]
		stored := make([]store.ThreadEvent, 0, len(batch))
		for _, e := range batch {
			b, err := json.Marshal(e.params(now))
			if err != nil { // engine values are JSON by construction
				st.log.Error("protocol event is not JSON", "run_id", st.run.ID, "method", e.method, "error", err.Error())
				continue
			}
			stored = append(stored, store.ThreadEvent{RunID: st.run.ID, Event: e.method, Data: b})
		}
		first, err := st.s.Events.AppendThreadEvents(st.ctx, st.run.OrgID, st.run.ThreadID, stored, st.expires)
		if err != nil {
			st.err = err
			st.log.Error("append thread events; the run resumes after its lease expires", "run_id", st.run.ID, "error", err.Error())
			return
		}
		pub := make([]StreamEvent, len(stored))
		for i, e := range stored {
			pub[i] = StreamEvent{ID: first + int64(i), Event: e.Event, Data: e.Data}
		}
		st.s.streams.publish(pub, protoKey(st.run.OrgID, st.run.ThreadID))
	}
}

// observe is the run's graph.Observer.
func (st *streamer) observe(e graph.Event) {
	if len(e.Namespace) > 0 && !st.kw.Subgraphs {
		return // LangGraph streams subgraphs only when asked
	}
	if !st.resumable && st.proto == nil && !st.s.streams.watched(runKey(st.run.ID), threadKey(st.run.OrgID, st.run.ThreadID)) {
		// No one to tell, nothing to keep: a runs/wait costs no stream. A
		// follower that comes later starts from then on, not from the
		// state the run started from.
		if e.Kind == graph.EventCheckpoint && len(e.Namespace) == 0 {
			st.mu.Lock()
			st.started[""] = true
			st.mu.Unlock()
		}
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil {
		return
	}
	var out []StreamEvent
	switch e.Kind {
	case graph.EventCheckpoint:
		out = st.checkpoint(out, e)
	case graph.EventTaskStart:
		out = st.taskStart(out, e)
	case graph.EventTaskEnd:
		out = st.taskEnd(out, e)
	case graph.EventCustom:
		if st.modes[modeCustom] {
			out = st.add(out, modeCustom, e.Namespace, e.Data)
		}
	case graph.EventCallStart, graph.EventCallEnd:
		out = st.call(out, e)
		if st.proto != nil {
			// The protocol maps calls from the engine's report (no mode
			// but events carries them), after what came before them.
			msgID := st.callMessage(e)
			st.send(out)
			if st.err == nil {
				st.sendProtocol(st.proto.call(e.Namespace, e.Task.Name, e.Kind == graph.EventCallStart, *e.Call, msgID))
			}
			return
		}
	case graph.EventMessageChunk:
		st.sendChunks(st.chunk(nil, e))
		return
	}
	st.send(out)
}

// call reports a chat model's or a tool's start and end (the events mode,
// as LangChain's astream_events v2 does), and notes a chat model call for
// its chunks.
func (st *streamer) call(out []StreamEvent, e graph.Event) []StreamEvent {
	c := e.Call
	kind := "on_tool"
	if c.Type == "chat_model" {
		kind = "on_chat_model"
	}
	meta := st.nodeMetadata(e)
	maps.Copy(meta, c.Metadata)
	if c.Type == "chat_model" {
		if e.Kind == graph.EventCallStart {
			st.calls[e.Task.ID] = modelCall{id: c.ID, name: c.Name, meta: meta}
		} else {
			delete(st.calls, e.Task.ID)
			if msg, ok := c.Output.(map[string]any); ok {
				if id, _ := msg["id"].(string); id != "" {
					delete(st.partial, id) // the message is complete
				}
			}
		}
	}
	if !st.modes[modeEvents] {
		return out
	}
	data := map[string]any{"input": c.Input}
	switch {
	case e.Kind == graph.EventCallStart:
		kind += "_start"
	case c.Output == nil:
		return out // it failed: astream_events reports no end
	default:
		kind += "_end"
		data["output"] = c.Output
	}
	return st.add(out, modeEvents, nil, st.nestedEvent(kind, c.Name, c.ID, e.Task.ID, meta, data))
}

// chunk reports a chat model's token chunk: as it is (messages-tuple), the
// message so far (messages), on_chat_model_stream (events). The message
// it belongs to is then not reported again when the node writes it
// (LangGraph's messages handler dedupes by id).
func (st *streamer) chunk(out []StreamEvent, e graph.Event) []StreamEvent {
	chunk, _ := e.Data.(map[string]any)
	id, _ := chunk["id"].(string)
	if chunk == nil || id == "" {
		return out
	}
	if st.proto != nil {
		st.taskMsg[e.Task.ID] = id
	}
	mc, ok := st.calls[e.Task.ID]
	if !ok {
		mc = modelCall{id: e.Task.ID, name: "ChatModel", meta: st.nodeMetadata(e)}
	}
	if st.modes[modeMessages] || st.modes[modeMessagesTuple] {
		st.messages[id] = true
		if st.modes[modeMessagesTuple] {
			out = st.add(out, "messages", e.Namespace, []any{chunk, mc.meta})
		}
		if st.modes[modeMessages] {
			// The Python server's messages mode: metadata once, then the
			// message so far, as a message (message_chunk_to_message).
			sum := graph.AddMessageChunks(st.partial[id], chunk)
			st.partial[id] = sum
			if !st.described[id] {
				st.described[id] = true
				out = st.add(out, "messages/metadata", nil, map[string]any{id: map[string]any{"metadata": mc.meta}})
			}
			out = st.add(out, "messages/partial", nil, []any{graph.ChunkMessage(sum)})
		}
	}
	if st.modes[modeEvents] {
		out = st.add(out, modeEvents, nil, st.nestedEvent("on_chat_model_stream", mc.name, mc.id, e.Task.ID, mc.meta,
			map[string]any{"chunk": chunk}))
	}
	return out
}

// callMessage is, at the end of a chat model call, the id of the message
// it answered (its output's, or its chunks' when it failed): the protocol
// completes or fails that message.
func (st *streamer) callMessage(e graph.Event) string {
	if e.Call.Type != "chat_model" {
		return ""
	}
	id := st.taskMsg[e.Task.ID]
	delete(st.taskMsg, e.Task.ID) // a call's start forgets a previous attempt's
	if msg, ok := e.Call.Output.(map[string]any); ok && e.Kind == graph.EventCallEnd {
		if out, _ := msg["id"].(string); out != "" {
			id = out
		}
	}
	return id
}

// nestedEvent is an astream_events (v2) event of a run nested in a node's
// (a chat model's or a tool's).
func (st *streamer) nestedEvent(event, name, runID, taskID string, meta map[string]any, data map[string]any) map[string]any {
	return map[string]any{"event": event, "name": name, "run_id": runID, "tags": []string{},
		"metadata": meta, "data": data, "parent_ids": []string{st.run.ID, taskID}}
}

// checkpoint reports a checkpoint: the state after a step (values), the
// checkpoint itself (checkpoints, debug), and a static interrupt (updates),
// as LangGraph's loop does after a step and in its tick.
func (st *streamer) checkpoint(out []StreamEvent, e graph.Event) []StreamEvent {
	ns := strings.Join(e.Namespace, "|")
	cp := e.Checkpoint
	key := ns + "/" + cp.ID
	if !st.started[ns] {
		st.started[ns] = true
		// A run that continues its thread (resume, command, or a new
		// attempt) first shows the state it starts from. That checkpoint
		// is not new unless a command's update made it: it is not
		// reported as one.
		if len(e.Namespace) == 0 && st.resuming {
			if st.modes[modeValues] {
				out = st.add(out, modeValues, nil, cp.Values)
			}
			if cp.Metadata.Source != graph.SourceInput {
				st.seen[key] = true
			}
		}
	}
	if !st.seen[key] {
		st.seen[key] = true
		if cp.Metadata.Source == graph.SourceLoop && wroteAny(cp.Metadata.Writes) && st.modes[modeValues] {
			out = st.add(out, modeValues, e.Namespace, cp.Values)
		}
		if st.modes[modeCheckpoints] || st.modes[modeDebug] {
			payload := st.checkpointPayload(e.Namespace, cp)
			if st.modes[modeCheckpoints] {
				out = st.add(out, modeCheckpoints, e.Namespace, payload)
			}
			if st.modes[modeDebug] {
				out = st.add(out, modeDebug, e.Namespace, st.debug("checkpoint", cp.Metadata.Step, payload))
			}
		}
	}
	if e.Outcome.Status == graph.Interrupted && len(e.Outcome.Interrupts) == 0 && st.modes[modeUpdates] {
		// A static interrupt (interrupt_before/after) has no values:
		// LangGraph reports {"__interrupt__": []} in updates only.
		out = st.add(out, modeUpdates, e.Namespace, map[string]any{interruptKey: []any{}})
	}
	return out
}

// wroteAny says whether a step changed the state: LangGraph emits values
// only when a channel was updated.
func wroteAny(writes map[string]any) bool {
	for _, w := range writes {
		if m, ok := w.(map[string]any); ok && len(m) > 0 {
			return true
		}
	}
	return false
}

func (st *streamer) taskStart(out []StreamEvent, e graph.Event) []StreamEvent {
	t := e.Task
	payload := map[string]any{"id": t.ID, "name": t.Name, "input": e.Values, "triggers": triggers(t.Name)}
	if st.modes[modeTasks] {
		out = st.add(out, modeTasks, e.Namespace, payload)
	}
	if st.modes[modeDebug] {
		out = st.add(out, modeDebug, e.Namespace, st.debug("task", e.Step, payload))
	}
	if st.modes[modeEvents] {
		out = st.add(out, modeEvents, nil, st.chainEvent("on_chain_start", t.Name, t.ID, st.nodeMetadata(e),
			map[string]any{"input": e.Values}))
	}
	if st.modes[modeMessages] || st.modes[modeMessagesTuple] {
		// Messages a node is given are not its output (LangGraph's
		// messages handler marks its input's messages as seen).
		for _, m := range findMessages(e.Values) {
			if id, _ := m["id"].(string); id != "" {
				st.messages[id] = true
			}
		}
	}
	return out
}

// triggers is what LangGraph names the trigger of a graph node's task.
func triggers(node string) []string { return []string{"branch:to:" + node} }

func (st *streamer) taskEnd(out []StreamEvent, e graph.Event) []StreamEvent {
	t := e.Task
	switch {
	case len(t.Interrupts) > 0:
		// As LangGraph's loop: updates get the interrupts, values the
		// state with them; a client that did not ask for updates still
		// gets them, as a values event (the Python server's rule).
		ints := interruptList(t.Interrupts)
		if st.modes[modeUpdates] {
			out = st.add(out, modeUpdates, e.Namespace, map[string]any{interruptKey: ints})
		} else {
			out = st.add(out, modeValues, e.Namespace, map[string]any{interruptKey: ints})
		}
		if st.modes[modeValues] {
			state := maps.Clone(e.Values)
			if state == nil {
				state = map[string]any{}
			}
			state[interruptKey] = ints
			out = st.add(out, modeValues, e.Namespace, state)
		}
	case t.Error == nil && t.Result != nil:
		if st.modes[modeUpdates] {
			var update any
			if len(t.Result.Writes) > 0 {
				update = t.Result.Writes.Map()
			}
			out = st.add(out, modeUpdates, e.Namespace, map[string]any{t.Name: update})
		}
		if !e.Cached {
			out = st.messagesOf(out, e)
		}
	}
	if e.Cached {
		return out // reported when it ran
	}
	result := map[string]any{"id": t.ID, "name": t.Name, "error": nil, "result": map[string]any{},
		"interrupts": interruptList(t.Interrupts)}
	if t.Error != nil {
		result["error"] = t.Error
	} else if t.Result != nil {
		result["result"] = t.Result.Writes.Map()
	}
	if st.modes[modeTasks] {
		out = st.add(out, modeTasks, e.Namespace, result)
	}
	if st.modes[modeDebug] {
		out = st.add(out, modeDebug, e.Namespace, st.debug("task_result", e.Step, result))
	}
	if st.modes[modeEvents] && t.Error == nil && t.Result != nil {
		out = st.add(out, modeEvents, nil, st.chainEvent("on_chain_end", t.Name, t.ID, st.nodeMetadata(e),
			map[string]any{"input": e.Values, "output": t.Result.Writes.Map()}))
	}
	return out
}

func interruptList(ints []graph.Interrupt) []graph.Interrupt {
	if ints == nil {
		return []graph.Interrupt{}
	}
	return ints
}

// messagesOf reports the chat messages in a task's writes (the messages
// modes, from whole messages; token chunks come from chat models).
func (st *streamer) messagesOf(out []StreamEvent, e graph.Event) []StreamEvent {
	if !st.modes[modeMessages] && !st.modes[modeMessagesTuple] {
		return out
	}
	var meta map[string]any
	for _, m := range findMessages(e.Task.Result.Writes.Map()) {
		msg := asMessage(m)
		id, _ := msg["id"].(string)
		if id == "" {
			id = uuid.NewString() // as LangGraph gives a message without one
			msg["id"] = id
		}
		if st.messages[id] {
			continue
		}
		st.messages[id] = true
		if meta == nil {
			meta = st.nodeMetadata(e)
		}
		if st.modes[modeMessagesTuple] {
			out = st.add(out, "messages", e.Namespace, []any{msg, meta})
		}
		if st.modes[modeMessages] {
			// The Python server's messages mode: metadata once per
			// message, then the message (complete: it was written whole).
			// It names these events without a namespace.
			if !st.described[id] {
				st.described[id] = true
				out = st.add(out, "messages/metadata", nil, map[string]any{id: map[string]any{"metadata": meta}})
			}
			out = st.add(out, "messages/complete", nil, []any{msg})
		}
	}
	return out
}

// findMessages returns the chat messages among values' values: a message,
// or a list holding messages (where LangGraph's messages handler looks).
func findMessages(values map[string]any) []map[string]any {
	var out []map[string]any
	for _, k := range slices.Sorted(maps.Keys(values)) {
		switch v := values[k].(type) {
		case map[string]any:
			if isMessage(v) {
				out = append(out, v)
			}
		case []any:
			for _, item := range v {
				if m, ok := item.(map[string]any); ok && isMessage(m) {
					out = append(out, m)
				}
			}
		}
	}
	return out
}

// isMessage says whether v is a chat message: content, and a type or role.
func isMessage(v map[string]any) bool {
	if _, ok := v["content"]; !ok {
		return false
	}
	t, _ := v["type"].(string)
	r, _ := v["role"].(string)
	return (t != "" && t != "remove") || r != ""
}

// messageTypes maps OpenAI roles to LangChain message types.
var messageTypes = map[string]string{"user": "human", "assistant": "ai", "system": "system", "developer": "system", "tool": "tool", "function": "function"}

// asMessage copies m with a LangChain type, which clients read messages by.
func asMessage(m map[string]any) map[string]any {
	msg := maps.Clone(m)
	if t, _ := msg["type"].(string); t == "" {
		r, _ := msg["role"].(string)
		if mapped, ok := messageTypes[r]; ok {
			r = mapped
		}
		msg["type"] = r
	}
	return msg
}

// nodeMetadata is the metadata LangGraph gives a node's run: what
// messages-tuple and events carry.
func (st *streamer) nodeMetadata(e graph.Event) map[string]any {
	meta := map[string]any{}
	_ = json.Unmarshal(st.run.Metadata, &meta)
	ns := strings.Join(append(slices.Clone(e.Namespace), e.Task.Name+":"+e.Task.ID), "|")
	maps.Copy(meta, map[string]any{
		"thread_id": st.run.ThreadID, "run_id": st.run.ID, "run_attempt": st.run.Attempt,
		"langgraph_step": e.Step, "langgraph_node": e.Task.Name, "langgraph_triggers": triggers(e.Task.Name),
		"langgraph_path": []string{"__pregel_pull", e.Task.Name}, "langgraph_checkpoint_ns": ns, "checkpoint_ns": ns,
	})
	if st.graphID != "" {
		meta["graph_id"] = st.graphID
	}
	return meta
}

// chainEvent is a LangChain astream_events (v2) event of the graph or a
// node: the part of the events mode the engine can report faithfully.
func (st *streamer) chainEvent(event, name, runID string, meta map[string]any, data map[string]any) map[string]any {
	if meta == nil {
		meta = map[string]any{"thread_id": st.run.ThreadID, "run_attempt": st.run.Attempt}
		if st.graphID != "" {
			meta["graph_id"] = st.graphID
		}
	}
	parents := []string{}
	if runID != st.run.ID {
		parents = []string{st.run.ID}
	}
	return map[string]any{"event": event, "name": name, "run_id": runID, "tags": []string{},
		"metadata": meta, "data": data, "parent_ids": parents}
}

// debug wraps a checkpoint or task payload as the debug mode does.
func (st *streamer) debug(kind string, step int, payload any) map[string]any {
	return map[string]any{"type": kind, "timestamp": st.s.now().Format("2006-01-02T15:04:05.000000+00:00"),
		"step": step, "payload": payload}
}

// checkpointPayload is LangGraph's checkpoint event (debug.py
// map_debug_checkpoint) with the Python server's checkpoint and
// parent_checkpoint additions.
func (st *streamer) checkpointPayload(ns []string, cp graph.Checkpoint) map[string]any {
	nsStr := strings.Join(ns, "|")
	ref := func(id string) map[string]any {
		return map[string]any{"thread_id": st.run.ThreadID, "checkpoint_ns": nsStr, "checkpoint_id": id}
	}
	config := func(id string) any {
		if id == "" {
			return nil
		}
		return map[string]any{"configurable": ref(id)}
	}
	var parent any
	if cp.ParentID != "" {
		parent = ref(cp.ParentID)
	}
	tasks := make([]map[string]any, 0, len(cp.Tasks))
	for _, t := range cp.Tasks {
		task := map[string]any{"id": t.ID, "name": t.Name, "state": nil}
		switch {
		case t.Error != nil:
			task["error"] = t.Error
		case t.Result != nil && t.Name != graph.Start:
			task["result"] = t.Result.Writes.Map()
			task["interrupts"] = interruptList(t.Interrupts)
		default:
			task["interrupts"] = interruptList(t.Interrupts)
		}
		tasks = append(tasks, task)
	}
	next := cp.Next
	if next == nil {
		next = []string{}
	}
	return map[string]any{
		"config": config(cp.ID), "parent_config": config(cp.ParentID),
		"values": cp.Values, "next": next, "tasks": tasks,
		"metadata": map[string]any{"source": cp.Metadata.Source, "step": cp.Metadata.Step,
			"writes": cp.Metadata.Writes, "parents": map[string]any{}},
		"checkpoint": ref(cp.ID), "parent_checkpoint": parent,
	}
}

// add appends the event of mode (named for its namespace) with data.
func (st *streamer) add(out []StreamEvent, mode string, ns []string, data any) []StreamEvent {
	name := mode
	if len(ns) > 0 {
		name += "|" + strings.Join(ns, "|")
	}
	b, err := json.Marshal(data)
	if err != nil { // engine values are JSON by construction
		st.log.Error("stream event is not JSON", "run_id", st.run.ID, "event", name, "error", err.Error())
		return out
	}
	return append(out, StreamEvent{ID: -1, Event: name, Data: b})
}

// sendChunks sends the events of a token chunk. A resumable run's wait
// (at most the chunk window, or until a batch is full, or until another
// event is sent) so that their event-log write is one for many chunks: the
// worker on AWS writes every event to DynamoDB, and a long answer must not
// be one write per token. Its followers still get every chunk, each with
// its id, once written. A protocol run's chunks wait likewise: their
// protocol events (a delta each) go to the thread's event log. Called with
// st.mu held.
func (st *streamer) sendChunks(evs []StreamEvent) {
	if (!st.resumable && st.proto == nil) || len(evs) == 0 {
		st.send(evs)
		return
	}
	st.pending = append(st.pending, evs...)
	for _, e := range evs {
		st.pendingBytes += len(e.Data)
	}
	batch := st.s.ChunkBatch
	if batch <= 0 {
		batch = DefaultChunkBatch
	}
	if len(st.pending) >= batch || st.pendingBytes >= maxAppendBytes {
		st.send(nil)
		return
	}
	if st.timer == nil {
		window := st.s.ChunkWindow
		if window <= 0 {
			window = DefaultChunkWindow
		}
		st.timer = time.AfterFunc(window, st.flush)
	}
}

// flush sends the chunk events that wait.
func (st *streamer) flush() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.send(nil)
}

// send writes a resumable run's events to the log, then hands them to the
// run's and its thread's followers; chunk events that wait go first.
// Called with st.mu held, so events keep their order.
func (st *streamer) send(evs []StreamEvent) {
	if len(st.pending) > 0 {
		evs = append(st.pending, evs...)
		st.pending, st.pendingBytes = nil, 0
	}
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	if len(evs) == 0 || st.err != nil {
		return
	}
	if st.proto != nil {
		if st.sendProtocol(st.proto.mapEvents(evs)); st.err != nil {
			return
		}
	}
	if !st.resumable {
		st.s.streams.publish(evs, runKey(st.run.ID), threadKey(st.run.OrgID, st.run.ThreadID))
		return
	}
	// One write per slice the event log takes at once (DynamoDB: a
	// transaction of 100 items, 4 MB), each published once written.
	for len(evs) > 0 {
		n, size := 0, 0
		for n < len(evs) && n < maxAppendEvents && (n == 0 || size+len(evs[n].Data) <= maxAppendBytes) {
			size += len(evs[n].Data)
			n++
		}
		batch := evs[:n]
		evs = evs[n:]
		stored := make([]store.RunEvent, len(batch))
		for i, e := range batch {
			stored[i] = store.RunEvent{Event: e.Event, Data: e.Data}
		}
		first, err := st.s.Events.AppendRunEvents(st.ctx, st.run.OrgID, st.run.ID, stored, st.expires)
		if err != nil {
			// Not published: a follower must never get an event the log
			// could not replay to it.
			st.err = err
			st.log.Error("append run events; the run resumes after its lease expires", "run_id", st.run.ID, "error", err.Error())
			return
		}
		for i := range batch {
			batch[i].ID = first + int64(i)
		}
		st.s.streams.publish(batch, runKey(st.run.ID), threadKey(st.run.OrgID, st.run.ThreadID))
	}
}

// finished tells the followers of run that it ended with result, and its
// thread's followers that it is done (the thread stream's lifecycle).
func (s *Service) finished(run store.Run, result []byte) {
	done, _ := json.Marshal(map[string]any{"status": "run_done", "run_id": run.ID})
	s.streams.publish([]StreamEvent{{ID: -1, Event: "metadata", Data: done}}, threadKey(run.OrgID, run.ThreadID))
	s.streams.finish(run.ID, rawOr(result, "null"), run.Temporary, s.now())
}

// sweepEvery is how often the workers of a process delete expired stream
// events (reads skip them anyway: this only frees the space).
const sweepEvery = time.Minute

// sweepEvents deletes expired events of the event log until ctx ends.
func (s *Service) sweepEvents(ctx context.Context, log *slog.Logger) {
	if s.Events == nil {
		return
	}
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		const batch = 1000 // one short write transaction at a time
		for ctx.Err() == nil {
			n, err := s.Events.DeleteExpiredRunEvents(ctx, s.now(), batch)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("delete expired stream events", "error", err.Error())
				}
				break
			}
			if n < batch {
				break
			}
		}
	}
}

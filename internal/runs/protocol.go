package runs

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// The thread event protocol (@langchain/react v1, the SDKs'
// client.threads.stream): a second framing of the same run streams. A run
// started through the protocol (run.start, input.respond; protocol_commands.go)
// streams the modes protocolRunModes; its streamer hands every batch of
// run-stream events to a protocolMapper, which turns them into the
// protocol's events (channel, namespace, node, data — the shapes of the
// published types, langchain-protocol / @langchain/protocol, as the
// upstream Python server makes them in langgraph_api/event_streaming). The
// streamer writes those to the thread's event log (store.Events
// AppendThreadEvents, which numbers them: seq) before anyone sees them, and
// publishes them on the thread's protocol feed. POST
// /threads/{id}/stream/events (protocol_stream.go) replays the log after since and
// follows the feed.

// The protocol's channels; custom:<name> names one custom event.
var protocolChannels = []string{"values", "updates", "messages", "tools", "lifecycle", "input", "checkpoints", "tasks", "custom"}

// protocolRunModes are the run-stream modes a protocol run streams: what
// the mapper reads (the Python server asks LangGraph for the same set).
var protocolRunModes = []string{modeValues, modeUpdates, modeMessagesTuple, modeCustom, modeTasks, modeCheckpoints}

func protoKey(orgID, threadID string) string { return "proto:" + orgID + "/" + threadID }

// protoEvent is a protocol event before the log numbers it.
type protoEvent struct {
	method string
	ns     []string
	node   string
	data   any
}

// params is the event's params as the protocol frames them.
func (e protoEvent) params(at time.Time) map[string]any {
	ns := e.ns
	if ns == nil {
		ns = []string{}
	}
	p := map[string]any{"namespace": ns, "timestamp": at.UnixMilli(), "data": e.data}
	if e.node != "" {
		p["node"] = e.node
	}
	return p
}

// protocolMapper turns one execution attempt's run-stream events into
// protocol events. It keeps what the protocol's lifecycle needs: the
// subgraph namespaces started and not yet completed, the interrupts
// already requested, the messages being streamed, and whether the root's
// terminal lifecycle was sent.
type protocolMapper struct {
	graph    func() string // the root graph's name (lifecycle graph_name)
	runID    string
	threadID string

	open        [][]string         // namespaces started and not completed, in order
	seen        map[string]bool    // namespaces ever started
	asked       map[string]bool    // interrupt ids requested (input.requested)
	streaming   []*streamedMessage // messages being streamed, in the order they started
	interrupted bool               // the root's interrupted lifecycle was sent
	done        bool               // the root's terminal lifecycle was sent
}

func newProtocolMapper(runID, threadID string, graph func() string) *protocolMapper {
	return &protocolMapper{graph: graph, runID: runID, threadID: threadID,
		seen: map[string]bool{}, asked: map[string]bool{}}
}

func nsKey(ns []string) string { return strings.Join(ns, "\x00") }

// segmentName is a namespace segment without its task id ("research" of
// "research:1b7e…"): the protocol's graph name of a subgraph.
func segmentName(seg string) string {
	name, _, _ := strings.Cut(seg, ":")
	return name
}

// mapEvents maps a batch of run-stream events, in order.
func (m *protocolMapper) mapEvents(evs []StreamEvent) []protoEvent {
	var out []protoEvent
	for _, e := range evs {
		mode, rest, _ := strings.Cut(e.Event, "|")
		var ns []string
		if rest != "" {
			ns = strings.Split(rest, "|")
		}
		switch mode {
		case "metadata":
			// An attempt starts: the root runs (a new attempt of the run
			// says so again).
			m.done, m.interrupted = false, false
			out = append(out, m.lifecycle(nil, "running", ""))
		case "error":
			var body struct {
				Message string `json:"message"`
				Error   string `json:"error"`
			}
			_ = json.Unmarshal(e.Data, &body)
			msg := body.Message
			if body.Error != "" {
				msg = body.Error + ": " + body.Message
			}
			out = m.finish(out, "failed", msg)
		case modeValues:
			out = m.values(out, ns, decodeJSON(e.Data))
		case modeUpdates:
			out = m.updates(out, ns, decodeJSON(e.Data))
		case "messages": // messages-tuple: [message, metadata]
			var pair []json.RawMessage
			if json.Unmarshal(e.Data, &pair) != nil || len(pair) != 2 {
				continue
			}
			msg, _ := decodeJSON(pair[0]).(map[string]any)
			meta, _ := decodeJSON(pair[1]).(map[string]any)
			if msg == nil {
				continue
			}
			out = m.started(out, ns)
			if msg["type"] == "AIMessageChunk" {
				out = m.chunk(out, ns, msg, meta)
			} else {
				out = m.message(out, ns, msg, meta)
			}
		case modeCustom:
			out = m.started(out, ns)
			out = append(out, protoEvent{method: "custom", ns: ns, data: customData(e.Data)})
		case modeTasks:
			out = m.started(out, ns)
			out = append(out, protoEvent{method: "tasks", ns: ns, data: json.RawMessage(e.Data)})
		case modeCheckpoints:
			out = m.checkpoint(out, ns, e.Data)
		}
	}
	return out
}

// lifecycle is a lifecycle event of ns.
func (m *protocolMapper) lifecycle(ns []string, status, errMsg string) protoEvent {
	name := m.graph()
	if len(ns) > 0 {
		name = segmentName(ns[len(ns)-1])
	}
	data := map[string]any{"event": status, "graph_name": name}
	if errMsg != "" {
		data["error"] = errMsg
	}
	return protoEvent{method: "lifecycle", ns: ns, data: data}
}

// started announces every prefix of ns not seen yet: a subgraph started
// (LangGraph's lifecycle transformer does so for every subgraph).
func (m *protocolMapper) started(out []protoEvent, ns []string) []protoEvent {
	for i := 1; i <= len(ns); i++ {
		prefix := slices.Clone(ns[:i])
		if k := nsKey(prefix); !m.seen[k] {
			m.seen[k] = true
			m.open = append(m.open, prefix)
			out = append(out, m.lifecycle(prefix, "started", ""))
		}
	}
	return out
}

// completeChild completes the oldest open child of parent run by node: an
// update of node in parent says its task (and so its subgraph) is done.
func (m *protocolMapper) completeChild(out []protoEvent, parent []string, node string) []protoEvent {
	if node == "" || strings.HasPrefix(node, "__") {
		return out
	}
	for i, ns := range m.open {
		if len(ns) == len(parent)+1 && slices.Equal(ns[:len(parent)], parent) && segmentName(ns[len(ns)-1]) == node {
			m.open = slices.Delete(m.open, i, i+1)
			return append(out, m.lifecycle(ns, "completed", ""))
		}
	}
	return out
}

// finish sends the root's terminal lifecycle (completed, interrupted or
// failed), completing every open subgraph first, deepest first.
func (m *protocolMapper) finish(out []protoEvent, status, errMsg string) []protoEvent {
	if m.done {
		return out
	}
	// A message still streaming ends with the run: complete when the run
	// completed or stopped for input, with the run's error when it failed.
	streamErr := ""
	if status == "failed" {
		streamErr = cmp.Or(errMsg, "the run failed")
	}
	out = m.closeMessages(out, func(*streamedMessage) bool { return true }, streamErr)
	open := slices.Clone(m.open)
	slices.SortStableFunc(open, func(a, b []string) int { return len(b) - len(a) })
	for _, ns := range open {
		out = append(out, m.lifecycle(ns, "completed", ""))
	}
	m.open = nil
	m.done = true
	if status == "interrupted" && m.interrupted {
		return out
	}
	return append(out, m.lifecycle(nil, status, errMsg))
}

// requestInput sends input.requested for each interrupt not requested yet,
// then the root's interrupted lifecycle (the run stopped for input).
func (m *protocolMapper) requestInput(out []protoEvent, ns []string, ints []any) []protoEvent {
	asked := false
	for _, raw := range ints {
		it, _ := raw.(map[string]any)
		id, _ := it["id"].(string)
		if id == "" || m.asked[id] {
			continue
		}
		m.asked[id] = true
		asked = true
		data := map[string]any{"interrupt_id": id}
		if v, ok := it["value"]; ok {
			data["payload"] = v
		}
		out = append(out, protoEvent{method: "input.requested", ns: ns, data: data})
	}
	if asked && !m.interrupted {
		m.interrupted = true
		out = append(out, m.lifecycle(nil, "interrupted", ""))
	}
	return out
}

// stripInterrupts separates LangGraph's __interrupt__ from a state.
func stripInterrupts(v any) ([]any, any) {
	state, ok := v.(map[string]any)
	if !ok {
		return nil, v
	}
	ints, has := state[interruptKey]
	if !has {
		return nil, v
	}
	list, _ := ints.([]any)
	clean := maps.Clone(state)
	delete(clean, interruptKey)
	return list, clean
}

func (m *protocolMapper) values(out []protoEvent, ns []string, v any) []protoEvent {
	out = m.started(out, ns)
	ints, clean := stripInterrupts(v)
	out = m.requestInput(out, ns, ints)
	if state, ok := clean.(map[string]any); !ok || len(state) > 0 {
		out = append(out, protoEvent{method: "values", ns: ns, data: clean})
	}
	return out
}

// updates maps {node: writes}: the node goes to params.node, the writes
// are the data (a node that wrote nothing gives {"value": null}, as the
// Python server's normalizer does).
func (m *protocolMapper) updates(out []protoEvent, ns []string, v any) []protoEvent {
	out = m.started(out, ns)
	update, _ := v.(map[string]any)
	if len(update) != 1 {
		return append(out, protoEvent{method: "updates", ns: ns, data: asUpdate(v)})
	}
	var node string
	for k := range update {
		node = k
	}
	// The node is done: so is what it was streaming.
	out = m.closeMessages(out, func(o *streamedMessage) bool { return o.node == node && slices.Equal(o.ns, ns) }, "")
	if node == interruptKey {
		ints, _ := update[node].([]any)
		return m.requestInput(out, ns, ints)
	}
	ints, clean := stripInterrupts(asUpdate(update[node]))
	out = m.requestInput(out, ns, ints)
	if state, ok := clean.(map[string]any); !ok || len(state) > 0 {
		out = append(out, protoEvent{method: "updates", ns: ns, node: node, data: clean})
	}
	return m.completeChild(out, ns, node)
}

func asUpdate(v any) any {
	if _, ok := v.(map[string]any); ok {
		return v
	}
	return map[string]any{"value": v}
}

// checkpoint maps the checkpoints mode's payload to the protocol's
// Checkpoint {id, parent_id, step, source}.
func (m *protocolMapper) checkpoint(out []protoEvent, ns []string, raw json.RawMessage) []protoEvent {
	var cp struct {
		Checkpoint struct {
			ID string `json:"checkpoint_id"`
		} `json:"checkpoint"`
		Parent *struct {
			ID string `json:"checkpoint_id"`
		} `json:"parent_checkpoint"`
		Metadata struct {
			Step   json.Number `json:"step"`
			Source string      `json:"source"`
		} `json:"metadata"`
	}
	if json.Unmarshal(raw, &cp) != nil || cp.Checkpoint.ID == "" {
		return out
	}
	out = m.started(out, ns)
	data := map[string]any{"id": cp.Checkpoint.ID, "step": cp.Metadata.Step, "source": cp.Metadata.Source}
	if cp.Parent != nil && cp.Parent.ID != "" {
		data["parent_id"] = cp.Parent.ID
	}
	return append(out, protoEvent{method: "checkpoints", ns: ns, data: data})
}

// protocolRoles are the protocol's message roles by LangChain type (tool
// messages keep "tool", as the Python server sends them). A chat model's
// AIMessageChunk is a piece of a message being streamed: see chunk.
var protocolRoles = map[string]string{"ai": "ai", "human": "human", "system": "system", "tool": "tool"}

// streamedMessage is a message whose chunks are being mapped: its
// message-start was sent, and the content blocks started so far (the last
// one open until it is finished).
type streamedMessage struct {
	id, node string
	ns       []string
	blocks   []*streamedBlock
	usage    map[string]any
}

// streamedBlock is a content block of a streamed message: text, or one tool
// call (a tool_call_chunk until it finishes as a tool_call).
type streamedBlock struct {
	tool       bool
	done       bool   // content-block-finish was sent
	text       string // a text block's text so far
	chunkIndex any    // a tool call block's tool_call_chunk index
	id, name   any    // a tool call's id and name (null until the provider names them)
	args       string // a tool call's arguments so far
}

// open is the message's open block, nil when there is none.
func (sm *streamedMessage) open() *streamedBlock {
	if n := len(sm.blocks); n > 0 && !sm.blocks[n-1].done {
		return sm.blocks[n-1]
	}
	return nil
}

// toolBlock is the block of the tool call chunk tc: the one its index names
// (an index-less chunk continues the open tool call when it names no new
// call), nil for a new call.
func (sm *streamedMessage) toolBlock(tc map[string]any) *streamedBlock {
	if tc["index"] == nil {
		if b := sm.open(); b != nil && b.tool && tc["id"] == nil {
			return b
		}
		return nil
	}
	for _, b := range sm.blocks {
		if b.tool && b.chunkIndex != nil && jsonEqual(b.chunkIndex, tc["index"]) {
			return b
		}
	}
	return nil
}

// streamed is the message being streamed with id, nil if none is.
func (m *protocolMapper) streamed(id string) *streamedMessage {
	for _, sm := range m.streaming {
		if sm.id == id {
			return sm
		}
	}
	return nil
}

// messageEvent is an event of the messages channel; every event after
// message-start names its message (message_id), so a client routes the
// events of messages streamed at once (parallel nodes) apart.
func messageEvent(ns []string, node, id string, data map[string]any) protoEvent {
	if data["event"] != "message-start" {
		data["message_id"] = id
	}
	return protoEvent{method: "messages", ns: ns, node: node, data: data}
}

// messageStart is a message's message-start: its role, id and metadata
// (the run, thread and node; the provider and model of a chat model's).
func (m *protocolMapper) messageStart(role, id, node string, meta map[string]any) map[string]any {
	md := map[string]any{"run_id": m.runID, "thread_id": m.threadID, "langgraph_node": node}
	for from, to := range map[string]string{"ls_provider": "provider", "ls_model_name": "model", "ls_model_type": "model_type"} {
		if v, _ := meta[from].(string); v != "" {
			md[to] = v
		}
	}
	return map[string]any{"event": "message-start", "role": role, "id": id, "metadata": md}
}

// chunk maps a chat model's token chunk (an AIMessageChunk of the
// messages-tuple mode). The first chunk of a message id starts the message
// (and closes a message the same node was streaming before it); each
// piece of text is a text-delta of the open text block, each piece of a
// tool call's arguments a tool-call-delta of that call's block. A block
// finishes when the next one starts; the message finishes when it is
// complete (closeMessages: the model call's end, the node's update, the
// node's next message, the end of the run).
func (m *protocolMapper) chunk(out []protoEvent, ns []string, chunk, meta map[string]any) []protoEvent {
	id, _ := chunk["id"].(string)
	if id == "" {
		return out // a piece of no message a client could put together
	}
	node, _ := meta["langgraph_node"].(string)
	sm := m.streamed(id)
	if sm == nil {
		out = m.closeMessages(out, func(o *streamedMessage) bool { return o.node == node && slices.Equal(o.ns, ns) }, "")
		sm = &streamedMessage{id: id, node: node, ns: slices.Clone(ns)}
		m.streaming = append(m.streaming, sm)
		out = append(out, messageEvent(sm.ns, node, id, m.messageStart("ai", id, node, meta)))
	}
	emit := func(data map[string]any) { out = append(out, messageEvent(sm.ns, node, id, data)) }
	startBlock := func(b *streamedBlock, content map[string]any) {
		if open := sm.open(); open != nil {
			out = m.finishBlock(out, sm, open)
		}
		sm.blocks = append(sm.blocks, b)
		emit(map[string]any{"event": "content-block-start", "index": len(sm.blocks) - 1, "content": content})
	}
	for _, piece := range chunkTexts(chunk["content"]) {
		if b := sm.open(); b == nil || b.tool {
			startBlock(&streamedBlock{}, map[string]any{"type": "text", "text": ""})
		}
		sm.open().text += piece
		emit(map[string]any{"event": "content-block-delta", "index": len(sm.blocks) - 1,
			"delta": map[string]any{"type": "text-delta", "text": piece}})
	}
	calls, _ := chunk["tool_call_chunks"].([]any)
	for _, raw := range calls {
		tc, _ := raw.(map[string]any)
		if tc == nil {
			continue
		}
		args, _ := tc["args"].(string)
		// Arguments for a call whose block already finished (a provider
		// interleaving two calls' fragments) are kept but not sent:
		// blocks must not interleave.
		b := sm.toolBlock(tc)
		if b == nil {
			b = &streamedBlock{tool: true, chunkIndex: tc["index"], id: tc["id"], name: tc["name"]}
			content := map[string]any{"type": "tool_call_chunk", "id": b.id, "name": b.name, "args": ""}
			if b.chunkIndex != nil {
				content["index"] = b.chunkIndex
			}
			startBlock(b, content)
		}
		if b.id == nil {
			b.id = tc["id"]
		}
		if b.name == nil {
			b.name = tc["name"]
		}
		b.args += args
		if args != "" && !b.done {
			emit(map[string]any{"event": "content-block-delta", "index": slices.Index(sm.blocks, b),
				"delta": map[string]any{"type": "tool-call-delta", "args": args}})
		}
	}
	if u, ok := chunk["usage_metadata"].(map[string]any); ok && len(u) > 0 {
		sm.usage = u // the provider reports it once, with the last chunk
	}
	return out
}

// chunkTexts are the pieces of text of a chunk's content (a string, or
// content blocks of which the text ones count).
func chunkTexts(content any) []string {
	var out []string
	switch c := content.(type) {
	case string:
		if c != "" {
			out = append(out, c)
		}
	case []any:
		for _, item := range c {
			switch b := item.(type) {
			case string:
				if b != "" {
					out = append(out, b)
				}
			case map[string]any:
				if t, _ := b["type"].(string); t == "text" {
					if s, _ := b["text"].(string); s != "" {
						out = append(out, s)
					}
				}
			}
		}
	}
	return out
}

// finishBlock sends content-block-finish for b with its final content: the
// text, or the tool call with its arguments parsed (as LangChain reads
// them: an invalid_tool_call when they are not a JSON object).
func (m *protocolMapper) finishBlock(out []protoEvent, sm *streamedMessage, b *streamedBlock) []protoEvent {
	b.done = true
	content := map[string]any{"type": "text", "text": b.text}
	if b.tool {
		calls, invalid := graph.ToolCallsOfChunks([]any{map[string]any{"id": b.id, "name": b.name, "args": b.args}})
		if len(calls) == 1 {
			content = calls[0].(map[string]any)
		} else if len(invalid) == 1 {
			content = invalid[0].(map[string]any)
		}
	}
	return append(out, messageEvent(sm.ns, sm.node, sm.id, map[string]any{"event": "content-block-finish",
		"index": slices.Index(sm.blocks, b), "content": content}))
}

// closeMessages ends the streamed messages which match: the open block's
// content-block-finish and message-finish (with the usage the provider
// reported), or, when errMsg says why the message cannot complete (the
// model call or the run failed), the protocol's message error.
func (m *protocolMapper) closeMessages(out []protoEvent, match func(*streamedMessage) bool, errMsg string) []protoEvent {
	kept := m.streaming[:0]
	for _, sm := range slices.Clone(m.streaming) {
		if !match(sm) {
			kept = append(kept, sm)
			continue
		}
		if errMsg != "" {
			out = append(out, messageEvent(sm.ns, sm.node, sm.id, map[string]any{"event": "error", "message": errMsg}))
			continue
		}
		if b := sm.open(); b != nil {
			out = m.finishBlock(out, sm, b)
		}
		finish := map[string]any{"event": "message-finish"}
		if sm.usage != nil {
			finish["usage"] = sm.usage
		}
		out = append(out, messageEvent(sm.ns, sm.node, sm.id, finish))
	}
	clear(m.streaming[len(kept):])
	m.streaming = kept
	return out
}

// message maps a whole chat message to the content-block lifecycle:
// message-start, for each block content-block-start / -delta / -finish,
// message-finish. A message written whole has one delta per block. It
// closes a message its node was streaming (its next message); the message
// a node streamed is not mapped again when written (the streamer sends it
// once), and if it were, it completes the streamed one.
func (m *protocolMapper) message(out []protoEvent, ns []string, msg, meta map[string]any) []protoEvent {
	typ, _ := msg["type"].(string)
	role, ok := protocolRoles[typ]
	if !ok {
		return out
	}
	id, _ := msg["id"].(string)
	node, _ := meta["langgraph_node"].(string)
	if id != "" && m.streamed(id) != nil {
		return m.closeMessages(out, func(o *streamedMessage) bool { return o.id == id }, "")
	}
	out = m.closeMessages(out, func(o *streamedMessage) bool { return o.node == node && slices.Equal(o.ns, ns) }, "")
	start := m.messageStart(role, id, node, meta)
	if callID, _ := msg["tool_call_id"].(string); callID != "" {
		start["tool_call_id"] = callID
	}
	emit := func(data map[string]any) { out = append(out, messageEvent(ns, node, id, data)) }
	emit(start)
	index := 0
	block := func(startBlock, delta, final map[string]any) {
		emit(map[string]any{"event": "content-block-start", "index": index, "content": startBlock})
		if delta != nil {
			emit(map[string]any{"event": "content-block-delta", "index": index, "delta": delta})
		}
		emit(map[string]any{"event": "content-block-finish", "index": index, "content": final})
		index++
	}
	text := func(s string) {
		if s != "" {
			block(map[string]any{"type": "text", "text": ""}, map[string]any{"type": "text-delta", "text": s},
				map[string]any{"type": "text", "text": s})
		}
	}
	switch c := msg["content"].(type) {
	case string:
		text(c)
	case []any:
		for _, item := range c {
			switch b := item.(type) {
			case string:
				text(b)
			case map[string]any:
				if t, _ := b["type"].(string); t == "text" {
					s, _ := b["text"].(string)
					text(s)
				} else if t != "" {
					block(b, nil, b)
				}
			}
		}
	}
	calls, _ := msg["tool_calls"].([]any)
	for _, raw := range calls {
		call, _ := raw.(map[string]any)
		if call == nil {
			continue
		}
		callID, _ := call["id"].(string)
		name, _ := call["name"].(string)
		args := call["args"]
		if args == nil {
			args = map[string]any{}
		}
		argsJSON, _ := json.Marshal(args)
		block(map[string]any{"type": "tool_call_chunk", "id": callID, "name": name, "args": ""},
			map[string]any{"type": "tool-call-delta", "args": string(argsJSON)},
			map[string]any{"type": "tool_call", "id": callID, "name": name, "args": args})
	}
	finish := map[string]any{"event": "message-finish"}
	if usage, ok := msg["usage_metadata"].(map[string]any); ok {
		finish["usage"] = usage
	}
	emit(finish)
	return out
}

// call maps the engine's report of a call a node makes (graph
// EventCallStart / EventCallEnd; the streamer hands them over directly, as
// no run-stream mode but events carries them). A tool's start and end are
// the tools channel's tool-started and tool-finished (tool-error when it
// failed or its message says so), named by the model's tool call id; a
// chat model's end completes the message it streamed (msgID), or fails it
// when the call failed.
func (m *protocolMapper) call(ns []string, node string, start bool, c graph.Call, msgID string) []protoEvent {
	var out []protoEvent
	switch c.Type {
	case "chat_model":
		if !start && msgID != "" {
			errMsg := ""
			if c.Output == nil {
				errMsg = "the chat model call failed"
			}
			out = m.closeMessages(out, func(o *streamedMessage) bool { return o.id == msgID }, errMsg)
		}
	case "tool":
		out = m.started(out, ns)
		callID := cmp.Or(c.ToolCallID, c.ID)
		tool := func(data map[string]any) {
			data["tool_call_id"] = callID
			out = append(out, protoEvent{method: "tools", ns: ns, node: node, data: data})
		}
		if start {
			input := c.Input
			if input == nil {
				input = map[string]any{}
			}
			tool(map[string]any{"event": "tool-started", "tool_name": c.Name, "input": input})
			break
		}
		msg, _ := c.Output.(map[string]any)
		switch status, _ := msg["status"].(string); {
		case c.Output == nil:
			tool(map[string]any{"event": "tool-error", "message": "tool " + c.Name + " failed"})
		case status == "error":
			text, _ := msg["content"].(string)
			tool(map[string]any{"event": "tool-error", "message": text})
		case msg != nil:
			tool(map[string]any{"event": "tool-finished", "output": msg["content"]})
		default:
			tool(map[string]any{"event": "tool-finished", "output": c.Output})
		}
	}
	return out
}

// customData is a custom event's data: {payload}, or {name, payload} for a
// named event — one emitted as an object of exactly a name (a non-empty
// string) and a payload, the protocol's own CustomData shape — which
// custom:<name> subscribers get (docs/runtime-protocol.md, Custom events).
func customData(raw json.RawMessage) map[string]any {
	var named struct {
		Name    string          `json:"name"`
		Payload json.RawMessage `json:"payload"`
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(raw, &keys) == nil && len(keys) == 2 && keys["payload"] != nil &&
		json.Unmarshal(raw, &named) == nil && named.Name != "" {
		return map[string]any{"name": named.Name, "payload": named.Payload}
	}
	return map[string]any{"payload": raw}
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// decodeJSON decodes b keeping numbers exact.
func decodeJSON(b []byte) any {
	dec := json.NewDecoder(bytesReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

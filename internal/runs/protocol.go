package runs

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"
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
// already requested, the tool calls started, and whether the root's
// terminal lifecycle was sent.
type protocolMapper struct {
	graph    func() string // the root graph's name (lifecycle graph_name)
	runID    string
	threadID string

	open        [][]string      // namespaces started and not completed, in order
	seen        map[string]bool // namespaces ever started
	asked       map[string]bool // interrupt ids requested (input.requested)
	tools       map[string]bool // tool call ids started
	interrupted bool            // the root's interrupted lifecycle was sent
	done        bool            // the root's terminal lifecycle was sent
}

func newProtocolMapper(runID, threadID string, graph func() string) *protocolMapper {
	return &protocolMapper{graph: graph, runID: runID, threadID: threadID,
		seen: map[string]bool{}, asked: map[string]bool{}, tools: map[string]bool{}}
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
			if msg != nil {
				out = m.started(out, ns)
				out = m.message(out, ns, msg, meta)
			}
		case modeCustom:
			out = m.started(out, ns)
			out = append(out, protoEvent{method: "custom", ns: ns, data: map[string]any{"payload": json.RawMessage(e.Data)}})
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
// messages keep "tool", as the Python server sends them).
var protocolRoles = map[string]string{"ai": "ai", "AIMessageChunk": "ai", "human": "human", "system": "system", "tool": "tool"}

// message maps a whole chat message to the content-block lifecycle:
// message-start, for each block content-block-start / -delta / -finish,
// message-finish. A message written whole has one delta per block.
//
// Token streaming plugs in here: chunks of one message (the same id) would
// send message-start on the first, a content-block-delta per chunk, and
// the finishes when the whole message is written; until chat models
// stream, every message arrives whole.
func (m *protocolMapper) message(out []protoEvent, ns []string, msg, meta map[string]any) []protoEvent {
	typ, _ := msg["type"].(string)
	role, ok := protocolRoles[typ]
	if !ok {
		return out
	}
	id, _ := msg["id"].(string)
	node, _ := meta["langgraph_node"].(string)
	start := map[string]any{"event": "message-start", "role": role, "id": id,
		"metadata": map[string]any{"run_id": m.runID, "thread_id": m.threadID, "langgraph_node": node}}
	if callID, _ := msg["tool_call_id"].(string); callID != "" {
		start["tool_call_id"] = callID
	}
	emit := func(data map[string]any) {
		out = append(out, protoEvent{method: "messages", ns: ns, node: node, data: data})
	}
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
	return m.toolEvents(out, ns, node, typ, msg, calls)
}

// toolEvents maps tool calls to the tools channel: an AI message's calls are
// tool-started (when the model asked for them: the engine reports tools as
// nodes, not calls), a tool message for a started call tool-finished (or
// tool-error when its status says so).
func (m *protocolMapper) toolEvents(out []protoEvent, ns []string, node, typ string, msg map[string]any, calls []any) []protoEvent {
	for _, raw := range calls {
		call, _ := raw.(map[string]any)
		callID, _ := call["id"].(string)
		if callID == "" || m.tools[callID] {
			continue
		}
		m.tools[callID] = true
		name, _ := call["name"].(string)
		out = append(out, protoEvent{method: "tools", ns: ns, node: node,
			data: map[string]any{"event": "tool-started", "tool_call_id": callID, "tool_name": name, "input": call["args"]}})
	}
	if typ != "tool" {
		return out
	}
	callID, _ := msg["tool_call_id"].(string)
	if !m.tools[callID] {
		return out
	}
	delete(m.tools, callID)
	if status, _ := msg["status"].(string); status == "error" {
		text, _ := msg["content"].(string)
		return append(out, protoEvent{method: "tools", ns: ns, node: node,
			data: map[string]any{"event": "tool-error", "tool_call_id": callID, "message": text}})
	}
	return append(out, protoEvent{method: "tools", ns: ns, node: node,
		data: map[string]any{"event": "tool-finished", "tool_call_id": callID, "output": msg["content"]}})
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

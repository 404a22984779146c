package interop

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// A2A over JSON-RPC, as the upstream Agent Server serves it
// (langgraph_api/api/a2a.py): one agent per assistant at
// /a2a/{assistant_id}. A context is a thread (message.contextId is its
// thread_id); a task is one run on it, named "{context_id}:{run_id}" so
// tasks/get needs no other key. Every answer is a JSON-RPC response with
// HTTP 200, errors included, except an unacceptable Accept header (400).

// A2A error codes beyond JSON-RPC's (A2A specification, "Error Handling").
const (
	CodeTaskNotFound           = -32001
	CodeTaskNotCancelable      = -32002
	CodeUnsupportedOperation   = -32004
	CodeContentTypeUnsupported = -32005
)

// maxHistoryLength bounds historyLength (upstream's bound).
const maxHistoryLength = 10

// dialect is the method family a request used. The slash names of A2A 0.3
// (message/send, ...) are answered in that revision's form: lower-case
// roles and states ("agent", "completed") and bare results. The A2A 1.0
// names (SendMessage, ...) are answered in 1.0's: ROLE_AGENT,
// TASK_STATE_COMPLETED, SendMessage's task under "task", and stream
// events under "task", "statusUpdate" and "artifactUpdate".
type dialect struct{ v1 bool }

var a2aMethods = map[string]struct {
	name string
	v1   bool
}{
	"message/send": {"send", false}, "message/stream": {"stream", false},
	"tasks/get": {"get", false}, "tasks/cancel": {"cancel", false},
	"SendMessage": {"send", true}, "SendStreamingMessage": {"stream", true},
	"GetTask": {"get", true}, "CancelTask": {"cancel", true},
}

var legacyStates = map[string]string{
	"TASK_STATE_SUBMITTED": "submitted", "TASK_STATE_WORKING": "working",
	"TASK_STATE_COMPLETED": "completed", "TASK_STATE_FAILED": "failed",
	"TASK_STATE_CANCELED": "canceled", "TASK_STATE_INPUT_REQUIRED": "input-required",
}

func (d dialect) state(s string) string {
	if d.v1 {
		return s
	}
	return legacyStates[s]
}

func (d dialect) role(agent bool) string {
	switch {
	case d.v1 && agent:
		return "ROLE_AGENT"
	case d.v1:
		return "ROLE_USER"
	case agent:
		return "agent"
	}
	return "user"
}

// terminal task states: such a task takes no further message.
var terminalStates = map[string]bool{"TASK_STATE_COMPLETED": true, "TASK_STATE_FAILED": true, "TASK_STATE_CANCELED": true}

// taskState maps a run's status (and its thread's, for a run that ended
// on an interrupt) to a task state.
func taskState(runStatus, threadStatus string) string {
	switch runStatus {
	case "pending":
		return "TASK_STATE_SUBMITTED"
	case "running":
		return "TASK_STATE_WORKING"
	case "success":
		if threadStatus == "interrupted" {
			return "TASK_STATE_INPUT_REQUIRED"
		}
		return "TASK_STATE_COMPLETED"
	case "interrupted":
		// An externally canceled run (interrupts of the graph end the run
		// successfully and interrupt the thread).
		return "TASK_STATE_CANCELED"
	case "error", "timeout":
		return "TASK_STATE_FAILED"
	}
	return "TASK_STATE_SUBMITTED"
}

// a2aCall is a validated JSON-RPC request to an agent.
type a2aCall struct {
	id     json.RawMessage
	method string // send, stream, get, cancel
	d      dialect
	env    envelope
}

// Stream is a message/stream answer: Run emits each server-sent event's
// data (a JSON-RPC response) in order and returns when the task is final,
// failed or ctx ends. The HTTP framing (event "message", heartbeats) is
// the caller's.
type Stream struct {
	run func(ctx context.Context, emit func(Response) error) error
}

// Run emits the stream's events; the first emit error ends it.
func (st *Stream) Run(ctx context.Context, emit func(Response) error) error { return st.run(ctx, emit) }

// A2A answers one POST /a2a/{assistant_id}: a Reply, or for message/stream
// a Stream (with Reply.Status 200).
func (s *Service) A2A(ctx context.Context, orgID, assistantID string, body []byte, accept string) (Reply, *Stream) {
	env, perr := decodeEnvelope(body)
	if perr != nil {
		return Reply{http.StatusOK, errorResponse(env.ID, perr)}, nil
	}
	m, known := a2aMethods[env.method]
	if env.method != "" && !known {
		return Reply{http.StatusOK, errorResponse(env.ID, rpcErr(CodeMethodNotFound, "Method not found: "+truncate(env.method, 100)))}, nil
	}
	if m.name == "stream" {
		if !accepts(accept, "text/event-stream") {
			return Reply{http.StatusBadRequest, errorResponse(env.ID, rpcErr(CodeInvalidRequest,
				"Invalid Request: the Accept header must include text/event-stream for streaming"))}, nil
		}
	} else if !accepts(accept, "application/json") {
		return Reply{http.StatusBadRequest, errorResponse(env.ID, rpcErr(CodeInvalidRequest,
			"Invalid Request: the Accept header must include application/json"))}, nil
	}
	switch env.kind() {
	case kindResponse:
		return Reply{Status: http.StatusAccepted}, nil
	case kindNotification:
		return Reply{http.StatusOK, errorResponse(nil, rpcErr(CodeInvalidRequest, "Invalid Request: id is required (A2A methods are requests)"))}, nil
	case kindInvalid:
		if env.ID != nil {
			return Reply{http.StatusOK, errorResponse(env.ID, rpcErr(CodeInvalidRequest, "Invalid Request: method is required"))}, nil
		}
		return Reply{http.StatusOK, errorResponse(nil, rpcErr(CodeInvalidRequest, "Invalid Request: the body must be a JSON-RPC request"))}, nil
	}
	call := a2aCall{id: env.ID, method: m.name, d: dialect{v1: m.v1}, env: env}
	switch call.method {
	case "stream":
		return Reply{Status: http.StatusOK}, &Stream{run: func(ctx context.Context, emit func(Response) error) error {
			return s.a2aStream(ctx, orgID, assistantID, call, emit)
		}}
	case "send":
		out, rerr := s.a2aSend(ctx, orgID, assistantID, call)
		return call.reply(out, rerr), nil
	case "get":
		out, rerr := s.a2aGet(ctx, orgID, assistantID, call)
		return call.reply(out, rerr), nil
	default:
		out, rerr := s.a2aCancel(ctx, orgID, assistantID, call)
		return call.reply(out, rerr), nil
	}
}

func (c a2aCall) reply(out any, rerr *RPCError) Reply {
	if rerr != nil {
		return Reply{http.StatusOK, errorResponse(c.id, rerr)}
	}
	return Reply{http.StatusOK, result(c.id, out)}
}

// sendParams are message/send's and message/stream's params.
type sendParams struct {
	Message       json.RawMessage `json:"message"`
	Configuration json.RawMessage `json:"configuration"`
	Context       json.RawMessage `json:"context"`
}

type a2aMessage struct {
	MessageID json.RawMessage   `json:"messageId"`
	Role      json.RawMessage   `json:"role"`
	Parts     []json.RawMessage `json:"parts"`
	ContextID *string           `json:"contextId"`
	TaskID    *string           `json:"taskId"`
}

// prepared is a validated message, ready to become a run.
type prepared struct {
	assistant runs.Assistant
	messageID string
	message   map[string]any // the message as sent, for the stream's first task
	contextID string         // "" for a new context
	task      *resolvedTask  // the continued task, if any
	input     map[string]any
	history   *int
	context   json.RawMessage
}

// prepare applies the rules of message/send and message/stream up to the
// run: params, message, parts, the assistant and the continued task.
func (s *Service) prepare(ctx context.Context, orgID, assistantID string, c a2aCall) (prepared, *RPCError) {
	var p sendParams
	var out prepared
	if c.env.Params == nil || isNull(c.env.Params) {
		return out, rpcErr(CodeInvalidParams, "Missing or invalid 'message' in params")
	}
	if err := c.env.params(&p); err != nil {
		return out, err
	}
	if p.Message == nil || !isObject(p.Message) {
		return out, rpcErr(CodeInvalidParams, "Missing or invalid 'message' in params")
	}
	if p.Configuration != nil && !isNull(p.Configuration) {
		var conf struct {
			HistoryLength json.RawMessage `json:"historyLength"`
		}
		if !isObject(p.Configuration) || json.Unmarshal(p.Configuration, &conf) != nil {
			return out, rpcErr(CodeInvalidParams, "Invalid params: 'configuration' must be an object")
		}
		h, rerr := historyLength(conf.HistoryLength)
		if rerr != nil {
			return out, rerr
		}
		out.history = h
	}
	if p.Context != nil && !isNull(p.Context) {
		if !isObject(p.Context) {
			return out, rpcErr(CodeInvalidParams, "Invalid params: 'context' must be an object")
		}
		out.context = p.Context
	}
	var msg a2aMessage
	if err := json.Unmarshal(p.Message, &msg); err != nil {
		return out, rpcErr(CodeInvalidParams, "Invalid params: message."+describeJSONError(err))
	}
	_ = json.Unmarshal(p.Message, &out.message)
	if json.Unmarshal(msg.MessageID, &out.messageID) != nil || out.messageID == "" {
		return out, rpcErr(CodeInvalidParams, "Missing required 'messageId' in message")
	}
	var role string
	if json.Unmarshal(msg.Role, &role) != nil || role == "" {
		return out, rpcErr(CodeInvalidParams, "Missing required 'role' in message")
	}
	agent := false
	switch role {
	case "user", "ROLE_USER":
	case "agent", "ROLE_AGENT":
		agent = true
	default:
		return out, rpcErr(CodeInvalidParams, "Invalid params: message.role must be user or agent")
	}
	if len(msg.Parts) == 0 {
		return out, rpcErr(CodeInvalidParams, "Message must contain at least one part")
	}
	a, err := s.runs.GetAssistant(ctx, orgID, assistantID)
	if err != nil {
		return out, s.assistantError(ctx, assistantID, err)
	}
	out.assistant = a
	input, hasText, perr := partsToInput(msg.Parts, agent, out.messageID)
	if perr != nil {
		return out, perr
	}
	out.input = input
	if msg.ContextID != nil {
		out.contextID = *msg.ContextID
	}
	if msg.TaskID != nil {
		t, rerr := s.resolveTask(ctx, orgID, a.AssistantID, *msg.TaskID, out.contextID)
		if rerr != nil {
			return out, rerr
		}
		if terminalStates[t.state] {
			return out, rpcErr(CodeUnsupportedOperation, "A terminal task cannot accept another message")
		}
		out.task = &t
		out.contextID = t.contextID
	}
	// Text becomes messages, unless it answers an interrupt (the resume value).
	if hasText && (out.task == nil || out.task.state != "TASK_STATE_INPUT_REQUIRED") {
		schemas, err := s.runs.AssistantSchemas(ctx, orgID, a.AssistantID)
		if err != nil {
			return out, s.internal(ctx, "a2a schemas", err)
		}
		props, _ := schemas.InputSchema["properties"].(map[string]any)
		if _, ok := props["messages"]; !ok {
			return out, rpcErr(CodeInvalidParams, "Assistant '"+a.AssistantID+"' (graph '"+a.GraphID+
				"') does not support A2A conversational messages: its input schema has no 'messages' field for text parts")
		}
	}
	return out, nil
}

// historyLength validates configuration.historyLength (nil: all).
func historyLength(raw json.RawMessage) (*int, *RPCError) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil || n < 0 {
		return nil, rpcErr(CodeInvalidParams, "historyLength must be a non-negative integer")
	}
	if n > maxHistoryLength {
		return nil, rpcErr(CodeInvalidParams, "historyLength cannot exceed 10")
	}
	return &n, nil
}

// startRun creates the run of a prepared message: on its context's thread
// (created if new), or resuming the continued task's interrupt.
func (s *Service) startRun(ctx context.Context, orgID string, p prepared) (runs.Run, *RPCError) {
	run, _, rerr := s.startRunMaybeStream(ctx, orgID, p, false)
	return run, rerr
}

// startRunMaybeStream starts the run of p; with stream, as upstream's
// message/stream does (stream_mode messages and values, api/a2a.py
// handle_message_stream), and returns its stream.
func (s *Service) startRunMaybeStream(ctx context.Context, orgID string, p prepared, stream bool) (runs.Run, *runs.RunStream, *RPCError) {
	threadID := p.contextID
	if threadID == "" {
		threadID = uuid.NewString()
	}
	create := "create"
	req := runs.RunRequest{AssistantID: &p.assistant.AssistantID, IfNotExists: &create, Context: p.context}
	meta, _ := json.Marshal(map[string]any{"a2a": map[string]any{"message_id": p.messageID}})
	req.Metadata = meta
	if p.task != nil && p.task.state == "TASK_STATE_INPUT_REQUIRED" {
		// The answer to the task's question resumes its interrupt.
		resume, _ := json.Marshal(resumeValue(p.input))
		req.Command = &runs.CommandInput{Resume: resume}
	} else {
		req.Input, _ = json.Marshal(p.input)
	}
	var run runs.Run
	var rs *runs.RunStream
	var err error
	if stream {
		req.StreamMode = json.RawMessage(`["messages","values"]`)
		run, rs, err = s.runs.CreateRunStream(ctx, orgID, threadID, req)
	} else {
		run, err = s.runs.CreateRun(ctx, orgID, threadID, req)
	}
	if err != nil {
		switch fail.KindOf(err) {
		case fail.KindInvalid, fail.KindNotFound, fail.KindBadRequest:
			return run, nil, rpcErr(CodeInvalidParams, "Invalid params: "+fail.MessageOf(err))
		case fail.KindConflict, fail.KindQuota:
			return run, nil, rpcErr(CodeInternalError, fail.MessageOf(err))
		}
		return run, nil, s.internal(ctx, "a2a run", err)
	}
	return run, rs, nil
}

// resumeValue is what a reply to an interrupt resumes it with: the text of
// a text-only message, else the data.
func resumeValue(input map[string]any) any {
	if msgs, ok := input["messages"].([]any); ok && len(input) == 1 {
		var text []string
		for _, m := range msgs {
			if mm, ok := m.(map[string]any); ok {
				if t, ok := mm["content"].(string); ok {
					text = append(text, t)
				}
			}
		}
		return strings.Join(text, "\n")
	}
	return input
}

func (s *Service) a2aSend(ctx context.Context, orgID, assistantID string, c a2aCall) (any, *RPCError) {
	p, rerr := s.prepare(ctx, orgID, assistantID, c)
	if rerr != nil {
		return nil, rerr
	}
	run, rerr := s.startRun(ctx, orgID, p)
	if rerr != nil {
		return nil, rerr
	}
	taskID := run.ThreadID + ":" + run.RunID
	if p.task != nil {
		taskID = p.task.id
	}
	var task map[string]any
	out, err := s.runs.Wait(ctx, orgID, run.ThreadID, run.RunID)
	switch {
	case err != nil && ctx.Err() != nil:
		// The request's time is up (an AWS function's response budget)
		// before the run ended: the task is answered as it stands, still
		// working, and the client follows it with tasks/get (A2A's
		// non-blocking answer). The run goes on.
		task = map[string]any{"kind": "task", "id": taskID, "contextId": run.ThreadID,
			"status": map[string]any{"state": c.d.state("TASK_STATE_WORKING"), "timestamp": now()}}
	case err != nil:
		return nil, s.internal(ctx, "a2a message/send", err)
	default:
		task = taskFromOutput(c.d, taskID, run.ThreadID, p.assistant.AssistantID, out, p.history)
	}
	if c.d.v1 {
		return map[string]any{"task": task}, nil
	}
	return task, nil
}

func (s *Service) a2aStream(ctx context.Context, orgID, assistantID string, c a2aCall, emit func(Response) error) error {
	refuse := func(rerr *RPCError) error { return emit(errorResponse(c.id, rerr)) }
	p, rerr := s.prepare(ctx, orgID, assistantID, c)
	if rerr != nil {
		return refuse(rerr)
	}
	run, rs, rerr := s.startRunMaybeStream(ctx, orgID, p, true)
	if rerr != nil {
		return refuse(rerr)
	}
	defer rs.Close()
	taskID := run.ThreadID + ":" + run.RunID
	if p.task != nil {
		taskID = p.task.id
	}
	wrap := func(kind string, v any) any {
		if c.d.v1 {
			return map[string]any{kind: v}
		}
		return v
	}
	sent := map[string]any{}
	for k, v := range p.message {
		sent[k] = v
	}
	sent["kind"], sent["taskId"], sent["contextId"] = "message", taskID, run.ThreadID
	first := map[string]any{"kind": "task", "id": taskID, "contextId": run.ThreadID, "history": []any{sent},
		"status": map[string]any{"state": c.d.state("TASK_STATE_SUBMITTED"), "timestamp": now()}}
	if err := emit(result(c.id, wrap("task", first))); err != nil {
		return err
	}
	working := map[string]any{"kind": "status-update", "taskId": taskID, "contextId": run.ThreadID,
		"status": map[string]any{"state": c.d.state("TASK_STATE_WORKING"), "timestamp": now()}, "final": false}
	if err := emit(result(c.id, wrap("statusUpdate", working))); err != nil {
		return err
	}
	if err := s.streamTokens(ctx, c, rs, taskID, run.ThreadID, emit, wrap); err != nil {
		return err
	}
	out, err := s.runs.Wait(ctx, orgID, run.ThreadID, run.RunID)
	if err != nil {
		return refuse(s.internal(ctx, "a2a message/stream", err))
	}
	task := taskFromOutput(c.d, taskID, run.ThreadID, p.assistant.AssistantID, out, p.history)
	if arts, ok := task["artifacts"].([]any); ok {
		for _, a := range arts {
			up := map[string]any{"kind": "artifact-update", "taskId": taskID, "contextId": run.ThreadID,
				"artifact": a, "append": false, "lastChunk": true}
			if err := emit(result(c.id, wrap("artifactUpdate", up))); err != nil {
				return err
			}
		}
	}
	final := map[string]any{"kind": "status-update", "taskId": taskID, "contextId": run.ThreadID,
		"status": task["status"], "final": true}
	return emit(result(c.id, wrap("statusUpdate", final)))
}

// resolvedTask is a task found by its id.
type resolvedTask struct {
	id, contextID string
	run           runs.Run
	state         string
}

// resolveTask finds the task id ("{context_id}:{run_id}", or a run id with
// contextId) of the assistant in the caller's organization.
func (s *Service) resolveTask(ctx context.Context, orgID, assistantID, taskID, contextID string) (resolvedTask, *RPCError) {
	notFound := rpcErr(CodeTaskNotFound, "Task not found: "+truncate(taskID, 120))
	ctxID, runID, found := strings.Cut(taskID, ":")
	if !found {
		ctxID, runID = "", taskID
	}
	if ctxID != "" && contextID != "" && ctxID != contextID {
		return resolvedTask{}, notFound
	}
	if ctxID == "" {
		ctxID = contextID
	}
	if uuid.Validate(ctxID) != nil || uuid.Validate(runID) != nil {
		return resolvedTask{}, notFound
	}
	run, err := s.runs.GetRun(ctx, orgID, ctxID, runID)
	if err != nil {
		if k := fail.KindOf(err); k == fail.KindNotFound || k == fail.KindInvalid {
			return resolvedTask{}, notFound
		}
		return resolvedTask{}, s.internal(ctx, "a2a task", err)
	}
	if run.AssistantID != assistantID {
		return resolvedTask{}, notFound
	}
	threadStatus := ""
	if run.Status == "success" {
		th, err := s.runs.GetThread(ctx, orgID, ctxID)
		if err != nil && fail.KindOf(err) != fail.KindNotFound {
			return resolvedTask{}, s.internal(ctx, "a2a task", err)
		}
		threadStatus = th.Status
	}
	return resolvedTask{id: taskID, contextID: ctxID, run: run, state: taskState(run.Status, threadStatus)}, nil
}

type taskParams struct {
	ID            *string         `json:"id"`
	ContextID     *string         `json:"contextId"`
	HistoryLength json.RawMessage `json:"historyLength"`
}

func (s *Service) taskParams(c a2aCall) (taskParams, *RPCError) {
	var p taskParams
	if err := c.env.params(&p); err != nil {
		return p, err
	}
	if p.ID == nil || *p.ID == "" {
		return p, rpcErr(CodeInvalidParams, "Missing required parameter: id (task_id)")
	}
	return p, nil
}

func (s *Service) a2aGet(ctx context.Context, orgID, assistantID string, c a2aCall) (any, *RPCError) {
	p, rerr := s.taskParams(c)
	if rerr != nil {
		return nil, rerr
	}
	h, rerr := historyLength(p.HistoryLength)
	if rerr != nil {
		return nil, rerr
	}
	a, err := s.runs.GetAssistant(ctx, orgID, assistantID)
	if err != nil {
		return nil, s.assistantError(ctx, assistantID, err)
	}
	t, rerr := s.resolveTask(ctx, orgID, a.AssistantID, *p.ID, deref(p.ContextID))
	if rerr != nil {
		return nil, rerr
	}
	status := map[string]any{"state": c.d.state(t.state), "timestamp": t.run.UpdatedAt}
	switch t.state {
	case "TASK_STATE_COMPLETED":
		status["message"] = agentMessage(c.d, t.id, t.contextID, "Task completed successfully")
	case "TASK_STATE_FAILED":
		status["message"] = agentMessage(c.d, t.id, t.contextID, "Task failed with status: "+t.run.Status)
	}
	task := map[string]any{"kind": "task", "id": t.id, "contextId": t.contextID, "status": status}
	if h == nil || *h > 0 {
		th, err := s.runs.GetThread(ctx, orgID, t.contextID)
		if err != nil && fail.KindOf(err) != fail.KindNotFound {
			return nil, s.internal(ctx, "a2a tasks/get", err)
		}
		task["history"] = history(c.d, th.Values, t.id, t.contextID, h)
	}
	return task, nil
}

func (s *Service) a2aCancel(ctx context.Context, orgID, assistantID string, c a2aCall) (any, *RPCError) {
	p, rerr := s.taskParams(c)
	if rerr != nil {
		return nil, rerr
	}
	a, err := s.runs.GetAssistant(ctx, orgID, assistantID)
	if err != nil {
		return nil, s.assistantError(ctx, assistantID, err)
	}
	t, rerr := s.resolveTask(ctx, orgID, a.AssistantID, *p.ID, deref(p.ContextID))
	if rerr != nil {
		return nil, rerr
	}
	if t.run.Status != "pending" && t.run.Status != "running" {
		return nil, rpcErr(CodeTaskNotCancelable, "Task has no active run to cancel")
	}
	if _, err := s.runs.CancelRun(ctx, orgID, t.contextID, t.run.RunID, "interrupt"); err != nil {
		if k := fail.KindOf(err); k == fail.KindConflict || k == fail.KindNotFound {
			return nil, rpcErr(CodeTaskNotCancelable, "Task has no active run to cancel")
		}
		return nil, s.internal(ctx, "a2a tasks/cancel", err)
	}
	return map[string]any{"kind": "task", "id": t.id, "contextId": t.contextID, "status": map[string]any{
		"state": c.d.state("TASK_STATE_CANCELED"), "timestamp": now(),
		"message": agentMessage(c.d, t.id, t.contextID, "Task was canceled")}}, nil
}

// assistantError answers an assistant that cannot be read: missing (or
// another organization's) is invalid params, as upstream.
func (s *Service) assistantError(ctx context.Context, assistantID string, err error) *RPCError {
	if k := fail.KindOf(err); k == fail.KindNotFound || k == fail.KindInvalid {
		return rpcErr(CodeInvalidParams, "Assistant '"+truncate(assistantID, 100)+"' not found")
	}
	return s.internal(ctx, "a2a assistant", err)
}

func agentMessage(d dialect, taskID, contextID, text string) map[string]any {
	return map[string]any{"kind": "message", "role": d.role(true), "parts": []any{textPart(text)},
		"messageId": uuid.NewString(), "taskId": taskID, "contextId": contextID}
}

func textPart(text string) map[string]any { return map[string]any{"kind": "text", "text": text} }

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// tokenWait is how long one read of a run's stream waits for events; the
// HTTP layer sends its own heartbeats meanwhile.
const tokenWait = 30 * time.Second

// streamTokens follows the run's stream until the run ended and emits, for
// every messages/partial event (the agent's message so far, as its chat
// model streams it), a working status-update carrying that message, as
// upstream does (api/a2a.py handle_message_stream with
// _lc_items_to_status_update_event): only the agent's prose, and nothing
// for a chunk without text (tool calls, metadata) or that repeats the
// text already sent. A client too slow for
// the run's stream is dropped from it (runs.ErrStreamDropped): the tokens
// stop and the answer still comes, from the run's end.
func (s *Service) streamTokens(ctx context.Context, c a2aCall, rs *runs.RunStream, taskID, contextID string,
	emit func(Response) error, wrap func(string, any) any) error {
	// A chunk that adds no text (the usage at a call's end) repeats the
	// message so far: sent once.
	sent := map[string]string{}
	for {
		evs, done, err := rs.Next(ctx, tokenWait)
		if errors.Is(err, runs.ErrStreamDropped) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Event != "messages/partial" {
				continue
			}
			msg := tokenMessage(c.d, ev.Data, taskID, contextID)
			if msg == nil {
				continue
			}
			id, text := msg["messageId"].(string), msg["parts"].([]any)[0].(map[string]any)["text"].(string)
			if sent[id] == text {
				continue
			}
			sent[id] = text
			up := map[string]any{"kind": "status-update", "taskId": taskID, "contextId": contextID,
				"status": map[string]any{"state": c.d.state("TASK_STATE_WORKING"), "message": msg, "timestamp": now()},
				"final":  false}
			if err := emit(result(c.id, wrap("statusUpdate", up))); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}

// tokenMessage is the A2A message of a messages/partial event's messages:
// the text of the agent's ones, joined (_lc_stream_items_to_a2a_message);
// nil when there is none. Its messageId is the LangGraph message's id, so
// a client can replace the message as it grows.
func tokenMessage(d dialect, data []byte, taskID, contextID string) map[string]any {
	var items []map[string]any
	if json.Unmarshal(data, &items) != nil {
		return nil
	}
	var text strings.Builder
	id := ""
	for _, m := range items {
		if agent, ok := messageRole(m); !ok || !agent {
			continue
		}
		for _, p := range contentParts(m["content"]) {
			if t, _ := p.(map[string]any)["text"].(string); t != "" {
				text.WriteString(t)
			}
		}
		if mid, _ := m["id"].(string); mid != "" && id == "" {
			id = mid
		}
	}
	if text.Len() == 0 {
		return nil
	}
	if id == "" {
		id = uuid.NewString()
	}
	return map[string]any{"kind": "message", "role": d.role(true), "parts": []any{textPart(text.String())},
		"messageId": id, "taskId": taskID, "contextId": contextID}
}

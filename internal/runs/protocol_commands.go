package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Commands of the thread event protocol (POST /threads/{id}/commands):
// {id, method, params} answered by {type: "success", id, result, meta} or
// {type: "error", id, error, message}. A command the protocol does not
// define gets unknown_command; bad params of a known one invalid_argument
// naming the field. Over HTTP the transport is stateless: the event
// stream's filter is its request body, so the subscription commands (which
// WebSocket clients use) and agent.getTree are not_supported here.

// Command is a protocol command.
type Command struct {
	ID     *int64          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// The protocol's error codes this server answers.
const (
	protoInvalidArgument = "invalid_argument"
	protoUnknownCommand  = "unknown_command"
	protoUnknownError    = "unknown_error"
	protoNoSuchRun       = "no_such_run"
	protoNoSuchInterrupt = "no_such_interrupt"
	protoNotSupported    = "not_supported"
)

// The protocol's methods; of these only run.start and input.respond are
// served over HTTP.
var protocolMethods = []string{"run.start", "input.respond", "input.inject", "subscription.subscribe",
	"subscription.unsubscribe", "subscription.reconnect", "agent.getTree", "state.get", "state.listCheckpoints", "state.fork"}

// protocolMultitask are the multitask strategies run.start takes (the SDKs
// send multitaskStrategy; enqueue when absent, the Python server's rule).
var protocolMultitask = []string{"reject", "rollback", "interrupt", "enqueue"}

// ThreadCommand handles one command on the thread and returns the reply.
// An error is for what is not a reply: the thread_id is no UUID (422),
// input.respond names a thread missing or another organization's (404),
// the store failed.
func (s *Service) ThreadCommand(ctx context.Context, orgID, threadID string, cmd Command) (map[string]any, error) {
	var id int64
	if cmd.ID != nil {
		id = *cmd.ID
	}
	switch cmd.Method {
	case "run.start":
		return s.runStart(ctx, orgID, threadID, id, cmd.Params)
	case "input.respond":
		return s.inputRespond(ctx, orgID, threadID, id, cmd.Params)
	}
	if slices.Contains(protocolMethods, cmd.Method) {
		return protoError(id, protoNotSupported, fmt.Sprintf("%s is not served over HTTP: an event stream's filter is the body of POST /threads/{thread_id}/stream/events, and this server serves no WebSocket", cmd.Method)), nil
	}
	return protoError(id, protoUnknownCommand, fmt.Sprintf("Unknown protocol command: %s", cmd.Method)), nil
}

func protoError(id int64, code, msg string) map[string]any {
	return map[string]any{"type": "error", "id": id, "error": code, "message": msg}
}

func protoSuccess(id int64, result map[string]any, appliedThrough int64) map[string]any {
	return map[string]any{"type": "success", "id": id, "result": result, "meta": map[string]any{"applied_through_seq": appliedThrough}}
}

// decodeParams reads a command's params (absent: {}).
func decodeParams(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("params.%s: must be %s", te.Field, jsonKind(te.Type.Kind().String()))
		}
		return errors.New("params: must be an object")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	}
	return "of another type"
}

// appliedThrough is the thread's last seq before a command changes
// anything: every event up to it was there before the command, which is
// what the reply's meta.applied_through_seq promises.
func (s *Service) appliedThrough(ctx context.Context, orgID, threadID string) (int64, error) {
	return s.Events.LastThreadEventSeq(ctx, orgID, threadID)
}

// protocolRun creates a run through the protocol: its stream is the
// protocol's set of modes with subgraphs, kept in the thread's event log.
// A rule the request breaks is a reply (invalid_argument); a failure of
// the server is an error.
func (s *Service) protocolRun(ctx context.Context, orgID, threadID string, id int64, req RunRequest) (Run, map[string]any, error) {
	modes, _ := json.Marshal(protocolRunModes)
	yes := true
	req.StreamMode, req.StreamSubgraphs, req.protocol = modes, &yes, true
	run, err := s.CreateRun(ctx, orgID, threadID, req)
	if err == nil {
		return run, nil, nil
	}
	switch fail.KindOf(err) {
	case fail.KindInvalid, fail.KindBadRequest, fail.KindNotFound:
		return Run{}, protoError(id, protoInvalidArgument, fail.MessageOf(err)), nil
	case fail.KindConflict:
		return Run{}, protoError(id, protoUnknownError, fail.MessageOf(err)), nil
	}
	return Run{}, nil, err
}

// runStart starts a run on the thread (creating the thread when it does
// not exist), or resumes it: input on an interrupted thread is the answer
// to its interrupt (Command(resume=input)), as the Python server does.
func (s *Service) runStart(ctx context.Context, orgID, threadID string, id int64, raw json.RawMessage) (map[string]any, error) {
	if s.Events == nil {
		return protoError(id, protoNotSupported, "this server keeps no event log, so it runs nothing through the thread event protocol"), nil
	}
	var p struct {
		AssistantID       *string         `json:"assistant_id"`
		Input             json.RawMessage `json:"input"`
		Config            json.RawMessage `json:"config"`
		Metadata          json.RawMessage `json:"metadata"`
		MultitaskStrategy *string         `json:"multitaskStrategy"`
		MultitaskSnake    *string         `json:"multitask_strategy"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return protoError(id, protoInvalidArgument, err.Error()), nil
	}
	if p.AssistantID == nil || *p.AssistantID == "" {
		return protoError(id, protoInvalidArgument, "params.assistant_id: is required (run.start requires an assistant_id)"), nil
	}
	req := RunRequest{AssistantID: p.AssistantID, Metadata: p.Metadata}
	if len(p.Config) > 0 && string(p.Config) != "null" {
		var cfg RunConfig
		if json.Unmarshal(p.Config, &cfg) != nil {
			return protoError(id, protoInvalidArgument, "params.config: must be an object"), nil
		}
		req.Config = &cfg
	}
	strategy := p.MultitaskStrategy
	if strategy == nil {
		strategy = p.MultitaskSnake
	}
	if strategy != nil && !slices.Contains(protocolMultitask, *strategy) {
		return protoError(id, protoInvalidArgument, fmt.Sprintf("params.multitaskStrategy: %q is not one of reject, rollback, interrupt, enqueue", *strategy)), nil
	}
	req.MultitaskStrategy = strategy
	create := "create"
	req.IfNotExists = &create
	hasInput := len(p.Input) > 0 && string(p.Input) != "null"
	t, err := s.threadIfAny(ctx, orgID, threadID)
	if err != nil {
		return nil, err
	}
	if hasInput && t != nil && t.Status == store.ThreadInterrupted {
		req.Command = &CommandInput{Resume: p.Input}
	} else {
		req.Input = p.Input
	}
	applied := int64(0)
	if t != nil {
		if applied, err = s.appliedThrough(ctx, orgID, t.ID); err != nil {
			return nil, err
		}
	}
	run, reply, err := s.protocolRun(ctx, orgID, threadID, id, req)
	if reply != nil || err != nil {
		return reply, err
	}
	return protoSuccess(id, map[string]any{"run_id": run.RunID}, applied), nil
}

// threadIfAny is the thread, or nil when it does not exist (yet).
func (s *Service) threadIfAny(ctx context.Context, orgID, threadID string) (*store.Thread, error) {
	t, err := s.thread(ctx, orgID, threadID)
	switch {
	case err == nil:
		return &t, nil
	case fail.KindOf(err) == fail.KindNotFound:
		return nil, nil
	}
	return nil, err
}

// respondEntry is one answer of input.respond.
type respondEntry struct {
	InterruptID *string         `json:"interrupt_id"`
	Namespace   json.RawMessage `json:"namespace"`
	Response    json.RawMessage `json:"response"`
}

// inputRespond answers pending interrupts of the thread: one
// (interrupt_id, response) or a batch (responses), resumed by one run
// (Command(resume={interrupt_id: response}, update, goto)).
func (s *Service) inputRespond(ctx context.Context, orgID, threadID string, id int64, raw json.RawMessage) (map[string]any, error) {
	if s.Events == nil {
		return protoError(id, protoNotSupported, "this server keeps no event log, so it runs nothing through the thread event protocol"), nil
	}
	var p struct {
		respondEntry
		Responses []respondEntry  `json:"responses"`
		Update    json.RawMessage `json:"update"`
		Goto      json.RawMessage `json:"goto"`
		Config    json.RawMessage `json:"config"`
		Metadata  json.RawMessage `json:"metadata"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return protoError(id, protoInvalidArgument, err.Error()), nil
	}
	entries := p.Responses
	field := "params.responses"
	if entries == nil {
		entries, field = []respondEntry{p.respondEntry}, "params"
	} else if len(entries) == 0 {
		return protoError(id, protoInvalidArgument, "params.responses: must hold at least one response"), nil
	}
	for i, e := range entries {
		at := field
		if field != "params" {
			at = fmt.Sprintf("%s[%d]", field, i)
		}
		if e.InterruptID == nil || *e.InterruptID == "" {
			return protoError(id, protoInvalidArgument, at+".interrupt_id: is required"), nil
		}
		var ns []string
		if len(e.Namespace) > 0 && string(e.Namespace) != "null" && json.Unmarshal(e.Namespace, &ns) != nil {
			return protoError(id, protoInvalidArgument, at+".namespace: must be a list of strings"), nil
		}
	}
	t, err := s.settledThread(ctx, orgID, threadID)
	if err != nil {
		return nil, err
	}
	state, err := s.ThreadState(ctx, orgID, t.ID)
	if err != nil {
		return nil, err
	}
	pending := map[string]bool{}
	for _, in := range state.Interrupts {
		pending[in.ID] = true
	}
	resume := map[string]json.RawMessage{}
	for _, e := range entries {
		if t.Status != store.ThreadInterrupted || !pending[*e.InterruptID] {
			return protoError(id, protoNoSuchInterrupt, fmt.Sprintf("Unknown or already-consumed interrupt: %s", *e.InterruptID)), nil
		}
		response := e.Response
		if len(response) == 0 {
			response = json.RawMessage("null")
		}
		resume[*e.InterruptID] = response
	}
	var meta struct {
		AssistantID string `json:"assistant_id"`
	}
	_ = json.Unmarshal(t.Metadata, &meta)
	if meta.AssistantID == "" {
		return protoError(id, protoNoSuchRun, "No interrupted run is bound to this thread."), nil
	}
	resumeJSON, _ := json.Marshal(resume)
	req := RunRequest{AssistantID: &meta.AssistantID, Metadata: p.Metadata,
		Command: &CommandInput{Resume: resumeJSON, Update: p.Update, Goto: p.Goto}}
	if len(p.Config) > 0 && string(p.Config) != "null" {
		var cfg RunConfig
		if json.Unmarshal(p.Config, &cfg) != nil {
			return protoError(id, protoInvalidArgument, "params.config: must be an object"), nil
		}
		req.Config = &cfg
	}
	applied, err := s.appliedThrough(ctx, orgID, t.ID)
	if err != nil {
		return nil, err
	}
	_, reply, err := s.protocolRun(ctx, orgID, t.ID, id, req)
	if reply != nil || err != nil {
		return reply, err
	}
	return protoSuccess(id, map[string]any{}, applied), nil
}

// interruptSettle bounds how long input.respond waits for a busy thread to
// settle (the Python server's barrier is 5 s too).
const interruptSettle = 5 * time.Second

// settledThread loads the thread and, while it is busy, waits for its run
// to end, up to interruptSettle: a client answers an interrupt as soon as
// input.requested arrives, which is before the run that asked has ended
// and stored the interrupt.
func (s *Service) settledThread(ctx context.Context, orgID, threadID string) (store.Thread, error) {
	t, err := s.thread(ctx, orgID, threadID)
	if err != nil || t.Status != store.ThreadBusy {
		return t, err
	}
	sub := s.streams.subscribe(threadKey(orgID, t.ID), true, 1, 1) // a signal only: it may drop
	defer sub.Close()
	deadline := time.NewTimer(interruptSettle)
	defer deadline.Stop()
	for t.Status == store.ThreadBusy {
		poll := time.NewTimer(s.pollInterval())
		select {
		case <-ctx.Done():
			poll.Stop()
			return t, ctx.Err()
		case <-deadline.C:
			poll.Stop()
			return t, nil
		case <-sub.Ready():
			sub.Take()
		case <-poll.C:
		}
		poll.Stop()
		if t, err = s.thread(ctx, orgID, threadID); err != nil {
			return t, err
		}
	}
	return t, nil
}

package main

// The protocol: a tiny library that checks invoke requests, dispatches them
// to the functions main.go registers and shapes their answers
// (docs/runtime-protocol.md). Copy it as it is; the agent is in main.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"runtime/debug"
	"strings"
	"unicode/utf8"
)

// maxRequestBytes bounds an invoke request (it holds the whole state).
const maxRequestBytes = 32 << 20

// Call is one invoke request, as a function sees it. Numbers in State,
// Config, Context, Resume and tool arguments are json.Number, so they keep
// their full precision.
type Call struct {
	Graph   string
	Node    string
	State   map[string]any
	Config  map[string]any
	Context map[string]any // nil when the run has none
	Resume  []any
	Tool    *ToolCall // the tool call, for a function tool; nil for a node

	asked  int
	events []any
}

// Emit sends value (any JSON value) to the clients that stream the run's
// custom events, as LangGraph's stream writer does. The events go with the
// function's answer, whatever it is (an interrupt or an error too). A
// function that asks questions runs again from its start when the run is
// resumed, and emits again what it emitted before them, as LangGraph does.
func (c *Call) Emit(value any) {
	c.events = append(c.events, value)
}

// EmitNamed sends payload as the custom event name: on the thread event
// protocol it reaches the custom:<name> subscribers (docs/runtime-protocol.md,
// Named events); run streams carry {"name", "payload"} as emitted.
func (c *Call) EmitNamed(name string, payload any) {
	c.events = append(c.events, map[string]any{"name": name, "payload": payload})
}

// ToolCall is the tool call a function tool executes.
type ToolCall struct {
	ID   string
	Name string
	Args map[string]any
}

// Command is what a node function answers: the writes to the state and the
// nodes to run next (in addition to the node's edges; "__end__" is
// allowed). A nil *Command writes nothing.
type Command struct {
	// Update is a map[string]any ({"channel": value}) or a list of
	// [channel, value] pairs ([][2]any), to write one channel more than once.
	Update any
	Goto   []string
}

// Update is the command that writes m.
func Update(m map[string]any) *Command { return &Command{Update: m} }

// Error is a failure a function reports with an exception-like type name;
// any other error a function returns is reported with the type "Error".
type Error struct {
	Type    string
	Message string
}

func (e *Error) Error() string { return e.Type + ": " + e.Message }

// NodeFunc is a function node.
type NodeFunc func(ctx context.Context, c *Call) (*Command, error)

// ToolFunc is a function tool: it returns the tool's output (any JSON value).
type ToolFunc func(ctx context.Context, c *Call, args map[string]any) (any, error)

// interrupted is what Interrupt panics with to stop a function that asks a
// question the run has no answer for yet.
type interrupted struct{ value any }

// Interrupt asks a human, as LangGraph's interrupt() does: the k-th question
// of a call returns the k-th answer when the run has been resumed that far;
// otherwise the function stops here (Interrupt does not return) and the run
// waits for the answer. The function then runs again from its start, so keep
// the code before a question free of side effects. Call it from the
// function's own goroutine: it stops the function with a panic that Invoke
// recovers.
func (c *Call) Interrupt(value any) any {
	if c.Tool != nil {
		panic(&Error{Type: "RuntimeError", Message: "a tool cannot ask a human: Interrupt works in function nodes only"})
	}
	if value == nil {
		panic(&Error{Type: "ValueError", Message: "Interrupt needs a value to show (not nil)"})
	}
	if c.asked < len(c.Resume) {
		c.asked++
		return c.Resume[c.asked-1]
	}
	panic(interrupted{value})
}

// Runtime holds a deployment's functions, by graph and node (or by tool
// name), and its graph config.
type Runtime struct {
	nodes    map[[2]string]NodeFunc
	tools    map[string]ToolFunc
	describe func() map[string]any
}

// NewRuntime returns a runtime whose describe answers config().
func NewRuntime(config func() map[string]any) *Runtime {
	return &Runtime{nodes: map[[2]string]NodeFunc{}, tools: map[string]ToolFunc{}, describe: config}
}

// Node registers fn as the function node name of graph.
func (r *Runtime) Node(graph, name string, fn NodeFunc) {
	key := [2]string{graph, name}
	if _, ok := r.nodes[key]; ok {
		panic(fmt.Sprintf("node %q of graph %q is registered twice", name, graph))
	}
	r.nodes[key] = fn
}

// Tool registers fn as the function tool name.
func (r *Runtime) Tool(name string, fn ToolFunc) {
	if _, ok := r.tools[name]; ok {
		panic(fmt.Sprintf("tool %q is registered twice", name))
	}
	r.tools[name] = fn
}

// badRequest is an invoke request that is not one (answered with 400).
type badRequest string

func (e badRequest) Error() string { return string(e) }

// ParseRequest decodes and checks an invoke request.
func ParseRequest(body []byte) (*Call, error) {
	if !utf8.Valid(body) {
		return nil, badRequest("the body is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badRequest("the body is not JSON: " + err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest("the body is not JSON: data after the request")
	}
	req, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("the body must be a JSON object: an invoke request {graph, node, state, config, context, resume}")
	}
	c := &Call{}
	for _, f := range []struct {
		key string
		dst *string
	}{{"graph", &c.Graph}, {"node", &c.Node}} {
		s, _ := req[f.key].(string)
		if s == "" {
			return nil, badRequest(fmt.Sprintf("%q: must be a non-empty string", f.key))
		}
		*f.dst = s
	}
	for _, f := range []struct {
		key string
		dst *map[string]any
	}{{"state", &c.State}, {"config", &c.Config}, {"context", &c.Context}} {
		switch v := req[f.key].(type) {
		case nil:
		case map[string]any:
			*f.dst = v
		default:
			return nil, badRequest(fmt.Sprintf("%q: must be an object", f.key))
		}
	}
	if c.State == nil {
		c.State = map[string]any{}
	}
	if c.Config == nil {
		c.Config = map[string]any{}
	}
	switch v := req["resume"].(type) {
	case nil:
		c.Resume = []any{}
	case []any:
		c.Resume = v
	default:
		return nil, badRequest(`"resume": must be a list`)
	}
	switch t := req["tool"].(type) {
	case nil:
	case map[string]any:
		c.Tool = &ToolCall{}
		if c.Tool.Name, _ = t["name"].(string); c.Tool.Name == "" {
			return nil, badRequest(`"tool.name": must be a non-empty string`)
		}
		var ok bool
		if c.Tool.ID, ok = t["id"].(string); !ok && t["id"] != nil {
			return nil, badRequest(`"tool.id": must be a string`)
		}
		switch a := t["args"].(type) {
		case nil:
			c.Tool.Args = map[string]any{}
		case map[string]any:
			c.Tool.Args = a
		default:
			return nil, badRequest(`"tool.args": must be an object`)
		}
	default:
		return nil, badRequest(`"tool": must be an object {id, name, args}`)
	}
	return c, nil
}

// Invoke runs the function a checked request names and returns the
// protocol's answer: update and goto, interrupt, output or error, with the
// custom events the function emitted.
func (r *Runtime) Invoke(ctx context.Context, c *Call) map[string]any {
	answer := r.invoke(ctx, c)
	if len(c.events) > 0 {
		answer["events"] = c.events
	}
	return answer
}

func (r *Runtime) invoke(ctx context.Context, c *Call) (answer map[string]any) {
	defer func() {
		switch p := recover().(type) {
		case nil:
		case interrupted:
			answer = map[string]any{"interrupt": p.value}
		default: // the function panicked: report it as its failure
			log.Printf("%s/%s: panic: %v\n%s", c.Graph, c.Node, p, debug.Stack())
			err, ok := p.(error)
			if !ok {
				err = &Error{Type: "panic", Message: fmt.Sprint(p)}
			}
			answer = errorAnswer(err)
		}
	}()
	if c.Tool != nil {
		fn, ok := r.tools[c.Tool.Name]
		if !ok {
			return errorAnswer(&Error{Type: "LookupError", Message: fmt.Sprintf("no function tool '%s' in this runtime", c.Tool.Name)})
		}
		out, err := fn(ctx, c, c.Tool.Args)
		if err != nil {
			return errorAnswer(err)
		}
		return map[string]any{"output": out}
	}
	fn, ok := r.nodes[[2]string{c.Graph, c.Node}]
	if !ok {
		return errorAnswer(&Error{Type: "LookupError",
			Message: fmt.Sprintf("no function for node '%s' of graph '%s' in this runtime", c.Node, c.Graph)})
	}
	cmd, err := fn(ctx, c)
	switch {
	case err != nil:
		return errorAnswer(err)
	case cmd == nil:
		return map[string]any{}
	}
	answer = map[string]any{}
	if cmd.Update != nil {
		answer["update"] = cmd.Update
	}
	if len(cmd.Goto) > 0 {
		answer["goto"] = cmd.Goto
	}
	return answer
}

func errorAnswer(err error) map[string]any {
	typ, msg := "Error", err.Error()
	var e *Error
	if errors.As(err, &e) {
		typ, msg = e.Type, e.Message
	}
	if msg == "" {
		msg = typ
	}
	return map[string]any{"error": map[string]any{"type": typ, "message": msg}}
}

// ServeHTTP serves the protocol: POST /invoke and GET /describe.
func (r *Runtime) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	want := map[string]string{"/invoke": http.MethodPost, "/describe": http.MethodGet}[req.URL.Path]
	switch {
	case want == "":
		reply(w, http.StatusNotFound, map[string]any{"detail": fmt.Sprintf("not found: %s (POST /invoke, GET /describe)", req.URL.Path)})
	case req.Method != want:
		w.Header().Set("Allow", want)
		reply(w, http.StatusMethodNotAllowed, map[string]any{"detail": fmt.Sprintf("%s answers %s, not %s", req.URL.Path, want, req.Method)})
	case want == http.MethodGet:
		reply(w, http.StatusOK, r.describe())
	default:
		r.serveInvoke(w, req)
	}
}

func (r *Runtime) serveInvoke(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxRequestBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		reply(w, http.StatusRequestEntityTooLarge, map[string]any{"detail": fmt.Sprintf("the body is larger than %d bytes", maxRequestBytes)})
		return
	case err != nil: // the client went away
		return
	}
	c, err := ParseRequest(body)
	if err != nil {
		reply(w, http.StatusBadRequest, map[string]any{"detail": err.Error()})
		return
	}
	answer := r.Invoke(req.Context(), c)
	if _, err := json.Marshal(answer); err != nil {
		answer = errorAnswer(&Error{Type: "TypeError", Message: "the answer is not JSON: " + err.Error()})
	}
	reply(w, http.StatusOK, answer)
}

func reply(w http.ResponseWriter, status int, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"detail": "the answer is not JSON"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// messageText is the text of a message: its content, or the text parts of
// a list of parts.
func messageText(m map[string]any) string {
	switch content := m["content"].(type) {
	case string:
		return content
	case []any:
		var b strings.Builder
		for _, part := range content {
			switch p := part.(type) {
			case string:
				b.WriteString(p)
			case map[string]any:
				if s, ok := p["text"].(string); ok {
					b.WriteString(s)
				}
			}
		}
		return b.String()
	}
	return ""
}

package graphdoc

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// Runtime is the transport to a deployment's runtime, where function nodes
// and function tools run (docs/runtime-protocol.md). HTTPRuntime is the HTTP
// one; internal/lambdaruntime's Runtime (Lambda Invoke) implements the
// same interface.
type Runtime interface {
	// Call runs one function: a function node, or a tool when req.Tool is
	// set. A failed exchange is a *CallError; a function that reports its
	// own failure answers normally, with FunctionResponse.Error.
	Call(ctx context.Context, req FunctionRequest) (FunctionResponse, error)
	// Describe returns the runtime's graph config (JSON), for ParseConfig
	// with a nil fs.FS.
	Describe(ctx context.Context) ([]byte, error)
}

// FunctionRequest is what the platform sends to run a function.
type FunctionRequest struct {
	// Graph is the graph id, Node the node's name (for a tool: the tools
	// node that executes it).
	Graph string `json:"graph"`
	Node  string `json:"node"`
	// Tool is the tool call to execute; nil for a function node.
	Tool *ToolCall `json:"tool,omitempty"`
	// State is the graph's state as the node sees it.
	State map[string]any `json:"state"`
	// Config carries run metadata (config.metadata: graph_id,
	// langgraph_node, langgraph_step, langgraph_task_id).
	Config map[string]any `json:"config"`
	// Context is the run's context (the assistant's configuration).
	Context map[string]any `json:"context"`
	// Resume holds the answers to the interrupts this call raised so far,
	// in order: the function's k-th interrupt returns Resume[k] when there
	// is one, and answers {"interrupt": value} when there is not.
	Resume []any `json:"resume"`
	// Auth is the provider token a function node's `auth` asks for (agent
	// auth); absent without one. The function uses it and never returns
	// it: the update is kept in the run's state.
	Auth *FunctionAuth `json:"auth,omitempty"`
}

// FunctionAuth is the token of a function node's `auth`.
type FunctionAuth struct {
	Provider string `json:"provider"`
	Token    string `json:"token"`
}

// ToolCall is a tool call of an assistant message.
type ToolCall struct {
	ID   string         `json:"id"`
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// FunctionResponse is a function's answer: for a function node, an update
// and gotos, or an interrupt; for a tool, its output; for either, an error
// the function reports.
type FunctionResponse struct {
	Update    graph.Writes   `json:"update,omitempty"`
	Goto      []string       `json:"goto,omitempty"`
	Interrupt any            `json:"interrupt,omitempty"`
	Output    any            `json:"output,omitempty"`
	Error     *FunctionError `json:"error,omitempty"`
	// Events are the custom events the function emitted, in order
	// (LangGraph's stream writer): the node reports each (the custom
	// stream mode) before it applies the rest of the answer. They may go
	// with any answer, an interrupt or an error included.
	Events []any `json:"events,omitempty"`
	// Store are writes to the organization's long-term memory store that a
	// function node asks for with its update (storenode.go): applied in
	// order once the function answered, before its update.
	Store []StoreWrite `json:"store,omitempty"`
}

// StoreWrite is one write of a function's "store": a put of value (an
// object; ttl in minutes, index as the API's) or a delete.
type StoreWrite struct {
	Op        string         `json:"op"`
	Namespace []string       `json:"namespace"`
	Key       string         `json:"key"`
	Value     map[string]any `json:"value,omitempty"`
	TTL       *float64       `json:"ttl,omitempty"`
	Index     any            `json:"index,omitempty"`
}

// maxStoreWrites bounds the store writes of one answer.
const maxStoreWrites = 100

func decodeStoreWrites(raw json.RawMessage) ([]StoreWrite, error) {
	var ws []StoreWrite
	if err := decodeJSON(raw, &ws); err != nil {
		return nil, errors.New(`must be a list of {"op": "put" | "delete", "namespace", "key", "value"}`)
	}
	if len(ws) > maxStoreWrites {
		return nil, fmt.Errorf("holds %d writes, at most %d are allowed", len(ws), maxStoreWrites)
	}
	for i, w := range ws {
		switch {
		case w.Op != "put" && w.Op != "delete":
			return nil, fmt.Errorf("write %d: op must be put or delete", i)
		case len(w.Namespace) == 0 || w.Key == "":
			return nil, fmt.Errorf("write %d: namespace and key are required", i)
		case w.Op == "put" && w.Value == nil:
			return nil, fmt.Errorf("write %d: a put needs a value (an object)", i)
		}
	}
	return ws, nil
}

// maxCustomEvents bounds the custom events of one answer.
const maxCustomEvents = 1000

// FunctionError is a failure a function reports: an exception class name
// (ValueError, say) and a message. For a node it becomes the run's error;
// for a tool, an error tool message the model can react to.
type FunctionError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// ParseFunctionResponse decodes and checks a runtime's answer: a JSON
// object with only the protocol's keys, each of its type, and not an
// interrupt or an error together with anything else.
func ParseFunctionResponse(b []byte) (FunctionResponse, error) {
	var r FunctionResponse
	var fields map[string]json.RawMessage
	if err := decodeJSON(b, &fields); err != nil || fields == nil {
		return r, fmt.Errorf("the answer is not a JSON object: %s", Excerpt(b))
	}
	for key, raw := range fields {
		var err error
		switch key {
		case "update":
			if json.Unmarshal(raw, &r.Update) != nil {
				err = errors.New("must be an object or a list of [key, value] pairs")
			}
		case "goto":
			r.Goto, err = decodeGoto(raw)
		case "interrupt":
			err = decodeJSON(raw, &r.Interrupt)
		case "output":
			err = decodeJSON(raw, &r.Output)
		case "error":
			r.Error, err = decodeFunctionError(raw)
		case "events":
			if decodeJSON(raw, &r.Events) != nil || r.Events == nil && string(bytes.TrimSpace(raw)) != "null" {
				err = errors.New("must be a list of custom events (JSON values)")
			} else if len(r.Events) > maxCustomEvents {
				err = fmt.Errorf("holds %d custom events, more than %d", len(r.Events), maxCustomEvents)
			}
		case "store":
			r.Store, err = decodeStoreWrites(raw)
		default:
			err = errors.New("is not part of the protocol (update, goto, interrupt, output, error, events, store)")
		}
		if err != nil {
			return FunctionResponse{}, fmt.Errorf("%q: %v", key, err)
		}
	}
	content := len(r.Update) > 0 || len(r.Goto) > 0 || r.Output != nil || len(r.Store) > 0
	switch {
	case r.Interrupt != nil && (content || r.Error != nil):
		return FunctionResponse{}, errors.New("an answer with an interrupt holds nothing else")
	case r.Error != nil && content:
		return FunctionResponse{}, errors.New("an answer with an error holds nothing else")
	}
	return r, nil
}

func decodeGoto(raw json.RawMessage) ([]string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("must be a node name or a list of node names")
	}
	return list, nil
}

// Bounds of a reported error: it ends up in the run's record.
const (
	maxErrorType    = 100
	maxErrorMessage = 4096
)

func decodeFunctionError(raw json.RawMessage) (*FunctionError, error) {
	var e FunctionError
	if err := json.Unmarshal(raw, &e); err != nil || e.Message == "" {
		return nil, errors.New(`must be {"type": "<ExceptionName>", "message": "<text>"} with a message`)
	}
	e.Type = Truncate(cmp.Or(e.Type, graph.KindGeneric), maxErrorType)
	e.Message = Truncate(e.Message, maxErrorMessage)
	return &e, nil
}

// Failure says how an exchange with a runtime failed.
type Failure int

const (
	// Unreachable: no connection could be made (after the retries).
	Unreachable Failure = iota + 1
	// TimedOut: no complete answer in the time allowed.
	TimedOut
	// BadStatus: an HTTP status other than 200 (after the retries for
	// 502, 503 and 504).
	BadStatus
	// BadResponse: the answer is not JSON, too large, or not the
	// protocol's shape.
	BadResponse
)

// CallError is a failed exchange with a runtime.
type CallError struct {
	Failure  Failure
	Attempts int
	Err      error
}

func (e *CallError) Error() string {
	if e.Attempts > 1 {
		return fmt.Sprintf("%v (%d attempts)", e.Err, e.Attempts)
	}
	return e.Err.Error()
}

func (e *CallError) Unwrap() error { return e.Err }

// HTTPRuntime reaches a runtime over HTTP: POST <URL>/invoke with a
// FunctionRequest, GET <URL>/describe for the graph config. Connection
// failures before the request is sent and 502/503/504 answers are retried
// with backoff; nothing else is, so a function runs at most once unless the
// runtime never saw the request or its gateway says it did not run it.
type HTTPRuntime struct {
	// URL is the runtime's base URL (a deployment's custom_url).
	URL string
	// Client makes the calls; it should be the SSRF-guarded client the
	// platform uses for every outbound call. Required.
	Client *http.Client
	// MaxAttempts bounds the attempts of one call (default 3).
	MaxAttempts int
	// Backoff is the wait before the second attempt, doubled after
	// (default 200 ms).
	Backoff time.Duration
	// MaxResponseBytes bounds an answer (default 10 MiB).
	MaxResponseBytes int64
}

// Call implements Runtime.
func (r *HTTPRuntime) Call(ctx context.Context, req FunctionRequest) (FunctionResponse, error) {
	if req.Resume == nil {
		req.Resume = []any{}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return FunctionResponse{}, fmt.Errorf("the request is not JSON: %w", err)
	}
	raw, attempts, err := r.exchange(ctx, http.MethodPost, "/invoke", body)
	if err != nil {
		return FunctionResponse{}, err
	}
	resp, err := ParseFunctionResponse(raw)
	if err != nil {
		return FunctionResponse{}, &CallError{Failure: BadResponse, Attempts: attempts, Err: err}
	}
	return resp, nil
}

// Describe implements Runtime.
func (r *HTTPRuntime) Describe(ctx context.Context) ([]byte, error) {
	raw, _, err := r.exchange(ctx, http.MethodGet, "/describe", nil)
	return raw, err
}

// exchange makes one request, retrying what is safe to retry.
func (r *HTTPRuntime) exchange(ctx context.Context, method, suffix string, body []byte) ([]byte, int, error) {
	if r.Client == nil {
		return nil, 0, errors.New("graphdoc: HTTPRuntime.Client is not set")
	}
	url := strings.TrimSuffix(r.URL, "/") + suffix
	policy := Retry{MaxAttempts: r.MaxAttempts, Backoff: r.Backoff}
	return policy.Do(ctx, func() ([]byte, bool, *CallError) { return r.attempt(ctx, method, url, body) })
}

// Retry is the retry policy of the runtime transports (HTTPRuntime and the
// Lambda one of internal/lambdaruntime): they retry only what did not run
// the function, so a function runs at most once per call otherwise.
type Retry struct {
	// MaxAttempts bounds the attempts of one call (default 3).
	MaxAttempts int
	// Backoff is the wait before the second attempt, doubled after
	// (default 200 ms).
	Backoff time.Duration
}

// Do calls attempt until it answers, fails without asking for a retry, the
// attempts are spent or ctx ends. It returns the answer and the number of
// attempts made; a failure is the last attempt's *CallError, with Attempts
// set.
func (p Retry) Do(ctx context.Context, attempt func() (raw []byte, retry bool, err *CallError)) ([]byte, int, error) {
	backoff := cmp.Or(p.Backoff, 200*time.Millisecond)
	attempts := cmp.Or(p.MaxAttempts, 3)
	for n := 1; ; n++ {
		raw, retry, err := attempt()
		if err == nil {
			return raw, n, nil
		}
		err.Attempts = n
		if !retry || n >= attempts {
			return nil, n, err
		}
		select {
		case <-ctx.Done():
			return nil, n, err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

func (r *HTTPRuntime) attempt(ctx context.Context, method, url string, body []byte) (raw []byte, retry bool, err *CallError) {
	req, e := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if e != nil {
		return nil, false, &CallError{Failure: Unreachable, Err: fmt.Errorf("runtime URL %q: %v", r.URL, e)}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, data, e := fetch(r.Client, req, cmp.Or(r.MaxResponseBytes, 10<<20))
	var fe *fetchError
	if errors.As(e, &fe) {
		switch fe.kind {
		case graph.KindTimeout:
			return nil, false, &CallError{Failure: TimedOut, Err: fe}
		case kindConnection:
			return nil, fe.dial, &CallError{Failure: Unreachable, Err: fe}
		default:
			return nil, false, &CallError{Failure: BadResponse, Err: fe}
		}
	}
	if e != nil { // the caller's context was canceled
		return nil, false, &CallError{Failure: Unreachable, Err: e}
	}
	if res.StatusCode != http.StatusOK {
		retry := slices.Contains([]int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}, res.StatusCode)
		return nil, retry, &CallError{Failure: BadStatus, Err: fmt.Errorf("%s %s answered %s: %s", method, displayURL(req.URL), res.Status, Excerpt(data))}
	}
	return data, false, nil
}

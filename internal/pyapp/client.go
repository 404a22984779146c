package pyapp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// Bounds of what the platform reads from a runtime: one message of a run's
// stream (a checkpoint carries the whole state) and one answer.
const (
	MaxMessage = 64 << 20
	MaxAnswer  = 64 << 20
)

// Client calls one runtime over HTTP.
type Client struct {
	BaseURL string // http://127.0.0.1:<port>
	Token   string // the runtime's bearer token (STEPGRAPH_RUNTIME_TOKEN)
	HTTP    *http.Client
}

// RunRequest is the run call (docs/runtime-protocol.md, "run").
type RunRequest struct {
	Graph    string `json:"graph"`
	ThreadID string `json:"thread_id"`
	// Input or Command (one of them, or neither to continue the thread).
	Input   json.RawMessage `json:"input,omitempty"`
	Command json.RawMessage `json:"command,omitempty"`
	Config  map[string]any  `json:"config,omitempty"`
	Context json.RawMessage `json:"context,omitempty"`
	// Checkpoint is the parent checkpoint's native bundle (nil: a new thread).
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// CheckpointID addresses the parent explicitly (a fork or time travel);
	// Superseded says the thread has newer checkpoints than it.
	CheckpointID    string   `json:"checkpoint_id,omitempty"`
	Superseded      bool     `json:"superseded,omitempty"`
	StreamMode      []string `json:"stream_mode"`
	Subgraphs       bool     `json:"subgraphs,omitempty"`
	InterruptBefore any      `json:"interrupt_before,omitempty"`
	InterruptAfter  any      `json:"interrupt_after,omitempty"`
	Durability      string   `json:"durability,omitempty"`
	// Store and Auth are where the graph's store operations and token
	// requests go during the call (the Bridge's routes, one grant).
	Store *Link `json:"store,omitempty"`
	Auth  *Link `json:"auth,omitempty"`
	// Events, on Lambda, is where the runtime posts the call's events while
	// it runs (the stage's /runtime/events); mailbox is where the platform
	// reads them (LambdaClient.Mailbox), never sent.
	Events  *Link   `json:"events,omitempty"`
	mailbox Mailbox `json:"-"`
	// YieldAfter bounds the call: past it, the run stops at the next
	// superstep boundary and ends "yielded"; the next call continues it.
	YieldAfter *YieldBudget `json:"yield_after,omitempty"`
	// Continued says the call continues one that yielded: the state it
	// starts from was streamed already (the runtime does not repeat it).
	Continued bool `json:"continued,omitempty"`
}

// YieldBudget is a run call's budget: seconds of execution and bytes of
// answer (0: unbounded). Both are soft: the call ends at the first
// superstep boundary past either, so a step's own time and output come on top.
type YieldBudget struct {
	Seconds float64 `json:"seconds,omitempty"`
	Bytes   int     `json:"bytes,omitempty"`
}

// Link is one route of the Bridge and the call's grant token.
type Link struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// Message is one line of a run's stream.
type Message struct {
	Type string `json:"type"` // "event", "checkpoint" or "end"
	// event
	// Seq numbers an event in its call (1, 2, ...) when the call posts its
	// events (RunRequest.Events); 0 otherwise.
	Seq  int64           `json:"seq,omitempty"`
	Mode string          `json:"mode,omitempty"`
	NS   []string        `json:"ns,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
	// checkpoint: graph.Checkpoint's JSON with the native bundle
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// end
	Status     string            `json:"status,omitempty"` // success, interrupted, error, yielded
	Values     json.RawMessage   `json:"values,omitempty"`
	Interrupts []graph.Interrupt `json:"interrupts,omitempty"`
	Error      *RuntimeError     `json:"error,omitempty"`
}

// RuntimeError is a failure the runtime reported: the graph's exception,
// or the app's (an import error), with the Python traceback.
type RuntimeError struct {
	Type      string `json:"error"`
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
}

func (e *RuntimeError) Error() string { return e.Type + ": " + e.Message }

// RequestError is the runtime refusing a call (400): the message names the field.
type RequestError struct{ Detail string }

func (e *RequestError) Error() string { return e.Detail }

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) post(ctx context.Context, path string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("the LangGraph runtime is unreachable: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var d struct {
			Detail string `json:"detail"`
		}
		if json.Unmarshal(raw, &d) == nil && d.Detail != "" && resp.StatusCode == http.StatusBadRequest {
			return nil, &RequestError{Detail: d.Detail}
		}
		return nil, fmt.Errorf("the LangGraph runtime answered %s to %s: %s", resp.Status, path, strings.TrimSpace(string(raw)))
	}
	return resp, nil
}

// call posts body and decodes the JSON answer into out; an answer
// {"error": ...} is returned as a *RuntimeError.
func (c *Client) call(ctx context.Context, path string, body, out any) error {
	resp, err := c.post(ctx, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	if err != nil {
		return err
	}
	if len(raw) > MaxAnswer {
		return fmt.Errorf("the LangGraph runtime's answer to %s is over %d bytes", path, MaxAnswer)
	}
	var e struct {
		Error *RuntimeError `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != nil {
		return e.Error
	}
	return json.Unmarshal(raw, out)
}

// Health asks the runtime whether it is up; it answers its graph ids.
func (c *Client) Health(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/health", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the LangGraph runtime's health check answered %s", resp.Status)
	}
	var h struct {
		Graphs []string `json:"graphs"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&h)
	return h.Graphs, err
}

// Description is what describe answers for one graph.
type Description struct {
	Description   *string        `json:"description"`
	InputSchema   map[string]any `json:"input_schema"`
	OutputSchema  map[string]any `json:"output_schema"`
	StateSchema   map[string]any `json:"state_schema"`
	ConfigSchema  map[string]any `json:"config_schema"`
	ContextSchema map[string]any `json:"context_schema"`
	// Graph is the drawn graph (LangChain's Graph.to_json: nodes, edges).
	Graph     map[string]any `json:"graph"`
	Subgraphs []string       `json:"subgraphs"`
}

// Describe answers the app's graphs (graphID "" for all), drawn with xray
// (false, true or a depth).
func (c *Client) Describe(ctx context.Context, graphID string, xray any) (map[string]Description, error) {
	return describe(ctx, c, graphID, xray)
}

// Run executes the graph once; each message of its stream goes to handle,
// in order, the last being the end. An error of handle stops the call.
func (c *Client) Run(ctx context.Context, req RunRequest, handle func(Message) error) error {
	if req.StreamMode == nil {
		req.StreamMode = []string{}
	}
	resp, err := c.post(ctx, "/run", req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	ended := false
	for {
		line, err := readLine(r, MaxMessage)
		if errors.Is(err, io.EOF) {
			if !ended {
				return errors.New("the LangGraph runtime's stream ended before the run did (did the runtime stop?)")
			}
			return nil
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("the LangGraph runtime sent a line that is not a message: %w", err)
		}
		if m.Type == "end" {
			ended = true
		}
		if err := handle(m); err != nil {
			return err
		}
	}
}

// readLine reads one line of at most max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		part, err := r.ReadSlice('\n')
		buf = append(buf, part...)
		if len(buf) > max {
			return nil, fmt.Errorf("a message of the LangGraph runtime is over %d bytes", max)
		}
		switch {
		case err == nil:
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return buf, nil
		default:
			return nil, err
		}
	}
}

// UpdateRequest is the update_state call.
type UpdateRequest struct {
	Graph      string          `json:"graph"`
	ThreadID   string          `json:"thread_id"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	Values     any             `json:"values"`
	AsNode     string          `json:"as_node,omitempty"`
	Config     map[string]any  `json:"config,omitempty"`
	// CheckpointID is the checkpoint the client named (a fork), or empty.
	CheckpointID string `json:"checkpoint_id,omitempty"`
}

// UpdateState applies values as as_node would write them; it answers the
// new checkpoint (graph.Checkpoint's JSON with its native bundle).
func (c *Client) UpdateState(ctx context.Context, req UpdateRequest) (json.RawMessage, error) {
	return updateState(ctx, c, req)
}

// StateRequest is the state call (a checkpoint's state, with its subgraphs').
type StateRequest struct {
	Graph      string          `json:"graph"`
	ThreadID   string          `json:"thread_id"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	Subgraphs  bool            `json:"subgraphs,omitempty"`
}

// State answers the state at the checkpoint, subgraphs' states in tasks[].state.
func (c *Client) State(ctx context.Context, req StateRequest) (map[string]any, error) {
	return state(ctx, c, req)
}

// waitHealthy polls the runtime until it answers or ctx ends.
func (c *Client) waitHealthy(ctx context.Context) error {
	for {
		if _, err := c.Health(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the LangGraph runtime did not become healthy: %w", context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

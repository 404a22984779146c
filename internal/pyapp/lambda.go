package pyapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Runtime is a LangGraph app's runtime, whatever carries the calls: a
// process on loopback over HTTP (Client) or a Lambda function
// (LambdaClient). Both speak the same protocol (docs/runtime-protocol.md,
// "LangGraph apps"), served by one dispatch in the runtime.
type Runtime interface {
	Describe(ctx context.Context, graphID string, xray any) (map[string]Description, error)
	Run(ctx context.Context, req RunRequest, handle func(Message) error) error
	UpdateState(ctx context.Context, req UpdateRequest) (json.RawMessage, error)
	State(ctx context.Context, req StateRequest) (map[string]any, error)
	caller // any other call of the protocol, by its operation's name
}

var (
	_ Runtime = (*Client)(nil)
	_ Runtime = (*LambdaClient)(nil)
)

// FunctionInvoker invokes a Lambda function synchronously and answers its
// result; internal/lambdaruntime's Functions implements it with Lambda
// Invoke (this package stays free of the AWS SDK). A function error
// (X-Amz-Function-Error) is an error.
type FunctionInvoker interface {
	InvokeFunction(ctx context.Context, function string, payload []byte) ([]byte, error)
}

// LambdaClient calls a runtime that is a Lambda function
// (stepgraph_runtime.lambda_handler.handler): one invocation per call,
// {"action", "request"} in, {"status", "body"} out, the HTTP transport's
// status and answer; a run's body is {"messages": [...]}, its stream
// delivered at once when the invocation ends.
type LambdaClient struct {
	Function string // the function's ARN or name
	Invoker  FunctionInvoker
	// Secrets, when set, go with every call as the event's "secrets": the
	// deployment's secret values, which the handler makes the app's
	// os.environ for that call only, so that the function's configuration
	// holds none (docs/runtime-protocol.md, "LangGraph apps on Lambda").
	// They are in no error of this client.
	Secrets map[string]string
	// Mailbox, when set, is where the events a call posts as it runs are
	// read (RunRequest.Events, mailbox.go): they are handed on while the
	// invocation lasts, not when it ends.
	Mailbox EventLog
}

// DefaultLambdaYield is the budget of a run call on Lambda: well inside
// Lambda's 15 minutes and 6 MB answer, so a call ends at a superstep
// boundary before either and the run goes on in the next invocation.
var DefaultLambdaYield = YieldBudget{Seconds: 600, Bytes: 4 << 20}

type lambdaEvent struct {
	Action  string            `json:"action"`
	Request any               `json:"request"`
	Secrets map[string]string `json:"secrets,omitempty"`
}

type lambdaResult struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// invoke makes one call and answers the body of a 200.
func (c *LambdaClient) invoke(ctx context.Context, action string, req any) (json.RawMessage, error) {
	if c.Invoker == nil {
		return nil, errors.New("pyapp: LambdaClient.Invoker is not set")
	}
	payload, err := json.Marshal(lambdaEvent{Action: action, Request: req, Secrets: c.Secrets})
	if err != nil {
		return nil, err
	}
	raw, err := c.Invoker.InvokeFunction(ctx, c.Function, payload)
	if err != nil {
		return nil, fmt.Errorf("the LangGraph runtime is unreachable: %w", err)
	}
	var res lambdaResult
	if err := json.Unmarshal(raw, &res); err != nil || res.Status == 0 {
		return nil, fmt.Errorf("the LangGraph runtime's answer to %s is not {status, body}: %.200s", action, raw)
	}
	if res.Status == 200 {
		return res.Body, nil
	}
	var d struct {
		Detail string        `json:"detail"`
		Error  *RuntimeError `json:"error"`
	}
	_ = json.Unmarshal(res.Body, &d)
	switch {
	case res.Status == 400 && d.Detail != "":
		return nil, &RequestError{Detail: d.Detail}
	case d.Error != nil: // the app could not be loaded
		return nil, fmt.Errorf("the LangGraph runtime answered %d to %s: %w", res.Status, action, d.Error)
	}
	return nil, fmt.Errorf("the LangGraph runtime answered %d to %s: %.300s", res.Status, action, res.Body)
}

// call makes a one-answer call; an answer {"error": ...} is a *RuntimeError.
func (c *LambdaClient) call(ctx context.Context, action string, req, out any) error {
	body, err := c.invoke(ctx, action, req)
	if err != nil {
		return err
	}
	var e struct {
		Error *RuntimeError `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil {
		return e.Error
	}
	return json.Unmarshal(body, out)
}

// Health answers the app's graph ids (loading the app in the function).
func (c *LambdaClient) Health(ctx context.Context) ([]string, error) {
	var h struct {
		Graphs []string `json:"graphs"`
	}
	err := c.call(ctx, "health", struct{}{}, &h)
	return h.Graphs, err
}

// Describe implements Runtime.
func (c *LambdaClient) Describe(ctx context.Context, graphID string, xray any) (map[string]Description, error) {
	return describe(ctx, c, graphID, xray)
}

// Run implements Runtime: the messages come when the invocation ends.
func (c *LambdaClient) Run(ctx context.Context, req RunRequest, handle func(Message) error) error {
	if req.StreamMode == nil {
		req.StreamMode = []string{}
	}
	if c.Mailbox != nil && req.mailbox.Key != "" {
		return c.runLive(ctx, req, handle)
	}
	body, err := c.invoke(ctx, "run", req)
	if err != nil {
		return err
	}
	return deliver(body, handle)
}

// runLive is Run for a call that posts its events: they are read from the
// call's mailbox while the invocation lasts, then the answer's messages
// but the events already handed on.
func (c *LambdaClient) runLive(ctx context.Context, req RunRequest, handle func(Message) error) error {
	box := &mailboxReader{log: c.Mailbox, box: req.mailbox, after: -1, next: 1}
	type answer struct {
		body json.RawMessage
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		body, err := c.invoke(ctx, "run", req)
		done <- answer{body, err}
	}()
	tick := time.NewTicker(MailboxPoll)
	defer tick.Stop()
	for {
		select {
		case a := <-done:
			if a.err != nil {
				return a.err
			}
			// Everything acknowledged was posted before the answer.
			if err := box.drain(ctx, handle); err != nil {
				return fmt.Errorf("the run call's posted events could not be read: %w", err)
			}
			return deliver(a.body, func(m Message) error {
				if m.Type == "event" && m.Seq > 0 && m.Seq < box.next {
					return nil // handed on from the mailbox
				}
				return handle(m)
			})
		case <-tick.C:
			// A failed read is tried again at the next tick, and at the end.
			_ = box.drain(ctx, handle)
		}
	}
}

// deliver hands on the messages of a run's answer, which must end with
// the run's end.
func deliver(body json.RawMessage, handle func(Message) error) error {
	var out struct {
		Messages []Message `json:"messages"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return fmt.Errorf("the LangGraph runtime's run answer is not {messages}: %w", err)
	}
	if n := len(out.Messages); n == 0 || out.Messages[n-1].Type != "end" {
		return errors.New("the LangGraph runtime's run answer does not end with the run's end")
	}
	for _, m := range out.Messages {
		if err := handle(m); err != nil {
			return err
		}
	}
	return nil
}

// UpdateState implements Runtime.
func (c *LambdaClient) UpdateState(ctx context.Context, req UpdateRequest) (json.RawMessage, error) {
	return updateState(ctx, c, req)
}

// State implements Runtime.
func (c *LambdaClient) State(ctx context.Context, req StateRequest) (map[string]any, error) {
	return state(ctx, c, req)
}

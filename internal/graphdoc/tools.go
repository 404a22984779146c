package graphdoc

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// toolsNode executes the tool calls of the last message (concurrently) and
// appends one tool message per call, in the calls' order. A tool's own
// failure (an HTTP error status, an error the function reports, an unknown
// tool) becomes an error tool message the model can react to; a failed
// exchange (timeout, no connection, a malformed answer) fails the node.
type toolsNode struct {
	graphID  string
	node     string
	messages string
	tools    map[string]*toolSpec
	client   *http.Client
	runtime  Runtime
	auth     *authSpec // a provider token for the http tools
	tokens   Tokens
}

func (t *toolsNode) run(ctx context.Context, state map[string]any, rt *graph.Runtime) (*graph.Command, error) {
	calls := toolCalls(lastMessage(state, t.messages))
	if len(calls) == 0 {
		return nil, nodeError(t.node, graph.KindValue, "the last message of %q is not an ai message with tool calls", t.messages)
	}
	token := ""
	if t.auth != nil {
		// Here, on the node's goroutine: it may interrupt the run.
		var err error
		if token, err = bearer(ctx, t.node, t.auth, t.tokens, rt); err != nil {
			return nil, err
		}
	}
	results := make([]any, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() { results[i], errs[i] = t.call(ctx, state, rt, call, token) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return graph.Update(map[string]any{t.messages: results}), nil
}

// call runs one tool call and returns its tool message.
func (t *toolsNode) call(ctx context.Context, state map[string]any, rt *graph.Runtime, call ToolCall, token string) (map[string]any, error) {
	spec, ok := t.tools[call.Name]
	if !ok {
		return toolMessage(call, fmt.Sprintf("Error: %s is not a valid tool, try one of [%s].",
			call.Name, strings.Join(sortedKeys(t.tools), ", ")), "error"), nil
	}
	ctx, cancel := context.WithTimeout(ctx, seconds(spec.Timeout, 30))
	defer cancel()
	// The events stream mode shows each tool call (LangChain's tool runs).
	traced := graph.Call{ID: uuid.NewString(), Type: "tool", Name: call.Name, Input: call.Args, ToolCallID: call.ID}
	if err := rt.StartCall(traced); err != nil {
		return nil, err
	}
	var msg map[string]any
	var err error
	if spec.Kind == "function" {
		msg, err = t.callFunction(ctx, state, rt, call)
	} else {
		msg, err = t.callHTTP(ctx, spec, call, token)
	}
	if err == nil {
		traced.Output = msg
	}
	if endErr := rt.EndCall(traced); err == nil {
		err = endErr
	}
	return msg, err
}

func (t *toolsNode) callHTTP(ctx context.Context, spec *toolSpec, call ToolCall, token string) (map[string]any, error) {
	method := cmp.Or(spec.Method, http.MethodPost)
	target, err := url.Parse(spec.URL)
	if err != nil {
		return nil, nodeError(t.node, graph.KindValue, "tool %q: %v", call.Name, err)
	}
	var body []byte
	if method == http.MethodGet || method == http.MethodDelete {
		q := target.Query()
		for _, k := range sortedKeys(call.Args) {
			q.Set(k, asText(call.Args[k]))
		}
		target.RawQuery = q.Encode()
	} else if body, err = json.Marshal(call.Args); err != nil {
		return nil, nodeError(t.node, graph.KindValue, "tool %q: %v", call.Name, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, nodeError(t.node, graph.KindValue, "tool %q: %v", call.Name, err)
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.1")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, data, err := fetch(t.client, req, cmp.Or(spec.MaxResponseBytes, 1<<20))
	if err != nil {
		return nil, redactError(callFailed(t.node, err), credentialsOf(req))
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		// An error answer may echo the request, a credential in the tool's
		// URL with it; the tool message is kept in the state.
		return toolMessage(call, redact(fmt.Sprintf("Error: HTTP %s: %s", res.Status, Excerpt(data)), credentialsOf(req)), "error"), nil
	}
	return toolMessage(call, string(bytes.ToValidUTF8(data, []byte("?"))), "success"), nil
}

func (t *toolsNode) callFunction(ctx context.Context, state map[string]any, rt *graph.Runtime, call ToolCall) (map[string]any, error) {
	req := FunctionRequest{Graph: t.graphID, Node: t.node, Tool: &call, State: state,
		Config: runConfig(t.graphID, rt), Context: rt.Context, Resume: []any{}}
	resp, err := t.runtime.Call(ctx, req)
	if err != nil {
		return nil, runtimeFailed(t.node, err)
	}
	if err := emitEvents(rt, resp.Events); err != nil {
		return nil, err
	}
	switch {
	case resp.Error != nil:
		return toolMessage(call, fmt.Sprintf("Error: %s: %s", resp.Error.Type, resp.Error.Message), "error"), nil
	case resp.Interrupt != nil || len(resp.Update) > 0 || len(resp.Goto) > 0 || len(resp.Store) > 0:
		return nil, nodeError(t.node, graph.KindValue,
			"tool %q: the runtime's answer to a tool call holds only output or error", call.Name)
	}
	content, ok := resp.Output.(string)
	if !ok {
		content = asText(resp.Output)
	}
	return toolMessage(call, content, "success"), nil
}

package graphdoc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/graph"
)

const maxCompletionBytes = 10 << 20

// chatModel calls an OpenAI-compatible Chat Completions endpoint with the
// conversation in its messages channel and appends the assistant's answer,
// tool calls included.
type chatModel struct {
	node     string
	spec     *nodeSpec
	url      string
	apiKey   string // never logged, returned or written to state
	tools    []map[string]any
	timeout  time.Duration
	client   *http.Client
	messages string
}

func newChatModel(node string, n *nodeSpec, tools map[string]*toolSpec, apiKey string, client *http.Client) *chatModel {
	c := &chatModel{node: node, spec: n, apiKey: apiKey, client: client, messages: n.messagesChannel,
		url:     strings.TrimSuffix(n.BaseURL, "/") + "/chat/completions",
		timeout: seconds(n.Timeout, 120)}
	for _, name := range n.Tools {
		t := tools[name]
		params := t.Parameters
		if params == nil {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		c.tools = append(c.tools, map[string]any{"type": "function", "function": map[string]any{
			"name": name, "description": t.Description, "parameters": params}})
	}
	return c
}

func (c *chatModel) run(ctx context.Context, state map[string]any, rt *graph.Runtime) (*graph.Command, error) {
	history, _ := state[c.messages].([]any)
	msgs, err := openAIMessages(history)
	if err != nil {
		return nil, nodeError(c.node, graph.KindValue, "%s: %v", c.messages, err)
	}
	scope := map[string]any{"state": state, "context": rt.Context}
	system := asText(c.spec.system.render(scope))
	if system != "" {
		msgs = append([]map[string]any{{"role": "system", "content": system}}, msgs...)
	}
	body := map[string]any{"model": c.spec.Model, "messages": msgs}
	if c.spec.Temperature != nil {
		body["temperature"] = *c.spec.Temperature
	}
	if c.spec.MaxTokens != nil {
		body["max_tokens"] = *c.spec.MaxTokens
	}
	if len(c.tools) > 0 {
		body["tools"] = c.tools
	}
	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	call := newModelCall(c, rt, system, history)
	if err := call.start(); err != nil {
		return nil, err
	}
	answer, err := c.complete(ctx, body, call)
	if err != nil {
		// Every failure, whatever its path, loses the key here: an endpoint
		// may echo the Authorization header in any answer.
		err = redactError(err, c.credentials())
		_ = call.end(nil) // reports a failed call: it cannot fail itself
		return nil, err
	}
	if err := call.end(answer); err != nil {
		return nil, err
	}
	return graph.Update(map[string]any{c.messages: answer}), nil
}

// complete makes the request and turns the first choice into an ai
// message: from the stream of chunks the endpoint answers with (reporting
// each to call as it arrives), or from a whole completion when the
// endpoint does not stream.
func (c *chatModel) complete(ctx context.Context, body map[string]any, call *modelCall) (map[string]any, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, nodeError(c.node, graph.KindValue, "the request is not JSON: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(raw))
	if err != nil {
		return nil, nodeError(c.node, graph.KindValue, "%v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream, application/json")
	req.Header.Set("User-Agent", userAgent)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	res, err := c.client.Do(req)
	if err != nil {
		return nil, callFailed(c.node, classify(req, err))
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK && isEventStream(res.Header.Get("Content-Type")) {
		streamed, err := readCompletionStream(res.Body, maxCompletionBytes, c.credentials(), call)
		if err != nil {
			return nil, c.streamFailed(req, err)
		}
		return streamed.message(call.id), nil
	}
	data, err := readBounded(req, res.Body, maxCompletionBytes)
	if err != nil {
		return nil, callFailed(c.node, err)
	}
	// The answer loses the key before anything reads it, so neither an
	// error's excerpt nor a completion that echoes it (the message is kept
	// in the state) can carry it.
	data = []byte(redact(string(data), c.credentials()))
	if res.StatusCode != http.StatusOK {
		return nil, nodeError(c.node, "APIStatusError", "the model endpoint answered %s: %s", res.Status, Excerpt(data))
	}
	var whole completion
	if err := decodeCompletion(data, &whole); err != nil {
		return nil, nodeError(c.node, graph.KindValue, "the model endpoint's answer is not a chat completion: %v", err)
	}
	return whole.message(call.id), nil
}

// credentials are the forms of the key the endpoint received: the key, and
// the whole header value (its base64 differs from the key's).
func (c *chatModel) credentials() []string {
	if c.apiKey == "" {
		return nil
	}
	return []string{c.apiKey, "Bearer " + c.apiKey}
}

type completion struct {
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage"`
}

type choice struct {
	Message      answerMessage `json:"message"`
	FinishReason string        `json:"finish_reason"`
}

type answerMessage struct {
	Content   any            `json:"content"`
	ToolCalls []toolCallJSON `json:"tool_calls"`
}

type toolCallJSON struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// aiMessage reads a Chat Completions answer as a LangGraph ai message
// (without an id: the messages reducer gives it one).
func aiMessage(data []byte) (map[string]any, error) {
	var c completion
	if err := decodeCompletion(data, &c); err != nil {
		return nil, err
	}
	return c.message(""), nil
}

// decodeCompletion reads a whole Chat Completions answer; it must have a
// choice.
func decodeCompletion(data []byte, c *completion) error {
	if err := decodeJSON(data, c); err != nil {
		return fmt.Errorf("%v: %s", err, Excerpt(data))
	}
	if len(c.Choices) == 0 {
		return fmt.Errorf("it has no choices: %s", Excerpt(data))
	}
	return nil
}

// message is the first choice as an ai message, with id when it is not
// empty. Tool calls whose arguments are not a JSON object go to
// invalid_tool_calls, as LangChain does, so they are never executed.
func (c *completion) message(id string) map[string]any {
	choice := c.Choices[0]
	content := choice.Message.Content
	if content == nil {
		content = ""
	}
	calls, invalid := []any{}, []any{}
	for _, tc := range choice.Message.ToolCalls {
		id := tc.ID
		if id == "" {
			id = "call_" + strings.ReplaceAll(uuid.NewString(), "-", "")
		}
		var args map[string]any
		raw := tc.Function.Arguments
		if strings.TrimSpace(raw) == "" {
			raw = "{}"
		}
		if err := decodeJSON([]byte(raw), &args); err != nil || args == nil {
			invalid = append(invalid, map[string]any{"type": "invalid_tool_call", "id": id,
				"name": tc.Function.Name, "args": tc.Function.Arguments, "error": "the arguments are not a JSON object"})
			continue
		}
		calls = append(calls, map[string]any{"type": "tool_call", "id": id, "name": tc.Function.Name, "args": args})
	}
	msg := map[string]any{"type": "ai", "content": content, "tool_calls": calls, "invalid_tool_calls": invalid,
		"response_metadata": map[string]any{"model_name": c.Model, "finish_reason": choice.FinishReason}}
	if u := c.Usage; u != nil {
		msg["usage_metadata"] = map[string]any{"input_tokens": u.PromptTokens,
			"output_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens}
	}
	if id != "" {
		msg["id"] = id
	}
	return msg
}

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
	if system := asText(c.spec.system.render(scope)); system != "" {
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
	answer, err := c.complete(ctx, body)
	if err != nil {
		// Every failure, whatever its path, loses the key here: an endpoint
		// may echo the Authorization header in any answer.
		return nil, redactError(err, c.credentials())
	}
	return graph.Update(map[string]any{c.messages: answer}), nil
}

// complete makes the request and turns the first choice into an ai message.
func (c *chatModel) complete(ctx context.Context, body map[string]any) (map[string]any, error) {
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
	req.Header.Set("User-Agent", userAgent)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	res, data, err := fetch(c.client, req, maxCompletionBytes)
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
	msg, err := aiMessage(data)
	if err != nil {
		return nil, nodeError(c.node, graph.KindValue, "the model endpoint's answer is not a chat completion: %v", err)
	}
	return msg, nil
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
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   any `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

// aiMessage reads a Chat Completions answer as a LangGraph ai message.
// Tool calls whose arguments are not a JSON object go to
// invalid_tool_calls, as LangChain does, so they are never executed.
func aiMessage(data []byte) (map[string]any, error) {
	var c completion
	if err := decodeJSON(data, &c); err != nil {
		return nil, fmt.Errorf("%v: %s", err, Excerpt(data))
	}
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("it has no choices: %s", Excerpt(data))
	}
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
	return msg, nil
}

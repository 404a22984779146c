package graphdoc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// Token streaming of chat_model nodes. The node asks the endpoint to
// stream (OpenAI's "stream": true): the answer is server-sent events, each
// a chat.completion.chunk whose delta holds a piece of the content or
// fragments of tool calls (by index), ended by "data: [DONE]". Each piece
// is reported as it arrives (graph.Runtime.EmitMessageChunk, a LangChain
// AIMessageChunk with the message's id), and the pieces add up to the very
// message a whole completion gives. An endpoint that answers plain JSON is
// read as before.

// maxStreamedToolCalls bounds the tool calls of one streamed answer.
const maxStreamedToolCalls = 128

// modelCall is one call of a chat model node as the run's observer sees
// it: its start and end (the events stream mode) and its chunks.
type modelCall struct {
	c        *chatModel
	rt       *graph.Runtime
	id       string // the answer's message id, shared by its chunks
	callID   string // the call's LangChain run id
	input    []any
	observed bool
}

func newModelCall(c *chatModel, rt *graph.Runtime, system string, history []any) *modelCall {
	m := &modelCall{c: c, rt: rt, id: uuid.NewString(), callID: uuid.NewString(), observed: rt.Observed()}
	if m.observed {
		if system != "" {
			m.input = append(m.input, map[string]any{"type": "system", "content": system})
		}
		m.input = append(m.input, history...)
	}
	return m
}

// metadata is what LangChain adds to a chat model's run metadata.
func (m *modelCall) metadata() map[string]any {
	meta := map[string]any{"ls_provider": "openai", "ls_model_name": m.c.spec.Model, "ls_model_type": "chat"}
	if t := m.c.spec.Temperature; t != nil {
		meta["ls_temperature"] = *t
	}
	if n := m.c.spec.MaxTokens; n != nil {
		meta["ls_max_tokens"] = *n
	}
	return meta
}

func (m *modelCall) call(output any) graph.Call {
	c := graph.Call{ID: m.callID, Type: "chat_model", Name: "ChatOpenAI", Metadata: m.metadata(), Output: output}
	if m.input != nil {
		c.Input = map[string]any{"messages": []any{m.input}}
	}
	return c
}

func (m *modelCall) start() error {
	if !m.observed {
		return nil
	}
	return m.rt.StartCall(m.call(nil))
}

// end reports the call's end: answer is nil when it failed.
func (m *modelCall) end(answer map[string]any) error {
	if !m.observed {
		return nil
	}
	return m.rt.EndCall(m.call(answer))
}

// chunk reports a piece of the answer.
func (m *modelCall) chunk(content string, toolChunks []any, responseMeta, usageMeta map[string]any) error {
	if !m.observed {
		return nil
	}
	if toolChunks == nil {
		toolChunks = []any{}
	}
	if responseMeta == nil {
		responseMeta = map[string]any{}
	}
	calls, invalid := graph.ToolCallsOfChunks(toolChunks)
	var usage any
	if usageMeta != nil {
		usage = usageMeta
	}
	return m.rt.EmitMessageChunk(map[string]any{"type": "AIMessageChunk", "id": m.id, "content": content,
		"additional_kwargs": map[string]any{}, "response_metadata": responseMeta, "name": nil, "example": false,
		"tool_calls": calls, "invalid_tool_calls": invalid, "usage_metadata": usage, "tool_call_chunks": toolChunks})
}

func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

// readBounded reads at most limit bytes of body.
func readBounded(req *http.Request, body io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, classify(req, err)
	}
	if int64(len(data)) > limit {
		return nil, &fetchError{kind: graph.KindValue,
			err: fmt.Errorf("%s %s: the answer is larger than %d bytes", req.Method, displayURL(req.URL), limit)}
	}
	return data, nil
}

// streamError is a stream the node cannot read: too large, not chunks,
// cut short, or an error the endpoint reported in it.
type streamError struct {
	kind string
	msg  string
}

func (e *streamError) Error() string { return e.msg }

// streamFailed reports a failed streamed answer.
func (c *chatModel) streamFailed(req *http.Request, err error) error {
	var se *streamError
	var ge *graph.Error
	switch {
	case errors.As(err, &se):
		return nodeError(c.node, se.kind, "%s", se.msg)
	case errors.As(err, &ge):
		return ge // a chunk the engine refused
	case errors.Is(err, context.Canceled):
		return err // the run was abandoned: the engine reports it
	}
	return nodeError(c.node, classifyKind(req, err), "the model endpoint's stream broke off: %v", classify(req, err))
}

func classifyKind(req *http.Request, err error) string {
	var fe *fetchError
	if errors.As(classify(req, err), &fe) {
		return fe.kind
	}
	return graph.KindGeneric
}

// streamChunk is one chat.completion.chunk.
type streamChunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   any `json:"content"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
	Error any    `json:"error"`
}

// streamedCall is a tool call being streamed.
type streamedCall struct {
	index int
	id    string
	name  string
	args  strings.Builder
	held  *holdback
}

// completionStream reads a streamed answer into a completion, reporting
// its pieces to call.
type completionStream struct {
	call    *modelCall
	creds   []string
	model   string
	finish  string
	usage   *usage
	content strings.Builder
	held    *holdback
	calls   []*streamedCall
	chunks  int
}

// readCompletionStream reads the server-sent events of a streamed
// completion: at most limit bytes in all, ended by [DONE] (or by the end of
// the body after a finish_reason, for servers that do not send [DONE]).
func readCompletionStream(body io.Reader, limit int64, creds []string, call *modelCall) (*completion, error) {
	s := &completionStream{call: call, creds: creds, held: newHoldback(creds)}
	lr := &io.LimitedReader{R: body, N: limit + 1}
	br := bufio.NewReaderSize(lr, 32<<10)
	var data bytes.Buffer
	hasData := false
	for {
		line, err := readLine(br)
		if lr.N <= 0 {
			return nil, &streamError{kind: graph.KindValue, msg: fmt.Sprintf("the model endpoint's stream is larger than %d bytes", limit)}
		}
		if err != nil && (err != io.EOF || len(line) == 0) {
			if err == io.EOF {
				if hasData { // a last event without its blank line
					if done, err := s.event(data.Bytes()); err != nil || done {
						return s.result(err)
					}
				}
				if s.finish != "" {
					return s.result(nil)
				}
				return nil, &streamError{kind: graph.KindValue, msg: "the model endpoint's stream ended before the answer was complete (no finish_reason, no [DONE])"}
			}
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if hasData {
				done, err := s.event(data.Bytes())
				if err != nil || done {
					return s.result(err)
				}
				data.Reset()
				hasData = false
			}
		case line[0] == ':': // a comment (keep-alive)
		case bytes.HasPrefix(line, []byte("data:")):
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(bytes.TrimPrefix(line[len("data:"):], []byte(" ")))
			hasData = true
		}
	}
}

// readLine reads a line of any length (the whole stream is bounded by the
// reader's limit).
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		line = append(line, part...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

func (s *completionStream) result(err error) (*completion, error) {
	if err != nil {
		return nil, err
	}
	return s.finishStream()
}

// event handles one event's data; done is true at [DONE].
func (s *completionStream) event(data []byte) (done bool, err error) {
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		return true, nil
	}
	// The key goes before anything reads the event (the endpoint may
	// echo it); a key cut in two by chunks is caught by the holdback.
	data = []byte(redact(string(data), s.creds))
	var ch streamChunk
	if err := decodeJSON(data, &ch); err != nil {
		return false, &streamError{kind: graph.KindValue,
			msg: "the model endpoint's stream is not a chat completion stream: " + Excerpt(data)}
	}
	if ch.Error != nil {
		return false, &streamError{kind: "APIStatusError", msg: "the model endpoint reported an error in its stream: " + Excerpt(data)}
	}
	s.chunks++
	if ch.Model != "" {
		s.model = ch.Model
	}
	if ch.Usage != nil {
		s.usage = ch.Usage
	}
	var piece string
	var toolChunks []any
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue // one answer is asked for (n = 1)
		}
		switch v := c.Delta.Content.(type) {
		case nil:
		case string:
			s.content.WriteString(v)
			piece = s.held.push(v)
		default:
			return false, &streamError{kind: graph.KindValue,
				msg: "the model endpoint's stream is not a chat completion stream: a delta's content is not text: " + Excerpt(data)}
		}
		for pos, d := range c.Delta.ToolCalls {
			index := pos
			if d.Index != nil {
				index = *d.Index
			}
			tc := s.toolCall(index)
			if tc == nil {
				return false, &streamError{kind: graph.KindValue,
					msg: fmt.Sprintf("the model endpoint's stream has a tool call index out of range (0 to %d): %d", maxStreamedToolCalls-1, index)}
			}
			chunk := map[string]any{"type": "tool_call_chunk", "index": index, "id": nil, "name": nil}
			if d.ID != "" && tc.id == "" {
				tc.id = d.ID
				chunk["id"] = d.ID
			}
			if d.Function.Name != "" && tc.name == "" {
				tc.name = d.Function.Name
				chunk["name"] = d.Function.Name
			}
			tc.args.WriteString(d.Function.Arguments)
			chunk["args"] = tc.held.push(d.Function.Arguments)
			toolChunks = append(toolChunks, chunk)
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			s.finish = *c.FinishReason
		}
	}
	if piece != "" || len(toolChunks) > 0 {
		if err := s.call.chunk(piece, toolChunks, nil, nil); err != nil {
			return false, err
		}
	}
	return false, nil
}

func (s *completionStream) toolCall(index int) *streamedCall {
	if index < 0 || index >= maxStreamedToolCalls {
		return nil
	}
	for _, tc := range s.calls {
		if tc.index == index {
			return tc
		}
	}
	tc := &streamedCall{index: index, held: newHoldback(s.creds)}
	s.calls = append(s.calls, tc)
	return tc
}

// finishStream reports what the holdbacks kept and the answer's metadata
// (LangChain's last chunks), and builds the completion the stream amounts
// to.
func (s *completionStream) finishStream() (*completion, error) {
	if s.chunks == 0 {
		return nil, &streamError{kind: graph.KindValue, msg: "the model endpoint's stream holds no chunk"}
	}
	slices.SortFunc(s.calls, func(a, b *streamedCall) int { return a.index - b.index })
	piece := s.held.flush()
	var toolChunks []any
	for _, tc := range s.calls {
		if rest := tc.held.flush(); rest != "" {
			toolChunks = append(toolChunks, map[string]any{"type": "tool_call_chunk", "index": tc.index, "id": nil, "name": nil, "args": rest})
		}
	}
	meta := map[string]any{"model_name": s.model, "finish_reason": s.finish}
	var usageMeta map[string]any
	if u := s.usage; u != nil {
		usageMeta = map[string]any{"input_tokens": u.PromptTokens, "output_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens}
	}
	if err := s.call.chunk(piece, toolChunks, meta, usageMeta); err != nil {
		return nil, err
	}
	c := &completion{Model: s.model, Usage: s.usage, Choices: []choice{{FinishReason: s.finish}}}
	c.Choices[0].Message.Content = redact(s.content.String(), s.creds)
	for _, tc := range s.calls {
		var call toolCallJSON
		call.ID, call.Function.Name = tc.id, tc.name
		call.Function.Arguments = redact(tc.args.String(), s.creds)
		c.Choices[0].Message.ToolCalls = append(c.Choices[0].Message.ToolCalls, call)
	}
	return c, nil
}

// holdback passes streamed text on, keeping back its end while it could be
// the start of a credential: a key the endpoint echoes cut over two
// chunks is redacted before either piece is reported. Ordinary text is
// held back by a few bytes at most (those that start a key, like "sk-").
type holdback struct {
	creds   []string
	forms   []string // what redact replaces
	pending string
}

func newHoldback(creds []string) *holdback {
	return &holdback{creds: creds, forms: credentialForms(creds)}
}

// push adds s and returns what can be reported now.
func (h *holdback) push(s string) string {
	if len(h.forms) == 0 {
		return s
	}
	h.pending = redact(h.pending+s, h.creds)
	cut := len(h.pending)
	longest := len(h.forms[0])
	for i := max(0, len(h.pending)-longest+1); i < len(h.pending); i++ {
		if h.startsAForm(h.pending[i:]) {
			cut = i
			break
		}
	}
	out := h.pending[:cut]
	h.pending = h.pending[cut:]
	return out
}

// startsAForm says whether tail is the start of a credential's form.
func (h *holdback) startsAForm(tail string) bool {
	for _, f := range h.forms {
		if len(tail) < len(f) && strings.HasPrefix(f, tail) {
			return true
		}
	}
	return false
}

// flush returns what is kept back.
func (h *holdback) flush() string {
	out := redact(h.pending, h.creds)
	h.pending = ""
	return out
}

package interop

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// MCP over the stateless Streamable HTTP transport, as the upstream Agent
// Server serves it (langgraph_api/api/mcp): every request is answered on
// its own, in JSON; there are no sessions and no server-initiated streams.

// MCP protocol revisions this server negotiates: a client asking for one of
// them gets it, any other gets the latest (the client may then disconnect).
var mcpVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

const mcpLatestVersion = "2025-11-25"

const (
	// mcpPageSize is how many tools one tools/list page holds (upstream's).
	mcpPageSize = 100
	// mcpMaxAssistants is how many assistants tools/call looks through for
	// the tool's name (upstream's bound).
	mcpMaxAssistants = 1000
	// mcpMaxToolName is MCP's bound on a tool name's length.
	mcpMaxToolName = 128
)

var (
	mcpSpaces  = regexp.MustCompile(`\s+`)
	mcpInvalid = regexp.MustCompile(`[^a-zA-Z0-9_\-.]`)
)

// ToolName turns an assistant's name into a valid MCP tool name
// (^[a-zA-Z0-9_\-.]{1,128}$): whitespace runs become "_", other characters
// outside the set are dropped, the rest is cut at 128. "" means the name
// has no valid character and the assistant is no tool.
func ToolName(name string) string {
	n := mcpSpaces.ReplaceAllString(strings.TrimSpace(name), "_")
	n = mcpInvalid.ReplaceAllString(n, "")
	if len(n) > mcpMaxToolName {
		n = n[:mcpMaxToolName]
	}
	return n
}

// negotiate answers the protocol version of an initialize request.
func negotiate(requested string) string {
	if slices.Contains(mcpVersions, requested) {
		return requested
	}
	return mcpLatestVersion
}

// MCP answers one POST /mcp. accept and protocolVersion are the request's
// Accept and MCP-Protocol-Version headers.
func (s *Service) MCP(ctx context.Context, orgID string, body []byte, accept, protocolVersion string) Reply {
	if !accepts(accept, "application/json") && !accepts(accept, "text/event-stream") {
		return Reply{http.StatusBadRequest, errorResponse(nil, rpcErr(CodeInvalidRequest,
			"Invalid Request: the Accept header must include application/json or text/event-stream"))}
	}
	env, perr := decodeEnvelope(body)
	if perr != nil {
		if (perr.Code == CodeInvalidParams || perr.Code == CodeMethodNotFound) && env.ID != nil {
			return Reply{http.StatusOK, errorResponse(env.ID, perr)}
		}
		return Reply{http.StatusBadRequest, errorResponse(env.ID, perr)}
	}
	// A request after initialize names the negotiated revision; an unknown
	// one is refused (Streamable HTTP, "Protocol Version Header").
	if protocolVersion != "" && !slices.Contains(mcpVersions, protocolVersion) {
		return Reply{http.StatusBadRequest, errorResponse(env.ID, rpcErr(CodeInvalidRequest,
			"Invalid Request: unsupported MCP-Protocol-Version "+strconv.Quote(truncate(protocolVersion, 40))+
				"; supported: "+strings.Join(mcpVersions, ", ")))}
	}
	switch env.kind() {
	case kindNotification, kindResponse:
		// Notifications and responses are accepted without a body.
		return Reply{Status: http.StatusAccepted}
	case kindInvalid:
		return Reply{http.StatusBadRequest, errorResponse(env.ID, rpcErr(CodeInvalidRequest,
			"Invalid Request: a message is a JSON-RPC request, notification or response"))}
	}
	var out any
	var rerr *RPCError
	switch env.method {
	case "initialize":
		out, rerr = s.mcpInitialize(env)
	case "ping":
		out = struct{}{}
	case "tools/list":
		out, rerr = s.mcpToolsList(ctx, orgID, env)
	case "tools/call":
		out, rerr = s.mcpToolsCall(ctx, orgID, env)
	default:
		rerr = rpcErr(CodeMethodNotFound, "Method not found: "+truncate(env.method, 100))
	}
	if rerr != nil {
		return Reply{http.StatusOK, errorResponse(env.ID, rerr)}
	}
	return Reply{http.StatusOK, result(env.ID, out)}
}

func (s *Service) mcpInitialize(env envelope) (any, *RPCError) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := env.params(&p); err != nil {
		return nil, err
	}
	return map[string]any{
		"protocolVersion": negotiate(p.ProtocolVersion),
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
		"serverInfo":      map[string]any{"name": "LangGraph", "version": s.version},
	}, nil
}

// mcpTool is one tool of tools/list.
type mcpTool struct {
	Name        string         `json:"name"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
	Annotations map[string]any `json:"annotations"`
}

// mcpToolsList lists one page of the organization's assistants as tools.
// The cursor is the offset of the page, as a string (MCP's cursors are
// opaque strings).
func (s *Service) mcpToolsList(ctx context.Context, orgID string, env envelope) (any, *RPCError) {
	var p struct {
		Cursor json.RawMessage `json:"cursor"`
	}
	if err := env.params(&p); err != nil {
		return nil, err
	}
	offset := 0
	if p.Cursor != nil && !isNull(p.Cursor) {
		var c string
		if json.Unmarshal(p.Cursor, &c) != nil {
			c = string(p.Cursor) // upstream sent numbers; take them too
		}
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 || n > mcpMaxAssistants*100 {
			return nil, rpcErr(CodeInvalidParams, "Invalid params: cursor is not one this server gave")
		}
		offset = n
	}
	list, err := s.runs.SearchAssistants(ctx, orgID, runs.AssistantSearch{Limit: mcpPageSize, Offset: offset})
	if err != nil {
		return nil, s.internal(ctx, "mcp tools/list", err)
	}
	tools := []mcpTool{}
	seen := map[string]bool{}
	for _, a := range list {
		name := ToolName(a.Name)
		if name == "" || seen[name] {
			// Two assistants with one tool name: the newest is the tool
			// (tools/call refuses the name as ambiguous, as upstream).
			continue
		}
		seen[name] = true
		schemas, err := s.runs.AssistantSchemas(ctx, orgID, a.AssistantID)
		if err != nil {
			// An assistant whose graph cannot be read (a deployed revision
			// gone, say) is left out of the list, as upstream does.
			s.log.WarnContext(ctx, "mcp: assistant left out of tools/list", "assistant_id", a.AssistantID, "error", err.Error())
			continue
		}
		input := schemas.InputSchema
		if input == nil {
			input = map[string]any{}
		}
		if _, ok := input["type"]; !ok {
			// MCP requires an object schema.
			input["type"] = "object"
		}
		desc := "Tool based on the " + a.Name + " assistant"
		if a.Description != nil && *a.Description != "" {
			desc = *a.Description
		}
		tools = append(tools, mcpTool{Name: name, Title: a.Name, Description: desc, InputSchema: input,
			Annotations: map[string]any{"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": true}})
	}
	out := map[string]any{"tools": tools}
	if len(list) == mcpPageSize {
		out["nextCursor"] = strconv.Itoa(offset + mcpPageSize)
	}
	return out, nil
}

// mcpToolsCall runs the assistant named by the tool as a stateless run
// (POST /runs/wait's path) and answers its output as text.
func (s *Service) mcpToolsCall(ctx context.Context, orgID string, env envelope) (any, *RPCError) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Context   json.RawMessage `json:"context"`
	}
	if err := env.params(&p); err != nil {
		return nil, err
	}
	if p.Name == "" {
		return nil, rpcErr(CodeInvalidParams, "Invalid params: name is required (the tool to call)")
	}
	if p.Arguments != nil && !isNull(p.Arguments) && !isObject(p.Arguments) {
		return nil, rpcErr(CodeInvalidParams, "Invalid params: arguments must be an object")
	}
	var match []runs.Assistant
	for offset := 0; offset < mcpMaxAssistants; offset += mcpPageSize {
		page, err := s.runs.SearchAssistants(ctx, orgID, runs.AssistantSearch{Limit: mcpPageSize, Offset: offset})
		if err != nil {
			return nil, s.internal(ctx, "mcp tools/call", err)
		}
		for _, a := range page {
			if ToolName(a.Name) == p.Name {
				match = append(match, a)
			}
		}
		if len(page) < mcpPageSize {
			break
		}
	}
	switch len(match) {
	case 0:
		return nil, rpcErr(CodeInvalidParams, "Unknown tool: "+truncate(p.Name, 128))
	case 1:
	default:
		return nil, rpcErr(CodeInvalidParams, "Multiple tools found with the same name.")
	}
	input := p.Arguments
	if input == nil || isNull(input) {
		input = json.RawMessage("{}")
	}
	req := runs.RunRequest{AssistantID: &match[0].AssistantID, Input: input}
	if p.Context != nil && !isNull(p.Context) {
		req.Context = p.Context
	}
	run, err := s.runs.CreateRun(ctx, orgID, "", req)
	if err != nil {
		return s.runRefused(ctx, "mcp tools/call", err)
	}
	out, err := s.runs.Wait(ctx, orgID, run.ThreadID, run.RunID)
	if err != nil && ctx.Err() != nil {
		// The request's time is up (an AWS function's response budget)
		// before the run ended; the run goes on, and the tool reports it.
		return map[string]any{"isError": true, "content": []any{map[string]any{"type": "text",
			"text": "the run " + run.RunID + " did not end within the time one request may take here; it goes on, " +
				"but its output is not kept (a stateless run): use the LangGraph API (POST /threads/{thread_id}/runs) for long runs"}}}, nil
	}
	if err != nil {
		return nil, s.internal(ctx, "mcp tools/call", err)
	}
	if msg, failed := runError(out); failed {
		return map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": msg}}}, nil
	}
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": string(out)}}}, nil
}

// runRefused maps a refused run creation: bad input is the caller's
// (invalid params); a limit or a conflict is the tool's failure, reported
// in the result so that the model calling the tool reads it.
func (s *Service) runRefused(ctx context.Context, op string, err error) (any, *RPCError) {
	switch fail.KindOf(err) {
	case fail.KindInvalid, fail.KindNotFound:
		return nil, rpcErr(CodeInvalidParams, "Invalid params: "+fail.MessageOf(err))
	case fail.KindBadRequest, fail.KindConflict, fail.KindQuota, fail.KindUnavailable:
		return map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": fail.MessageOf(err)}}}, nil
	}
	return nil, s.internal(ctx, op, err)
}

// internal logs an unexpected failure and answers it without internals.
func (s *Service) internal(ctx context.Context, op string, err error) *RPCError {
	if k := fail.KindOf(err); k == fail.KindUnavailable || k == fail.KindQuota {
		return rpcErr(CodeInternalError, fail.MessageOf(err))
	}
	if ctx.Err() == nil {
		s.log.ErrorContext(ctx, op+" failed", "error", err.Error())
	}
	return rpcErr(CodeInternalError, "Internal error")
}

// runError reads a run's output: {"__error__": {"error", "message"}} is a
// failed run, and its message is what the caller sees.
func runError(out json.RawMessage) (string, bool) {
	var v struct {
		Err *struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		} `json:"__error__"`
	}
	if json.Unmarshal(out, &v) != nil || v.Err == nil {
		return "", false
	}
	switch {
	case v.Err.Error != "" && v.Err.Message != "":
		return v.Err.Error + ": " + v.Err.Message, true
	case v.Err.Message != "":
		return v.Err.Message, true
	}
	return v.Err.Error, true
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// truncate bounds text of the caller's that an answer repeats.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

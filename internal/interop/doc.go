// Package interop owns the two agent-interoperability protocols the upstream
// Agent Server (langgraph-api) serves beside the LangGraph API, so that
// clients which speak neither the LangGraph API nor its SDKs can use the
// organization's assistants:
//
//   - MCP (mcp.go): the stateless Streamable HTTP endpoint POST /mcp. Each
//     assistant of the organization is a tool: tools/list answers its name
//     (normalized to MCP's tool-name rule), description and input schema;
//     tools/call runs it as a stateless run and answers its output.
//   - A2A (a2a.go, a2a_messages.go): POST /a2a/{assistant_id}, JSON-RPC
//     message/send, message/stream, tasks/get and tasks/cancel (and their
//     A2A 1.0 names), and the assistant's agent card. An A2A context is a
//     thread; a task is one run on it ("{context_id}:{run_id}").
//
// The package holds the protocol rules only: the JSON-RPC envelope and its
// error objects (jsonrpc.go), protocol-version negotiation, the mapping of
// messages, parts, run statuses and outputs. Every run goes through
// runs.Service like any other (limits, multitask strategy, webhooks and
// tenant isolation apply); the HTTP framing is internal/api's.
package interop

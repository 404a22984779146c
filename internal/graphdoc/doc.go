// Package graphdoc turns a deployment's graph documents into runnable
// graphs. It owns
//
//   - the graph document format (YAML or JSON): state channels with
//     reducers and JSON Schemas, nodes of the built-in kinds (chat_model,
//     tools, http, transform, interrupt, subgraph, function), edges and
//     conditional edges (docs/graphs.md), and the graph config that names a
//     revision's graphs;
//   - their JSON Schemas (DocumentSchema, ConfigSchema, embedded for the API
//     to serve) and validation: the schemas first, then the rules a schema
//     cannot say (unknown nodes and channels, subgraph cycles, templates,
//     missing secrets, URLs), every problem named by file, JSON path and rule;
//   - compilation into the engine's graphs (internal/graph), with the
//     nodes' behaviour: Chat Completions calls, tool execution, HTTP calls,
//     the small template language, interrupts, nested subgraph runs;
//   - the function runtime protocol (docs/runtime-protocol.md): the Runtime
//     port, its request and response, the retry policy of its transports
//     (Retry), the HTTP transport and the rule of Lambda function ARNs. The
//     Lambda Invoke transport is an adapter of the port and lives with the
//     AWS code (internal/lambdaruntime): this package holds no AWS client.
//     Both transports run the port's contract suite, runtimetest.
//
// It reads no repository and stores nothing: the caller hands it the files
// (an fs.FS) or a runtime's description, the deployment's secrets, its
// runtime and the HTTP client every outbound call goes through (the
// platform's SSRF-guarded one). Secret values are only ever sent where a
// document names them and never appear in errors or state.
package graphdoc

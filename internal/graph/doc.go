// Package graph is stepgraph's execution engine: a Pregel-style graph runner in
// the manner of LangGraph, as a pure library. It owns
//
//   - state channels and their reducers (last value, append, add, messages),
//   - graph definitions (nodes, edges, conditional edges) and their validation,
//   - super-step execution: the nodes triggered in a step run concurrently, and
//     their writes merge in a fixed order (node name, then write order),
//   - commands (update / goto / resume), static and dynamic interrupts, the
//     recursion limit and node errors,
//   - checkpoints: the complete, JSON-serializable execution state between two
//     super-steps,
//   - the registry of graphs by name, with the built-in graphs, and their
//     description (drawing and JSON Schema) for the assistants API,
//   - observing a run (events.go): the tasks each step runs, what they
//     produced, the checkpoints, and events nodes emit, with subgraph
//     namespaces; what the streaming API derives its stream modes from.
//
// It owns no storage, no HTTP and no clock-driven behaviour: durability is the
// caller's concern. Begin applies a run's input to a checkpoint, Step executes
// exactly one super-step, and Run loops Step, handing every checkpoint to a
// Sink. The runs service drives Run in-process; the Step Functions worker calls
// Step once per invocation and carries the returned Checkpoint (as JSON) to the
// next one. Both paths therefore share every rule.
//
// State values are JSON values in the shape encoding/json produces with
// UseNumber: nil, bool, string, json.Number, []any and map[string]any. Input
// and node writes are normalized to that shape on entry, which is what makes a
// checkpoint survive a JSON round trip unchanged (and keeps integers exact: a
// counter serializes as 5, never 5.0). Nodes read numbers with Float or Int.
package graph

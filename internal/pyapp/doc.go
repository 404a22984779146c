// Package pyapp hosts LangGraph Python apps: a repository whose
// langgraph.json names Python graphs runs on stepgraph unchanged, LangGraph
// executing the graphs in the Python runtime of runtimes/python, stepgraph
// owning threads, runs, streaming and every checkpoint.
//
// It owns the platform's side of the runtime protocol
// (docs/runtime-protocol.md, "LangGraph apps"): the clients of a runtime
// behind one interface (Runtime: describe, run with its stream of events
// and checkpoints, update_state, state) over HTTP (Client, NDJSON) and over
// Lambda Invoke (LambdaClient, one invocation per call, through a
// FunctionInvoker that internal/lambdaruntime implements, so this package
// stays free of the AWS SDK), starting a runtime process on 127.0.0.1 and
// stopping it (Process), the bridge of a run call (a Granter hands out its
// links: the loopback Bridge, one in-memory grant, or StageLinks, a signed
// token for the stage's API when the runtime is a Lambda function; both
// served by CallRoutes, carrying the graph's store operations to the store
// API and its requests for the run's user's provider tokens to agent
// auth), live events on Lambda (a call posts its events as it runs to its
// mailbox in the event log, which LambdaClient reads while the invocation
// lasts: mailbox.go), LambdaApps and RuntimeApps (the apps served at a
// revision's runtime URL: a hosted_repo app's function, an external_docker
// deployment's runtime that is a LangGraph app), Graph, a Python
// graph as runs executes it (runs.ForeignGraph), and Venv, the virtual
// environment stepgraph dev makes for an app (stamped with what it was
// made from, reused while unchanged), and the app's build for Lambda
// (Build: a zip; BuildImage: a container image's build context).
//
// The runtime is stateless: each call carries the thread's parent
// checkpoint as stepgraph stored it (graph.Checkpoint.Native, LangGraph's
// own checkpoint, opaque here), and every checkpoint the graph writes comes
// back to be stored through the store ports like the engine's own. A run
// call may carry a budget (Graph.Yield, YieldBudget): the runtime stops at
// a superstep boundary past it and Graph.Run continues the run in a next
// call from its last checkpoint, so a Lambda runtime's 15 minutes and
// 6 MB answer bound a call, not a run.
package pyapp

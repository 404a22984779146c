// Package pyruntime carries the runtime of LangGraph Python apps
// (stepgraph_runtime, in this directory) inside the stepgraph binary: the
// server writes it out (Extract) and starts it with an app's interpreter.
// The Python package is the source of truth; embed.go only embeds it, and
// its pinned requirements (Requirements, which stepgraph dev installs).
package pyruntime

"""stepgraph's runtime for LangGraph Python apps.

It loads the graphs an app's ``langgraph.json`` names and serves the
runtime protocol of docs/runtime-protocol.md ("LangGraph apps"): describe,
run, update_state and state, over HTTP on loopback (server.py) or as a
Lambda handler (lambda_handler.py), both through one dispatch
(dispatch.py). LangGraph executes the graphs; the runtime keeps
nothing between calls. Every checkpoint the graph writes is sent back to the
platform, which stores it and hands it back as the parent of the next call.
"""

__version__ = "0.1.0"

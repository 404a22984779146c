// Package conformance runs the official LangGraph SDKs, unchanged, against a
// real `stepgraph serve`: the Python client (PyPI langgraph-sdk, from .venv)
// with pytest, and the JS client (npm @langchain/langgraph-sdk, from
// test/conformance/js/node_modules) with node's test runner. Both are
// installed, pinned, by `make test-deps` (scripts/install-test-deps.sh).
//
// The suites live in python/ and js/; conformance_test.go builds the server,
// starts it (internal/testserver) on 127.0.0.1 with a fresh data directory,
// and runs them.
package conformance

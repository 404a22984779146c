// Package conformance runs the official LangGraph SDKs, unchanged, against a
// real `stepgraph serve`: the Python client (PyPI langgraph-sdk, from .venv)
// with pytest, and the JS client (npm @langchain/langgraph-sdk, from
// test/conformance/js/node_modules) with node's test runner. Both are
// installed, pinned, by `make test-deps` (scripts/install-test-deps.sh).
//
// The suites live in python/ and js/; conformance_test.go builds the server,
// starts it (internal/testserver) on 127.0.0.1 with a fresh data directory,
// and runs them: the JS suites once per SDK version (1.15.0 and 2.0.0, see
// js/sdk-under-test.mjs).
//
// langgraphdev_test.go serves the same LangGraph app on stepgraph and on
// upstream's `langgraph dev` (.venv-langgraph-dev, the benchmark's pins)
// and requires the same answers to the same SDK calls (thread state,
// history, update_state, forks, subgraph state, supersteps, assistants'
// schemas and graphs) once run-specific values are normalised
// (langgraphdev/test_parity.py).
//
// routes_test.go walks upstream's own OpenAPI document (langgraph-api's
// openapi.json, pinned in upstream/langgraph-api.pin) and finds every
// operation routed, but those upstream/pending.txt lists as not built yet
// (docs/api-conformance.md).
package conformance

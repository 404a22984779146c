// Package schemathesis runs Schemathesis (PyPI, pinned in requirements.txt and
// installed into .venv by `make test-deps`) against a real `stepgraph serve`:
// every operation of the server's own OpenAPI document, with a valid API key,
// checking that no answer is a server error and every answer matches the
// document (status code, content type, headers and body schema).
//
// schemathesis_test.go builds the server, starts it (internal/testserver) on
// 127.0.0.1 with a fresh data directory, and runs Schemathesis with a fixed
// seed and a bounded number of examples per operation. hooks.py keeps the
// generated requests on this machine (see there). Every finding fails the test with Schemathesis' report;
// each real one becomes a regression test in internal/api
// (schemathesis_regressions_test.go).
//
// TestSchemathesisUpstream runs it again with upstream's own document
// (langgraph-api's openapi.json, pinned in
// test/conformance/upstream/langgraph-api.pin), positive mode: stepgraph
// must answer as upstream documents. upstream_hooks.py corrects that
// document where it is wrong about upstream's own server, each erratum
// citing upstream's code (docs/api-conformance.md).
package schemathesis

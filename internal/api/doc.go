// Package api is stepgraph's one HTTP surface. openapi.yaml is the source of
// truth: the server registers exactly the operations it lists (each bound to a
// handler by operationId) and validates every request against it before a
// handler runs. Handlers only translate HTTP: they decode the request into a
// use-case input, call the use-case package (providers, deployments, ...) and
// encode the answer; fail kinds become status codes here and nowhere else.
//
// Cross-cutting behaviour lives in the middleware: request ids, access logs
// (never bodies), panic recovery, the body size limit, X-Api-Key
// authentication, Idempotency-Key replay, and {"detail": ...} error bodies.
package api

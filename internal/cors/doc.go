// Package cors owns the API's cross-origin policy: which browser origins (a
// LangGraph Studio, a useStream UI) may call it, the headers a preflight and
// an answer carry, and the rule of an allow-list entry. The API server
// applies it (internal/api); the CDK app (infra/stack) gives the same lists
// to API Gateway, which answers preflights on AWS before any function runs.
// It imports only the standard library, so the CDK module can use it.
package cors

// Package reqid carries the id of the request that caused some work through
// a context, so that the work's log lines name it wherever the work goes:
// the HTTP layer (internal/api) puts each request's id in its context, the
// Step Functions dispatcher (internal/dispatch/sfn) writes it into the run
// execution's input, and the run worker (internal/lambdaapp) logs it with
// the run id on every line of the steps it executes.
package reqid

// Command run-stream is the Lambda of the run streams (POST
// /threads/{thread_id}/runs/stream, POST /runs/stream, GET
// .../runs/{run_id}/stream, GET /threads/{thread_id}/stream) and of the join
// of a run (GET .../runs/{run_id}/join): the shared HTTP API, its responses
// streamed by API Gateway's REST API (ResponseTransferMode STREAM). It
// executes no run: it tails the event log the run worker writes. Its routes
// are in functions/routes.json; configuration and behaviour in
// internal/lambdaapp.
package main

import "github.com/stepgraph/stepgraph/internal/lambdaapp"

func main() { lambdaapp.StartAPI("run-stream") }

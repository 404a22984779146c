// Command thread-run-wait is the Lambda of POST /threads/{thread_id}/runs/wait
// (run on a thread and answer with its output): the shared HTTP API behind API
// Gateway (HTTP API, payload 2.0). Its routes are in functions/routes.json;
// configuration and behaviour in internal/lambdaapp.
package main

import "github.com/stepgraph/stepgraph/internal/lambdaapp"

func main() { lambdaapp.StartAPI("thread-run-wait") }

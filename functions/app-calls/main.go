// Command app-calls is the Lambda of the routes LangGraph apps' graphs call
// during a run call on Lambda (/runtime/store, /runtime/auth/token, /runtime/events), with
// the call's signed token: the shared HTTP API behind API Gateway. Its
// routes are in functions/routes.json; configuration and behaviour in
// internal/lambdaapp.
package main

import "github.com/stepgraph/stepgraph/internal/lambdaapp"

func main() { lambdaapp.StartAPI("app-calls") }

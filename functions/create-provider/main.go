// Command create-provider is the Lambda of POST /v2/auth/providers (register
// an OAuth provider): the shared HTTP API behind API Gateway (HTTP API,
// payload 2.0). Its routes are in functions/routes.json; configuration and
// behaviour in internal/lambdaapp.
package main

import "github.com/stepgraph/stepgraph/internal/lambdaapp"

func main() { lambdaapp.StartAPI("create-provider") }

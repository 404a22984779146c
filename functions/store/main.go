// Command store is the Lambda of the long-term memory store's routes
// (/store/items, /store/namespaces): the shared HTTP API behind API Gateway
// (HTTP API, payload 2.0). Its routes are in functions/routes.json;
// configuration and behaviour in internal/lambdaapp.
package main

import "github.com/stepgraph/stepgraph/internal/lambdaapp"

func main() { lambdaapp.StartAPI("store") }

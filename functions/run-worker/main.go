// Command run-worker is the Lambda the run state machine invokes: it executes
// super-steps of one run ("step") or ends a run its execution gave up on
// ("abandon"). See internal/lambdaapp and internal/awsflow.
package main

import "github.com/stepgraph/stepgraph/internal/lambdaapp"

func main() { lambdaapp.StartRunWorker() }

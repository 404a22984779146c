// Command deploy-worker is the Lambda the provisioning state machine invokes:
// it carries a deployment revision through its lifecycle ("provision") or
// finishes a deployment's deletion ("delete"). See internal/lambdaapp and
// internal/awsflow.
package main

import "github.com/stepgraph/stepgraph/internal/lambdaapp"

func main() { lambdaapp.StartDeployWorker() }

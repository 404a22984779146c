package stack

import "github.com/stepgraph/stepgraph/internal/awsflow"

// Definitions returns the ASL of the run and the deploy (provisioning) state
// machines, from the main module's internal/awsflow, with their
// ${RunWorkerArn} / ${DeployWorkerArn} placeholders.
func Definitions() (run, deploy string) {
	return awsflow.RunASL, awsflow.ProvisionASL
}

// placeholders maps each placeholder of the definitions to the function
// whose ARN replaces it.
var placeholders = map[string]string{
	awsflow.RunWorkerArn:    FnRunWorker,
	awsflow.DeployWorkerArn: FnDeployWorker,
}

// Package functions holds the Lambda functions of the AWS deployment, one
// main per directory: the API functions (each serves the shared HTTP API
// behind API Gateway; routes.json says which routes go to which function)
// and the two workers the state machines invoke, run-worker and
// deploy-worker. Each main only wires dependencies from the environment
// through internal/lambdaapp and starts the handler.
//
// `make lambdas` builds them as provided.al2023 bootstraps. The tests here
// run every sample event of events/ through its function, and the whole
// flow end to end on the emulator: the workers as real Lambdas driven by
// the real Step Functions state machines, including a hosted_repo
// LangGraph app built by its real buildspec on a local CodeBuild
// (internal/awstest/codebuildlocal) and run through the stage's routes.
package functions

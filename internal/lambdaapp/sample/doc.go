// Package sample runs the Lambda functions of functions/ on an AWS
// emulator (MiniStack), for `make invoke`, the sample-event test and the
// end-to-end test:
//
//   - Build compiles function mains as provided.al2023 bootstraps for the
//     host's architecture (what the emulator runs as local processes);
//   - Deploy creates a stack on the emulator under a name prefix: the
//     DynamoDB tables, the run-worker and deploy-worker Lambdas from those
//     bootstraps, and the two Standard state machines of internal/awsflow;
//   - Prepare stores what the sample events of events/ refer to (an
//     organization and its API key, a thread, pending runs, deployments
//     whose runtime is examples/python/runtime.py deployed as a Lambda by
//     ExampleRuntime) and Expand fills the events' {{PLACEHOLDERS}} with it;
//   - Invoke runs one function's handler in this process on one event, as
//     the Lambda runtime would, and returns its JSON answer.
//
// StartMiniStack starts the emulator installed by scripts/install-ministack.sh
// on a free loopback port, for tools; tests use internal/awstest.
package sample

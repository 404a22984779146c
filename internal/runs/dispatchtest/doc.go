// Package dispatchtest is the contract every runs.Dispatcher must honour:
// given a runs.Service that uses it, a created run is executed to its end
// with its output, a run queued behind another on its thread runs in its
// turn, dispatching a run again executes it no more than once, and Lost
// does not give up on a run that is still on its way, nor lose the result
// of one that finished.
//
// The suite drives the Service (CreateRun, CancelRun, AbandonRun, the
// threads' history) and the dispatcher in effect (Service.Dispatcher, or
// Service.InProcess when that is nil), on the built-in echo and counter
// graphs, and waits, polling with generous deadlines, for runs to settle:
// it asserts outcomes, never durations.
//
// It is run by
//
//   - internal/runs, for the in-process workers of Service.StartWorkers
//     (a nil Dispatcher; dispatch_contract_test.go);
//   - internal/dispatch/sfn, whose Dispatcher starts an execution of the run
//     state machine (internal/awsflow) per run on the MiniStack emulator,
//     invoking a run worker that hands each step to
//     lambdaapp.HandleRunTask in the test process (contract_test.go).
package dispatchtest

// Package runtimetest is the contract every graphdoc.Runtime transport must
// honour (docs/runtime-protocol.md): what a function runtime receives, how
// its answers are decoded, which failures are retried and how each one is
// reported as a *graphdoc.CallError.
//
// The suite scripts the remote function (a Function: answer this, crash,
// turn the call away, hang) and asks the transport's factory for a Runtime
// that reaches it, so the same cases run over every transport:
//
//   - graphdoc.HTTPRuntime, over an httptest server on 127.0.0.1
//     (internal/graphdoc/runtime_contract_test.go);
//   - lambdaruntime.Runtime over a fake Invoker that plays the script as
//     the Lambda API would answer it, and over real Lambda Invoke calls on
//     the MiniStack emulator, to a function that hands each event to the
//     script in the test process (internal/lambdaruntime/contract_test.go).
//     The emulator cannot be made to throttle a call, so that run omits the
//     cases that need an Unavailable answer (see Run's cannot).
//
// A transport's own details (HTTP status lines, Lambda's error names, the
// SDK's retryer) stay in its package's tests.
package runtimetest

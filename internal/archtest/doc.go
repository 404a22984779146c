// Package archtest holds the import rules of ARCHITECTURE.md as a test on
// the real dependency graph of the module (go list, non-test builds, so an
// indirect dependency counts):
//
//   - the use cases, the ports, the engine, the graph format and the HTTP
//     layer depend on no adapter library — no AWS SDK (nor smithy), no
//     SQLite driver, no go-git — not even through another package;
//   - only a composition root (cmd/, functions/, internal/lambdaapp,
//     bench/, test/, examples/) imports an adapter;
//   - the engine (internal/graph) imports nothing of the project;
//   - every package of the module is placed on the map: a new package must
//     be added to a part here (and to ARCHITECTURE.md) before it builds
//     green.
//
// The rules are a table (rules.go); TestRulesCatchViolations plants a
// violation of each in a made-up graph and checks that it is reported.
package archtest

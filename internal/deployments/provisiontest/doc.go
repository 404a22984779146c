// Package provisiontest is the contract every deployments.Provisioner must
// honour: given a deployments.Service wired with it, the lifecycle work the
// Service starts is carried out in the background — a new revision reaches
// DEPLOYED and its deployment READY, a failing one settles *_FAILED, a
// deletion finishes, a newer revision supersedes an older one, a rollback
// is carried again, work handed over by Resume is done — and starting the
// same work more than once is harmless.
//
// The suite drives the Service only (Create, CreateRevision, Redeploy,
// Delete, Resume, and the Provisioner's StartProvision and StartDelete
// again) and waits, polling with generous deadlines, for the records to
// settle: it asserts outcomes, never durations. Its deployments are
// external_docker ones with an image_uri and no runtime to describe, or a
// custom_url nothing answers at, so that no test reaches the network.
//
// It is run by
//
//   - internal/dispatch/local, whose Provisioner runs the work on
//     goroutines of the test process (local_test.go);
//   - internal/dispatch/sfn, whose Provisioner starts executions of the
//     provisioning state machine (internal/awsflow) on the MiniStack
//     emulator, invoking a deploy worker that hands the task to
//     lambdaapp.HandleDeployTask in the test process (contract_test.go).
package provisiontest

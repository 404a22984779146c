// Package deployments owns agent deployments: their configuration rules
// (per source, resource_spec, secrets), revisions, and the lifecycle that
// carries a revision from CREATING to DEPLOYED or a *_FAILED status.
//
// Handlers hand it decoded requests; it decides and answers with the wire
// records (Deployment, Revision). Storage is the store.Deployments port,
// secret values go to the secrets.Store port (records keep references only,
// and answers show every value as SecretMask), and where lifecycle work runs
// is the Provisioner port's business: localprov runs it in-process, an AWS
// provisioner drives the same Service.Provision from a state machine.
//
// A deployment's "target" is the revision it is moving to: the newest one,
// or the one a redeploy picked. A revision still in progress that is no longer
// the target ends SKIPPED.
package deployments

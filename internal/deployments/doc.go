// Package deployments owns agent deployments: their configuration rules
// (per source, resource_spec, secrets), revisions, and the lifecycle that
// carries a revision from CREATING to DEPLOYED or a *_FAILED status.
//
// Handlers hand it decoded requests; it decides and answers with the wire
// records (Deployment, Revision). Storage is the store.Deployments port,
// secret values go to the secrets.Store port (records keep references only,
// and answers show every value as SecretMask), and where lifecycle work runs
// is the Provisioner port's business: internal/dispatch/local runs it
// in-process, internal/dispatch/sfn drives the same Service.Provision from
// a state machine; internal/deployments/provisiontest is the contract both
// run. Hosted repositories are read through the sources port
// (internal/sources; the go-git adapter is internal/sources/git).
//
// A deployment's "target" is the revision it is moving to: the newest one,
// or the one a redeploy picked. A revision still in progress that is no longer
// the target ends SKIPPED.
//
// A revision keeps its graphs (graphs.go): the graph config and documents
// read from the repository while building, or described by the runtime
// while deploying, bounded by MaxGraphBytes; deploying checks them
// (graphdoc's rules, graph ids unique in the organization) and asks the
// GraphPublisher port (internal/deployedgraphs) to check that they compile
// as served and, once the revision is active, to publish them.
// ServedGraphs and RevisionGraphs are how the graphs are read back. The
// runtime that describes an external_docker revision is its custom_url, or
// else, where the server has a RuntimeProvisioner (runtimes.go; on AWS a
// Lambda function made from image_uri), the runtime made for the revision.
//
// A hosted LangGraph app (apps.go) is run by an AppHost where the server
// runs apps itself (the local server), or else built by an AppBuilder
// (builds.go; on AWS, CodeBuild) while the revision waits in BUILDING —
// Provision answers a *PendingError meanwhile — and its zip made into the
// deployment's runtime by the RuntimeProvisioner. An external_docker
// runtime that describes itself as a LangGraph app (external.go) makes an
// app revision too, served at the runtime's URL.
package deployments

// Package deployedgraphs serves the graphs of an organization's deployments:
// it is where a deployed revision's graph documents become the engine's
// graphs that runs execute.
//
// It owns
//
//   - resolution: a graph id names, in an organization, the graph of the
//     active revision of the READY deployment that serves it
//     (deployments.Service.ServedGraphs); a run created on it keeps that
//     revision (runs.GraphRevision) whatever is deployed later;
//   - compilation: a revision's stored graph config (deployments
//     .RevisionGraphs) compiled with graphdoc, with the deployment's secret
//     values (read from the secrets port; graphdoc sends them only as the
//     API keys of chat_model nodes), its runtime (function nodes and
//     function tools; without one, a document that has any does not
//     compile) and the platform's guarded HTTP client for every outbound
//     call. Compiled revisions are cached per revision id and runtime URL:
//     a revision never changes, a PATCHed custom_url makes a new entry;
//   - the choice of transport to a deployment's runtime (Host.RuntimeFor),
//     for function calls and the describe call made while deploying: Lambda
//     Invoke when the runtime URL is a Lambda function ARN (a custom_url
//     given as one, or the function the AWS deploy worker made from
//     image_uri), HTTP otherwise. A server without a Lambda client (the
//     local one) fails a revision whose runtime is a Lambda function;
//   - the deploy-time rules that need the platform: a graph id may not be
//     a built-in graph's, and the documents must compile as they will be
//     served (a secret the deployment does not have, a function without a
//     runtime, a runtime this server cannot call, a plain-http URL off
//     loopback...), and a LangGraph app's function must load the app and
//     serve its graphs (AppChecker, pyapp.LambdaApps), and an
//     external_docker runtime that described itself as a LangGraph app must
//     serve the graphs it named (ExternalApps, pyapp.RuntimeApps: the app
//     answers at the revision's runtime URL, over HTTP or Lambda Invoke);
//   - publication: when a revision becomes active, each of its graphs gets
//     its default assistant (runs.DeployedAssistantID).
//
// Host implements runs.DeployedGraphs (what runs needs to execute deployed
// graphs) and deployments.GraphPublisher (what the lifecycle needs to check
// and publish a revision), so neither use-case package imports the other.
// It stores nothing: deployments keeps the revisions, runs the assistants.
package deployedgraphs

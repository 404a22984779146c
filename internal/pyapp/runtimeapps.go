package pyapp

import (
	"context"
	"net/http"
	"strings"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graphdoc"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// RuntimeApps serves the graphs of LangGraph apps that answer at their
// revision's runtime URL, the deployment's own runtime: an external_docker
// deployment whose runtime (custom_url, or the function made from its
// image_uri) described itself as a LangGraph app
// (deployments.RevisionGraphs.ExternalApp). Nothing is staged or started
// here. The transport follows the URL, as for graph-document runtimes: a
// Lambda function ARN is invoked through Lambda (the LambdaApps; nil on a
// server without a Lambda client, which then refuses the revision), any
// other URL is stepgraph_runtime's HTTP server, reached with HTTP (the
// platform's guarded client: the custom_url rules on private and loopback
// addresses apply to its calls too).
//
// Secrets go with the calls only to a runtime the platform made from the
// revision's image_uri (RevisionGraphs.RuntimeSecrets), as for
// graph-document runtimes: a runtime of the deployment's own (custom_url)
// has its own configuration. The HTTP server takes no bearer token from
// the platform: nothing but the network decides who reaches a custom_url.
type RuntimeApps struct {
	HTTP   *http.Client
	Lambda *LambdaApps
	// Bridge gives the graphs of HTTP runtimes their links (the store,
	// provider tokens); nil: none (get_store() is None). The runtime must
	// reach them: the local server's loopback Bridge serves only a runtime
	// on the same machine.
	Bridge Granter
}

// Graph implements deployedgraphs.Apps.
func (a *RuntimeApps) Graph(ctx context.Context, rg deployments.RevisionGraphs, env map[string]string, graphID string) (runs.DeployedGraph, error) {
	if graphdoc.IsLambdaFunctionARN(rg.RuntimeURL) {
		if a.Lambda == nil {
			return runs.DeployedGraph{}, fail.BadRequest("revision %s is a LangGraph app whose runtime %s is a Lambda function, and this server has no Lambda client",
				rg.RevisionID, rg.RuntimeURL)
		}
		return a.Lambda.Graph(ctx, rg, runtimeSecrets(rg, env), graphID)
	}
	if rg.RuntimeURL == "" {
		return runs.DeployedGraph{}, fail.BadRequest("revision %s is a LangGraph app without a runtime: it cannot be served here", rg.RevisionID)
	}
	rt := a.client(rg.RuntimeURL)
	// Not cached: what answers at a URL may change without a new revision.
	shape, err := describeShape(ctx, rt, "runtime "+rg.RuntimeURL, graphID)
	return deployedAppGraph(rg, shape, err, &Graph{ID: graphID, Runtime: rt, Bridge: a.Bridge})
}

// CheckApp implements deployedgraphs.AppChecker: the runtime loads the app
// and serves the revision's graphs (its health call).
func (a *RuntimeApps) CheckApp(ctx context.Context, rg deployments.RevisionGraphs, env map[string]string) (string, error) {
	if graphdoc.IsLambdaFunctionARN(rg.RuntimeURL) {
		if a.Lambda == nil {
			return "the deployment's runtime " + rg.RuntimeURL + " is a Lambda function, and this server has no Lambda client: " +
				"only stepgraph's AWS deployment invokes Lambda function runtimes; give the http(s) URL where the runtime answers", nil
		}
		return a.Lambda.CheckApp(ctx, rg, runtimeSecrets(rg, env))
	}
	return checkServes(ctx, a.client(rg.RuntimeURL), "the app's runtime "+rg.RuntimeURL, rg.GraphIDs), nil
}

// Activate implements deployedgraphs.Apps: the runtime is the deployment's
// own, nothing to start or stop.
func (a *RuntimeApps) Activate(context.Context, deployments.RevisionGraphs) error { return nil }

func (a *RuntimeApps) client(url string) *Client {
	return &Client{BaseURL: strings.TrimSuffix(url, "/"), HTTP: a.HTTP}
}

// runtimeSecrets are the secrets a call to the revision's runtime carries:
// only a runtime the platform made holds none of its own.
func runtimeSecrets(rg deployments.RevisionGraphs, env map[string]string) map[string]string {
	if !rg.RuntimeSecrets {
		return nil
	}
	return env
}

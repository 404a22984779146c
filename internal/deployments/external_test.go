package deployments_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/deployments"
)

// answerPublisher answers every describe call with answer and records the
// revisions it checked.
type answerPublisher struct {
	answer  string
	checked []deployments.RevisionGraphs
}

func (p *answerPublisher) DescribeRuntime(context.Context, string, int64) ([]byte, error) {
	return []byte(p.answer), nil
}

func (p *answerPublisher) Check(_ context.Context, g deployments.RevisionGraphs) (string, error) {
	p.checked = append(p.checked, g)
	return "", nil
}

func (p *answerPublisher) Publish(context.Context, deployments.RevisionGraphs) error { return nil }

// An external_docker runtime that describes itself as a LangGraph app
// ({"langgraph_app": ...}, stepgraph_runtime) makes an app revision, served
// at the runtime like a hosted app's; a graph config keeps making a
// graph-document revision; any other answer fails the revision, naming
// what is wrong.
func TestExternalAppDescribe(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, answer string
		graphs       []string // the app's graph ids; nil: not an app
		reason       string   // DEPLOY_FAILED with a reason containing this
	}{
		{name: "app", answer: `{"langgraph_app": {"graphs": {"hitl": "./src/agent/hitl.py:graph", "agent": {"path": "agent.graph:graph", "description": "d"}}}}`,
			graphs: []string{"agent", "hitl"}},
		{name: "graph config", answer: `{"graphs": {"g": {"state": {"n": {}}, "nodes": {"fn": {"kind": "function"}}, "edges": [{"from": "__start__", "to": "fn"}]}}}`},
		{name: "load error", answer: `{"langgraph_app": {"error": {"error": "ModuleNotFoundError", "message": "No module named 'langchain_openai'", "traceback": "Traceback (most recent call last): ..."}}}`,
			reason: "the runtime cannot load the LangGraph app: ModuleNotFoundError: No module named 'langchain_openai'\nTraceback (most recent call last): ..."},
		{name: "javascript", answer: `{"langgraph_app": {"graphs": {"agent": "./src/agent.ts:graph"}}}`,
			reason: "describe: names JavaScript graphs: JavaScript LangGraph apps are not supported (only Python ones)"},
		{name: "no graphs", answer: `{"langgraph_app": {"graphs": {}}}`,
			reason: "describe: /langgraph_app/graphs: must name at least one graph"},
		{name: "not a spec", answer: `{"langgraph_app": {"graphs": {"agent": "graphs/agent.json"}}}`,
			reason: `describe: /langgraph_app/graphs: each graph must be "./path/to/file.py:variable" or "module:variable"`},
		{name: "app not an object", answer: `{"langgraph_app": ["agent"]}`,
			reason: "describe: /langgraph_app: must be an object"},
		{name: "both", answer: `{"graphs": {}, "langgraph_app": {"graphs": {"a": "m:g"}}}`,
			reason: "describe: the runtime's answer has both /graphs and /langgraph_app"},
		{name: "neither", answer: `{"status": "ok", "graph_ids": ["a"]}`,
			reason: "describe: the runtime's answer is neither a graph config ({\"graphs\": {...}}) nor a LangGraph app's ({\"langgraph_app\": {\"graphs\": {...}}}); its keys: [graph_ids, status]"},
		{name: "not an object", answer: `["agent"]`,
			reason: "describe: the runtime's answer is not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t)
			pub := &answerPublisher{answer: tc.answer}
			svc.Graphs = pub
			d, err := svc.Create(ctx, "org", createInput(t, `{"name": "ext", "source": "external_docker",
				"source_config": {"custom_url": "`+functionARN+`"}, "source_revision_config": {"image_uri": "example/agent:1"}}`))
			if err != nil {
				t.Fatal(err)
			}
			if err := svc.Provision(ctx, "org", d.ID, *d.LatestRevisionID); err != nil {
				t.Fatal(err)
			}
			rev, err := svc.Revision(ctx, "org", d.ID, *d.LatestRevisionID)
			if err != nil {
				t.Fatal(err)
			}
			if tc.reason != "" {
				if rev.Status != deployments.RevDeployFailed || rev.StatusMessage == nil ||
					!strings.Contains(*rev.StatusMessage, "source_config.custom_url "+functionARN+": "+tc.reason) {
					t.Fatalf("%s: %v, want DEPLOY_FAILED naming the custom_url and %q", rev.Status, deref(rev.StatusMessage), tc.reason)
				}
				return
			}
			if rev.Status != deployments.RevDeployed {
				t.Fatalf("%s: %s", rev.Status, deref(rev.StatusMessage))
			}
			rg, err := svc.RevisionGraphs(ctx, "org", d.ID, rev.ID)
			if err != nil {
				t.Fatal(err)
			}
			if tc.graphs == nil {
				if rg.App || rg.ExternalApp || !slices.Equal(rg.GraphIDs, []string{"g"}) {
					t.Fatalf("a graph config: app %v, external app %v, graphs %v", rg.App, rg.ExternalApp, rg.GraphIDs)
				}
				return
			}
			if !rg.App || !rg.ExternalApp || !slices.Equal(rg.GraphIDs, tc.graphs) || rg.RuntimeURL != functionARN || rg.RuntimeSecrets {
				t.Fatalf("an app: app %v, external %v, graphs %v, runtime %q, secrets per call %v", rg.App, rg.ExternalApp, rg.GraphIDs, rg.RuntimeURL, rg.RuntimeSecrets)
			}
			if _, err := rg.Config(); err == nil {
				t.Error("an app's revision has a graph config")
			}
			// The publisher checked it as an app, with its graph ids (its
			// runtime is asked whether it serves them).
			last := pub.checked[len(pub.checked)-1]
			if !last.App || !last.ExternalApp || !slices.Equal(last.GraphIDs, tc.graphs) {
				t.Errorf("checked %+v", last)
			}
			served, err := svc.ServedGraphs(ctx, "org")
			if err != nil || len(served) != len(tc.graphs) || served["hitl"].RevisionID != rev.ID {
				t.Errorf("served %v, %v", served, err)
			}
		})
	}
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

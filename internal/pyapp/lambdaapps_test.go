package pyapp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/pyapp"
)

// answeringInvoker answers every invocation with answer.
type answeringInvoker struct{ answer string }

func (a answeringInvoker) InvokeFunction(context.Context, string, []byte) ([]byte, error) {
	return []byte(a.answer), nil
}

// While a revision deploys, its function must load the app and serve the
// revision's graphs: an import error fails it with the traceback, a graph
// the function does not serve names it; at a run, an app that cannot be
// loaded is a 400 naming the error.
func TestLambdaAppsCheck(t *testing.T) {
	ctx := context.Background()
	rg := deployments.RevisionGraphs{RevisionID: "r1", RuntimeURL: "arn:aws:lambda:us-east-1:123456789012:function:rt-d1:3",
		GraphIDs: []string{"agent", "hitl"}, App: true}
	check := func(answer string) string {
		t.Helper()
		reason, err := (&pyapp.LambdaApps{Invoker: answeringInvoker{answer}}).CheckApp(ctx, rg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return reason
	}
	if r := check(`{"status": 200, "body": {"status": "ok", "graphs": ["agent", "hitl"]}}`); r != "" {
		t.Errorf("a healthy function: %q", r)
	}
	loadError := `{"status": 503, "body": {"error": {"error": "ModuleNotFoundError", "message": "No module named 'langchain_foo'",
		"traceback": "Traceback (most recent call last):\n  File \"graph.py\", line 1"}}}`
	if r := check(loadError); !strings.Contains(r, "cannot load the app: ModuleNotFoundError: No module named 'langchain_foo'\nTraceback (most recent call last):") {
		t.Errorf("an import error: %q", r)
	}
	if r := check(`{"status": 200, "body": {"status": "ok", "graphs": ["agent"]}}`); !strings.Contains(r, "serves [agent], not [hitl]") {
		t.Errorf("a missing graph: %q", r)
	}
	_, err := (&pyapp.LambdaApps{Invoker: answeringInvoker{loadError}}).Graph(ctx, rg, nil, "agent")
	if fail.KindOf(err) != fail.KindBadRequest || !strings.Contains(err.Error(), "No module named 'langchain_foo'") {
		t.Errorf("a run's graph of an app that cannot load: %v", err)
	}
}

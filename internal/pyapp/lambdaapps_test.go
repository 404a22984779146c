package pyapp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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

// payloadInvoker answers a healthy app and keeps the last payload.
type payloadInvoker struct{ last []byte }

func (p *payloadInvoker) InvokeFunction(_ context.Context, _ string, payload []byte) ([]byte, error) {
	p.last = payload
	return []byte(`{"status": 200, "body": {"status": "ok", "graphs": ["agent"]}}`), nil
}

// RuntimeApps checks an external_docker app where it answers: an HTTP
// runtime's health call, a Lambda function through LambdaApps — with the
// secrets only when the platform made the function — and a function on a
// server without Lambda is a reason, not a call.
func TestRuntimeAppsCheck(t *testing.T) {
	ctx := context.Background()
	health := `{"status": "ok", "graphs": ["agent"]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(health))
	}))
	defer srv.Close()
	const arn = "arn:aws:lambda:us-east-1:123456789012:function:my-app"
	inv := &payloadInvoker{}
	apps := &pyapp.RuntimeApps{HTTP: srv.Client(), Lambda: &pyapp.LambdaApps{Invoker: inv}}
	env := map[string]string{"TOKEN": "t-1"}
	for _, tc := range []struct {
		name    string
		rg      deployments.RevisionGraphs
		apps    *pyapp.RuntimeApps
		reason  string // contained in the reason; "" for none
		secrets bool   // the invocation carried them
	}{
		{name: "http", rg: deployments.RevisionGraphs{RuntimeURL: srv.URL + "/", GraphIDs: []string{"agent"}}, apps: apps},
		{name: "http, a graph it does not serve", rg: deployments.RevisionGraphs{RuntimeURL: srv.URL, GraphIDs: []string{"agent", "hitl"}}, apps: apps,
			reason: "the app's runtime " + srv.URL + " serves [agent], not [hitl]"},
		{name: "custom_url function", rg: deployments.RevisionGraphs{RuntimeURL: arn, GraphIDs: []string{"agent"}}, apps: apps},
		{name: "function made from image_uri", rg: deployments.RevisionGraphs{RuntimeURL: arn, GraphIDs: []string{"agent"}, RuntimeSecrets: true}, apps: apps, secrets: true},
		{name: "no Lambda here", rg: deployments.RevisionGraphs{RuntimeURL: arn, GraphIDs: []string{"agent"}}, apps: &pyapp.RuntimeApps{HTTP: srv.Client()},
			reason: "is a Lambda function, and this server has no Lambda client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv.last = nil
			reason, err := tc.apps.CheckApp(ctx, tc.rg, env)
			if err != nil || !strings.Contains(reason, tc.reason) || (tc.reason == "") != (reason == "") {
				t.Fatalf("reason %q (%v), want %q", reason, err, tc.reason)
			}
			if got := strings.Contains(string(inv.last), `"secrets"`); got != tc.secrets {
				t.Errorf("secrets sent: %v, want %v (%s)", got, tc.secrets, inv.last)
			}
		})
	}
}

// A graph's shape is described once per revision and function: a
// custom_url may name a function without a version, whose code can change
// under the same ARN, so a new revision describes it again.
func TestLambdaAppsDescribeOncePerRevision(t *testing.T) {
	ctx := context.Background()
	inv := &processInvoker{python: python(t), runtimeDir: filepath.Join(repoRoot(t), "runtimes", "python"), config: basicApp(t)}
	apps := &pyapp.LambdaApps{Invoker: inv}
	fn := "arn:aws:lambda:us-east-1:000000000000:function:my-app" // no version
	for i, rev := range []string{"r1", "r1", "r2", "r1"} {
		rg := deployments.RevisionGraphs{RevisionID: rev, RuntimeURL: fn, GraphIDs: []string{"agent"}, ExternalApp: true}
		if _, err := apps.Graph(ctx, rg, nil, "agent"); err != nil {
			t.Fatalf("graph %d (%s): %v", i, rev, err)
		}
	}
	if n := inv.calls.Load(); n != 2 {
		t.Fatalf("%d describe calls for revisions r1, r1, r2, r1 of one function; want 2 (one per revision)", n)
	}
}

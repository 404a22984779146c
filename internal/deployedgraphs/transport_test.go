package deployedgraphs

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/graphdoc"
	"github.com/stepgraph/stepgraph/internal/runs"
)

const runtimeARN = "arn:aws:lambda:eu-west-1:123456789012:function:stepgraph-prod-rt-0a1b2c"

// fakeFunctions stands for Lambda: Runtimes is what the composition root
// gives Host.Lambda, and each runtime it makes answers the describe call
// with lambdaDoc and every invoke with an update, recording the calls.
type fakeFunctions struct {
	mu      sync.Mutex
	actions []string // "describe" or "invoke"
	names   []string // the function each call went to
	bounds  []int64  // maxBytes asked for
}

func (f *fakeFunctions) Runtimes(functionARN string, maxBytes int64) graphdoc.Runtime {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bounds = append(f.bounds, maxBytes)
	return &fakeFunction{f: f, name: functionARN}
}

type fakeFunction struct {
	f    *fakeFunctions
	name string
}

func (r *fakeFunction) record(action string) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	r.f.actions = append(r.f.actions, action)
	r.f.names = append(r.f.names, r.name)
}

func (r *fakeFunction) Call(context.Context, graphdoc.FunctionRequest) (graphdoc.FunctionResponse, error) {
	r.record("invoke")
	return graphdoc.FunctionResponse{Update: graph.Writes{{Key: "n", Value: 2}}}, nil
}

func (r *fakeFunction) Describe(context.Context) ([]byte, error) {
	r.record("describe")
	return []byte(lambdaDoc), nil
}

const lambdaDoc = `{"graphs": {"g": {"state": {"n": {}}, "nodes": {"fn": {"kind": "function"}},
	"edges": [{"from": "__start__", "to": "fn"}]}}}`

// RuntimeFor: a function ARN is called with Lambda Invoke, an http(s) URL
// over HTTP; a Host without a Lambda client refuses an ARN.
func TestRuntimeFor(t *testing.T) {
	lc := &fakeFunctions{}
	h := &Host{HTTPClient: &http.Client{}, Lambda: lc.Runtimes}
	rt, err := h.RuntimeFor(runtimeARN, 7)
	if lr, ok := rt.(*fakeFunction); err != nil || !ok || lr.name != runtimeARN || lc.bounds[0] != 7 {
		t.Errorf("RuntimeFor(ARN): %#v, %v, want the Lambda runtime of the function, bounded", rt, err)
	}
	rt, err = h.RuntimeFor("https://runtime.example.com", 1000)
	if hr, ok := rt.(*graphdoc.HTTPRuntime); err != nil || !ok || hr.URL != "https://runtime.example.com" || hr.MaxResponseBytes != 1000 {
		t.Errorf("RuntimeFor(https): %#v, %v, want an HTTPRuntime", rt, err)
	}
	// Something shaped like an ARN but not a function's stays an HTTP URL
	// (custom_url's rule refuses it before it gets here).
	if rt, _ := h.RuntimeFor("arn:aws:lambda:eu-west-1:123456789012:layer:x", 0); rt == nil {
		t.Errorf("RuntimeFor of another ARN: nil")
	} else if _, ok := rt.(*graphdoc.HTTPRuntime); !ok {
		t.Errorf("RuntimeFor of another ARN: %T", rt)
	}

	_, err = (&Host{HTTPClient: &http.Client{}}).RuntimeFor(runtimeARN, 0)
	if ue, ok := err.(*UnreachableRuntimeError); !ok || !strings.Contains(ue.Error(), runtimeARN+" is a Lambda function, and this server has no Lambda client") {
		t.Errorf("RuntimeFor(ARN) without a Lambda client: %v", err)
	}

	// The hook replaces the rule.
	hook := &graphdoc.HTTPRuntime{URL: "x"}
	h.Runtime = func(string) graphdoc.Runtime { return hook }
	if rt, err := h.RuntimeFor(runtimeARN, 0); rt != hook || err != nil {
		t.Errorf("RuntimeFor with the hook: %v, %v", rt, err)
	}
}

// Describe while deploying, the check and the served graph's function node
// all reach a Lambda runtime through the Host's Lambda client.
func TestLambdaRuntimeServed(t *testing.T) {
	ctx := context.Background()
	lc := &fakeFunctions{}
	h, src, _ := newHost(t)
	h.Lambda = lc.Runtimes
	raw, err := h.DescribeRuntime(ctx, runtimeARN, deployments.MaxGraphBytes)
	if err != nil || string(raw) != lambdaDoc {
		t.Fatalf("DescribeRuntime: %s, %v", raw, err)
	}
	rg := deployments.DescribedRevisionGraphs("org", "d1", "r1", runtimeARN, nil, raw)
	if reason, err := h.Check(ctx, rg); reason != "" || err != nil {
		t.Fatalf("Check: %q, %v", reason, err)
	}
	src.revs["r1"] = rg
	dg, err := h.Current(ctx, "org", "g")
	if err != nil {
		t.Fatal(err)
	}
	cp, out, err := graph.Run(ctx, dg.Graph, nil, map[string]any{"n": 1}, graph.Options{}, nil)
	if err != nil || out.Status != graph.Done || fmt.Sprint(cp.Values["n"]) != "2" {
		t.Fatalf("run: %v, %s %+v, values %v", err, out.Status, out.Error, cp.Values)
	}
	if strings.Join(lc.actions, " ") != "describe invoke" || lc.names[0] != runtimeARN || lc.names[1] != runtimeARN {
		t.Errorf("Lambda calls %v to %v, want describe then invoke of %s", lc.actions, lc.names, runtimeARN)
	}

	// An answer larger than the bound is refused, whatever the transport.
	h.Runtime = func(string) graphdoc.Runtime { return &fakeFunction{f: lc, name: runtimeARN} }
	if _, err := h.DescribeRuntime(ctx, runtimeARN, 10); err == nil || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Errorf("DescribeRuntime of a large answer: %v", err)
	}
}

// Without a Lambda client, a revision whose runtime is a Lambda function
// fails the check with the reason, and is not served.
func TestLambdaRuntimeWithoutClient(t *testing.T) {
	ctx := context.Background()
	h, src, _ := newHost(t)
	rg := deployments.DescribedRevisionGraphs("org", "d1", "r1", runtimeARN, nil, []byte(lambdaDoc))
	reason, err := h.Check(ctx, rg)
	if err != nil || !strings.Contains(reason, "is a Lambda function, and this server has no Lambda client") {
		t.Fatalf("Check: %q, %v", reason, err)
	}
	if _, err := h.DescribeRuntime(ctx, runtimeARN, 0); err == nil || !strings.Contains(err.Error(), "no Lambda client") {
		t.Errorf("DescribeRuntime: %v", err)
	}
	src.revs["r1"] = rg
	if _, err := h.At(ctx, "org", "g", runs.GraphRevision{DeploymentID: "d1", RevisionID: "r1"}); fail.KindOf(err) != fail.KindBadRequest || !strings.Contains(err.Error(), "no Lambda client") {
		t.Errorf("At: %v (kind %v), want a client error", err, fail.KindOf(err))
	}
}

// A Host's HTTP transport still answers describe (an http(s) custom_url).
func TestDescribeRuntimeHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(lambdaDoc))
	}))
	defer srv.Close()
	h := &Host{HTTPClient: &http.Client{}}
	raw, err := h.DescribeRuntime(context.Background(), srv.URL, 1<<20)
	if err != nil || string(raw) != lambdaDoc {
		t.Fatalf("DescribeRuntime over HTTP: %s, %v", raw, err)
	}
}

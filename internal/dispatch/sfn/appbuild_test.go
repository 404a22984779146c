package sfn_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/stepgraph/stepgraph/internal/awsflow"
	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/dispatch/sfn"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/sources"
)

// appRepo is a hosted repository holding a LangGraph app.
type appRepo struct{}

func (appRepo) CheckURL(string) error { return nil }

func (appRepo) CheckFiles(_ context.Context, _, _, _ string, read func(fs.FS) error) (sources.Checkout, error) {
	err := read(fstest.MapFS{"langgraph.json": {Data: []byte(`{"graphs": {"hitl": "./hitl.py:graph"}}`)}})
	return sources.Checkout{CommitSHA: strings.Repeat("c", 40)}, err
}

// slowBuilder's builds run for their first two checks.
type slowBuilder struct{ checks atomic.Int32 }

func (b *slowBuilder) StartBuild(context.Context, deployments.RevisionApp, fs.FS) (string, string, error) {
	return "p:1", "", nil
}

func (b *slowBuilder) Build(context.Context, deployments.RevisionApp, string) (deployments.AppBuild, error) {
	if b.checks.Add(1) <= 2 {
		return deployments.AppBuild{}, nil
	}
	return deployments.AppBuild{Done: true, Code: deployments.AppCode{Bucket: "b", Key: "k",
		Manifest: []byte(`{"handler": "stepgraph_runtime.lambda_handler.handler", "runtime": "python3.11", "architecture": "x86_64", "graphs": {"hitl": "./hitl.py:graph"}}`)}}, nil
}

func (b *slowBuilder) RemoveBuilds(context.Context, string) error { return nil }

// madeRuntimes hands out one function for every app.
type madeRuntimes struct{}

func (madeRuntimes) EnsureRuntime(context.Context, string, string) (string, error) {
	return "", nil
}

func (madeRuntimes) EnsureAppRuntime(context.Context, string, deployments.AppCode) (string, error) {
	return "arn:aws:lambda:us-east-1:000000000000:function:rt-x:1", nil
}

func (madeRuntimes) Reserved(string) bool                        { return false }
func (madeRuntimes) DeleteRuntime(context.Context, string) error { return nil }

// A hosted_repo LangGraph app through the provisioning state machine and
// the deploy worker's handler: while its build runs the worker answers
// wait_seconds, the machine waits and provisions the revision again, and
// once built it is deployed — one execution, no Lambda waiting.
func TestProvisioningWaitsForTheAppBuild(t *testing.T) {
	ep := awstest.Start(t)
	client := awssfn.NewFromConfig(ep.Config)
	log := slog.New(slog.DiscardHandler)
	l := openStores(t)
	b := &slowBuilder{}
	deployWorker := &lambdaapp.App{Log: log, Deployments: &deployments.Service{Store: l.db, Secrets: l.sec,
		Sources: appRepo{}, Builder: b, Runtimes: madeRuntimes{}, BuildPoll: time.Second}}
	var mu sync.Mutex
	var answers []lambdaapp.DeployTaskResult
	fn := awstest.LambdaProxy(t, ep, "deploy-worker", workerTimeout, worker(func(ctx context.Context, task lambdaapp.DeployTask) (lambdaapp.DeployTaskResult, error) {
		out, err := deployWorker.HandleDeployTask(ctx, task)
		mu.Lock()
		defer mu.Unlock()
		answers = append(answers, out)
		return out, err
	}))
	def, err := awsflow.ProvisionDefinition(fn)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sfn.NewProvisioner(client, stateMachine(t, client, "provision", def), log)
	if err != nil {
		t.Fatal(err)
	}
	svc := &deployments.Service{Store: l.db, Secrets: l.sec, Sources: appRepo{}, Provisioner: p}
	var in deployments.CreateInput
	if err := json.Unmarshal([]byte(`{"name": "app", "source": "hosted_repo", "source_config": {"repo_url": "https://git.example.com/app.git"},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`), &in); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	d, err := svc.Create(ctx, "org", in)
	if err != nil {
		t.Fatal(err)
	}
	var rev deployments.Revision
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if rev, err = svc.Revision(ctx, "org", d.ID, *d.LatestRevisionID); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		answered := len(answers)
		mu.Unlock()
		// Settled, and the worker's answer for it given.
		if rev.Status == deployments.RevDeployed && answered >= 3 || strings.HasSuffix(rev.Status, "FAILED") || time.Now().After(deadline) {
			break
		}
	}
	if rev.Status != deployments.RevDeployed {
		t.Fatalf("revision %s %v", rev.Status, rev.StatusMessage)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answers) != 3 || answers[0].WaitSeconds != 1 || answers[0].Status != deployments.RevBuilding ||
		answers[0].OrgID != "org" || answers[2].WaitSeconds != 0 || answers[2].Status != deployments.RevDeployed {
		t.Errorf("the deploy worker answered %+v, want two waits (BUILDING) then DEPLOYED", answers)
	}
}

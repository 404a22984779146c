package lambdaruntime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/codebuild"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/sources"
	pyruntime "github.com/stepgraph/stepgraph/runtimes/python"
)

// localBuilder stands for CodeBuild, used only here (the emulator's
// CodeBuild runs no build without Docker): it does what the buildspec
// does — `stepgraph build` of the app's directory in the checkout, with
// python3.11, here from the offline test wheelhouse — and uploads the zip
// and its manifest under the revision's prefix, as the buildspec does.
type localBuilder struct {
	t      *testing.T
	s3     *s3.Client
	bucket string
	mu     sync.Mutex
	done   map[string]deployments.AppBuild
}

func (b *localBuilder) StartBuild(ctx context.Context, app deployments.RevisionApp, fsys fs.FS) (string, string, error) {
	dir := b.t.TempDir()
	if err := os.CopyFS(dir, fsys); err != nil {
		return "", "", err
	}
	var zip bytes.Buffer
	m, err := pyapp.Build(ctx, pyapp.BuildOptions{Dir: filepath.Join(dir, filepath.Dir(app.ConfigPath)),
		Python: repoFile(b.t, ".venv", "bin", "python"), RuntimeFiles: pyruntime.Files(), RuntimeRequirements: pyruntime.Requirements,
		PythonVersion: "3.11", FindLinks: repoFile(b.t, ".deps", "lambda-wheels", "x86_64"), NoIndex: true}, &zip)
	id := "local:" + app.RevisionID
	result := deployments.AppBuild{Done: true}
	if err != nil {
		result.Reason = err.Error()
	} else {
		manifest, _ := json.Marshal(m)
		prefix := codebuild.Prefix(app.DeploymentID, app.RevisionID)
		for name, body := range map[string][]byte{"app.zip": zip.Bytes(), "stepgraph_build.json": manifest} {
			if _, err := b.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(prefix + name), Body: bytes.NewReader(body)}); err != nil {
				return "", "", err
			}
		}
		result.Code = deployments.AppCode{Bucket: b.bucket, Key: prefix + "app.zip", Manifest: manifest}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done[id] = result
	return id, "", nil
}

// RemoveBuilds removes what it uploaded, as the CodeBuild builder does.
func (b *localBuilder) RemoveBuilds(ctx context.Context, deploymentID string) error {
	return (&codebuild.Builder{S3: b.s3, Bucket: b.bucket}).RemoveBuilds(ctx, deploymentID)
}

// Build answers "running" once, as a build that has just started.
func (b *localBuilder) Build(_ context.Context, _ deployments.RevisionApp, id string) (deployments.AppBuild, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done[id+":asked"].Done {
		return b.done[id], nil
	}
	b.done[id+":asked"] = deployments.AppBuild{Done: true}
	return deployments.AppBuild{}, nil
}

// repoDir is a hosted repository: a directory of the machine.
type repoDir struct{ dir string }

func (r repoDir) CheckURL(string) error { return nil }

func (r repoDir) CheckFiles(_ context.Context, _, _, _ string, read func(fs.FS) error) (sources.Checkout, error) {
	if err := read(os.DirFS(r.dir)); err != nil {
		return sources.Checkout{}, err
	}
	return sources.Checkout{CommitSHA: strings.Repeat("b", 40)}, nil
}

// The deploy flow of a hosted_repo LangGraph app on AWS, on the emulator:
// the revision waits in BUILDING while its build runs (Provision answers a
// PendingError, as the provisioning machine's loop expects), the build's
// zip in S3 becomes the deployment's function (a version of it), and the
// revision serves the app's graphs through pyapp.LambdaApps: a run to
// its interrupt and its resume, each continued over several invocations.
// A build that fails fails the revision with its reason. What stands in
// for AWS here: the build (localBuilder: the buildspec's command, run on
// this machine) and the state machine's loop (Provision is called again
// by the test).
func TestHostedAppOnMiniStack(t *testing.T) {
	ep := awstest.Start(t)
	ctx := t.Context()
	lc := lambda.NewFromConfig(ep.Config)
	s3c := s3.NewFromConfig(ep.Config, func(o *s3.Options) { o.UsePathStyle = true })
	bucket := strings.ToLower(awstest.Prefix(t)) + "payloads"
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	p := newPlatform(t, lc)
	p.svc.Sources = repoDir{dir: repoFile(t, "runtimes", "python", "tests", "apps")}
	p.svc.Builder = &localBuilder{t: t, s3: s3c, bucket: bucket, done: map[string]deployments.AppBuild{}}
	p.svc.Runtimes = &lambdaruntime.Provisioner{Client: lc, NamePrefix: namePrefix(t), RoleARN: emulatorRole,
		Poll: 100 * time.Millisecond, ReadyWait: time.Minute}
	inv := &countingFunctions{next: lambdaruntime.Functions{Client: lc}}
	p.host.Apps = &pyapp.LambdaApps{Invoker: inv}

	d, err := p.svc.Create(ctx, "org-1", createRepoInput(t, "basic/langgraph.json"))
	if err != nil {
		t.Fatal(err)
	}
	rev := provisionUntilSettled(t, p, d)
	if rev.Status != deployments.RevDeployed {
		t.Fatalf("revision %s: %s", rev.Status, reason(rev))
	}
	dg := runHitl(t, p)
	if info, schemas, err := dg.Foreign.Info(ctx, false); err != nil || len(info.Nodes) == 0 || schemas.StateSchema == nil {
		t.Errorf("the graph's drawing and schemas: %+v %+v %v", info, schemas, err)
	}
	if inv.calls() < 3 {
		t.Errorf("%d invocations of the app's function", inv.calls())
	}

	// Deleting the deployment deletes its function and its builds' objects.
	if err := p.svc.Delete(ctx, "org-1", d.ID); err != nil {
		t.Fatal(err)
	}
	if err := p.svc.FinishDelete(ctx, "org-1", d.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(lambdaruntime.FunctionName(p.svc.Runtimes.(*lambdaruntime.Provisioner).NamePrefix, d.ID))}); err == nil {
		t.Error("the app's function outlived its deployment")
	}
	left, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("builds/" + d.ID + "/")})
	if err != nil || len(left.Contents) != 0 {
		t.Errorf("build objects after the deployment's deletion: %+v %v", left, err)
	}
}

// countingFunctions counts the invocations it passes on.
type countingFunctions struct {
	next pyapp.FunctionInvoker
	mu   sync.Mutex
	n    int
}

func (c *countingFunctions) InvokeFunction(ctx context.Context, function string, payload []byte) ([]byte, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.next.InvokeFunction(ctx, function, payload)
}

func (c *countingFunctions) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func createRepoInput(t *testing.T, configPath string) deployments.CreateInput {
	t.Helper()
	raw := fmt.Sprintf(`{"name": "app", "source": "hosted_repo", "source_config": {"repo_url": "https://git.example.com/apps.git"},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": %q}}`, configPath)
	var in deployments.CreateInput
	if err := json.Unmarshal([]byte(raw), &in); err != nil {
		t.Fatal(err)
	}
	return in
}

// provisionUntilSettled provisions the revision again while it waits for
// its build, as the provisioning machine does after wait_seconds.
func provisionUntilSettled(t *testing.T, p *platform, d deployments.Deployment) deployments.Revision {
	t.Helper()
	pending := 0
	for {
		err := p.svc.Provision(t.Context(), "org-1", d.ID, *d.LatestRevisionID)
		var wait *deployments.PendingError
		if err != nil && !errorsAs(err, &wait) {
			t.Fatal(err)
		}
		rev, rerr := p.svc.Revision(t.Context(), "org-1", d.ID, *d.LatestRevisionID)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if wait == nil {
			if pending == 0 {
				t.Errorf("the revision never waited for its build")
			}
			return rev
		}
		if rev.Status != deployments.RevBuilding {
			t.Fatalf("pending in %s", rev.Status)
		}
		if pending++; pending > 5 {
			t.Fatal("the build never ended")
		}
	}
}

// runHitl runs the deployed hitl graph to its interrupt and resumes it to
// its end; it answers the graph.
func runHitl(t *testing.T, p *platform) runs.DeployedGraph {
	t.Helper()
	dg, err := p.host.Current(t.Context(), "org-1", "hitl")
	if err != nil {
		t.Fatal(err)
	}
	cp, out := runForeign(t, dg, nil, runs.ForeignRun{Input: json.RawMessage(`{"topic": "zips"}`)})
	if out.Status != graph.Interrupted || len(out.Interrupts) != 1 {
		t.Fatalf("hitl: %s %+v", out.Status, out.Interrupts)
	}
	cp, out = runForeign(t, dg, cp, runs.ForeignRun{Command: json.RawMessage(`{"resume": "yes"}`)})
	if out.Status != graph.Done || cp.Values["approved"] != true {
		t.Fatalf("hitl resumed: %s %v", out.Status, cp.Values)
	}
	return dg
}

// runForeign runs a LangGraph app's graph once from cp (nil: a new
// thread), storing nothing, and returns its last checkpoint.
func runForeign(t *testing.T, dg runs.DeployedGraph, from *graph.Checkpoint, in runs.ForeignRun) (*graph.Checkpoint, graph.Outcome) {
	t.Helper()
	in.OrgID, in.ThreadID, in.RunID, in.AssistantID, in.GraphID = "org-1", "thread-1", "run-1", "a-1", "hitl"
	in.From = from
	out, cp, err := dg.Foreign.Run(t.Context(), in, func(context.Context, graph.Checkpoint) error { return nil }, func(runs.ForeignEvent) {})
	if err != nil {
		t.Fatal(err)
	}
	return cp, out
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

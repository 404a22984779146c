package codebuild_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	cb "github.com/aws/aws-sdk-go-v2/service/codebuild"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/awstest/codebuildlocal"
	"github.com/stepgraph/stepgraph/internal/codebuild"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/lambdaapp/sample"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
	"github.com/stepgraph/stepgraph/internal/pyapp"
)

// The real buildspec (awsflow.AppBuildspec) through the real Builder, on a
// CodeBuild that runs it (codebuildlocal: bash on this machine, python3.11
// being the project's .venv interpreter and aws the pinned AWS CLI v1 of
// .venv-awscli, both talking to the emulator's S3; pip offline from the
// test wheelhouse through PIP_NO_INDEX and PIP_FIND_LINKS in the build's
// environment, the buildspec untouched). A good app's build leaves
// app.zip and stepgraph_build.json under the revision's prefix, and the
// zip becomes a function on the emulator that answers health with the
// manifest's graphs. A broken app's (a requirement the wheelhouse does not
// have) fails in phase BUILD with CodeBuild's message and the log's tail,
// pip's words in it.
func TestBuildspecRunsOnLocalCodeBuild(t *testing.T) {
	ep := awstest.Start(t)
	ctx := t.Context()
	root, err := sample.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	s3c := s3.NewFromConfig(ep.Config, func(o *s3.Options) { o.UsePathStyle = true })
	prefix := strings.ToLower(awstest.Prefix(t))
	bucket, project := prefix+"payloads", prefix+"app-build"
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	// The CLI's asset, as the stack puts it in its asset bucket.
	if err := codebuildlocal.PutCLI(ctx, ep.Config, root, bucket, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	srv, err := codebuildlocal.Start(codebuildlocal.AppBuild(ep.Config, root, project, bucket, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	b := &codebuild.Builder{CodeBuild: cb.NewFromConfig(ep.Config, func(o *cb.Options) { o.BaseEndpoint = aws.String(srv.URL) }),
		S3: s3c, Logs: cloudwatchlogs.NewFromConfig(ep.Config), Project: project, Bucket: bucket, TempDir: t.TempDir()}

	good := deployments.RevisionApp{OrgID: "org", DeploymentID: "dep-good", RevisionID: "rev-1", ConfigPath: "basic/langgraph.json"}
	broken := deployments.RevisionApp{OrgID: "org", DeploymentID: "dep-broken", RevisionID: "rev-1", ConfigPath: "app/langgraph.json"}
	goodID, reason, err := b.StartBuild(ctx, good, os.DirFS(filepath.Join(root, "runtimes", "python", "tests", "apps")))
	if err != nil || reason != "" {
		t.Fatalf("StartBuild: %q %v", reason, err)
	}
	brokenID, reason, err := b.StartBuild(ctx, broken, fstest.MapFS{
		"app/langgraph.json": {Data: []byte(`{"dependencies": ["stepgraph-no-such-package==1.0"], "graphs": {"g": "./graph.py:graph"}}`)},
		"app/graph.py":       {Data: []byte("graph = None\n")},
	})
	if err != nil || reason != "" {
		t.Fatalf("StartBuild: %q %v", reason, err)
	}

	// wait polls a build as the provisioning machine does; the broken
	// app's may well have ended while the good one's was awaited.
	wait := func(app deployments.RevisionApp, id string, mustRun bool) deployments.AppBuild {
		t.Helper()
		running := 0
		for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
			got, err := b.Build(ctx, app, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Done {
				if mustRun && running == 0 {
					t.Errorf("build %s was never IN_PROGRESS", id)
				}
				return got
			}
			running++
		}
		t.Fatalf("build %s did not end", id)
		return deployments.AppBuild{}
	}

	built := wait(good, goodID, true)
	if built.Reason != "" {
		t.Fatalf("the good app's build failed: %s", built.Reason)
	}
	var m pyapp.Manifest
	if err := json.Unmarshal(built.Code.Manifest, &m); err != nil || m.Runtime != "python3.11" || m.Graphs["hitl"] == "" {
		t.Fatalf("the build's manifest: %s %v", built.Code.Manifest, err)
	}
	left, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(codebuild.Prefix(good.DeploymentID, good.RevisionID))})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range left.Contents {
		keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), codebuild.Prefix(good.DeploymentID, good.RevisionID)))
	}
	slices.Sort(keys)
	if strings.Join(keys, ",") != "app.zip,source.zip,stepgraph_build.json" {
		t.Errorf("objects of the build: %v", keys)
	}

	// The zip is a function that answers health with the manifest's graphs.
	lc := lambda.NewFromConfig(ep.Config)
	p := &lambdaruntime.Provisioner{Client: lc, NamePrefix: prefix, RoleARN: "arn:aws:iam::000000000000:role/app-runtime",
		Poll: 100 * time.Millisecond, ReadyWait: time.Minute}
	arn, err := p.EnsureAppRuntime(ctx, good.DeploymentID, built.Code)
	if err != nil {
		t.Fatal(err)
	}
	defer p.DeleteRuntime(ctx, good.DeploymentID)
	graphs, err := (&pyapp.LambdaClient{Function: arn, Invoker: lambdaruntime.Functions{Client: lc}}).Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for id := range m.Graphs {
		want = append(want, id)
	}
	slices.Sort(want)
	slices.Sort(graphs)
	if !slices.Equal(graphs, want) {
		t.Errorf("health of the built function: %v, want the manifest's graphs %v", graphs, want)
	}

	failed := wait(broken, brokenID, false)
	t.Logf("the broken app's reason:\n%s", failed.Reason)
	for _, part := range []string{
		"build FAILED in phase BUILD: Error while executing command: /opt/stepgraph/stepgraph build \"$STEPGRAPH_APP_DIR\"",
		"Reason: exit status 1",
		"stepgraph-no-such-package", // pip's words, from the log's tail
	} {
		if !strings.Contains(failed.Reason, part) {
			t.Errorf("the broken app's reason lacks %q:\n%s", part, failed.Reason)
		}
	}
	if n := strings.Count(failed.Reason, "\n"); n > codebuild.LogTailLines {
		t.Errorf("the reason carries %d log lines, want at most %d", n, codebuild.LogTailLines)
	}
}

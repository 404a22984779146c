package codebuild_test

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	cb "github.com/aws/aws-sdk-go-v2/service/codebuild"
	"github.com/aws/aws-sdk-go-v2/service/codebuild/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stepgraph/stepgraph/internal/awsflow"
	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/codebuild"
	"github.com/stepgraph/stepgraph/internal/deployments"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

var app = deployments.RevisionApp{OrgID: "org", DeploymentID: "dep-1", RevisionID: "rev-1", ConfigPath: "apps/agent/langgraph.json"}

var checkout = fstest.MapFS{
	"apps/agent/langgraph.json": {Data: []byte(`{"graphs": {"agent": "./graph.py:graph"}}`)},
	"apps/agent/graph.py":       {Data: []byte("graph = None\n")},
	".git/config":               {Data: []byte("[core]\n")},
}

// On the emulator (its CodeBuild keeps builds as records and ends them
// SUCCEEDED at once: it runs nothing without Docker), the builder's calls
// are answered: the checkout goes to the bucket as the build's source, a
// build of the project starts, and a succeeded build is its zip with the
// manifest the buildspec uploads beside it (put here by the test, since no
// buildspec runs); without that manifest, the build has no result.
func TestBuilderOnMiniStack(t *testing.T) {
	ep := awstest.Start(t)
	ctx := t.Context()
	s3c := s3.NewFromConfig(ep.Config, func(o *s3.Options) { o.UsePathStyle = true })
	cbc := cb.NewFromConfig(ep.Config)
	prefix := strings.ToLower(awstest.Prefix(t))
	bucket, project := prefix+"payloads", prefix+"app-build"
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	// The project as infra/stack makes it (TestAppBuildProject holds that
	// shape).
	if _, err := cbc.CreateProject(ctx, &cb.CreateProjectInput{
		Name:      aws.String(project),
		Source:    &types.ProjectSource{Type: types.SourceTypeNoSource, Buildspec: aws.String(awsflow.AppBuildspec)},
		Artifacts: &types.ProjectArtifacts{Type: types.ArtifactsTypeNoArtifacts},
		Environment: &types.ProjectEnvironment{Type: types.EnvironmentTypeLinuxContainer, ComputeType: types.ComputeTypeBuildGeneral1Medium,
			Image: aws.String("aws/codebuild/amazonlinux2-x86_64-standard:5.0")},
		ServiceRole: aws.String("arn:aws:iam::000000000000:role/app-build"),
	}); err != nil {
		t.Fatal(err)
	}
	b := &codebuild.Builder{CodeBuild: cbc, S3: s3c, Logs: cloudwatchlogs.NewFromConfig(ep.Config), Project: project, Bucket: bucket, TempDir: t.TempDir()}

	id, reason, err := b.StartBuild(ctx, app, checkout)
	if err != nil || reason != "" || !strings.HasPrefix(id, project+":") {
		t.Fatalf("StartBuild: %q %q %v", id, reason, err)
	}
	src, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("builds/dep-1/rev-1/source.zip")})
	if err != nil {
		t.Fatal(err)
	}
	if got := zipNames(t, src.Body); got != "apps/agent/graph.py,apps/agent/langgraph.json" {
		t.Errorf("source zip holds %s, want the checkout without .git", got)
	}

	built, err := b.Build(ctx, app, id)
	if err != nil || !built.Done || !strings.Contains(built.Reason, "wrote no stepgraph_build.json under s3://"+bucket+"/builds/dep-1/rev-1/") {
		t.Fatalf("a build without its manifest: %+v %v", built, err)
	}
	manifest := []byte(`{"handler": "stepgraph_runtime.lambda_handler.handler", "runtime": "python3.11", "architecture": "x86_64", "graphs": {"agent": "./graph.py:graph"}}`)
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("builds/dep-1/rev-1/stepgraph_build.json"), Body: bytes.NewReader(manifest)}); err != nil {
		t.Fatal(err)
	}
	built, err = b.Build(ctx, app, id)
	want := deployments.AppCode{Bucket: bucket, Key: "builds/dep-1/rev-1/app.zip", Manifest: manifest}
	if err != nil || !built.Done || built.Reason != "" || built.Code.Bucket != want.Bucket || built.Code.Key != want.Key || !bytes.Equal(built.Code.Manifest, manifest) {
		t.Fatalf("a succeeded build: %+v %v", built, err)
	}
	if built, err = b.Build(ctx, app, project+":no-such-build"); err != nil || !built.Done || !strings.Contains(built.Reason, "no longer knows build") {
		t.Errorf("an unknown build: %+v %v", built, err)
	}

	// Deleting the deployment removes every object of its builds (and of
	// no other deployment's); twice is no error.
	other := "builds/dep-2/rev-9/app.zip"
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(other), Body: bytes.NewReader([]byte("z"))}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := b.RemoveBuilds(ctx, "dep-1"); err != nil {
			t.Fatal(err)
		}
	}
	left, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("builds/")})
	if err != nil || len(left.Contents) != 1 || aws.ToString(left.Contents[0].Key) != other {
		t.Errorf("objects after RemoveBuilds: %+v %v, want only %s", left, err, other)
	}
}

func zipNames(t *testing.T, r io.ReadCloser) string {
	t.Helper()
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	return strings.Join(names, ",")
}

// fakeCodeBuild answers BatchGetBuilds with build and records StartBuild.
type fakeCodeBuild struct {
	build   types.Build
	started []*cb.StartBuildInput
}

func (f *fakeCodeBuild) StartBuild(_ context.Context, in *cb.StartBuildInput, _ ...func(*cb.Options)) (*cb.StartBuildOutput, error) {
	f.started = append(f.started, in)
	return &cb.StartBuildOutput{Build: &types.Build{Id: aws.String("p:1")}}, nil
}

func (f *fakeCodeBuild) BatchGetBuilds(context.Context, *cb.BatchGetBuildsInput, ...func(*cb.Options)) (*cb.BatchGetBuildsOutput, error) {
	return &cb.BatchGetBuildsOutput{Builds: []types.Build{f.build}}, nil
}

type fakeLogs struct{ lines []string }

func (f fakeLogs) GetLogEvents(_ context.Context, in *cloudwatchlogs.GetLogEventsInput, _ ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.GetLogEventsOutput, error) {
	var evs []cwtypes.OutputLogEvent
	for _, l := range f.lines[max(0, len(f.lines)-int(aws.ToInt32(in.Limit))):] {
		evs = append(evs, cwtypes.OutputLogEvent{Message: aws.String(l + "\n")})
	}
	return &cloudwatchlogs.GetLogEventsOutput{Events: evs}, nil
}

type fakeObjects struct{ put map[string][]byte }

func (f *fakeObjects) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	b, err := io.ReadAll(in.Body)
	f.put[aws.ToString(in.Key)] = b
	return &s3.PutObjectOutput{}, err
}

func (f *fakeObjects) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return nil, io.ErrUnexpectedEOF
}

func (f *fakeObjects) ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	return &s3.ListObjectsV2Output{}, nil
}

func (f *fakeObjects) DeleteObjects(context.Context, *s3.DeleteObjectsInput, ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error) {
	return &s3.DeleteObjectsOutput{}, nil
}

// What CodeBuild says a build is (the emulator only ever says SUCCEEDED):
// running is not done; a failed build's reason is its failed phase's
// message and the tail of its log; the build is started with the
// buildspec, the checkout as its S3 source and where to write.
func TestBuildStates(t *testing.T) {
	ctx := context.Background()
	fcb := &fakeCodeBuild{build: types.Build{Id: aws.String("p:1"), BuildStatus: types.StatusTypeInProgress}}
	var lines []string
	for i := range 30 {
		lines = append(lines, "line "+string(rune('a'+i%26)))
	}
	lines = append(lines, "ERROR: No matching distribution found for langchain-nope==9")
	objects := &fakeObjects{put: map[string][]byte{}}
	b := &codebuild.Builder{CodeBuild: fcb, S3: objects, Logs: fakeLogs{lines}, Project: "p", Bucket: "bkt", TempDir: t.TempDir()}

	if _, _, err := b.StartBuild(ctx, app, checkout); err != nil {
		t.Fatal(err)
	}
	in := fcb.started[0]
	env := map[string]string{}
	for _, v := range in.EnvironmentVariablesOverride {
		env[aws.ToString(v.Name)] = aws.ToString(v.Value)
	}
	if aws.ToString(in.BuildspecOverride) != awsflow.AppBuildspec || in.SourceTypeOverride != types.SourceTypeS3 ||
		aws.ToString(in.SourceLocationOverride) != "bkt/builds/dep-1/rev-1/source.zip" ||
		env[awsflow.BuildEnvAppDir] != "apps/agent" || env[awsflow.BuildEnvPrefix] != "s3://bkt/builds/dep-1/rev-1" {
		t.Errorf("StartBuild %+v, env %v", in, env)
	}
	if _, ok := objects.put["builds/dep-1/rev-1/source.zip"]; !ok {
		t.Errorf("no source uploaded: %v", objects.put)
	}

	if got, err := b.Build(ctx, app, "p:1"); err != nil || got.Done {
		t.Errorf("a running build: %+v %v", got, err)
	}
	fcb.build = types.Build{Id: aws.String("p:1"), BuildStatus: types.StatusTypeFailed,
		Logs: &types.LogsLocation{GroupName: aws.String("/aws/codebuild/p"), StreamName: aws.String("1")},
		Phases: []types.BuildPhase{
			{PhaseType: types.BuildPhaseTypeInstall, PhaseStatus: types.StatusTypeSucceeded},
			{PhaseType: types.BuildPhaseTypeBuild, PhaseStatus: types.StatusTypeFailed, Contexts: []types.PhaseContext{
				{StatusCode: aws.String("COMMAND_EXECUTION_ERROR"), Message: aws.String("Error while executing command: stepgraph build. Reason: exit status 1")}}},
		}}
	got, err := b.Build(ctx, app, "p:1")
	if err != nil || !got.Done || !strings.HasPrefix(got.Reason, "build FAILED in phase BUILD: Error while executing command: stepgraph build. Reason: exit status 1\n") ||
		!strings.HasSuffix(got.Reason, "\nERROR: No matching distribution found for langchain-nope==9") ||
		strings.Count(got.Reason, "\n") != codebuild.LogTailLines {
		t.Errorf("a failed build: %+v %v", got, err)
	}

	// A checkout over the bounds is a reason, not an error: it will not
	// get smaller.
	big := fstest.MapFS{}
	for i := range codebuild.MaxSourceFiles + 1 {
		big["f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+"/"+strconv.Itoa(i)] = &fstest.MapFile{}
	}
	if _, reason, err := b.StartBuild(ctx, app, big); err != nil || !strings.Contains(reason, "over 20000 files") {
		t.Errorf("a large checkout: %q %v", reason, err)
	}
}

// Package codebuild builds LangGraph apps' Lambda zips on AWS CodeBuild:
// it implements deployments.AppBuilder for the deploy worker, which has no
// pip and no room to build an app itself.
//
// StartBuild zips the revision's checkout (bounded like the local server's
// kept apps) to the stack's bucket at builds/<deployment>/<revision>/
// source.zip and starts a build of the stack's project with that object as
// its source and awsflow.AppBuildspec as its buildspec: `stepgraph build`
// with python3.11, writing app.zip and stepgraph_build.json under the same
// prefix. Build reads the build (BatchGetBuilds): still running; failed,
// with the failed phase's message and the tail of its log (CloudWatch
// Logs) as the reason; or succeeded, with the zip's object and the
// manifest read from the bucket. The project, its least-privilege role and
// its log group are the stack's (infra/stack).
package codebuild

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	cb "github.com/aws/aws-sdk-go-v2/service/codebuild"
	"github.com/aws/aws-sdk-go-v2/service/codebuild/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/stepgraph/stepgraph/internal/awsflow"
	"github.com/stepgraph/stepgraph/internal/deployments"
)

// API is the part of CodeBuild a Builder uses; *codebuild.Client
// implements it.
type API interface {
	StartBuild(ctx context.Context, in *cb.StartBuildInput, optFns ...func(*cb.Options)) (*cb.StartBuildOutput, error)
	BatchGetBuilds(ctx context.Context, in *cb.BatchGetBuildsInput, optFns ...func(*cb.Options)) (*cb.BatchGetBuildsOutput, error)
}

// Objects is the part of S3 a Builder uses; *s3.Client implements it.
type Objects interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
}

// Logs is the part of CloudWatch Logs a Builder uses (a failed build's
// log); *cloudwatchlogs.Client implements it.
type Logs interface {
	GetLogEvents(ctx context.Context, in *cloudwatchlogs.GetLogEventsInput, optFns ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.GetLogEventsOutput, error)
}

// Bounds of a checkout sent to a build: as the local server keeps an app
// (internal/pyapp), and the manifest's size.
const (
	MaxSourceBytes   = 100 << 20
	MaxSourceFiles   = 20000
	maxManifestBytes = 1 << 20
	// LogTailLines is how many of a failed build's last log lines its
	// reason carries.
	LogTailLines = 20
)

var _ deployments.AppBuilder = (*Builder)(nil)

// Builder starts and reads builds of the stack's project.
type Builder struct {
	CodeBuild API
	S3        Objects
	// Logs reads a failed build's log; nil leaves the reason to the
	// failed phase's message.
	Logs Logs
	// Project is the CodeBuild project, Bucket the stack's bucket.
	Project, Bucket string
	// TempDir is where the source zip is written before its upload
	// (Lambda's /tmp); os.TempDir() when empty.
	TempDir string
}

// Prefix is the key prefix of a revision's build objects.
func Prefix(deploymentID, revisionID string) string {
	return "builds/" + deploymentID + "/" + revisionID + "/"
}

// StartBuild implements deployments.AppBuilder.
func (b *Builder) StartBuild(ctx context.Context, app deployments.RevisionApp, fsys fs.FS) (string, string, error) {
	prefix := Prefix(app.DeploymentID, app.RevisionID)
	err := b.putSource(ctx, prefix+"source.zip", fsys)
	var big *tooLargeError
	if errors.As(err, &big) {
		return "", big.Error() + ": a LangGraph app is built from at most " +
			fmt.Sprintf("%d MiB in %d files", MaxSourceBytes>>20, MaxSourceFiles), nil
	}
	if err != nil {
		return "", "", err
	}
	out, err := b.CodeBuild.StartBuild(ctx, &cb.StartBuildInput{
		ProjectName:            aws.String(b.Project),
		SourceTypeOverride:     types.SourceTypeS3,
		SourceLocationOverride: aws.String(b.Bucket + "/" + prefix + "source.zip"),
		BuildspecOverride:      aws.String(awsflow.AppBuildspec),
		EnvironmentVariablesOverride: []types.EnvironmentVariable{
			{Name: aws.String(awsflow.BuildEnvAppDir), Value: aws.String(appDir(app.ConfigPath)), Type: types.EnvironmentVariableTypePlaintext},
			{Name: aws.String(awsflow.BuildEnvPrefix), Value: aws.String("s3://" + b.Bucket + "/" + strings.TrimSuffix(prefix, "/")), Type: types.EnvironmentVariableTypePlaintext},
		},
	})
	if err != nil {
		return "", "", fmt.Errorf("start a build of project %s: %w", b.Project, err)
	}
	if out.Build == nil || aws.ToString(out.Build.Id) == "" {
		return "", "", fmt.Errorf("start a build of project %s: no build id in the answer", b.Project)
	}
	return aws.ToString(out.Build.Id), "", nil
}

// appDir is the app's directory in the checkout: its langgraph.json's.
func appDir(configPath string) string {
	return path.Dir(path.Clean(configPath))
}

// Build implements deployments.AppBuilder.
func (b *Builder) Build(ctx context.Context, app deployments.RevisionApp, buildID string) (deployments.AppBuild, error) {
	out, err := b.CodeBuild.BatchGetBuilds(ctx, &cb.BatchGetBuildsInput{Ids: []string{buildID}})
	if err != nil {
		return deployments.AppBuild{}, fmt.Errorf("read build %s: %w", buildID, err)
	}
	if len(out.Builds) != 1 {
		// Builds are kept for a year: one that is gone cannot be waited for.
		return deployments.AppBuild{Done: true, Reason: "CodeBuild no longer knows build " + buildID}, nil
	}
	build := out.Builds[0]
	switch build.BuildStatus {
	case types.StatusTypeInProgress:
		return deployments.AppBuild{}, nil
	case types.StatusTypeSucceeded:
		return b.built(ctx, Prefix(app.DeploymentID, app.RevisionID))
	}
	return deployments.AppBuild{Done: true, Reason: b.failure(ctx, build)}, nil
}

// RemoveBuilds implements deployments.AppBuilder: every object under the
// deployment's builds/<deployment>/ prefix, a page at a time.
func (b *Builder) RemoveBuilds(ctx context.Context, deploymentID string) error {
	prefix := "builds/" + deploymentID + "/"
	for {
		page, err := b.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(b.Bucket), Prefix: aws.String(prefix)})
		if err != nil {
			return fmt.Errorf("list s3://%s/%s: %w", b.Bucket, prefix, err)
		}
		if len(page.Contents) == 0 {
			return nil
		}
		var ids []s3types.ObjectIdentifier
		for _, o := range page.Contents {
			ids = append(ids, s3types.ObjectIdentifier{Key: o.Key})
		}
		out, err := b.S3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(b.Bucket), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			return fmt.Errorf("delete under s3://%s/%s: %w", b.Bucket, prefix, err)
		}
		if len(out.Errors) > 0 {
			return fmt.Errorf("delete s3://%s/%s: %s", b.Bucket, aws.ToString(out.Errors[0].Key), aws.ToString(out.Errors[0].Message))
		}
	}
}

// built is a succeeded build's zip and manifest.
func (b *Builder) built(ctx context.Context, prefix string) (deployments.AppBuild, error) {
	key := prefix + awsflow.BuildManifest
	got, err := b.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.Bucket), Key: aws.String(key)})
	if err != nil {
		var missing interface{ ErrorCode() string }
		if errors.As(err, &missing) && (missing.ErrorCode() == "NoSuchKey" || missing.ErrorCode() == "NotFound") {
			return deployments.AppBuild{Done: true, Reason: "the build succeeded but wrote no " + awsflow.BuildManifest + " under s3://" + b.Bucket + "/" + prefix}, nil
		}
		return deployments.AppBuild{}, fmt.Errorf("read s3://%s/%s: %w", b.Bucket, key, err)
	}
	defer got.Body.Close()
	manifest, err := io.ReadAll(io.LimitReader(got.Body, maxManifestBytes+1))
	if err != nil {
		return deployments.AppBuild{}, fmt.Errorf("read s3://%s/%s: %w", b.Bucket, key, err)
	}
	if len(manifest) > maxManifestBytes {
		return deployments.AppBuild{Done: true, Reason: awsflow.BuildManifest + " is over 1 MiB"}, nil
	}
	return deployments.AppBuild{Done: true, Code: deployments.AppCode{Bucket: b.Bucket, Key: prefix + awsflow.BuildZip, Manifest: manifest}}, nil
}

// failure says why a build ended without success: its status, the failed
// phase's message and the tail of its log.
func (b *Builder) failure(ctx context.Context, build types.Build) string {
	reason := fmt.Sprintf("build %s", build.BuildStatus)
	for _, p := range build.Phases {
		if p.PhaseStatus == "" || p.PhaseStatus == types.StatusTypeSucceeded {
			continue
		}
		reason += fmt.Sprintf(" in phase %s", p.PhaseType)
		for _, c := range p.Contexts {
			if msg := aws.ToString(c.Message); msg != "" {
				reason += ": " + msg
			}
		}
		break
	}
	if tail := b.logTail(ctx, build.Logs); tail != "" {
		reason += "\n" + tail
	}
	return reason
}

// logTail is the last lines of the build's log ("" when there is none to
// read: the reason keeps the phase's message).
func (b *Builder) logTail(ctx context.Context, loc *types.LogsLocation) string {
	if b.Logs == nil || loc == nil || aws.ToString(loc.GroupName) == "" || aws.ToString(loc.StreamName) == "" {
		return ""
	}
	out, err := b.Logs.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{
		LogGroupName: loc.GroupName, LogStreamName: loc.StreamName,
		StartFromHead: aws.Bool(false), Limit: aws.Int32(LogTailLines),
	})
	if err != nil {
		return ""
	}
	lines := make([]string, 0, len(out.Events))
	for _, e := range out.Events {
		lines = append(lines, strings.TrimRight(aws.ToString(e.Message), "\n"))
	}
	return strings.Join(lines, "\n")
}

// putSource uploads the checkout as a zip, written to a temporary file
// first (an upload needs its length).
func (b *Builder) putSource(ctx context.Context, key string, fsys fs.FS) error {
	f, err := os.CreateTemp(b.TempDir, "stepgraph-source-*.zip")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := zipTree(f, fsys); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := b.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.Bucket), Key: aws.String(key), Body: f}); err != nil {
		return fmt.Errorf("upload the app's source to s3://%s/%s: %w", b.Bucket, key, err)
	}
	return nil
}

// zipTree writes fsys's regular files (without .git) as a zip, within
// MaxSourceBytes and MaxSourceFiles.
func zipTree(w io.Writer, fsys fs.FS) error {
	zw := zip.NewWriter(w)
	var files, size int64
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == ".git":
			return fs.SkipDir
		case !d.Type().IsRegular():
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if files++; files > MaxSourceFiles {
			return &tooLargeError{fmt.Sprintf("the repository has over %d files", MaxSourceFiles)}
		}
		if size += info.Size(); size > MaxSourceBytes {
			return &tooLargeError{fmt.Sprintf("the repository is over %d MiB", MaxSourceBytes>>20)}
		}
		hdr := &zip.FileHeader{Name: name, Method: zip.Deflate}
		hdr.SetMode(info.Mode())
		dst, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		src, err := fsys.Open(name)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(dst, src)
		return err
	})
	var big *tooLargeError
	if errors.As(err, &big) {
		return big
	}
	if err != nil {
		return fmt.Errorf("zip the app's source: %w", err)
	}
	return zw.Close()
}

// tooLargeError is a checkout over the bounds: the revision fails.
type tooLargeError struct{ msg string }

func (e *tooLargeError) Error() string { return e.msg }

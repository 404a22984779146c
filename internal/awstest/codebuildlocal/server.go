package codebuildlocal

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Project is the one CodeBuild project a Server builds.
type Project struct {
	Name      string
	Buildspec string
	// Env is the project's environment variables (plaintext).
	Env map[string]string
}

// Options of Start.
type Options struct {
	Project Project
	// AWS addresses the emulator (its BaseEndpoint, region and static
	// credentials): the builds' sources come from its S3, their logs go
	// to its CloudWatch Logs, and their commands get its endpoint and
	// credentials in their environment.
	AWS aws.Config
	// Root is the module root: the builds' python3.11 is its .venv's
	// interpreter, their aws the AWS CLI of its .venv-awscli (CheckTools).
	Root string
	// Env is added to every build's environment (e.g. pip's PIP_NO_INDEX
	// and PIP_FIND_LINKS for an offline build).
	Env map[string]string
	// Runtimes are the runtime-versions the "image" has, e.g.
	// {"python": "3.11"}.
	Runtimes map[string]string
	// WorkDir holds the builds' directories (os.TempDir() when empty).
	WorkDir string
	// Timeout bounds a build (10 minutes when 0).
	Timeout time.Duration
}

// Server is a running local CodeBuild.
type Server struct {
	// URL is its endpoint, e.g. http://127.0.0.1:40123 (a CodeBuild
	// client's BaseEndpoint, or AWS_ENDPOINT_URL_CODEBUILD).
	URL string

	opts   Options
	srv    *httptest.Server
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	builds map[string]*build
	number int64
}

// Start serves a local CodeBuild on 127.0.0.1. Close stops it and its
// running builds.
func Start(opts Options) (*Server, error) {
	if opts.Project.Name == "" {
		return nil, errors.New("codebuildlocal: Options.Project.Name is empty")
	}
	if opts.AWS.BaseEndpoint == nil {
		return nil, errors.New("codebuildlocal: Options.AWS has no BaseEndpoint (the emulator's address)")
	}
	if _, err := parseBuildspec(opts.Project.Buildspec); opts.Project.Buildspec != "" && err != nil {
		return nil, fmt.Errorf("codebuildlocal: the project's buildspec: %w", err)
	}
	if err := CheckTools(opts.Root); err != nil {
		return nil, fmt.Errorf("codebuildlocal: %w", err)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Minute
	}
	s := &Server{opts: opts, builds: map[string]*build{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s, nil
}

// Close stops the server and waits for its builds to stop.
func (s *Server) Close() {
	s.cancel()
	s.srv.Close()
	s.wg.Wait()
}

// apiError is CodeBuild's JSON 1.1 error.
type apiError struct {
	status int
	typ    string
	msg    string
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "CodeBuild_20161006.")
	var out any
	var aerr *apiError
	switch {
	case r.Method != http.MethodPost || !ok:
		aerr = &apiError{400, "UnknownOperationException", "not a CodeBuild call: " + target}
	case op == "StartBuild":
		out, aerr = s.startBuild(r.Body)
	case op == "BatchGetBuilds":
		out, aerr = s.batchGetBuilds(r.Body)
	default:
		aerr = &apiError{400, "UnknownOperationException", "the local CodeBuild does not serve " + op}
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if aerr != nil {
		w.WriteHeader(aerr.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": aerr.typ, "message": aerr.msg})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Type  string `json:"type,omitempty"`
}

type startBuildInput struct {
	ProjectName                  string   `json:"projectName"`
	SourceTypeOverride           string   `json:"sourceTypeOverride"`
	SourceLocationOverride       string   `json:"sourceLocationOverride"`
	BuildspecOverride            string   `json:"buildspecOverride"`
	EnvironmentVariablesOverride []envVar `json:"environmentVariablesOverride"`
}

func (s *Server) startBuild(body io.Reader) (any, *apiError) {
	var in startBuildInput
	if err := json.NewDecoder(body).Decode(&in); err != nil {
		return nil, &apiError{400, "InvalidInputException", "the request is not JSON: " + err.Error()}
	}
	if in.ProjectName != s.opts.Project.Name {
		return nil, &apiError{400, "ResourceNotFoundException", "Project cannot be found: " + in.ProjectName}
	}
	spec := s.opts.Project.Buildspec
	if in.BuildspecOverride != "" {
		spec = in.BuildspecOverride
	}
	parsed, err := parseBuildspec(spec)
	if err != nil {
		return nil, &apiError{400, "InvalidInputException", "Invalid buildspec: " + err.Error()}
	}
	if in.SourceTypeOverride != "" && in.SourceTypeOverride != "S3" && in.SourceTypeOverride != "NO_SOURCE" {
		return nil, &apiError{400, "InvalidInputException", "the local CodeBuild takes S3 sources only, not " + in.SourceTypeOverride}
	}
	env := map[string]string{}
	for k, v := range s.opts.Project.Env {
		env[k] = v
	}
	for _, v := range in.EnvironmentVariablesOverride {
		if v.Type != "" && v.Type != "PLAINTEXT" {
			return nil, &apiError{400, "InvalidInputException", "environmentVariablesOverride " + v.Name + ": the local CodeBuild takes PLAINTEXT variables only"}
		}
		env[v.Name] = v.Value
	}
	s.mu.Lock()
	s.number++
	uuid := randomUUID()
	b := &build{id: s.opts.Project.Name + ":" + uuid, stream: uuid, number: s.number, project: s.opts.Project.Name,
		source: in.SourceLocationOverride, spec: parsed, env: env, start: time.Now(), status: "IN_PROGRESS",
		region: s.opts.AWS.Region}
	s.builds[b.id] = b
	view := b.view()
	s.mu.Unlock()

	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.Timeout)
		defer cancel()
		s.run(ctx, b)
	}()
	return map[string]any{"build": view}, nil
}

func (s *Server) batchGetBuilds(body io.Reader) (any, *apiError) {
	var in struct {
		IDs []string `json:"ids"`
	}
	if err := json.NewDecoder(body).Decode(&in); err != nil {
		return nil, &apiError{400, "InvalidInputException", "the request is not JSON: " + err.Error()}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	builds, missing := []buildView{}, []string{}
	for _, id := range in.IDs {
		if b, ok := s.builds[id]; ok {
			builds = append(builds, b.view())
		} else {
			missing = append(missing, id)
		}
	}
	return map[string]any{"builds": builds, "buildsNotFound": missing}, nil
}

// Builds is the ids of the builds started, sorted.
func (s *Server) Builds() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.builds))
	for id := range s.builds {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// fetchSource unzips the build's S3 source ("bucket/key") into dir.
func (s *Server) fetchSource(ctx context.Context, location, dir string) error {
	if location == "" {
		return nil
	}
	bucket, key, ok := strings.Cut(location, "/")
	if !ok || bucket == "" || key == "" {
		return fmt.Errorf("the source location %q is not bucket/key", location)
	}
	c := s3.NewFromConfig(s.opts.AWS, func(o *s3.Options) { o.UsePathStyle = true })
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("get s3://%s/%s: %w", bucket, key, err)
	}
	defer got.Body.Close()
	data, err := io.ReadAll(got.Body)
	if err != nil {
		return fmt.Errorf("read s3://%s/%s: %w", bucket, key, err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("s3://%s/%s is not a zip: %w", bucket, key, err)
	}
	for _, f := range zr.File {
		name := filepath.FromSlash(f.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("the source zip's entry %q leaves the source directory", f.Name)
		}
		dst := filepath.Join(dir, name)
		if f.FileInfo().IsDir() {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := writeEntry(f, dst); err != nil {
			return err
		}
	}
	return nil
}

func writeEntry(f *zip.File, dst string) error {
	src, err := f.Open()
	if err != nil {
		return err
	}
	defer src.Close()
	mode := f.Mode().Perm() | 0o600
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func randomUUID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

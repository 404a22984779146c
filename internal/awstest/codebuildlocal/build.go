package codebuildlocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"gopkg.in/yaml.v3"
)

// buildspec is the part of a buildspec the local CodeBuild runs.
type buildspec struct {
	Version any `yaml:"version"`
	Env     struct {
		Shell     string            `yaml:"shell"`
		Variables map[string]string `yaml:"variables"`
	} `yaml:"env"`
	Phases map[string]struct {
		RuntimeVersions map[string]any `yaml:"runtime-versions"`
		Commands        []string       `yaml:"commands"`
	} `yaml:"phases"`
}

// phaseNames are the buildspec's phases in CodeBuild's order, with their
// phase types.
var phaseNames = []struct{ key, typ string }{
	{"install", "INSTALL"}, {"pre_build", "PRE_BUILD"}, {"build", "BUILD"}, {"post_build", "POST_BUILD"},
}

func parseBuildspec(text string) (*buildspec, error) {
	var spec buildspec
	if err := yaml.Unmarshal([]byte(text), &spec); err != nil {
		return nil, err
	}
	if v := fmt.Sprint(spec.Version); v != "0.2" {
		return nil, fmt.Errorf("version %q: the local CodeBuild runs buildspec version 0.2", v)
	}
	if spec.Env.Shell != "" && spec.Env.Shell != "bash" {
		return nil, fmt.Errorf("env.shell %q: the local CodeBuild runs bash only", spec.Env.Shell)
	}
	for name := range spec.Phases {
		known := false
		for _, p := range phaseNames {
			known = known || p.key == name
		}
		if !known {
			return nil, fmt.Errorf("phases.%s: not a phase the local CodeBuild runs (install, pre_build, build, post_build)", name)
		}
	}
	return &spec, nil
}

// build is one build's state; the Server's mutex guards its fields.
type build struct {
	id, stream, project, source, region string
	number                              int64
	spec                                *buildspec
	env                                 map[string]string
	start, end                          time.Time
	status, current                     string
	phases                              []phaseView
}

type phaseContext struct {
	StatusCode string `json:"statusCode"`
	Message    string `json:"message"`
}

type phaseView struct {
	PhaseType         string         `json:"phaseType"`
	PhaseStatus       string         `json:"phaseStatus,omitempty"`
	StartTime         float64        `json:"startTime"`
	EndTime           float64        `json:"endTime,omitempty"`
	DurationInSeconds int64          `json:"durationInSeconds,omitempty"`
	Contexts          []phaseContext `json:"contexts,omitempty"`
}

type buildView struct {
	ID            string      `json:"id"`
	Arn           string      `json:"arn"`
	BuildNumber   int64       `json:"buildNumber"`
	ProjectName   string      `json:"projectName"`
	BuildStatus   string      `json:"buildStatus"`
	CurrentPhase  string      `json:"currentPhase"`
	BuildComplete bool        `json:"buildComplete"`
	StartTime     float64     `json:"startTime"`
	EndTime       float64     `json:"endTime,omitempty"`
	Phases        []phaseView `json:"phases"`
	Source        struct {
		Type     string `json:"type"`
		Location string `json:"location"`
	} `json:"source"`
	Logs struct {
		GroupName  string `json:"groupName"`
		StreamName string `json:"streamName"`
	} `json:"logs"`
}

func epoch(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// LogGroup is the log group of project's builds, as CodeBuild names it.
func LogGroup(project string) string { return "/aws/codebuild/" + project }

func (b *build) view() buildView {
	v := buildView{ID: b.id, Arn: "arn:aws:codebuild:" + b.region + ":000000000000:build/" + b.id, BuildNumber: b.number,
		ProjectName: b.project, BuildStatus: b.status, CurrentPhase: b.current, BuildComplete: b.status != "IN_PROGRESS",
		StartTime: epoch(b.start), EndTime: epoch(b.end), Phases: append([]phaseView{}, b.phases...)}
	v.Source.Type, v.Source.Location = "S3", b.source
	v.Logs.GroupName, v.Logs.StreamName = LogGroup(b.project), b.stream
	return v
}

// run runs the build to its end and records it.
func (s *Server) run(ctx context.Context, b *build) {
	log := &buildLog{}
	root, err := os.MkdirTemp(s.opts.WorkDir, "codebuildlocal-*")
	failed := ""
	if err != nil {
		failed = err.Error()
	} else {
		defer os.RemoveAll(root)
	}
	// /tmp and /opt of the build's own, and the source under its /tmp (as
	// CodeBuild's /codebuild/output/src…/src): see doc.go.
	tmp, opt := filepath.Join(root, "tmp"), filepath.Join(root, "opt")
	const srcDir = "/tmp/codebuild/output/src/src"
	phase := func(typ string, do func() (code, msg string)) bool {
		s.setPhase(b, phaseView{PhaseType: typ, StartTime: epoch(time.Now())})
		code, msg := "CLIENT_ERROR", failed
		if failed == "" {
			code, msg = do()
		}
		status := "SUCCEEDED"
		if code != "" {
			status = "FAILED"
			log.add(fmt.Sprintf("Phase complete: %s State: FAILED", typ))
			log.add(fmt.Sprintf("Phase context status code: %s Message: %s", code, msg))
		} else {
			log.add(fmt.Sprintf("Phase complete: %s State: SUCCEEDED", typ))
		}
		s.endPhase(b, status, code, msg)
		return code == ""
	}
	if failed == "" {
		for _, d := range []string{tmp, opt, filepath.Join(tmp, "codebuild", "output", "src", "src"), filepath.Join(tmp, "home")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				failed = err.Error()
			}
		}
		if err := writeTools(s.opts.Root, filepath.Join(root, toolsDir)); failed == "" && err != nil {
			failed = err.Error()
		}
	}
	ok := phase("DOWNLOAD_SOURCE", func() (string, string) {
		log.add("Waiting for agent ping")
		if err := s.fetchSource(ctx, b.source, filepath.Join(tmp, "codebuild", "output", "src", "src")); err != nil {
			return "CLIENT_ERROR", err.Error()
		}
		return "", ""
	})
	env := s.environ(b, srcDir)
	buildFailed := false
	for _, p := range phaseNames {
		spec, has := b.spec.Phases[p.key]
		// After a failed install or pre_build, CodeBuild goes to
		// finalizing; after a failed build, post_build still runs.
		if !ok && !(p.key == "post_build" && buildFailed) {
			continue
		}
		if !has {
			continue
		}
		good := phase(p.typ, func() (string, string) {
			if code, msg := s.checkRuntimes(spec.RuntimeVersions); code != "" {
				return code, msg
			}
			for _, c := range spec.Commands {
				log.add("Running command " + c)
				if err := s.command(ctx, c, env, root, srcDir, log); err != nil {
					reason := err.Error()
					log.add(fmt.Sprintf("Command did not exit successfully %s %s", c, reason))
					return "COMMAND_EXECUTION_ERROR", fmt.Sprintf("Error while executing command: %s. Reason: %s", c, reason)
				}
			}
			return "", ""
		})
		if !good && ok {
			ok, buildFailed = false, p.key == "build"
		}
	}
	phase("FINALIZING", func() (string, string) { return "", "" })
	if err := s.putLog(context.WithoutCancel(ctx), b, log); err != nil {
		// The build's result stands; its log is what the builder could
		// not read.
		fmt.Fprintf(os.Stderr, "codebuildlocal: the log of %s: %v\n", b.id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b.phases = append(b.phases, phaseView{PhaseType: "COMPLETED", StartTime: epoch(time.Now())})
	b.current, b.end = "COMPLETED", time.Now()
	b.status = "SUCCEEDED"
	if !ok || failed != "" {
		b.status = "FAILED"
	}
}

func (s *Server) setPhase(b *build, p phaseView) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b.phases = append(b.phases, p)
	b.current = p.PhaseType
}

func (s *Server) endPhase(b *build, status, code, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &b.phases[len(b.phases)-1]
	now := time.Now()
	p.PhaseStatus, p.EndTime = status, epoch(now)
	p.DurationInSeconds = int64(now.Sub(time.Unix(0, int64(p.StartTime*1e9))).Seconds())
	if code != "" {
		p.Contexts = []phaseContext{{StatusCode: code, Message: msg}}
	}
}

// checkRuntimes fails the install phase as CodeBuild does when the
// buildspec asks for a runtime version the image does not have.
func (s *Server) checkRuntimes(want map[string]any) (string, string) {
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		v := fmt.Sprint(want[name])
		if have := s.opts.Runtimes[name]; have != v {
			return "YAML_FILE_ERROR", fmt.Sprintf("Unknown runtime version named '%s' of %s. This build image has the following versions: %s", v, name, have)
		}
	}
	return "", ""
}

// environ is a build's commands' environment.
func (s *Server) environ(b *build, srcDir string) []string {
	env := map[string]string{
		"PATH":                     toolsDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":                     "/tmp/home",
		"LANG":                     "C.UTF-8",
		"TMPDIR":                   "/tmp",
		"CODEBUILD_BUILD_ID":       b.id,
		"CODEBUILD_BUILD_ARN":      "arn:aws:codebuild:" + b.region + ":000000000000:build/" + b.id,
		"CODEBUILD_BUILD_NUMBER":   fmt.Sprint(b.number),
		"CODEBUILD_BUILD_IMAGE":    "codebuildlocal",
		"CODEBUILD_INITIATOR":      "codebuildlocal",
		"CODEBUILD_SRC_DIR":        srcDir,
		"CODEBUILD_SOURCE_VERSION": b.source,
		"CODEBUILD_START_TIME":     fmt.Sprint(b.start.UnixMilli()),
		"AWS_REGION":               b.region,
		"AWS_DEFAULT_REGION":       b.region,
		"AWS_ENDPOINT_URL":         aws.ToString(s.opts.AWS.BaseEndpoint),
		// The emulator's addresses are IPs: path-style S3 URLs.
		"AWS_CONFIG_FILE": "/tmp/home/.aws/config",
	}
	if creds, err := s.opts.AWS.Credentials.Retrieve(context.Background()); err == nil {
		env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = creds.AccessKeyID, creds.SecretAccessKey
	}
	for k, v := range s.opts.Env {
		env[k] = v
	}
	for k, v := range b.spec.Env.Variables {
		env[k] = v
	}
	for k, v := range b.env {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// command runs one command with `bash -c` in the build's own mount
// namespace (its /tmp and /opt), in the source directory.
func (s *Server) command(ctx context.Context, command string, env []string, root, srcDir string, log *buildLog) error {
	// The AWS CLI's configuration: path-style addressing for the
	// emulator's IP endpoint.
	cfg := filepath.Join(root, "tmp", "home", ".aws", "config")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfg, []byte("[default]\ns3 =\n    addressing_style = path\n"), 0o644); err != nil {
		return err
	}
	// Mounts first (root's paths are under the host's /tmp, hidden once
	// /tmp is the build's), then the command in the source directory. A
	// module root under the host's /tmp (a clone in /tmp: the tools and
	// the wheelhouse are there) stays visible at its path: it is bound
	// into the build's /tmp, which is then mounted with its submounts.
	script := `set -e
for keep in "${@:4}"; do mkdir -p "$1/tmp${keep#/tmp}"; mount --bind "$keep" "$1/tmp${keep#/tmp}"; done
mount --bind "$1/opt" /opt
mount --rbind "$1/tmp" /tmp
cd "$2"
exec bash -c "$3"`
	args := []string{"--mount", "--propagation", "private", "/bin/bash", "-c", script, "bash", root, srcDir, command}
	if s.opts.Root == "/tmp" || strings.HasPrefix(s.opts.Root, "/tmp/") {
		args = append(args, s.opts.Root)
	}
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	log.flush()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("exit status %d", exit.ExitCode())
	}
	return err
}

// buildLog is a build's log: its lines with their times.
type buildLog struct {
	mu      sync.Mutex
	lines   []cwtypes.InputLogEvent
	partial bytes.Buffer
}

// add appends a line of CodeBuild's own ("[Container] ...").
func (l *buildLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.lines = append(l.lines, cwtypes.InputLogEvent{Message: aws.String("[Container] " + now.UTC().Format("2006/01/02 15:04:05.000000") + " " + line),
		Timestamp: aws.Int64(now.UnixMilli())})
}

// Write takes a command's output, a line at a time.
func (l *buildLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial.Write(p)
	for {
		line, err := l.partial.ReadString('\n')
		if err != nil {
			l.partial.Reset()
			l.partial.WriteString(line)
			return len(p), nil
		}
		l.output(strings.TrimRight(line, "\n"))
	}
}

// flush ends a command's last line without a newline.
func (l *buildLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.partial.Len() > 0 {
		l.output(l.partial.String())
		l.partial.Reset()
	}
}

// output appends a line of a command's output (CloudWatch Logs takes no
// empty message: an empty line is a space).
func (l *buildLog) output(line string) {
	if line == "" {
		line = " "
	}
	l.lines = append(l.lines, cwtypes.InputLogEvent{Message: aws.String(line), Timestamp: aws.Int64(time.Now().UnixMilli())})
}

// putLog writes the build's log to the emulator's CloudWatch Logs, where
// BatchGetBuilds says it is.
func (s *Server) putLog(ctx context.Context, b *build, log *buildLog) error {
	c := cloudwatchlogs.NewFromConfig(s.opts.AWS)
	group := LogGroup(b.project)
	if _, err := c.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(group)}); err != nil {
		var exists *cwtypes.ResourceAlreadyExistsException
		if !errors.As(err, &exists) {
			return err
		}
	}
	if _, err := c.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String(group), LogStreamName: aws.String(b.stream)}); err != nil {
		return err
	}
	log.mu.Lock()
	lines := append([]cwtypes.InputLogEvent{}, log.lines...)
	log.mu.Unlock()
	for len(lines) > 0 {
		n := min(len(lines), 1000)
		if _, err := c.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String(group), LogStreamName: aws.String(b.stream), LogEvents: lines[:n]}); err != nil {
			return err
		}
		lines = lines[n:]
	}
	return nil
}

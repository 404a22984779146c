package codebuildlocal_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	cb "github.com/aws/aws-sdk-go-v2/service/codebuild"
	"github.com/aws/aws-sdk-go-v2/service/codebuild/types"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/awstest/codebuildlocal"
	"github.com/stepgraph/stepgraph/internal/lambdaapp/sample"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// What a build does with its buildspec, as CodeBuild does it: phases in
// order, stopping at the first failing command with CodeBuild's phase
// message (post_build still runs after a failed build), runtime-versions
// the image lacks failing install, variables by precedence (StartBuild's
// override, the project's, the buildspec's), commands in the source
// directory with a /tmp of the build's own (the module root still seen
// when it is under the machine's /tmp), the log in CloudWatch Logs.
func TestBuilds(t *testing.T) {
	ep := awstest.Start(t)
	root, err := sample.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	root = rootUnderTmp(t, root)
	project := strings.ToLower(awstest.Prefix(t)) + "p"
	srv, err := codebuildlocal.Start(codebuildlocal.Options{
		Project: codebuildlocal.Project{Name: project, Env: map[string]string{"WHO": "project", "PROJECT_ONLY": "p", "MARK": project}},
		AWS:     ep.Config, Root: root, Runtimes: map[string]string{"python": "3.11"}, WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := cb.NewFromConfig(ep.Config, func(o *cb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	logs := cloudwatchlogs.NewFromConfig(ep.Config)

	const head = "version: 0.2\nenv:\n  shell: bash\n  variables:\n    WHO: buildspec\n    SPEC_ONLY: s\nphases:\n"
	for _, tc := range []struct {
		name, spec string
		status     types.StatusType
		phases     string // type:status of the buildspec's phases run
		message    string // the failed phase's message
		log        []string
	}{
		{name: "all succeed", status: types.StatusTypeSucceeded, phases: "INSTALL:SUCCEEDED BUILD:SUCCEEDED",
			spec: head + "  install:\n    runtime-versions:\n      python: 3.11\n    commands:\n      - python3.11 -c 'import sys; print(\"py\", sys.version_info[:2])'\n" +
				"  build:\n    commands:\n      - echo \"$WHO $PROJECT_ONLY $SPEC_ONLY $OVERRIDE\" && test \"$PWD\" = \"$CODEBUILD_SRC_DIR\"\n      - echo mine > \"/tmp/$MARK\" && cat \"/tmp/$MARK\"\n",
			log: []string{"py (3, 11)", "override p s yes", "mine", "Phase complete: BUILD State: SUCCEEDED"}},
		{name: "a failed build runs post_build", status: types.StatusTypeFailed, phases: "BUILD:FAILED POST_BUILD:SUCCEEDED",
			spec:    head + "  build:\n    commands:\n      - echo before\n      - exit 3\n      - echo never\n  post_build:\n    commands:\n      - echo after\n",
			message: "Error while executing command: exit 3. Reason: exit status 3",
			log:     []string{"before", "Command did not exit successfully exit 3 exit status 3", "after"}},
		{name: "a failed install skips the rest", status: types.StatusTypeFailed, phases: "INSTALL:FAILED",
			spec:    head + "  install:\n    commands:\n      - false\n  build:\n    commands:\n      - echo never\n  post_build:\n    commands:\n      - echo never\n",
			message: "Error while executing command: false. Reason: exit status 1"},
		{name: "a runtime the image lacks", status: types.StatusTypeFailed, phases: "INSTALL:FAILED",
			spec:    head + "  install:\n    runtime-versions:\n      python: 3.12\n    commands:\n      - echo never\n",
			message: "Unknown runtime version named '3.12' of python. This build image has the following versions: 3.11"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.StartBuild(t.Context(), &cb.StartBuildInput{ProjectName: aws.String(project), BuildspecOverride: aws.String(tc.spec),
				EnvironmentVariablesOverride: []types.EnvironmentVariable{
					{Name: aws.String("WHO"), Value: aws.String("override")}, {Name: aws.String("OVERRIDE"), Value: aws.String("yes")}}})
			if err != nil {
				t.Fatal(err)
			}
			var b types.Build
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
				got, err := c.BatchGetBuilds(t.Context(), &cb.BatchGetBuildsInput{Ids: []string{aws.ToString(out.Build.Id)}})
				if err != nil || len(got.Builds) != 1 {
					t.Fatalf("%+v %v", got, err)
				}
				if b = got.Builds[0]; b.BuildStatus != types.StatusTypeInProgress || time.Now().After(deadline) {
					break
				}
			}
			var phases []string
			message := ""
			for _, p := range b.Phases {
				switch p.PhaseType {
				case types.BuildPhaseTypeInstall, types.BuildPhaseTypePreBuild, types.BuildPhaseTypeBuild, types.BuildPhaseTypePostBuild:
					phases = append(phases, string(p.PhaseType)+":"+string(p.PhaseStatus))
				}
				if p.PhaseStatus == types.StatusTypeFailed && len(p.Contexts) == 1 {
					message = aws.ToString(p.Contexts[0].Message)
				}
			}
			if b.BuildStatus != tc.status || strings.Join(phases, " ") != tc.phases || message != tc.message {
				t.Errorf("build %s, phases %v, message %q; want %s, %s, %q", b.BuildStatus, phases, message, tc.status, tc.phases, tc.message)
			}
			events, err := logs.GetLogEvents(t.Context(), &cloudwatchlogs.GetLogEventsInput{LogGroupName: b.Logs.GroupName, LogStreamName: b.Logs.StreamName, StartFromHead: aws.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			for _, e := range events.Events {
				text.WriteString(aws.ToString(e.Message) + "\n")
			}
			for _, want := range tc.log {
				if !strings.Contains(text.String(), want) {
					t.Errorf("the log lacks %q:\n%s", want, text.String())
				}
			}
			if strings.Contains(text.String(), "echo never") {
				t.Errorf("a command after the failure ran:\n%s", text.String())
			}
		})
	}
	if _, err := os.Stat(filepath.Join("/tmp", project)); err == nil {
		t.Error("a build wrote the machine's /tmp")
	}
}

// rootUnderTmp is a module root under the machine's /tmp, as a clone there
// has it (which each build's own /tmp would hide): its tools' venvs are
// links to root's.
func rootUnderTmp(t *testing.T, root string) string {
	t.Helper()
	if strings.HasPrefix(root, "/tmp/") {
		return root // a clone in /tmp already (links to it would be hidden)
	}
	dir, err := os.MkdirTemp("/tmp", "codebuildlocal-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, venv := range []string{".venv", codebuildlocal.AWSCLIVenv} {
		if err := os.Symlink(filepath.Join(root, venv), filepath.Join(dir, venv)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

package lambdaapp

import (
	"context"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/sources/git"
	"github.com/stepgraph/stepgraph/internal/sources/gittest"
)

// The deploy worker (and the API functions, which check repo_url when a
// deployment is created) read git sources as the local server does by
// default: no local repositories, https through the SSRF guard, the default
// limits, fetches under /tmp. Nothing here calls AWS.
func TestGitSourcesOnLambda(t *testing.T) {
	srv := gittest.NewServer(t)
	repo := srv.AddFiles(t, "agent", map[string][]byte{"langgraph.json": []byte(`{"graphs": {}}`)})
	for _, role := range []Role{RoleDeployWorker, RoleAPI} {
		a, err := Open(Config{Role: role, TablePrefix: "p-", SecretsPrefix: "p/",
			RunStateMachineARN:    "arn:aws:states:us-east-1:000000000000:stateMachine:runs",
			DeployStateMachineARN: "arn:aws:states:us-east-1:000000000000:stateMachine:deploys"}, testAWS(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c, ok := a.Deployments.Sources.(*git.Checker)
		if !ok {
			t.Fatalf("%v: sources %T", role, a.Deployments.Sources)
		}
		if c.TempDir != "/tmp" || len(c.LocalDirs) != 0 || c.MaxBytes != 0 || c.MaxObjectBytes != 0 || c.Timeout != 0 {
			t.Errorf("%v: checker %+v, want /tmp and the defaults", role, c)
		}
		if err := c.CheckURL("file:///var/task"); err == nil || !strings.Contains(err.Error(), "local repositories (file:// URLs and local paths) are disabled") {
			t.Errorf("%v: file:// on Lambda: %v", role, err)
		}
		_, err = c.Check(context.Background(), repo, "main", "langgraph.json")
		if err == nil || !strings.Contains(err.Error(), "its host is a private, loopback, link-local or metadata address") {
			t.Errorf("%v: loopback git host: %v", role, err)
		}
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("the git server answered %d requests", n)
	}
}

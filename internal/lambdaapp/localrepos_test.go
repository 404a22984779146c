package lambdaapp

import (
	"strings"
	"testing"
)

// A deployed function's environment cannot open local repositories: only
// the emulator tests' binaries (-tags stepgraph_faults) take
// EnvLocalRepoDirs; any other build refuses to start, naming it.
func TestLocalRepoDirsFromEnv(t *testing.T) {
	env := map[string]string{EnvTablePrefix: "p-", EnvSecretsPrefix: "p/", EnvDeployStateMachineARN: "arn:aws:states:us-east-1:123456789012:stateMachine:provision",
		EnvLocalRepoDirs: "/srv/repos"}
	c, err := FromEnv(RoleDeployWorker, lookupIn(env))
	switch {
	case localReposFromEnv && (err != nil || c.LocalRepoDirs != "/srv/repos"):
		t.Fatalf("a test binary: %+v %v", c, err)
	case !localReposFromEnv && (err == nil || !strings.Contains(err.Error(), EnvLocalRepoDirs) || !strings.Contains(err.Error(), "https://")):
		t.Fatalf("a deployed function took %s: %+v %v", EnvLocalRepoDirs, c, err)
	}
	if back, err := FromEnv(RoleDeployWorker, lookupIn((Config{TablePrefix: "p-", SecretsPrefix: "p/", DeployStateMachineARN: env[EnvDeployStateMachineARN]}).Env())); err != nil || back.LocalRepoDirs != "" {
		t.Fatalf("no local repositories by default: %+v %v", back, err)
	}
}

package pyapp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvCommandAnswers: the env module's one line is its answer, its
// refusal (an *EnvRefusal with the type and message), or missing (an error
// naming the command with its standard error).
func TestEnvCommandAnswers(t *testing.T) {
	rt := t.TempDir()
	pkg := filepath.Join(rt, "stepgraph_runtime")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	// A stand-in module printing what its first argument says.
	module := `import sys
answers = {
    "ok": '{"installed": ["a==1"]}',
    "refuse": '{"error": {"error": "DependencyError", "message": "pip could not install x==1"}}',
}
if sys.argv[1] in answers:
    print(answers[sys.argv[1]])
else:
    sys.stderr.write("boom in the module\n")
    sys.exit(3)
`
	for name, data := range map[string]string{"__init__.py": "", "env.py": module} {
		if err := os.WriteFile(filepath.Join(pkg, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(arg string) ([]string, error) {
		var answer struct {
			Installed []string `json:"installed"`
		}
		err := envCommand{Python: "python3", Args: []string{arg}, Env: append(baseEnv(), "PYTHONPATH="+rt)}.run(context.Background(), &answer)
		return answer.Installed, err
	}
	if got, err := run("ok"); err != nil || len(got) != 1 || got[0] != "a==1" {
		t.Errorf("answer: %v %v", got, err)
	}
	_, err := run("refuse")
	var refused *EnvRefusal
	if !errors.As(err, &refused) || refused.Type != "DependencyError" || refused.Message != "pip could not install x==1" {
		t.Errorf("refusal: %#v", err)
	}
	_, err = run("crash")
	if err == nil || errors.As(err, &refused) || !strings.Contains(err.Error(), "stepgraph_runtime.env") || !strings.Contains(err.Error(), "boom in the module") {
		t.Errorf("no answer: %v", err)
	}
}

package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestImportRules holds the rules on the module's real dependency graph.
func TestImportRules(t *testing.T) {
	for _, v := range Violations(modulePackages(t)) {
		t.Error(v)
	}
}

// modulePackages lists every package of the main module with go list.
func modulePackages(t *testing.T) []Package {
	t.Helper()
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = strings.TrimSpace(string(root))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 40 {
		t.Fatalf("go list found %d packages: not the module", len(pkgs))
	}
	return pkgs
}

// Each rule reports a violation planted in a made-up graph, and a clean
// graph passes.
func TestRulesCatchViolations(t *testing.T) {
	const m = module + "/"
	clean := []Package{
		{ImportPath: m + "cmd/stepgraph", Imports: []string{m + "internal/store/sqlite", m + "internal/runs"}},
		{ImportPath: m + "internal/runs", Imports: []string{m + "internal/store", m + "internal/graph"},
			Deps: []string{m + "internal/store", m + "internal/graph", "github.com/google/uuid"}},
		{ImportPath: m + "internal/store/sqlite", Imports: []string{"modernc.org/sqlite"}, Deps: []string{"modernc.org/sqlite"}},
		{ImportPath: m + "internal/graph"},
	}
	if v := Violations(clean); len(v) != 0 {
		t.Fatalf("a clean graph has violations: %v", v)
	}
	cases := []struct {
		name  string
		plant Package
		want  string
	}{
		{"a use case depends on SQLite through another package",
			Package{ImportPath: m + "internal/deployments", Imports: []string{m + "internal/store/sqlite"},
				Deps: []string{m + "internal/store/sqlite", "modernc.org/sqlite"}},
			"internal/deployments (core) depends on the adapter library modernc.org/sqlite (through " + m + "internal/store/sqlite)"},
		{"the format holds an AWS client",
			Package{ImportPath: m + "internal/graphdoc", Imports: []string{"github.com/aws/aws-sdk-go-v2/service/lambda"},
				Deps: []string{"github.com/aws/aws-sdk-go-v2/service/lambda"}},
			"internal/graphdoc (core) depends on the adapter library github.com/aws/aws-sdk-go-v2/service/lambda"},
		{"the API depends on go-git",
			Package{ImportPath: m + "internal/api", Deps: []string{"github.com/go-git/go-git/v5"}},
			"internal/api (core) depends on the adapter library github.com/go-git/go-git/v5"},
		{"a use case picks an adapter",
			Package{ImportPath: m + "internal/providers", Imports: []string{m + "internal/secrets/local"}},
			"internal/providers (core) imports the adapter internal/secrets/local"},
		{"an adapter picks another",
			Package{ImportPath: m + "internal/dispatch/sfn", Imports: []string{m + "internal/store/dynamo"}},
			"internal/dispatch/sfn (adapter) imports the adapter internal/store/dynamo"},
		{"the engine imports the project",
			Package{ImportPath: m + "internal/graph", Imports: []string{m + "internal/fail"}},
			"internal/graph (the engine) imports internal/fail"},
		{"a package on no part",
			Package{ImportPath: m + "internal/newthing"},
			"internal/newthing is on no part of the map"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Violations(append(clean, c.plant))
			if len(v) == 0 || !strings.Contains(strings.Join(v, "\n"), c.want) {
				t.Errorf("violations %q, want one containing %q", v, c.want)
			}
		})
	}
}

package functions_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/stepgraph/stepgraph/internal/lambdaapp"
)

// routes.json, the function table, the mains and the OpenAPI document agree.
func TestRoutes(t *testing.T) {
	raw, err := os.ReadFile("routes.json")
	if err != nil {
		t.Fatal(err)
	}
	var file []lambdaapp.Function
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(file, lambdaapp.Functions) {
		want, _ := json.MarshalIndent(lambdaapp.Functions, "", "  ")
		t.Fatalf("functions/routes.json differs from lambdaapp.Functions; it should read:\n%s", want)
	}

	start := map[string]string{"api": `lambdaapp\.StartAPI\("%s"\)`, "run-worker": `lambdaapp\.StartRunWorker\(\)`,
		"deploy-worker": `lambdaapp\.StartDeployWorker\(\)`, "cron-fire": `lambdaapp\.StartCronFire\(\)`}
	dirs, _ := filepath.Glob("*/main.go")
	if len(dirs) != len(lambdaapp.Functions) {
		t.Errorf("%d mains under functions/, %d functions listed", len(dirs), len(lambdaapp.Functions))
	}
	routed := map[string]string{}
	for _, f := range lambdaapp.Functions {
		src, err := os.ReadFile(filepath.Join(f.Name, "main.go"))
		if err != nil {
			t.Errorf("function %s: %v", f.Name, err)
			continue
		}
		pattern := start[f.Role]
		if f.Role == "api" {
			pattern = strings.Replace(pattern, "%s", regexp.QuoteMeta(f.Name), 1)
		}
		if !regexp.MustCompile(pattern).Match(src) {
			t.Errorf("functions/%s/main.go does not start the %s handler", f.Name, f.Role)
		}
		for _, r := range f.Routes {
			if prev, ok := routed[r]; ok {
				t.Errorf("route %s goes to %s and %s", r, prev, f.Name)
			}
			routed[r] = f.Name
		}
	}

	doc, err := os.ReadFile(filepath.Join("..", "internal", "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(doc, &spec); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for path, methods := range spec.Paths {
		for m := range methods {
			switch m {
			case "get", "post", "put", "patch", "delete":
				ops = append(ops, strings.ToUpper(m)+" "+path)
			}
		}
	}
	sort.Strings(ops)
	for _, op := range ops {
		if _, ok := routed[op]; !ok {
			t.Errorf("operation %s is routed to no function", op)
		}
		delete(routed, op)
	}
	for r, f := range routed {
		t.Errorf("route %s of %s is no operation of openapi.yaml", r, f)
	}
}

package stack

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// Route is one operation of the OpenAPI document and the function that
// serves it behind the HTTP API.
type Route struct {
	Method   string // upper case: GET, POST, PATCH, DELETE, PUT
	Path     string // the document's path template, e.g. /threads/{thread_id}
	Function string // a name of Functions
	Stream   bool   // its function's responses stream behind the REST API
}

// Key is the route's API Gateway route key, "METHOD /path".
func (r Route) Key() string { return r.Method + " " + r.Path }

// FunctionEntry is one function of functions/routes.json, the list the main
// module keeps of its Lambdas (internal/lambdaapp.Functions) for tools
// outside it: name, role ("api", "run-worker", "deploy-worker"), for API
// functions the route keys it serves, and its grants.
type FunctionEntry struct {
	Name   string   `json:"name"`
	Role   string   `json:"role"`
	Routes []string `json:"routes"`
	// Stream: the REST API streams every route of the function
	// (integration ResponseTransferMode STREAM through
	// InvokeWithResponseStream, up to 15 minutes).
	Stream bool   `json:"stream"`
	Grants Grants `json:"grants"`
}

// Grants is what a function may do (internal/lambdaapp.Grants, where the
// main module derives them from the code behind each function's routes):
// the stack grants each function's role exactly this, in IAM terms
// (policy.go).
type Grants struct {
	// Tables: table name without the prefix → AccessRead or AccessWrite.
	Tables map[string]string `json:"tables"`
	// Secrets: kind (SecretKinds) → actions (SecretActions).
	Secrets map[string][]string `json:"secrets"`
	// Executions: keys of ExecutionGrants.
	Executions []string `json:"executions"`
	// Runtimes: RuntimesInvoke, RuntimesManage.
	Runtimes []string `json:"runtimes"`
	// Schedules: SchedulesManage.
	Schedules []string `json:"schedules"`
	// Vault: actions (VaultActions) on agent auth's token vault: its items
	// are in the providers table (granted apart, under Tables), their data
	// keys wrapped by the stack's vault KMS key.
	Vault []string `json:"vault"`
	// Builds: BuildsStart, on the stack's app-build project (appbuild.go).
	Builds []string `json:"builds"`
	// Tenant: one organization's session (tenant.go), the run worker's.
	Tenant *TenantGrants `json:"tenant"`
}

var openapiMethods = []string{"get", "put", "post", "delete", "patch", "head", "options"}

// Operations lists the route keys ("METHOD /path") of every operation of an
// OpenAPI document, in document order of paths and then method.
func Operations(doc []byte) ([]string, error) {
	var d struct {
		Paths yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	if d.Paths.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("openapi: no paths")
	}
	var ops []string
	for i := 0; i+1 < len(d.Paths.Content); i += 2 {
		path := d.Paths.Content[i].Value
		var item map[string]yaml.Node
		if err := d.Paths.Content[i+1].Decode(&item); err != nil {
			return nil, fmt.Errorf("openapi: path %s: %w", path, err)
		}
		for _, m := range openapiMethods {
			if _, ok := item[m]; ok {
				ops = append(ops, strings.ToUpper(m)+" "+path)
			}
		}
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("openapi: no operations")
	}
	return ops, nil
}

// LoadRoutes returns one Route per operation of internal/api/openapi.yaml
// under repoRoot, each to the function functions/routes.json assigns it, and
// the functions of routes.json. The document decides which routes exist;
// routes.json only which function serves each. It fails when an operation
// has no function, when routes.json routes something the document does not
// have, or assigns an operation twice, so neither file can drift from the
// other unnoticed.
func LoadRoutes(repoRoot string) ([]Route, []FunctionEntry, error) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "internal", "api", "openapi.yaml"))
	if err != nil {
		return nil, nil, err
	}
	ops, err := Operations(doc)
	if err != nil {
		return nil, nil, err
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, "functions", "routes.json"))
	if err != nil {
		return nil, nil, err
	}
	var fns []FunctionEntry
	if err := json.Unmarshal(raw, &fns); err != nil {
		return nil, nil, fmt.Errorf("functions/routes.json: %w", err)
	}
	routes, err := assign(ops, fns)
	return routes, fns, err
}

func assign(ops []string, fns []FunctionEntry) ([]Route, error) {
	inDoc := map[string]bool{}
	for _, op := range ops {
		inDoc[op] = true
	}
	owner := map[string]string{}
	streams := map[string]bool{}
	for _, f := range fns {
		streams[f.Name] = f.Stream
		if f.Role != "api" && len(f.Routes) > 0 {
			return nil, fmt.Errorf("functions/routes.json: %s (role %s) has routes", f.Name, f.Role)
		}
		for _, key := range f.Routes {
			if !inDoc[key] {
				return nil, fmt.Errorf("functions/routes.json: %s routes %q, which is not an operation of internal/api/openapi.yaml", f.Name, key)
			}
			if prev, dup := owner[key]; dup {
				return nil, fmt.Errorf("functions/routes.json: %q is routed to both %s and %s", key, prev, f.Name)
			}
			owner[key] = f.Name
		}
	}
	var routes []Route
	for _, op := range ops {
		fn, ok := owner[op]
		if !ok {
			return nil, fmt.Errorf("operation %s of internal/api/openapi.yaml has no function in functions/routes.json", op)
		}
		method, path, _ := strings.Cut(op, " ")
		routes = append(routes, Route{Method: method, Path: path, Function: fn, Stream: streams[fn]})
	}
	return routes, nil
}

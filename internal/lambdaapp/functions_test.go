package lambdaapp

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

// An API function opened under its name serves its routes and nothing
// else: the routes of other functions answer 404 (405 for a method the
// path lacks) without reaching a use case, whatever reaches the function
// (the system function gets API Gateway's $default route: any request no
// route matched).
func TestAPIFunctionServesOnlyItsRoutes(t *testing.T) {
	open := func(fn string) *App {
		t.Helper()
		a, err := Open(Config{Role: RoleAPI, Function: fn, TablePrefix: "p-", SecretsPrefix: "p/",
			RunStateMachineARN:    "arn:aws:states:us-east-1:000000000000:stateMachine:run",
			DeployStateMachineARN: "arn:aws:states:us-east-1:000000000000:stateMachine:deploy"}, testAWS(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	threads, system, all := open("threads"), open("system"), open("")
	for _, tc := range []struct {
		name   string
		app    *App
		method string
		path   string
		status int
	}{
		// No key: a served operation answers 401 before any AWS call.
		{"threads serves its routes", threads, "POST", "/threads", 401},
		{"threads serves its routes", threads, "GET", "/threads/t1/state", 401},
		{"not another function's", threads, "GET", "/ok", 404},
		{"not another function's", threads, "POST", "/runs/wait", 404},
		{"system serves its public routes", system, "GET", "/ok", 200},
		{"system serves its public routes", system, "GET", "/info", 200},
		{"no authenticated route through $default", system, "GET", "/threads/t1", 404},
		{"no authenticated route through $default", system, "POST", "/v2/auth/providers", 404},
		{"HEAD is no route of the document", system, "HEAD", "/threads/5b1c7c2a-4c1e-4f0e-9a3e-1d2c3b4a5f60", 405},
		{"a word where an id goes is no route", system, "HEAD", "/threads/t1", 404},
		{"unknown paths", system, "GET", "/nope", 404},
		{"without a name, every operation", all, "GET", "/ok", 200},
		{"without a name, every operation", all, "POST", "/threads", 401},
	} {
		resp := serve(t, tc.app.Handler, request(tc.method, tc.path))
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %s %s: %d %s, want %d", tc.name, tc.method, tc.path, resp.StatusCode, resp.Body, tc.status)
		}
	}
	for _, fn := range []string{"nope", "run-worker"} {
		_, err := Open(Config{Role: RoleAPI, Function: fn, TablePrefix: "p-", SecretsPrefix: "p/",
			RunStateMachineARN:    "arn:aws:states:us-east-1:000000000000:stateMachine:run",
			DeployStateMachineARN: "arn:aws:states:us-east-1:000000000000:stateMachine:deploy"}, testAWS(), nil)
		if err == nil || !strings.Contains(err.Error(), fn) {
			t.Errorf("API function %q: %v, want an error naming it", fn, err)
		}
	}
}

// The grants use the vocabulary infra/stack translates to IAM, name real
// tables, and follow the rules every function of a role shares.
func TestGrantsVocabulary(t *testing.T) {
	tables := map[string]bool{}
	for _, in := range dynamo.TableDefinitions("") {
		tables[aws.ToString(in.TableName)] = true
	}
	kinds := []string{SecretProviders, SecretDeployments, SecretOrgs, SecretAgentAuth, SecretStore}
	actions := []string{SecretCreate, SecretGet, SecretDelete}
	for _, f := range Functions {
		g := f.Grants
		for table, access := range g.Tables {
			if !tables[table] {
				t.Errorf("%s: table %q is no table of dynamo.TableDefinitions", f.Name, table)
			}
			if access != Read && access != Write {
				t.Errorf("%s: table %s: access %q, want %q or %q", f.Name, table, access, Read, Write)
			}
		}
		for kind, acts := range g.Secrets {
			if !slices.Contains(kinds, kind) {
				t.Errorf("%s: secret kind %q, want one of %v", f.Name, kind, kinds)
			}
			seen := map[string]bool{}
			for _, a := range acts {
				if !slices.Contains(actions, a) || seen[a] {
					t.Errorf("%s: secrets %s: action %q, want each of %v at most once", f.Name, kind, a, actions)
				}
				seen[a] = true
			}
			if len(acts) == 0 {
				t.Errorf("%s: secrets %s: no action", f.Name, kind)
			}
		}
		seen := map[string]bool{}
		for _, a := range g.Vault {
			if !slices.Contains(actions, a) || seen[a] {
				t.Errorf("%s: vault: action %q, want each of %v at most once", f.Name, a, actions)
			}
			seen[a] = true
		}
		if len(g.Vault) > 0 && g.Tables[dynamo.TableProviders] != Write {
			t.Errorf("%s: vault grants without write on the providers table, where the vault's items are", f.Name)
		}
		for _, e := range g.Executions {
			if !slices.Contains([]string{StartRun, StartRunExpress, DescribeRun, StartDeploy, ListDeploy, WakeRun}, e) {
				t.Errorf("%s: execution grant %q", f.Name, e)
			}
		}
		for _, r := range g.Runtimes {
			if !slices.Contains([]string{InvokeRuntimes, ManageRuntimes}, r) {
				t.Errorf("%s: runtime grant %q", f.Name, r)
			}
		}
		for _, sc := range g.Schedules {
			if sc != ManageSchedules {
				t.Errorf("%s: schedule grant %q", f.Name, sc)
			}
		}
		// Every API function with an authenticated route reads the keys;
		// the one with public routes only (system) is granted nothing.
		if f.Role == RoleAPI.String() {
			if f.Name == "system" {
				if len(g.Tables)+len(g.Secrets)+len(g.Executions)+len(g.Runtimes)+len(g.Schedules) != 0 {
					t.Errorf("system: grants %+v, want none (public routes only)", g)
				}
			} else if g.Tables[dynamo.TableOrganizations] == "" {
				t.Errorf("%s: authenticates every request, and cannot read %s", f.Name, dynamo.TableOrganizations)
			}
			if slices.Contains(g.Runtimes, ManageRuntimes) {
				t.Errorf("%s: only the deploy worker makes runtimes", f.Name)
			}
		}
	}
}

// An organization's secrets are tagged with it; a deployment's, named
// after the deployment, and the operator's are not.
func TestOrgTags(t *testing.T) {
	for name, want := range map[string]string{
		"providers/o1/values.0":            "o1",
		"orgs/o1/webhook-0123456789abcdef": "o1",
		"agentauth/o1/gh/u1-abc":           "o1",
		"deployments/d1/values.0":          "",
		"store/embeddings":                 "",
		"orgs//x":                          "",
	} {
		got := OrgTags(name)[OrgTag]
		if got != want || (want == "" && OrgTags(name) != nil) {
			t.Errorf("OrgTags(%q) = %v, want org %q", name, OrgTags(name), want)
		}
	}
}

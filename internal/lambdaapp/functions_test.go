package lambdaapp

import (
	"strings"
	"testing"
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
		{"HEAD is no route of the document", system, "HEAD", "/threads/t1", 405},
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

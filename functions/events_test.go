package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/lambdaapp/sample"
)

// functionOf is the function an event file is for: <function>.json or
// <function>.<variant>.json.
func functionOf(file string) string {
	name := strings.TrimSuffix(filepath.Base(file), ".json")
	fn, _, _ := strings.Cut(name, ".")
	return fn
}

// Every sample event goes through its function's handler, on the emulator,
// and gets the answer it shows.
func TestSampleEvents(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "events", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample events: %v", err)
	}
	covered := map[string]bool{}
	for _, f := range files {
		covered[functionOf(f)] = true
	}
	for _, f := range lambdaapp.Functions {
		if !covered[f.Name] {
			t.Errorf("function %s has no sample event in events/", f.Name)
		}
	}

	s := sharedStack(t)
	log := testLog(t)
	ctx := context.Background()
	vars, err := sample.Prepare(ctx, s, log)
	if err != nil {
		t.Fatal(err)
	}

	// What each sample must answer: API status and body checks, worker answers.
	type api struct {
		status int
		check  func(t *testing.T, body any)
	}
	object := func(keys ...string) func(*testing.T, any) {
		return func(t *testing.T, body any) {
			m, ok := body.(map[string]any)
			if !ok {
				t.Fatalf("body %v is not an object", body)
			}
			for _, k := range keys {
				if _, ok := m[k]; !ok {
					t.Errorf("body lacks %q: %v", k, m)
				}
			}
		}
	}
	array := func(t *testing.T, body any) {
		if _, ok := body.([]any); !ok {
			t.Fatalf("body %v is not an array", body)
		}
	}
	apis := map[string]api{
		"system.json":            {200, object("version")},
		"create-provider.json":   {200, object("provider_id", "client_id")},
		"providers.json":         {200, array},
		"create-deployment.json": {201, object("id", "latest_revision_id")},
		"deployments.json":       {200, object("id", "status")},
		"assistants.json":        {200, array},
		"threads.json":           {200, object("thread_id", "status")},
		"runs.json":              {200, array},
		"store.json":             {200, object("items")},
		"crons.json":             {200, array},
		"app-calls.json":         {200, object("results")},
		"thread-run-wait.json": {200, func(t *testing.T, body any) {
			if b, _ := json.Marshal(body); string(b) != `{"count":3,"steps":3}` {
				t.Errorf("counter answered %s", b)
			}
		}},
		"stateless-run-wait.json": {200, func(t *testing.T, body any) {
			if b, _ := json.Marshal(body); !strings.Contains(string(b), `"content":"echo: hello"`) {
				t.Errorf("echo answered %s", b)
			}
		}},
	}
	// Streamed answers (REST API events to the functions whose routes
	// stream): the SSE body.
	streamed := map[string]func(*testing.T, string){
		"run-stream.json": func(t *testing.T, body string) {
			if !strings.HasPrefix(body, "event: metadata\r\n") || !strings.Contains(body, `"content":"echo: hello"`) ||
				!strings.Contains(body, "id: 0\r\n") {
				t.Errorf("the stream: %q", body)
			}
		},
	}
	workers := map[string]string{
		"run-worker.json":           `{"run_id":"` + vars[sample.VarRunID] + `","status":"done","wait_seconds":0}`,
		"run-worker.abandon.json":   `{"run_id":"` + vars[sample.VarAbandonRunID] + `","status":"abandoned","wait_seconds":0}`,
		"deploy-worker.json":        `{"action":"provision","org_id":"` + vars[sample.VarOrgID] + `","deployment_id":"` + vars[sample.VarDeploymentID] + `","revision_id":"` + vars[sample.VarRevisionID] + `","status":"DEPLOYED"}`,
		"deploy-worker.delete.json": `{"action":"delete","org_id":"` + vars[sample.VarOrgID] + `","deployment_id":"` + vars[sample.VarDeleteDeploymentID] + `","status":"deleted"}`,
		"deploy-worker.resume.json": `{"action":"resume","status":"resumed"}`,
		// A delivery of a slot that is not due: nothing fires (the sample
		// cron's next slot is next January).
		"cron-fire.json": `null`,
	}

	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := sample.Expand(raw, vars)
			if err != nil {
				t.Fatal(err)
			}
			out, err := sample.Invoke(ctx, s, functionOf(file), ev, time.Minute, log)
			if err != nil {
				t.Fatalf("invoke: %v", err)
			}
			if want, ok := workers[name]; ok {
				if string(out) != want {
					t.Fatalf("answer %s\nwant   %s", out, want)
				}
				return
			}
			if check, ok := streamed[name]; ok {
				prelude, body, found := bytes.Cut(out, make([]byte, 8))
				var meta struct {
					StatusCode        int                 `json:"statusCode"`
					MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
				}
				if !found || json.Unmarshal(prelude, &meta) != nil {
					t.Fatalf("not a streamed integration response (prelude, eight NULs, body): %q", out)
				}
				if meta.StatusCode != 200 || !strings.HasPrefix(strings.Join(meta.MultiValueHeaders["Content-Type"], ","), "text/event-stream") {
					t.Fatalf("status %d, headers %v\n%s", meta.StatusCode, meta.MultiValueHeaders, body)
				}
				check(t, string(body))
				return
			}
			exp, ok := apis[name]
			if !ok {
				t.Fatalf("no expectation for %s: add one", name)
			}
			var resp events.APIGatewayV2HTTPResponse
			if err := json.Unmarshal(out, &resp); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != exp.status || resp.Headers["Content-Type"] != "application/json" {
				t.Fatalf("status %d, Content-Type %q; want %d, application/json\n%s", resp.StatusCode,
					resp.Headers["Content-Type"], exp.status, resp.Body)
			}
			var body any
			if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
				t.Fatalf("body is not JSON: %v\n%s", err, resp.Body)
			}
			exp.check(t, body)
		})
	}

	// The abandoned run ended with ExecutionLost, carrying the cause.
	a, err := s.Open(lambdaapp.RoleRunWorker, log)
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Runs.GetRun(ctx, vars[sample.VarOrgID], vars[sample.VarAbandonThreadID], vars[sample.VarAbandonRunID])
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Runs.Join(ctx, vars[sample.VarOrgID], vars[sample.VarAbandonThreadID], vars[sample.VarAbandonRunID])
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "error" || !strings.Contains(string(res), `"error":"ExecutionLost"`) || !strings.Contains(string(res), "exit status 2") {
		t.Errorf("abandoned run: %s %s", r.Status, res)
	}
}

package sample

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/calltoken"
	"github.com/stepgraph/stepgraph/internal/crons"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// Vars are the values of the sample events' placeholders.
type Vars map[string]string

// Placeholders filled by Prepare:
//
//	API_KEY               an API key of organization "sample"
//	ORG_ID                that organization
//	THREAD_ID             a thread of it (idle, no runs)
//	RUN_ID                a pending stateless run (echo) that nothing executes
//	ABANDON_RUN_ID        a pending run on a thread of its own, likewise
//	ABANDON_THREAD_ID     that thread
//	DEPLOYMENT_ID         a deployment whose first revision is CREATING; its
//	                      runtime is examples/python/runtime.py as a Lambda
//	                      (custom_url: the function's ARN, ExampleRuntime)
//	REVISION_ID           that revision
//	DELETE_DEPLOYMENT_ID  a deployment marked AWAITING_DELETE
//	CALL_TOKEN            a LangGraph app's call token for RUN_ID (app-calls)
const (
	VarAPIKey             = "API_KEY"
	VarOrgID              = "ORG_ID"
	VarThreadID           = "THREAD_ID"
	VarRunID              = "RUN_ID"
	VarAbandonRunID       = "ABANDON_RUN_ID"
	VarAbandonThreadID    = "ABANDON_THREAD_ID"
	VarDeploymentID       = "DEPLOYMENT_ID"
	VarRevisionID         = "REVISION_ID"
	VarDeleteDeploymentID = "DELETE_DEPLOYMENT_ID"
	VarCronID             = "CRON_ID"
	// VarCallToken is a LangGraph app's run-call token of the sample run
	// (calltoken), which app-calls' routes take instead of an API key.
	VarCallToken = "CALL_TOKEN"
)

// Prepare stores the records the sample events refer to, through the
// use cases of a worker-shaped app (no dispatcher, no provisioner: the runs
// stay pending and the revision CREATING until a sample event moves them).
func Prepare(ctx context.Context, s *Stack, log *slog.Logger) (Vars, error) {
	a, err := s.Open(lambdaapp.RoleRunWorker, log)
	if err != nil {
		return nil, err
	}
	v := Vars{}
	org, _, err := a.Keys.EnsureOrganization(ctx, "sample")
	if err != nil {
		return nil, err
	}
	v[VarOrgID] = org.ID
	if v[VarAPIKey], err = a.Keys.Create(ctx, org.ID); err != nil {
		return nil, err
	}
	tid := uuid.NewString()
	if _, err := a.Runs.CreateThread(ctx, org.ID, runs.ThreadInput{ThreadID: &tid}); err != nil {
		return nil, fmt.Errorf("create the sample thread: %w", err)
	}
	v[VarThreadID] = tid

	run := func(threadID, body string) (string, error) {
		var req runs.RunRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			return "", err
		}
		r, err := a.Runs.CreateRun(ctx, org.ID, threadID, req)
		return r.RunID, err
	}
	if v[VarRunID], err = run("", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"sample"}]}}`); err != nil {
		return nil, fmt.Errorf("create the sample run: %w", err)
	}
	v[VarAbandonThreadID] = uuid.NewString()
	if v[VarAbandonRunID], err = run(v[VarAbandonThreadID], `{"assistant_id":"counter","input":{"steps":2},"if_not_exists":"create"}`); err != nil {
		return nil, fmt.Errorf("create the run to abandon: %w", err)
	}

	// The sample deployment's runtime is a Lambda function: provisioning
	// it describes the example's graphs through Lambda Invoke. (An image
	// alone would need the platform to make a runtime from it, which the
	// emulator cannot run without Docker.)
	runtimeARN, err := s.ExampleRuntime(ctx)
	if err != nil {
		return nil, fmt.Errorf("deploy the example runtime: %w", err)
	}
	deployment := func(name, runtime string) (deployments.Deployment, error) {
		var in deployments.CreateInput
		doc := `{"name":"` + name + `","source":"external_docker","source_config":{"custom_url":"` + runtime + `"},` +
			`"source_revision_config":{"image_uri":"registry.example/` + name + `:1"}}`
		if err := json.Unmarshal([]byte(doc), &in); err != nil {
			return deployments.Deployment{}, err
		}
		return a.Deployments.Create(ctx, org.ID, in)
	}
	d, err := deployment("sample-agent", runtimeARN)
	if err != nil {
		return nil, fmt.Errorf("create the sample deployment: %w", err)
	}
	v[VarDeploymentID] = d.ID
	if d.LatestRevisionID == nil {
		return nil, fmt.Errorf("the sample deployment has no revision")
	}
	v[VarRevisionID] = *d.LatestRevisionID
	gone, err := deployment("sample-deleted", runtimeARN)
	if err != nil {
		return nil, fmt.Errorf("create the deployment to delete: %w", err)
	}
	if err := a.Deployments.Delete(ctx, org.ID, gone.ID); err != nil {
		return nil, err
	}
	v[VarDeleteDeploymentID] = gone.ID

	// A cron whose next slot is far off: the sample delivery finds it not
	// due, fires nothing and sets its schedule to that slot.
	var cron crons.CreateRequest
	if err := json.Unmarshal([]byte(`{"assistant_id":"echo","schedule":"0 0 1 1 *","input":{"messages":[]}}`), &cron); err != nil {
		return nil, err
	}
	c, err := a.Crons.Create(ctx, org.ID, "", cron)
	if err != nil {
		return nil, fmt.Errorf("create the sample cron: %w", err)
	}
	v[VarCronID] = c.CronID

	if a.CallTokens == nil {
		return nil, fmt.Errorf("the run worker signs no call tokens")
	}
	if v[VarCallToken], _, err = a.CallTokens.Issue(ctx, calltoken.Claims{OrgID: org.ID, RunID: v[VarRunID], AssistantID: "echo"},
		time.Hour); err != nil {
		return nil, fmt.Errorf("sign the sample call token: %w", err)
	}
	return v, nil
}

var placeholder = regexp.MustCompile(`\{\{([A-Z_]+)\}\}`)

// Expand replaces each {{NAME}} of event with vars[NAME]; a placeholder
// without a value is an error. Values are JSON-string safe (ids, keys).
func Expand(event []byte, vars Vars) ([]byte, error) {
	var missing []string
	out := placeholder.ReplaceAllFunc(event, func(m []byte) []byte {
		name := string(m[2 : len(m)-2])
		val, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return []byte(val)
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("no value for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

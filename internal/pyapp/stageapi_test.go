package pyapp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/assembly"
	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
	pyruntime "github.com/stepgraph/stepgraph/runtimes/python"
)

// stage is the stage's API served on 127.0.0.1 (the routes the runtime
// function calls back, /store and the rest), on the services that also run
// the runs, as the API and run-worker functions share a stage's tables.
type stage struct {
	url  string
	svc  *assembly.Services
	keys map[string]string // API key by organization id
	logs *lockedBuffer
	// events is the stage's event log: the calls' mailboxes.
	events store.Events
}

func startStage(t *testing.T, orgs ...string) *stage {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	sec, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := &stage{keys: map[string]string{}, logs: &lockedBuffer{}, events: db}
	log := slog.New(slog.NewJSONHandler(io.MultiWriter(st.logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	st.svc = assembly.Assemble(assembly.Adapters{Store: db, Events: db, Secrets: sec, AgentAuth: db}, assembly.Options{Log: log})
	h, err := api.New(st.svc.APIConfig())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); db.Close() })
	st.url = ts.URL
	st.svc.AgentAuth.CallbackBase = ts.URL // the OAuth redirect URIs
	ctx := context.Background()
	for _, org := range orgs {
		if err := db.CreateOrganization(ctx, store.Organization{ID: org, Name: org, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if st.keys[org], err = st.svc.Keys.Create(ctx, org); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// do calls the stage's API with org's API key.
func (st *stage) do(t *testing.T, org, method, path string, body any) (int, []byte) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest(method, st.url+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", st.keys[org])
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

// runIn runs the deployed graph of body in org on a new thread and answers
// runs/wait's body and the thread.
func runIn(t *testing.T, rs *runs.Service, org, body string) (map[string]any, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), perProcessDeadline)
	defer cancel()
	th, err := rs.CreateThread(ctx, org, runs.ThreadInput{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rs.CreateRun(ctx, org, th.ThreadID, req(t, body))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rs.Wait(ctx, org, th.ThreadID, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out, th.ThreadID
}

// TestBuiltZipReachesTheStageAPIOnMiniStack: a graph of an app built by
// stepgraph build, a function on the emulator, uses get_store() and
// stepgraph_runtime.auth.get_token through the stage's API (the function
// cannot reach a loopback bridge): its links are the stage's /runtime
// routes with a signed token per call. The item it stores is the
// organization's, visible through /store there and not in another
// organization (whose run's token reads nothing of it); the token request
// reaches agent auth for the run's user (no token yet: the node
// interrupts with the authorization URL). A streamed run's events reach
// its stream while the invocation runs (posted to the stage's
// /runtime/events), each once. No call token is in a log line or a
// checkpoint.
func TestBuiltZipReachesTheStageAPIOnMiniStack(t *testing.T) {
	ep := awstest.Start(t)
	lc := lambda.NewFromConfig(ep.Config)
	code, m, err := build(t, pyapp.BuildOptions{Dir: filepath.Dir(authApp(t)), Python: python(t), RuntimeFiles: pyruntime.Files(),
		RuntimeRequirements: pyruntime.Requirements, FindLinks: lambdaWheels(t), NoIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	rt := &pyapp.LambdaClient{Function: createZipFunction(t, lc, code, m), Invoker: lambdaruntime.Functions{Client: lc}}

	st := startStage(t, "acme", "other")
	if status, body := st.do(t, "acme", "POST", "/v2/auth/providers", map[string]any{"provider_id": "gh", "name": "GitHub",
		"client_id": "Iv1.abc", "client_secret": "s3cret-stage", "auth_url": "https://idp.example/authorize",
		"token_url": "https://idp.example/token"}); status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("provider: %d %s", status, body)
	}
	ctx := context.Background()
	descs, err := rt.Describe(ctx, "memo", false)
	if err != nil {
		t.Fatal(err)
	}
	shape, err := pyapp.Shape("memo", descs["memo"])
	if err != nil {
		t.Fatal(err)
	}
	links := &pyapp.StageLinks{BaseURL: st.url, Signer: st.svc.CallTokens, Store: true, Auth: true, Events: true}
	rt.Mailbox = st.events
	rs := st.svc.Runs
	rs.Deployed = &app{graphs: map[string]runs.DeployedGraph{"memo": {Graph: shape,
		Revision: runs.GraphRevision{DeploymentID: "d1", RevisionID: "r1"},
		Foreign:  &pyapp.Graph{ID: "memo", Runtime: rt, Bridge: links, Yield: &pyapp.DefaultLambdaYield}}}}
	t.Cleanup(rs.StartWorkers(2, slog.New(slog.NewTextHandler(io.Discard, nil))))
	for _, org := range []string{"acme", "other"} {
		if err := rs.EnsureDeployedAssistant(ctx, org, "memo", ""); err != nil {
			t.Fatal(err)
		}
	}

	out, th := runIn(t, rs, "acme", `{"assistant_id": "memo", "input": {"user": "ada", "fact": "likes teal", "ask_token": true}, "context": {"user_id": "ada"}}`)
	ints, _ := out["__interrupt__"].([]any)
	if len(ints) != 1 {
		t.Fatalf("no interrupt for the user's token: %v", out)
	}
	value, _ := ints[0].(map[string]any)["value"].(map[string]any)
	if authURL, _ := value["auth_url"].(string); !strings.HasPrefix(authURL, "https://idp.example/authorize?") || value["provider"] != "gh" {
		t.Fatalf("the interrupt is not agent auth's authorization: %v", value)
	}

	status, item := st.do(t, "acme", "GET", "/store/items?namespace=memories.ada&key=note", nil)
	if status != http.StatusOK || !strings.Contains(string(item), `"likes teal"`) {
		t.Fatalf("the graph's item through /store: %d %s", status, item)
	}
	if status, item := st.do(t, "other", "GET", "/store/items?namespace=memories.ada&key=note", nil); status != http.StatusOK || strings.TrimSpace(string(item)) != "null" {
		t.Fatalf("another organization reads the item through /store: %d %s", status, item)
	}
	if out, _ := runIn(t, rs, "other", `{"assistant_id": "memo", "input": {"user": "ada"}}`); len(out["known"].([]any)) != 0 {
		t.Fatalf("another organization's run read %v, want nothing", out["known"])
	}
	if out, _ := runIn(t, rs, "acme", `{"assistant_id": "memo", "input": {"user": "ada"}}`); len(out["known"].([]any)) != 1 {
		t.Fatalf("the organization's next run knows %v, want the note", out["known"])
	}

	liveEvents(t, st, rs)

	hist, err := rs.History(ctx, "acme", th, runs.HistoryQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	saved, _ := json.Marshal(hist)
	for what, text := range map[string]string{"log": st.logs.String(), "checkpoint": string(saved)} {
		if strings.Contains(text, "sgc1.") || strings.Contains(text, "s3cret-stage") {
			t.Errorf("a call token or the client secret is in a %s", what)
		}
	}
}

// liveEvents: the memo graph sends a custom event, then waits for a signal
// in the store that the test writes only once it has read the event from
// the run's stream: the event arrived while the invocation was running.
// The run then ends with the event streamed once.
func liveEvents(t *testing.T, st *stage, rs *runs.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), perProcessDeadline)
	defer cancel()
	th, err := rs.CreateThread(ctx, "acme", runs.ThreadInput{})
	if err != nil {
		t.Fatal(err)
	}
	_, stream, err := rs.CreateRunStream(ctx, "acme", th.ThreadID, req(t,
		`{"assistant_id": "memo", "input": {"user": "ada", "wait_for": "go"}, "stream_mode": ["custom"]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var custom []string
	signalled := false
	for {
		evs, done, err := stream.Next(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Event == "custom" {
				custom = append(custom, string(e.Data))
			}
		}
		if !signalled && len(custom) > 0 {
			// The graph is still waiting: the event came live.
			if status, body := st.do(t, "acme", "PUT", "/store/items", map[string]any{"namespace": []string{"signals"}, "key": "go",
				"value": map[string]any{"go": true}}); status/100 != 2 {
				t.Fatalf("signal: %d %s", status, body)
			}
			signalled = true
		}
		if done {
			break
		}
	}
	if !signalled || len(custom) != 1 || !strings.Contains(custom[0], `"waiting"`) {
		t.Fatalf("custom events %v, want the one event, once, before the run ended", custom)
	}
}

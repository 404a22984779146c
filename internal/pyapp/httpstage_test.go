package pyapp_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/testserver"
)

// An external_docker app's HTTP runtime on the stage (what the run worker
// wires: RuntimeApps with StageLinks, no event mailbox): the graph's
// get_store() reaches the stage's /runtime/store with its call's token, in
// its organization only, and the token is in no log or checkpoint.
func TestHTTPRuntimeReachesTheStageAPI(t *testing.T) {
	st := startStage(t, "acme", "other")
	apps := &pyapp.RuntimeApps{HTTP: http.DefaultClient,
		Bridge: &pyapp.StageLinks{BaseURL: st.url, Signer: st.svc.CallTokens, Store: true, Auth: true}}
	rg := deployments.RevisionGraphs{DeploymentID: "d1", RevisionID: "r1", GraphIDs: []string{"memo"},
		ExternalApp: true, RuntimeURL: testserver.StartAppRuntime(t, repoRoot(t), filepath.Dir(authApp(t)), nil)}
	ctx := context.Background()
	if reason, err := apps.CheckApp(ctx, rg, nil); err != nil || reason != "" {
		t.Fatalf("the runtime's check: %q, %v", reason, err)
	}
	memo, err := apps.Graph(ctx, rg, nil, "memo")
	if err != nil {
		t.Fatal(err)
	}
	rs := st.svc.Runs
	rs.Deployed = &app{graphs: map[string]runs.DeployedGraph{"memo": memo}}
	t.Cleanup(rs.StartWorkers(2, slog.New(slog.NewTextHandler(io.Discard, nil))))
	for _, org := range []string{"acme", "other"} {
		if err := rs.EnsureDeployedAssistant(ctx, org, "memo", ""); err != nil {
			t.Fatal(err)
		}
	}

	_, th := runIn(t, rs, "acme", `{"assistant_id": "memo", "input": {"user": "ada", "fact": "likes teal"}}`)
	status, item := st.do(t, "acme", "GET", "/store/items?namespace=memories.ada&key=note", nil)
	if status != http.StatusOK || !strings.Contains(string(item), `"likes teal"`) {
		t.Fatalf("the graph's item through /store: %d %s", status, item)
	}
	if out, _ := runIn(t, rs, "other", `{"assistant_id": "memo", "input": {"user": "ada"}}`); len(out["known"].([]any)) != 0 {
		t.Fatalf("another organization's run read %v, want nothing", out["known"])
	}
	if out, _ := runIn(t, rs, "acme", `{"assistant_id": "memo", "input": {"user": "ada"}}`); len(out["known"].([]any)) != 1 {
		t.Fatalf("the organization's next run knows %v, want the note", out["known"])
	}
	hist, err := rs.History(ctx, "acme", th, runs.HistoryQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	saved, _ := json.Marshal(hist)
	for what, text := range map[string]string{"log": st.logs.String(), "checkpoint": string(saved)} {
		if strings.Contains(text, "sgc1.") {
			t.Errorf("a call token is in a %s", what)
		}
	}
}

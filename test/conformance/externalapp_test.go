package conformance

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/testserver"
)

// TestExternalLangGraphApp deploys a LangGraph app as an external_docker
// deployment of a real `stepgraph serve`: its runtime is stepgraph_runtime's
// HTTP server, started here from the app's directory with the .venv's
// interpreter (as a container would run it), and the deployment's
// custom_url is its loopback URL. The runtime's describe call answers that
// it is a LangGraph app, so the revision serves its graphs; the hitl graph
// runs to its interrupt and resumes through the API, with the thread's
// state and history. The server runs no app itself (no -langgraph-python):
// -outbound-allow-private lets it reach a loopback runtime, as for any
// custom_url.
func TestExternalLangGraphApp(t *testing.T) {
	root, tmp, bin := appServerBinary(t)
	runtimeURL := testserver.StartAppRuntime(t, root, filepath.Join(root, "runtimes", "python", "tests", "apps", "basic"), os.Stderr)
	srv := testserver.StartT(t, testserver.Options{Binary: bin, DataDir: filepath.Join(tmp, "data"), Dir: tmp, WaitKey: true,
		Args: []string{"-log-json", "-outbound-allow-private"}})
	c := &apiClient{t: t, url: srv.URL(), key: srv.FirstKey()}

	d := c.call("POST", "/v2/deployments", map[string]any{"name": "ext-app", "source": "external_docker",
		"source_config":          map[string]any{"custom_url": runtimeURL},
		"source_revision_config": map[string]any{"image_uri": "example.com/team/app:1"}})
	waitDeployed(t, c, d)

	thread := c.call("POST", "/threads", map[string]any{})["thread_id"].(string)
	out := c.call("POST", "/threads/"+thread+"/runs/wait", map[string]any{"assistant_id": "hitl", "input": map[string]any{"topic": "cats"}})
	if got := jsonText(out["__interrupt__"]); !strings.Contains(got, `"question":"Publish cats?"`) {
		t.Fatalf("the first run answered %v, want the hitl graph's interrupt", out)
	}
	st := c.call("GET", "/threads/"+thread+"/state", nil)
	if jsonText(st["next"]) != `["review"]` || jsonText(st["values"].(map[string]any)["log"]) != `["drafted cats"]` {
		t.Fatalf("the interrupted thread's state: next %v, values %v", st["next"], st["values"])
	}
	out = c.call("POST", "/threads/"+thread+"/runs/wait", map[string]any{"assistant_id": "hitl", "command": map[string]any{"resume": "yes"}})
	if out["approved"] != true || jsonText(out["log"]) != `["drafted cats","review: yes"]` {
		t.Fatalf("the resumed run answered %v", out)
	}
	st = c.call("GET", "/threads/"+thread+"/state", nil)
	if jsonText(st["next"]) != `[]` || st["values"].(map[string]any)["approved"] != true {
		t.Fatalf("the finished thread's state: %v", st)
	}
	history := getList(t, c, "/threads/"+thread+"/history?limit=20")
	var steps []string
	for _, h := range history {
		s := h.(map[string]any)
		steps = append(steps, jsonText(s["next"]))
	}
	// Newest first: done, then waiting at review (the interrupt), then
	// the steps before it.
	if len(history) < 3 || steps[0] != `[]` || steps[1] != `["review"]` {
		t.Fatalf("history (next of each state, newest first): %v", steps)
	}
	if d := c.call("GET", "/v2/deployments/"+d["id"].(string), nil); d["status"] != "READY" {
		t.Errorf("deployment %v", d)
	}
}

// appServerBinary checks the Python dependencies of the LangGraph app
// tests and builds the server: the repository's root, the test's
// temporary directory and the binary in it.
func appServerBinary(t *testing.T) (root, tmp, bin string) {
	t.Helper()
	root, err := testserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := testserver.CheckDeps(root, testserver.PythonSDK); err != nil {
		t.Fatal(err)
	}
	tmp = t.TempDir()
	bin = filepath.Join(tmp, "stepgraph")
	if err := testserver.Build(t.Context(), root, bin); err != nil {
		t.Fatal(err)
	}
	return root, tmp, bin
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// getList is apiClient.call for an answer that is a JSON array.
func getList(t *testing.T, c *apiClient, path string) []any {
	t.Helper()
	req, _ := http.NewRequest("GET", c.url+path, nil)
	req.Header.Set("X-Api-Key", c.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out []any
	if resp.StatusCode != 200 || json.Unmarshal(bytes.TrimSpace(raw), &out) != nil {
		t.Fatalf("GET %s: %s %s", path, resp.Status, raw)
	}
	return out
}

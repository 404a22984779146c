package conformance

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/oauthtest"
	"github.com/stepgraph/stepgraph/internal/testserver"
)

// TestLangGraphApp deploys a LangGraph Python app (runtimes/python/tests/
// apps/basic: a ReAct agent, a human-in-the-loop graph, a map-reduce with
// Send, a graph with a subgraph, a graph using the store) from a local git
// repository to a real `stepgraph serve -langgraph-python`, and runs it
// through the official Python SDK and RemoteGraph (langgraphapp/); and
// apps/auth, whose nodes get the run's user's provider token after a
// consent at a real OAuth server. No network: the chat model is a scripted
// LangChain chat model, the app's dependencies are the .venv's (pip runs
// with --no-index).
func TestLangGraphApp(t *testing.T) {
	root, tmp, bin := appServerBinary(t)
	python := filepath.Join(root, ".venv", "bin", "python")
	repos := filepath.Join(tmp, "repos")
	if err := os.Mkdir(repos, 0o755); err != nil {
		t.Fatal(err)
	}
	// The provider-token test consents at a real OAuth 2.0 server on
	// loopback (its token endpoint too: -outbound-allow-private); every
	// token it issues is looked for in the server's log and data.
	idp, err := oauthtest.Start(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(idp.Stop)
	front := oauthtest.NewFront(idp)
	t.Cleanup(front.Close)
	var issuedMu sync.Mutex
	var issued []string
	front.Issued = func(v string) { issuedMu.Lock(); issued = append(issued, v); issuedMu.Unlock() }
	srv := testserver.StartT(t, testserver.Options{
		Binary: bin, DataDir: filepath.Join(tmp, "data"), Dir: tmp, WaitKey: true,
		Args: []string{"-log-json", "-allow-local-repos", repos, "-outbound-allow-private",
			"-langgraph-python", python, "-langgraph-no-index"},
	})
	app := appFiles(t, filepath.Join(root, "runtimes", "python", "tests", "apps", "basic"))
	repo := agentRepo(t, repos, app)
	authRepo := agentRepo(t, repos, appFiles(t, filepath.Join(root, "runtimes", "python", "tests", "apps", "auth")))
	js := agentRepo(t, repos, map[string]string{
		"langgraph.json": `{"graphs": {"agent": "./src/agent.ts:graph"}}`,
		"src/agent.ts":   "export const graph = null;\n",
	})
	env := append(os.Environ(),
		"STEPGRAPH_URL="+srv.URL(),
		"STEPGRAPH_API_KEY="+srv.FirstKey(),
		"STEPGRAPH_LG_REPO="+repo,
		"STEPGRAPH_LG_JS_REPO="+js,
		"STEPGRAPH_LG_DIR="+tmp,
		"STEPGRAPH_LG_AUTH_REPO="+authRepo,
		"STEPGRAPH_OAUTH_ISSUER="+idp.Issuer,
		"STEPGRAPH_OAUTH_TOKEN_URL="+front.TokenURL,
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
		"PYTHONDONTWRITEBYTECODE=1",
	)
	start := time.Now()
	runSuite(t, root, env, python, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider",
		filepath.Join("test", "conformance", "langgraphapp"))
	t.Logf("the LangGraph app suite took %s", time.Since(start).Round(time.Millisecond))
	issuedMu.Lock()
	defer issuedMu.Unlock()
	for _, tok := range issued {
		if where := tokenIn(tok, srv.Logs(), srv.DataDir()); where != "" {
			t.Errorf("an issued token is in %s", where)
		}
	}
	t.Logf("the OAuth server issued %d tokens; none is in the server's log or data", len(issued))
}

// tokenIn names where secret is: the log or a file of dir, as it is or in
// one of its base64 forms (LangGraph's checkpoints are kept base64); "" if
// nowhere.
func tokenIn(secret, log, dir string) string {
	forms := [][]byte{[]byte(secret)}
	for k := 0; k < 3; k++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, k), secret...))
		if k > 0 {
			enc = enc[4:] // the first group mixes in other bytes
		}
		forms = append(forms, []byte(enc[:len(enc)-4]))
	}
	has := func(data []byte) bool {
		for _, f := range forms {
			if bytes.Contains(data, f) {
				return true
			}
		}
		return false
	}
	if has([]byte(log)) {
		return "the server's log"
	}
	where := ""
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || where != "" {
			return nil
		}
		if data, err := os.ReadFile(p); err == nil && has(data) {
			where = p
		}
		return nil
	})
	return where
}

// appFiles reads an app's directory as a repository's files.
func appFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestLangGraphAppCrashResumes kills the server (SIGKILL) while a LangGraph
// app's run is in its second step, its first step's checkpoint stored; the runtime it started ends with it, and
// a new server on the same data directory starts the revision's runtime
// again and resumes the run from the checkpoint after the first step, which
// does not run again.
func TestLangGraphAppCrashResumes(t *testing.T) {
	root, tmp, bin := appServerBinary(t)
	repos := filepath.Join(tmp, "repos")
	if err := os.Mkdir(repos, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := agentRepo(t, repos, appFiles(t, filepath.Join(root, "runtimes", "python", "tests", "apps", "basic")))
	opts := testserver.Options{Binary: bin, DataDir: filepath.Join(tmp, "data"), Dir: tmp, WaitKey: true, Group: true,
		Args: []string{"-log-json", "-allow-local-repos", repos, "-run-lease", "1s",
			"-langgraph-python", filepath.Join(root, ".venv", "bin", "python"), "-langgraph-no-index"}}
	first := testserver.StartT(t, opts)
	key := first.FirstKey()
	c := &apiClient{t: t, url: first.URL(), key: key}
	deployApp(t, c, repo)
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	thread := c.call("POST", "/threads", map[string]any{})["thread_id"].(string)
	run := c.call("POST", "/threads/"+thread+"/runs", map[string]any{"assistant_id": "slow", "input": map[string]any{"dir": work}})
	waitUntil(t, "the second step to start", func() bool { _, err := os.Stat(filepath.Join(work, "entered")); return err == nil })
	// The run resumes from its last stored checkpoint: the first step's is
	// stored in the background (durability async) while the second runs, so
	// the kill waits for it to be the thread's state. (Killed before that, a
	// run rightly runs its first step again.)
	waitUntil(t, "the first step's checkpoint to be stored", func() bool {
		next, _ := json.Marshal(c.call("GET", "/threads/"+thread+"/state", nil)["next"])
		return string(next) == `["second"]`
	})
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.Done()

	opts.WaitKey = false
	second := testserver.StartT(t, opts)
	c.url = second.URL()
	if err := os.WriteFile(filepath.Join(work, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := c.call("GET", fmt.Sprintf("/threads/%s/runs/%s/join", thread, run["run_id"]), nil)
	if b, _ := json.Marshal(out["steps"]); string(b) != `["first","second"]` {
		t.Fatalf("the resumed run answered %v", out)
	}
	if log, _ := os.ReadFile(filepath.Join(work, "first.log")); string(log) != "first\n" {
		t.Errorf("the first step ran %d times", strings.Count(string(log), "first"))
	}
	if st := c.call("GET", fmt.Sprintf("/threads/%s/runs/%s", thread, run["run_id"]), nil)["status"]; st != "success" {
		t.Errorf("run status %v", st)
	}
}

type apiClient struct {
	t   *testing.T
	url string
	key string
}

func (c *apiClient) call(method, path string, body any) map[string]any {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		c.t.Fatalf("%s %s: %s %s", method, path, resp.Status, raw)
	}
	var out map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(raw), &out); err != nil {
		c.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
	}
	return out
}

// waitUntil polls cond; the deadline is a safety net only.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

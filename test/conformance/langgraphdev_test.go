package conformance

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/testserver"
)

// TestLangGraphDevParity serves the same LangGraph app
// (runtimes/python/tests/apps/basic) on stepgraph (`serve
// -langgraph-python`, a hosted_repo deployment from a local git repository,
// as TestLangGraphApp) and on upstream's `langgraph dev` (langgraph-cli[inmem],
// .venv-langgraph-dev), and runs langgraphdev/: the official Python SDK
// makes the same calls on both and the transcripts must be identical once
// the run-specific values are normalised (langgraphdev/test_parity.py says
// which and why). Both servers listen on 127.0.0.1; `langgraph dev` runs
// offline (no browser, analytics, version check or tracing).
// PYTEST_ADDOPTS="-k hitl" runs one scenario.
func TestLangGraphDevParity(t *testing.T) {
	root, err := testserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := testserver.CheckDeps(root, testserver.PythonSDK, testserver.LangGraphDev); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	appDir := filepath.Join(root, "runtimes", "python", "tests", "apps", "basic")
	app := appFiles(t, appDir)
	// Upstream starts first: it imports the app while stepgraph builds.
	upstream := launchLangGraphDev(t, root, filepath.Join(tmp, "upstream"), app)

	python := filepath.Join(root, ".venv", "bin", "python")
	bin := filepath.Join(tmp, "stepgraph")
	if err := testserver.Build(t.Context(), root, bin); err != nil {
		t.Fatal(err)
	}
	repos := filepath.Join(tmp, "repos")
	if err := os.Mkdir(repos, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := testserver.StartT(t, testserver.Options{
		Binary: bin, DataDir: filepath.Join(tmp, "data"), Dir: tmp, WaitKey: true,
		Args: []string{"-log-json", "-allow-local-repos", repos,
			"-langgraph-python", python, "-langgraph-no-index"},
	})
	c := &apiClient{t: t, url: srv.URL(), key: srv.FirstKey()}
	deployApp(t, c, agentRepo(t, repos, app))
	if err := upstream.Ready(t.Context()); err != nil {
		t.Fatalf("langgraph dev: %v\n%s", err, testserver.Tail(upstream.Logs(), testserver.LogLines))
	}

	env := append(os.Environ(),
		"STEPGRAPH_URL="+srv.URL(),
		"STEPGRAPH_API_KEY="+srv.FirstKey(),
		"LANGGRAPH_DEV_URL="+upstream.URL(),
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
		"PYTHONDONTWRITEBYTECODE=1",
	)
	runSuite(t, root, env, python, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider",
		filepath.Join("test", "conformance", "langgraphdev"))
}

// launchLangGraphDev writes the app's files to dir and starts upstream's
// `langgraph dev` on them, on a free loopback port, without waiting for it
// (Ready does); it is stopped at the test's cleanup. The app's package is
// on PYTHONPATH: `langgraph dev` does not install the app's dependencies
// ("." in langgraph.json), where stepgraph pip-installs the app.
func launchLangGraphDev(t *testing.T, root, dir string, app map[string]string) *testserver.Server {
	t.Helper()
	for name, content := range app {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	port, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	s, err := testserver.Launch(testserver.Options{
		Port: port, Dir: dir, Group: true, StartTimeout: 3 * time.Minute,
		Command: []string{filepath.Join(root, testserver.LangGraphDevBin), "dev",
			"--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", fmt.Sprint(port),
			"--config", "langgraph.json", "--server-log-level", "WARNING"},
		Env: append(os.Environ(),
			"PYTHONPATH="+filepath.Join(dir, "src"),
			"PYTHONDONTWRITEBYTECODE=1",
			// Offline: no CLI analytics, no PyPI version check, no
			// LangSmith tracing or metadata.
			"LANGGRAPH_CLI_NO_ANALYTICS=1",
			"LANGGRAPH_NO_VERSION_CHECK=true",
			"LANGSMITH_TRACING=false",
			"LANGCHAIN_TRACING_V2=false",
			"LANGSMITH_API_KEY=",
			"LANGCHAIN_API_KEY=",
			"LANGGRAPH_CLOUD_LICENSE_KEY=",
			"DO_NOT_TRACK=1",
		),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil && !s.Killed() {
			t.Logf("langgraph dev exit: %v", err)
		}
		if t.Failed() {
			t.Logf("langgraph dev output (last %d lines):\n%s", testserver.LogLines, testserver.Tail(s.Logs(), testserver.LogLines))
		}
	})
	return s
}

// freeLoopbackPort is a port free on 127.0.0.1 now: `langgraph dev` takes
// a port and does not say which one it got for port 0.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// deployApp deploys a LangGraph app's repository (hosted_repo, ref main) and
// waits until its revision is deployed.
func deployApp(t *testing.T, c *apiClient, repo string) {
	t.Helper()
	d := c.call("POST", "/v2/deployments", map[string]any{"name": "app", "source": "hosted_repo",
		"source_config":          map[string]any{"repo_url": repo},
		"source_revision_config": map[string]any{"repo_ref": "main", "graph_config_path": "langgraph.json"}})
	waitDeployed(t, c, d)
}

// waitDeployed waits for the latest revision of deployment d to be
// DEPLOYED; a failed one fails the test.
func waitDeployed(t *testing.T, c *apiClient, d map[string]any) {
	t.Helper()
	revPath := fmt.Sprintf("/v2/deployments/%s/revisions/%s", d["id"], d["latest_revision_id"])
	waitUntil(t, "the revision to deploy", func() bool {
		rev := c.call("GET", revPath, nil)
		if st := rev["status"]; st == "BUILD_FAILED" || st == "DEPLOY_FAILED" {
			t.Fatalf("revision %v", rev)
		}
		return rev["status"] == "DEPLOYED"
	})
}

package conformance

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/testserver"
)

// TestLangGraphApp deploys a LangGraph Python app (runtimes/python/tests/
// apps/basic: a ReAct agent, a human-in-the-loop graph, a map-reduce with
// Send, a graph with a subgraph, a graph using the store) from a local git
// repository to a real `stepgraph serve -langgraph-python`, and runs it
// through the official Python SDK and RemoteGraph (langgraphapp/). No
// network: the chat model is a scripted LangChain chat model, the app's
// dependencies are the .venv's (pip runs with --no-index).
func TestLangGraphApp(t *testing.T) {
	root, err := testserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := testserver.CheckDeps(root, testserver.PythonSDK); err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(root, ".venv", "bin", "python")
	tmp := t.TempDir()
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
	app := appFiles(t, filepath.Join(root, "runtimes", "python", "tests", "apps", "basic"))
	repo := agentRepo(t, repos, app)
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
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
		"PYTHONDONTWRITEBYTECODE=1",
	)
	start := time.Now()
	runSuite(t, root, env, python, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider",
		filepath.Join("test", "conformance", "langgraphapp"))
	t.Logf("the LangGraph app suite took %s", time.Since(start).Round(time.Millisecond))
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

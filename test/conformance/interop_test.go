package conformance

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/testserver"
)

// TestInteropConformance runs the official MCP and A2A Python SDKs
// (test/conformance/interop, their own venv .venv-interop) against a
// server of its own: MCP's streamablehttp_client and ClientSession list
// the assistants as tools and call echo; the A2A client reads the agent
// card, sends, streams and gets a task.
func TestInteropConformance(t *testing.T) {
	root, err := testserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(root, ".venv-interop", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s not found: run scripts/install-test-deps.sh", python)
	}
	start := time.Now()
	srv := startServer(t, root)
	t.Logf("server %s up in %s", srv.URL(), time.Since(start).Round(time.Millisecond))
	env := append(os.Environ(),
		"STEPGRAPH_URL="+srv.URL(),
		"STEPGRAPH_API_KEY="+srv.FirstKey(),
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
		"PYTHONDONTWRITEBYTECODE=1",
	)
	runSuite(t, root, env, python, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider",
		filepath.Join("test", "conformance", "interop"))
}

package conformance

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/oauthtest"
	"github.com/stepgraph/stepgraph/internal/testserver"
)

// suiteTimeout bounds one SDK suite; startTimeout the example runtime's start.
const (
	suiteTimeout = 5 * time.Minute
	startTimeout = 30 * time.Second
	// serverLogLines is how much of the example runtime's log a failure shows.
	serverLogLines = testserver.LogLines
)

// TestSDKConformance starts one server and runs the Python and the JS SDK
// suites against it, side by side.
func TestSDKConformance(t *testing.T) {
	root, err := testserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := testserver.CheckDeps(root, testserver.PythonSDK, testserver.JSSDK); err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(root, ".venv", "bin", "python")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found on PATH (%v): install Node.js, then run `make test-deps`", err)
	}

	start := time.Now()
	srv := startServer(t, root)
	t.Logf("server %s up in %s", srv.URL(), time.Since(start).Round(time.Millisecond))
	// After both suites: their semantic searches reached the endpoint.
	t.Cleanup(func() {
		if srv.embeddingsCalls() == 0 && !t.Failed() {
			t.Errorf("the store never called the embeddings endpoint: the semantic search tests did not reach it")
		}
	})
	agent := newDeployedAgent(t, root, python, srv.repos)
	chatPy, releasePy := chatRepo(t, srv.repos, "py")
	chatJS, releaseJS := chatRepo(t, srv.repos, "js")
	// The agent-auth suite (langchain-auth) consents at a real OAuth 2.0
	// server on loopback.
	idp, err := oauthtest.Start(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(idp.Stop)

	env := append(os.Environ(),
		"STEPGRAPH_URL="+srv.URL(),
		"STEPGRAPH_API_KEY="+srv.FirstKey(),
		"STEPGRAPH_WEBHOOK_SECRET="+srv.webhookSecret,
		"STEPGRAPH_AGENT_REPO="+agent.repoURL,
		"STEPGRAPH_AGENT_RUNTIME="+agent.runtimeURL,
		"STEPGRAPH_AGENT_API_KEY="+agent.apiKey,
		"STEPGRAPH_OAUTH_ISSUER="+idp.Issuer,
		"STEPGRAPH_NESTED_REPO_PYTHON="+nestedRepo(t, srv.repos, "py"),
		"STEPGRAPH_NESTED_REPO_JS="+nestedRepo(t, srv.repos, "js"),
		"STEPGRAPH_CHAT_REPO_PYTHON="+chatPy,
		"STEPGRAPH_CHAT_REPO_JS="+chatJS,
		"STEPGRAPH_CHAT_RELEASE_JS="+releaseJS,
		"STEPGRAPH_CHAT_RELEASE_PYTHON="+releasePy,
		// Loopback must never go through a proxy from the environment.
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
		// Leave no __pycache__ in the work tree.
		"PYTHONDONTWRITEBYTECODE=1",
	)

	t.Run("python", func(t *testing.T) {
		t.Parallel()
		runSuite(t, root, env, python, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider",
			filepath.Join("test", "conformance", "python"))
	})
	// The JS suites run once per SDK version issue 15 names: 1.15.0 (npm's
	// latest) and 2.0.0 (js/sdk-under-test.mjs picks the package), one
	// after the other, side by side with the Python suite.
	t.Run("js", func(t *testing.T) {
		t.Parallel()
		for _, version := range jsSDKVersions {
			t.Run(version, func(t *testing.T) {
				runSuite(t, root, append(slices.Clone(env), "STEPGRAPH_JS_SDK_VERSION="+version), node,
					"--test", "--test-reporter=spec",
					filepath.Join("test", "conformance", "js", "sdk.test.mjs"),
					filepath.Join("test", "conformance", "js", "tokens.test.mjs"),
					filepath.Join("test", "conformance", "js", "crons.test.mjs"),
					filepath.Join("test", "conformance", "js", "threads.test.mjs"),
					filepath.Join("test", "conformance", "js", "assistants.test.mjs"),
					filepath.Join("test", "conformance", "js", "runs.test.mjs"),
					filepath.Join("test", "conformance", "js", "ui.test.mjs"))
			})
		}
	})
}

// jsSDKVersions are the @langchain/langgraph-sdk versions the JS suites run
// against (both installed by test/conformance/js/package.json).
var jsSDKVersions = []string{"2.0.0", "1.15.0"}

type server struct {
	*testserver.Server
	webhookSecret string
	repos         string // the directory the server reads file:// repositories under
	// embeddingsCalls counts the calls of the store's fake embeddings
	// endpoint (the SDK suites' semantic searches make some).
	embeddingsCalls func() int
}

// startServer builds ./cmd/stepgraph and starts it on 127.0.0.1 with a fresh
// data directory, waiting for its address and first-start API key. It is
// stopped with SIGTERM in t.Cleanup.
func startServer(t *testing.T, root string) *server {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "stepgraph")
	if err := testserver.Build(context.Background(), root, bin); err != nil {
		t.Fatal(err)
	}
	repos := filepath.Join(tmp, "repos")
	if err := os.Mkdir(repos, 0o755); err != nil {
		t.Fatal(err)
	}
	// The store's semantic search embeds with a fake endpoint on loopback
	// (embeddings_test.go), its key in the environment only.
	embeddings := startFakeEmbeddings(t)
	srv := &server{repos: repos, Server: testserver.StartT(t, testserver.Options{
		Binary: bin, DataDir: filepath.Join(tmp, "data"), Dir: tmp, WaitKey: true,
		Env: append(os.Environ(), "STEPGRAPH_STORE_EMBEDDINGS_API_KEY="+embeddingsKey),
		Args: []string{"-log-json", "-webhooks-allow-private",
			"-store-embeddings-url", embeddings.url, "-store-embeddings-model", "fake-embedder",
			"-store-index-fields", "text",
			// The deployed agent's model and runtime are test servers on loopback.
			"-outbound-allow-private",
			// The deployed agent's repository is a local one.
			"-allow-local-repos", repos,
			// A cron's firing is noticed within a second of its slot.
			"-cron-tick", "1s"},
	})}

	srv.embeddingsCalls = func() int {
		embeddings.mu.Lock()
		defer embeddings.mu.Unlock()
		return embeddings.calls
	}
	// After the suites (cleanups run after the parallel subtests): the
	// embeddings key is in no line the server wrote.
	t.Cleanup(func() {
		if strings.Contains(srv.Logs(), embeddingsKey) {
			t.Errorf("the server logged the embeddings API key")
		}
	})

	// The webhook tests verify signatures with this secret. Without it the
	// test fails, but the suites still run so every other result shows.
	sec := exec.Command(bin, "webhooks", "secret", "--org", "default", "-data", srv.DataDir())
	sec.Dir = tmp
	var secErr bytes.Buffer
	sec.Stderr = &secErr
	out, err := sec.Output()
	srv.webhookSecret = strings.TrimSpace(string(out))
	switch {
	case err != nil:
		t.Errorf("stepgraph webhooks secret --org default: %v\n%s(the webhook tests of both suites will fail)", err, secErr.String())
	case srv.webhookSecret == "":
		t.Errorf("stepgraph webhooks secret --org default printed nothing (the webhook tests of both suites will fail)")
	}
	return srv
}

// runSuite runs one SDK suite and fails with its output on a non-zero exit.
func runSuite(t *testing.T, root string, env []string, name string, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	cmd.Env = env
	cmd.Stdin = nil
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start).Round(time.Millisecond)
	if ctx.Err() != nil {
		t.Fatalf("%s %s: timed out after %s\n%s", filepath.Base(name), strings.Join(args, " "), suiteTimeout, out)
	}
	if err != nil {
		t.Fatalf("%s %s: %v (after %s)\n%s", filepath.Base(name), strings.Join(args, " "), err, took, out)
	}
	t.Logf("%s passed in %s; last lines:\n%s", filepath.Base(name), took, testserver.Tail(string(out), 12))
}

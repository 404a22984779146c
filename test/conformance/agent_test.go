package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/stepgraph/stepgraph/internal/testserver"
)

// deployedAgent is what the SDK suites need to deploy an agent and run it
// by graph name (test_sdk.py, test_deployed_agent_by_graph_name): a git
// repository declaring the support agent of examples/, whose chat model is a
// local OpenAI-compatible server, and the example Python runtime serving
// its functions. Everything listens on 127.0.0.1.
type deployedAgent struct {
	repoURL    string // file:// URL; graph config at agent/stepgraph.yaml
	runtimeURL string // the deployment's custom_url
	apiKey     string // the OPENAI_API_KEY secret the model expects
}

const agentAPIKey = "sk-conformance-agent-key"

// supportYAML is the support agent of examples/ (examples/support.yaml;
// the example runtimes describe the same document).
var supportYAML = func() string {
	b, err := os.ReadFile("../../examples/support.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func newDeployedAgent(t *testing.T, root, python, repos string) deployedAgent {
	t.Helper()
	model := httptest.NewServer(http.HandlerFunc(fakeModel))
	t.Cleanup(model.Close)
	return deployedAgent{
		repoURL: agentRepo(t, repos, map[string]string{
			"agent/stepgraph.yaml":      "graphs:\n  support: graphs/support.yaml\n",
			"agent/graphs/support.yaml": strings.ReplaceAll(supportYAML, "MODEL_URL", model.URL+"/v1"),
		}),
		runtimeURL: startExampleRuntime(t, root, python),
		apiKey:     agentAPIKey,
	}
}

var orderNumber = regexp.MustCompile(`\d+`)

// fakeModel answers Chat Completions: without a tool result it calls
// lookup_order for the order the user names, with one it answers from it.
// A request without the deployment's API key is refused.
func fakeModel(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+agentAPIKey {
		http.Error(w, `{"error": {"message": "bad API key"}}`, http.StatusUnauthorized)
		return
	}
	var body struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	last := body.Messages[len(body.Messages)-1]
	w.Header().Set("Content-Type", "application/json")
	message := map[string]any{"role": "assistant"}
	finish := "stop"
	if last["role"] != "tool" {
		args, _ := json.Marshal(map[string]string{"order_id": orderNumber.FindString(fmt.Sprint(last["content"]))})
		message["content"], finish = nil, "tool_calls"
		message["tool_calls"] = []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "lookup_order", "arguments": string(args)}}}
	} else {
		var order map[string]any
		message["content"] = "Sorry, I could not check that."
		if json.Unmarshal([]byte(fmt.Sprint(last["content"])), &order) == nil {
			carrier := order["carrier"]
			if carrier == nil {
				carrier = "none"
			}
			message["content"] = fmt.Sprintf("Order %v is %v (carrier %v).", order["order_id"], order["status"], carrier)
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "model": "gpt-4o-mini",
		"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}}})
}

// agentRepo commits files to the main branch of a new repository under
// repos (the directory the server allows local repositories under).
func agentRepo(t *testing.T, repos string, files map[string]string) string {
	t.Helper()
	dir, err := os.MkdirTemp(repos, "agent-")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.Main}})
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}
	if _, err := wt.Commit("agent", &git.CommitOptions{Author: sig}); err != nil {
		t.Fatal(err)
	}
	return "file://" + filepath.ToSlash(dir)
}

// startExampleRuntime starts examples/python/runtime.py on 127.0.0.1 and
// returns its URL; it is stopped with SIGTERM in t.Cleanup.
func startExampleRuntime(t *testing.T, root, python string) string {
	t.Helper()
	cmd := exec.Command(python, filepath.Join(root, "examples", "python", "runtime.py"), "--host", "127.0.0.1", "--port", "0")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	logs := &syncBuffer{}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start examples/python/runtime.py: %v", err)
	}
	first := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		scan(stderr, logs, func(string) {})
	}()
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			logs.WriteLine(sc.Text())
			select {
			case first <- sc.Text():
			default:
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("example runtime output (last %d lines):\n%s", serverLogLines, testserver.Tail(logs.String(), serverLogLines))
		}
	})
	select {
	case line := <-first:
		url, ok := strings.CutPrefix(line, "listening on ")
		if !ok {
			t.Fatalf("examples/python/runtime.py printed %q first", line)
		}
		return url
	case <-exited:
		t.Fatalf("examples/python/runtime.py exited:\n%s", logs.String())
	case <-time.After(startTimeout):
		t.Fatalf("examples/python/runtime.py did not start within %s", startTimeout)
	}
	return ""
}

// scan copies r line by line into buf, calling fn on each line.
func scan(r io.Reader, buf *syncBuffer, fn func(string)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		buf.WriteLine(line)
		fn(line)
	}
	_, _ = io.Copy(io.Discard, r)
}

// syncBuffer is a line buffer shared by the example runtime's two output readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) WriteLine(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
	b.buf.WriteByte('\n')
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// nestedRepo is a repository whose graph <prefix>_nested runs the graph
// <prefix>_writer as a subgraph node (research): what the SDK suites stream
// with stream_subgraphs. Each suite deploys its own (the graph names of an
// organization are unique), from the file:// URL this returns (a repository
// under repos, where the server allows local ones).
func nestedRepo(t *testing.T, repos, prefix string) string {
	t.Helper()
	const writer = `description: Writes a report on the topic.
state:
  topic: {schema: {type: string}}
  report: {schema: {type: string}}
  messages: {reducer: messages}
nodes:
  write:
    kind: transform
    update:
      report: "A report on {{ state.topic }}"
      messages: {type: ai, content: "wrote about {{ state.topic }}"}
edges: [{from: __start__, to: write}]
`
	nested := fmt.Sprintf(`description: Researches a topic with the writer subgraph.
state:
  topic: {schema: {type: string}}
  report: {schema: {type: string}}
  messages: {reducer: messages}
nodes:
  research: {kind: subgraph, graph: %s_writer}
edges: [{from: __start__, to: research}]
`, prefix)
	return agentRepo(t, repos, map[string]string{
		"stepgraph.yaml":     fmt.Sprintf("graphs:\n  %[1]s_nested: graphs/nested.yaml\n  %[1]s_writer: graphs/writer.yaml\n", prefix),
		"graphs/nested.yaml": nested,
		"graphs/writer.yaml": writer,
	})
}

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

	"github.com/stepgraph/stepgraph/internal/testmodel"
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
	model := supportModel(t)
	return deployedAgent{
		repoURL: agentRepo(t, repos, map[string]string{
			"agent/stepgraph.yaml":      "graphs:\n  support: graphs/support.yaml\n  desk: graphs/desk.yaml\n",
			"agent/graphs/support.yaml": strings.ReplaceAll(supportYAML, "MODEL_URL", model.URL+"/v1"),
			"agent/graphs/desk.yaml":    deskYAML,
		}),
		runtimeURL: startExampleRuntime(t, root, python),
		apiKey:     agentAPIKey,
	}
}

// deskYAML is the graph the SDK suites stream every mode of, with and
// without subgraphs: its classify function emits a custom event (the
// example runtime serves it for desk as for support), then the support
// agent runs as its subgraph (another custom event, the chat model's
// token chunks, a tool call).
const deskYAML = `description: Classifies a request, then hands it to the support agent (a subgraph).
state:
  messages: {reducer: messages}
  topic: {schema: {type: string}}
nodes:
  classify: {kind: function, timeout: 20}
  answer: {kind: subgraph, graph: support}
edges:
  - {from: __start__, to: classify}
  - {from: classify, to: answer}
`

var orderNumber = regexp.MustCompile(`\d+`)

// supportModel is an OpenAI-compatible Chat Completions server that
// streams (internal/testmodel): without a tool result it calls
// lookup_order for the order the user names, its arguments in fragments;
// with one it answers from it, in pieces. A request without the
// deployment's API key is refused.
func supportModel(t *testing.T) *testmodel.Server {
	return testmodel.Start(t, agentAPIKey, func(r testmodel.Request) testmodel.Turn {
		msgs := r.Messages()
		last := msgs[len(msgs)-1]
		if last["role"] != "tool" {
			order := orderNumber.FindString(fmt.Sprint(last["content"]))
			return testmodel.Turn{ToolCalls: []testmodel.ToolCall{{ID: "call_1", Name: "lookup_order",
				Args: []string{`{"order_id": "`, order, `"}`}}}}
		}
		var order map[string]any
		if json.Unmarshal([]byte(fmt.Sprint(last["content"])), &order) != nil {
			return testmodel.Turn{Content: []string{"Sorry, I could ", "not check that."}}
		}
		carrier := order["carrier"]
		if carrier == nil {
			carrier = "none"
		}
		return testmodel.Turn{Content: []string{"Order ", fmt.Sprint(order["order_id"]), " is ", fmt.Sprint(order["status"]),
			fmt.Sprintf(" (carrier %v).", carrier)}}
	})
}

// chatRepo is a repository with the graph <prefix>_assist: a chat model
// (a streaming test model without a key) answers "You said: <the last
// message>." in pieces of three characters, then an interrupt asks whether
// to send it (the answer goes to approved). The SDK suites stream its
// tokens and drive it like a chat UI (useStream). A message containing
// "wait" makes the model stop after two pieces until a POST to release
// (the second URL, on 127.0.0.1) lets one waiting answer go on: a run a
// client can reconnect to while it is still answering.
func chatRepo(t *testing.T, repos, prefix string) (repoURL, release string) {
	t.Helper()
	hold := make(chan struct{}, 16)
	releaser := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST to release a waiting answer", http.StatusMethodNotAllowed)
			return
		}
		select {
		case hold <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(releaser.Close)
	model := testmodel.Start(t, "", func(r testmodel.Request) testmodel.Turn {
		msgs := r.Messages()
		last := fmt.Sprint(msgs[len(msgs)-1]["content"])
		text := "You said: " + last + "."
		var pieces []string
		for len(text) > 3 {
			pieces, text = append(pieces, text[:3]), text[3:]
		}
		turn := testmodel.Turn{Content: append(pieces, text), Usage: &[3]int{5, len(pieces) + 1, len(pieces) + 6}}
		if strings.Contains(last, "wait") {
			turn.Hold, turn.HoldAfter = hold, 2
		}
		return turn
	})
	doc := `description: Answers, then asks whether to send the answer.
state:
  messages: {reducer: messages}
  approved: {}
nodes:
  reply:
    kind: chat_model
    base_url: ` + model.URL + `/v1
    model: gpt-4o-mini
  approve:
    kind: interrupt
    value: {question: "Send this answer?"}
    update: {approved: "{{ resume }}"}
edges:
  - {from: __start__, to: reply}
  - {from: reply, to: approve}
`
	return agentRepo(t, repos, map[string]string{
		"stepgraph.yaml":     fmt.Sprintf("graphs:\n  %s_assist: graphs/assist.yaml\n", prefix),
		"graphs/assist.yaml": doc,
	}), releaser.URL
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

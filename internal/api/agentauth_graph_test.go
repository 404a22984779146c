package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// authGraphYAML is a deployed graph whose http node sends the run's user's
// token of provider "gh" to a resource server.
const authGraphYAML = `state:
  repos: {}
nodes:
  list:
    kind: http
    url: RESOURCE_URL
    auth: {provider: gh, scopes: [openid, read]}
    update: {repos: "{{ response.body.repos }}"}
edges:
  - {from: __start__, to: list}
`

// bearerRecorder is a loopback resource server that answers body and
// records each call's Authorization header.
type bearerRecorder struct {
	URL string
	mu  sync.Mutex
	got []string
}

func newBearerRecorder(t *testing.T, body string) *bearerRecorder {
	t.Helper()
	b := &bearerRecorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.got = append(b.got, r.Header.Get("Authorization"))
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	b.URL = srv.URL
	return b
}

// seen is the Authorization headers of the calls so far.
func (b *bearerRecorder) seen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.got...)
}

// deployGraph deploys one graph document, graphID in file, from a local
// repository, and waits for it.
func (a *authEnv) deployGraph(t *testing.T, deployment, graphID, file, doc string) {
	repo, commit := gitRepoWriter(t)
	commit(map[string]string{"stepgraph.yaml": "graphs:\n  " + graphID + ": " + file + "\n", file: doc})
	body := repoDeployment(deployment, repo)
	body["source_revision_config"] = map[string]any{"repo_ref": "main", "graph_config_path": "stepgraph.yaml"}
	a.deployReady(body)
}

// TestAgentAuthInGraph: a graph node asks for the run's user's token; with
// none the run interrupts with the authorization URL (upstream's interrupt
// value); after the user consents (a browser at the real OAuth server),
// resuming the run calls the loopback resource server with the token.
func TestAgentAuthInGraph(t *testing.T) {
	a := newAuthEnv(t)
	a.provider("gh", map[string]any{"client_secret": secret("cs-gh-graph-secret"), "uses_pkce": true})

	resource := newBearerRecorder(t, `{"repos": ["alpha", "beta"]}`)
	a.deployGraph(t, "auth-graph", "repos", "repos.yaml", strings.Replace(authGraphYAML, "RESOURCE_URL", resource.URL+"/repos", 1))

	tid := a.newThread(a.keyA)
	run := map[string]any{"assistant_id": "repos", "input": map[string]any{}, "context": map[string]any{"user_id": "ada"}}
	out := waitBody(t, a.do("POST", "/threads/"+tid+"/runs/wait", a.keyA, run))
	ints, _ := out["__interrupt__"].([]any)
	if len(ints) != 1 {
		t.Fatalf("no interrupt: %v", out)
	}
	value, _ := ints[0].(map[string]any)["value"].(map[string]any)
	authURL, _ := value["auth_url"].(string)
	if value["provider"] != "gh" || !strings.HasPrefix(authURL, oauthServer.Issuer+"/authorize?") || value["message"] == nil {
		t.Fatalf("interrupt value: %v", value)
	}
	if seen := resource.seen(); len(seen) != 0 {
		t.Fatalf("the resource server was called without a token: %q", seen)
	}

	// Resuming before the consent fails the node, as upstream's client does.
	early := a.newThread(a.keyA)
	waitBody(t, a.do("POST", "/threads/"+early+"/runs/wait", a.keyA, map[string]any{"assistant_id": "repos", "input": map[string]any{}, "context": map[string]any{"user_id": "bob"}}))
	failed := waitBody(t, a.do("POST", "/threads/"+early+"/runs/wait", a.keyA, map[string]any{"assistant_id": "repos", "command": map[string]any{"resume": "done"}, "context": map[string]any{"user_id": "bob"}}))
	if !strings.Contains(fmt.Sprint(failed["__error__"]), "not completed") {
		t.Errorf("resume without consent: %v", failed)
	}

	// The user consents in a browser; the run resumes with the token.
	if cb := a.consent(authURL); cb["status"] != "completed" {
		t.Fatalf("callback: %v", cb)
	}
	issued := a.front.Last().AccessToken
	out = waitBody(t, a.do("POST", "/threads/"+tid+"/runs/wait", a.keyA, map[string]any{"assistant_id": "repos", "command": map[string]any{"resume": "done"}, "context": map[string]any{"user_id": "ada"}}))
	if fmt.Sprint(out["repos"]) != "[alpha beta]" || out["__interrupt__"] != nil {
		t.Fatalf("resumed run: %v", out)
	}
	seen := resource.seen()
	if len(seen) != 1 || seen[0] != "Bearer "+issued {
		t.Errorf("the resource server saw %d calls; with the issued token: %v", len(seen), len(seen) == 1 && seen[0] == "Bearer "+issued)
	}

	// The user may come from the run's metadata instead (the worker hands
	// it to the nodes): ada's token, with no context at all.
	byMeta := waitBody(t, a.do("POST", "/threads/"+a.newThread(a.keyA)+"/runs/wait", a.keyA,
		map[string]any{"assistant_id": "repos", "input": map[string]any{}, "metadata": map[string]any{"user_id": "ada"}}))
	if fmt.Sprint(byMeta["repos"]) != "[alpha beta]" || byMeta["__interrupt__"] != nil {
		t.Fatalf("run with the user in its metadata: %v", byMeta)
	}
	seen = resource.seen()
	if len(seen) != 2 || seen[1] != "Bearer "+issued {
		t.Errorf("the metadata's user: the resource server saw %d calls; the last with ada's token: %v", len(seen), len(seen) == 2 && seen[1] == "Bearer "+issued)
	}

	// A run without the user in its context fails the node, naming the key.
	noUser := waitBody(t, a.do("POST", "/runs/wait", a.keyA, map[string]any{"assistant_id": "repos", "input": map[string]any{}}))
	if !strings.Contains(fmt.Sprint(noUser["__error__"]), `"user_id"`) {
		t.Errorf("run without a user: %v", noUser)
	}
}

// TestAgentAuthInGraphAgentScope: a node whose auth says agent: true asks
// for the token scoped to the run's assistant: the user's unscoped token
// does not serve it (the run interrupts), and the token granted through
// that interrupt is stored with the assistant id as its agent_id.
func TestAgentAuthInGraphAgentScope(t *testing.T) {
	a := newAuthEnv(t)
	a.provider("gh", map[string]any{"client_secret": secret("cs-gh-graph-agent-secret"), "uses_pkce": true})
	resource := newBearerRecorder(t, `{"repos": ["alpha"]}`)
	doc := strings.Replace(authGraphYAML, "RESOURCE_URL", resource.URL+"/repos", 1)
	doc = strings.Replace(doc, "scopes: [openid, read]}", "scopes: [openid, read], agent: true}", 1)
	a.deployGraph(t, "auth-graph-agent", "repos", "repos.yaml", doc)

	// ada's unscoped token, granted outside any agent.
	res := a.authenticate("gh", "ada")
	a.consent(res["url"].(string))
	unscoped := a.front.Last().AccessToken

	tid := a.newThread(a.keyA)
	run := map[string]any{"assistant_id": "repos", "input": map[string]any{}, "context": map[string]any{"user_id": "ada"}}
	out := waitBody(t, a.do("POST", "/threads/"+tid+"/runs/wait", a.keyA, run))
	ints, _ := out["__interrupt__"].([]any)
	if len(ints) != 1 {
		t.Fatalf("the unscoped token served an agent-scoped node: %v", out)
	}
	authURL, _ := ints[0].(map[string]any)["value"].(map[string]any)["auth_url"].(string)
	if cb := a.consent(authURL); cb["status"] != "completed" {
		t.Fatalf("callback: %v", cb)
	}
	scoped := a.front.Last().AccessToken
	run["command"], run["input"] = map[string]any{"resume": "done"}, nil
	if out := waitBody(t, a.do("POST", "/threads/"+tid+"/runs/wait", a.keyA, run)); fmt.Sprint(out["repos"]) != "[alpha]" {
		t.Fatalf("resumed run: %v", out)
	}
	seen := resource.seen()
	if len(seen) != 1 || seen[0] != "Bearer "+scoped || scoped == unscoped {
		t.Errorf("the resource server saw %d calls; with the agent's token: %v", len(seen), len(seen) == 1 && seen[0] == "Bearer "+scoped)
	}

	var runs []map[string]any
	r := a.do("GET", "/threads/"+tid+"/runs", a.keyA, nil)
	if err := json.Unmarshal(r.Body, &runs); err != nil || len(runs) == 0 {
		t.Fatalf("runs: %d %s", r.Status, r.Body)
	}
	var toks []map[string]any
	r = a.do("GET", "/v2/auth/tokens?provider_id=gh&user_id=ada", a.keyA, nil)
	if err := json.Unmarshal(r.Body, &toks); err != nil || len(toks) != 2 {
		t.Fatalf("ada's tokens: %d %s", r.Status, r.Body)
	}
	if toks[0]["agent_id"] != nil || toks[1]["agent_id"] != runs[0]["assistant_id"] {
		t.Errorf("agent_ids %v, %v; want null and the run's assistant %v", toks[0]["agent_id"], toks[1]["agent_id"], runs[0]["assistant_id"])
	}
}

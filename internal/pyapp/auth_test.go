package pyapp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/agentauth"
	"github.com/stepgraph/stepgraph/internal/oauthtest"
	"github.com/stepgraph/stepgraph/internal/providers"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// lockedBuffer collects a log written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// recordingAuth is agent auth, recording the agent of each request.
type recordingAuth struct {
	*agentauth.Service
	mu     sync.Mutex
	agents []string // "<none>" for the unscoped token
}

func (r *recordingAuth) Authenticate(ctx context.Context, orgID string, in agentauth.AuthenticateInput) (agentauth.AuthenticateResult, error) {
	agent := "<none>"
	if in.AgentID != nil {
		agent = *in.AgentID
	}
	r.mu.Lock()
	r.agents = append(r.agents, agent)
	r.mu.Unlock()
	return r.Service.Authenticate(ctx, orgID, in)
}

// authApp is the runtime's test app whose nodes ask for the run's user's
// provider token (runtimes/python/tests/apps/auth).
func authApp(t *testing.T) string {
	return filepath.Join(repoRoot(t), "runtimes", "python", "tests", "apps", "auth", "langgraph.json")
}

// startOAuth runs the real OAuth server with a recording front of its token
// endpoint; every token it issues is added to issued.
func startOAuth(t *testing.T, issued *[]string, mu *sync.Mutex) (*oauthtest.Server, *oauthtest.Front) {
	t.Helper()
	srv, err := oauthtest.Start(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	front := oauthtest.NewFront(srv)
	front.Issued = func(v string) { mu.Lock(); *issued = append(*issued, v); mu.Unlock() }
	t.Cleanup(front.Close)
	return srv, front
}

// newAgentAuth is agent auth on db, with provider "gh" of the OAuth server
// (PKCE S256, client_secret_basic) and its callback served on loopback.
func newAgentAuth(t *testing.T, db *sqlite.DB, srv *oauthtest.Server, front *oauthtest.Front) *agentauth.Service {
	t.Helper()
	ctx := context.Background()
	// Agent auth's records belong to an organization: the env's ("org").
	if err := db.CreateOrganization(ctx, store.Organization{ID: "org", Name: "org", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	sec, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	prov := &providers.Service{Store: db, Secrets: sec, AllowHTTPLoopback: true}
	if _, err := prov.Create(ctx, "org", providers.CreateInput{ProviderID: ptr("gh"), Name: ptr("GitHub"), ClientID: ptr("client-gh"),
		ClientSecret: ptr("cs-gh-app-secret"), AuthURL: ptr(srv.Issuer + "/authorize"), TokenURL: ptr(front.TokenURL),
		UsesPKCE: ptr(true), CodeChallengeMethod: ptr("S256")}); err != nil {
		t.Fatal(err)
	}
	stateKey := bytes.Repeat([]byte{7}, 32)
	svc := &agentauth.Service{Store: db, Providers: prov, Vault: sec, HTTPClient: &http.Client{Timeout: time.Minute},
		StateKey: func(context.Context, string) ([]byte, error) { return stateKey, nil }}
	callback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		res, err := svc.Callback(r.Context(), strings.TrimPrefix(r.URL.Path, "/v2/auth/callback/"),
			agentauth.CallbackInput{Code: q.Get("code"), State: q.Get("state"), Error: q.Get("error")})
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		_ = json.NewEncoder(w).Encode(res)
	}))
	t.Cleanup(callback.Close)
	svc.CallbackBase = callback.URL
	return svc
}

// TestAppNodeGetsTheUsersTokenAfterConsent: a LangGraph app's node asks for
// the run's user's token (stepgraph_runtime.auth.get_token); with none the
// run interrupts with upstream's value; the user consents at the real OAuth
// server (a browser following the redirect chain to the callback); resuming
// runs the node again, which calls the resource server with the token. The
// token is in no run output, state, checkpoint, log or stored record.
func TestAppNodeGetsTheUsersTokenAfterConsent(t *testing.T) {
	var mu sync.Mutex
	var issued []string
	srv, front := startOAuth(t, &issued, &mu)

	var seen []string
	resource := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, `{"repos": ["alpha", "beta"]}`)
	}))
	t.Cleanup(resource.Close)

	var logs lockedBuffer
	p := startRuntimeTo(t, authApp(t), io.MultiWriter(&logs, testWriter{t}))
	dataDir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dataDir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	aa := &recordingAuth{Service: newAgentAuth(t, db, srv, front)}
	e := newEnvOn(t, db, p, aa, slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	input := `"input": {"resource_url": "` + resource.URL + `/repos"}`

	th := e.thread(t)
	out := e.wait(t, th, `{"assistant_id": "tokens", `+input+`, "context": {"user_id": "ada"}}`)
	ints, _ := out["__interrupt__"].([]any)
	if len(ints) != 1 {
		t.Fatalf("no interrupt: %v\n%s", out, logs.String())
	}
	value, _ := ints[0].(map[string]any)["value"].(map[string]any)
	authURL, _ := value["auth_url"].(string)
	if value["provider"] != "gh" || fmt.Sprint(value["scopes"]) != "[openid read]" || !strings.HasPrefix(authURL, srv.Issuer+"/authorize?") ||
		value["message"] != "OAuth authentication required for provider 'gh'." {
		t.Fatalf("interrupt value: %v", value)
	}

	// Resuming before the consent fails the node, as langchain-auth does.
	early := e.thread(t)
	e.wait(t, early, `{"assistant_id": "tokens", `+input+`, "context": {"user_id": "bob"}}`)
	failed := e.wait(t, early, `{"assistant_id": "tokens", "command": {"resume": "done"}, "context": {"user_id": "bob"}}`)
	if msg := fmt.Sprint(failed["__error__"]); !strings.Contains(msg, "ValueError") || !strings.Contains(msg, "not completed") {
		t.Errorf("resume without consent: %v", failed)
	}

	status, body, _, err := oauthtest.Consent(context.Background(), authURL)
	if err != nil || status != http.StatusOK || !strings.Contains(string(body), `"status":"completed"`) {
		t.Fatalf("consent: %d %s %v", status, body, err)
	}
	out = e.wait(t, th, `{"assistant_id": "tokens", "command": {"resume": "done"}, "context": {"user_id": "ada"}}`)
	if fmt.Sprint(out["repos"]) != "[alpha beta]" || out["__interrupt__"] != nil {
		t.Fatalf("resumed run: %v", out)
	}
	token := front.Last().AccessToken
	mu.Lock()
	if len(seen) != 1 || seen[0] != "Bearer "+token {
		t.Errorf("the resource server saw %d calls, with the issued token: %v", len(seen), len(seen) == 1 && seen[0] == "Bearer "+token)
	}
	mu.Unlock()

	// The run's metadata names the user when its context does not.
	out = e.wait(t, e.thread(t), `{"assistant_id": "tokens", `+input+`, "metadata": {"user_id": "ada"}}`)
	if fmt.Sprint(out["repos"]) != "[alpha beta]" {
		t.Errorf("user from the run's metadata: %v", out)
	}
	// A run naming no user fails the node, naming the key.
	out = e.wait(t, e.thread(t), `{"assistant_id": "tokens", `+input+`}`)
	if msg := fmt.Sprint(out["__error__"]); !strings.Contains(msg, "AuthError") || !strings.Contains(msg, "user_id: the run names no user") {
		t.Errorf("run without a user: %v", out)
	}

	// The token is scoped to the run's assistant, as langchain-auth scopes
	// it inside LangGraph.
	assistant, err := e.runs.GetAssistant(context.Background(), "org", "tokens")
	if err != nil {
		t.Fatal(err)
	}
	aa.mu.Lock()
	for _, agent := range aa.agents {
		if agent != assistant.AssistantID {
			t.Errorf("token requested for agent %q, want the run's assistant %s", agent, assistant.AssistantID)
		}
	}
	aa.mu.Unlock()

	scanForTokens(t, e, issued, &mu, logs.String(), dataDir, th)
}

// scanForTokens fails when an issued token is in the thread's state or
// history, the logs, or the data directory (the checkpoints' LangGraph
// bundles hold base64: its forms are looked for too).
func scanForTokens(t *testing.T, e *env, issued []string, mu *sync.Mutex, logs, dataDir, thread string) {
	t.Helper()
	st, err := e.runs.ThreadState(context.Background(), "org", thread)
	if err != nil {
		t.Fatal(err)
	}
	state, _ := json.Marshal(st)
	files := map[string][]byte{"logs": []byte(logs), "state": state}
	_ = filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files[p], _ = os.ReadFile(p)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(issued) == 0 {
		t.Fatal("the OAuth server issued no token")
	}
	for _, tok := range issued {
		for name, data := range files {
			for _, form := range append(base64Forms(tok), tok) {
				if bytes.Contains(data, []byte(form)) {
					t.Errorf("an issued token is in %s", name)
				}
			}
		}
	}
}

// base64Forms are the parts of secret's base64 encodings, at each of the
// three alignments, that depend on secret's bytes only.
func base64Forms(secret string) []string {
	var out []string
	for k := 0; k < 3; k++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, k), secret...))
		if k > 0 {
			enc = enc[4:]
		}
		out = append(out, enc[:len(enc)-4])
	}
	return out
}

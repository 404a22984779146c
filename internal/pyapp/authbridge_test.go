package pyapp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stepgraph/stepgraph/internal/agentauth"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/pyapp"
)

// fakeAuth answers every request with res (or err), recording the inputs.
type fakeAuth struct {
	mu  sync.Mutex
	ins []agentauth.AuthenticateInput
	res agentauth.AuthenticateResult
	err error
}

func (f *fakeAuth) Authenticate(_ context.Context, orgID string, in agentauth.AuthenticateInput) (agentauth.AuthenticateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ins = append(f.ins, in)
	return f.res, f.err
}

func (f *fakeAuth) answer(res agentauth.AuthenticateResult, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.res, f.err = res, err
}

func (f *fakeAuth) last() (agentauth.AuthenticateInput, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ins[len(f.ins)-1], len(f.ins)
}

func askToken(t *testing.T, link *pyapp.Link, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, link.URL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+link.Token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

func TestBridgeTokenRoute(t *testing.T) {
	pending := agentauth.AuthenticateResult{Status: "pending", URL: "https://idp.example/authorize?state=s", AuthID: "a1"}
	auth := &fakeAuth{res: pending}
	b, err := pyapp.StartBridge(nil, auth, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	links, release, _ := b.Grant(context.Background(), pyapp.CallScope{OrgID: "org", AssistantID: "asst-1", UserID: "ada"})
	if links.Store != nil || links.Auth == nil {
		t.Fatalf("links %+v: a bridge without a store links no store", links)
	}

	// agent_id: absent → the run's assistant; null → unscoped; a string → it.
	for body, want := range map[string]string{
		`{"provider": "gh", "scopes": ["repo"]}`:                    "asst-1",
		`{"provider": "gh", "scopes": ["repo"], "agent_id": null}`:  "<none>",
		`{"provider": "gh", "scopes": ["repo"], "agent_id": "a-2"}`: "a-2",
	} {
		status, out := askToken(t, links.Auth, body)
		if status != 200 || out["status"] != "pending" || out["auth_url"] != pending.URL || out["auth_id"] != nil {
			t.Errorf("%s: %d %v", body, status, out)
		}
		in, _ := auth.last()
		got := "<none>"
		if in.AgentID != nil {
			got = *in.AgentID
		}
		if got != want || *in.UserID != "ada" || *in.Provider != "gh" {
			t.Errorf("%s: agent %q user %q, want agent %q and the run's user", body, got, *in.UserID, want)
		}
	}
	if status, out := askToken(t, links.Auth, `{"provider": "gh", "scopes": ["repo"], "agent_id": 7}`); status != 422 || out["detail"] != "agent_id: must be a string or null" {
		t.Errorf("agent_id 7: %d %v", status, out)
	}
	if status, out := askToken(t, links.Auth, strings.Repeat(" ", 65<<10)+"{}"); status != 422 || !strings.HasPrefix(out["detail"].(string), "body: is at most") {
		t.Errorf("a large body: %d %v", status, out)
	}

	// Agent auth's refusals keep their words; other failures do not.
	auth.answer(pending, fail.Invalid("scopes", "is required"))
	if status, out := askToken(t, links.Auth, `{"provider": "gh"}`); status != 422 || out["detail"] != "scopes: is required" {
		t.Errorf("refused: %d %v", status, out)
	}
	auth.answer(pending, io.ErrUnexpectedEOF)
	if status, out := askToken(t, links.Auth, `{"provider": "gh", "scopes": []}`); status != 503 || strings.Contains(out["detail"].(string), "EOF") {
		t.Errorf("failed: %d %v", status, out)
	}
	auth.answer(agentauth.AuthenticateResult{Status: "completed", Token: "tok-value"}, nil)
	if status, out := askToken(t, links.Auth, `{"provider": "gh", "scopes": []}`); status != 200 || out["token"] != "tok-value" {
		t.Errorf("completed: %d %v", status, out)
	}

	// At most 100 token requests per call (8 made above).
	for i := 8; i < 100; i++ {
		askToken(t, links.Auth, `{"provider": "gh", "scopes": []}`)
	}
	if status, out := askToken(t, links.Auth, `{"provider": "gh", "scopes": []}`); status != 429 || !strings.Contains(out["detail"].(string), "at most 100") {
		t.Errorf("the 101st request: %d %v", status, out)
	}

	// The grant ends with the call.
	release()
	if status, _ := askToken(t, links.Auth, `{"provider": "gh", "scopes": []}`); status != 401 {
		t.Errorf("after the call: %d", status)
	}

	// A run naming no user: the request fails, naming the key.
	noUser, release2, _ := b.Grant(context.Background(), pyapp.CallScope{OrgID: "org", AssistantID: "asst-1"})
	defer release2()
	_, before := auth.last()
	if status, out := askToken(t, noUser.Auth, `{"provider": "gh", "scopes": []}`); status != 422 || !strings.HasPrefix(out["detail"].(string), `user_id: the run names no user: set "user_id"`) {
		t.Errorf("no user: %d %v", status, out)
	}
	if _, after := auth.last(); after != before {
		t.Error("a request without a user reached agent auth")
	}
}

func TestRunUser(t *testing.T) {
	conf := map[string]any{"configurable": map[string]any{"user_id": "from-config"}}
	for _, c := range []struct {
		context, metadata string
		config            map[string]any
		want              string
	}{
		{`{"user_id": "from-context"}`, `{"user_id": "from-metadata"}`, conf, "from-context"},
		{``, `{"user_id": "from-metadata"}`, conf, "from-config"},
		{`{"user_id": ""}`, `{"user_id": "from-metadata"}`, nil, "from-metadata"},
		{`{"user_id": 7}`, `{}`, nil, ""},
		{`null`, ``, nil, ""},
	} {
		if got := pyapp.RunUser(json.RawMessage(c.context), c.config, json.RawMessage(c.metadata)); got != c.want {
			t.Errorf("RunUser(%s, %v, %s) = %q, want %q", c.context, c.config, c.metadata, got, c.want)
		}
	}
}

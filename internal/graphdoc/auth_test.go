package graphdoc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
)

type fakeTokens struct {
	token, url string
	err        error
	got        []string
}

func (f *fakeTokens) Token(_ context.Context, user, agent, provider string, scopes []string) (string, string, error) {
	f.got = append(f.got, user+"|"+provider+"|"+strings.Join(scopes, ","))
	if agent != "" {
		f.got[len(f.got)-1] += "|agent=" + agent
	}
	return f.token, f.url, f.err
}

// TestBearer: the rules of a node's auth, run on the engine's runtime
// (graph.Runtime.Interrupt needs a task, so through a one-node graph).
func TestBearer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		spec      authSpec
		context   map[string]any
		metadata  map[string]any
		tokens    *fakeTokens
		wantToken string
		interrupt bool
		errHas    string
		asked     string
	}{
		{name: "token", spec: authSpec{Provider: "gh", Scopes: []string{"repo"}}, context: map[string]any{"user_id": "ada"},
			tokens: &fakeTokens{token: "tok"}, wantToken: "tok", asked: "ada|gh|repo"},
		{name: "user key", spec: authSpec{Provider: "gh", UserKey: "who"}, context: map[string]any{"who": "bob"},
			tokens: &fakeTokens{token: "tok"}, wantToken: "tok", asked: "bob|gh|"},
		{name: "no user", spec: authSpec{Provider: "gh"}, context: map[string]any{},
			tokens: &fakeTokens{token: "tok"}, errHas: `neither the run's context nor its metadata has "user_id"`},
		{name: "user not a string", spec: authSpec{Provider: "gh"}, context: map[string]any{"user_id": 7},
			tokens: &fakeTokens{token: "tok"}, errHas: `has "user_id"`},
		{name: "user from metadata", spec: authSpec{Provider: "gh"}, context: map[string]any{}, metadata: map[string]any{"user_id": "meta"},
			tokens: &fakeTokens{token: "tok"}, wantToken: "tok", asked: "meta|gh|"},
		{name: "context before metadata", spec: authSpec{Provider: "gh"}, context: map[string]any{"user_id": "ctx"}, metadata: map[string]any{"user_id": "meta"},
			tokens: &fakeTokens{token: "tok"}, wantToken: "tok", asked: "ctx|gh|"},
		{name: "empty context value: metadata", spec: authSpec{Provider: "gh"}, context: map[string]any{"user_id": ""}, metadata: map[string]any{"user_id": "meta"},
			tokens: &fakeTokens{token: "tok"}, wantToken: "tok", asked: "meta|gh|"},
		{name: "non-string context value: metadata", spec: authSpec{Provider: "gh"}, context: map[string]any{"user_id": 7}, metadata: map[string]any{"user_id": "meta"},
			tokens: &fakeTokens{token: "tok"}, wantToken: "tok", asked: "meta|gh|"},
		{name: "user key in metadata", spec: authSpec{Provider: "gh", UserKey: "who"}, metadata: map[string]any{"who": "bob", "user_id": "other"},
			tokens: &fakeTokens{token: "tok"}, wantToken: "tok", asked: "bob|gh|"},
		{name: "user key in neither", spec: authSpec{Provider: "gh", UserKey: "who"}, context: map[string]any{"user_id": "ada"}, metadata: map[string]any{"user_id": "ada"},
			tokens: &fakeTokens{token: "tok"}, errHas: `has "who"`},
		{name: "agent: the run's assistant", spec: authSpec{Provider: "gh", Agent: true}, context: map[string]any{"user_id": "ada"},
			metadata: map[string]any{"assistant_id": "asst-1"}, tokens: &fakeTokens{token: "tok"}, wantToken: "tok", asked: "ada|gh||agent=asst-1"},
		{name: "no agent: unscoped", spec: authSpec{Provider: "gh"}, context: map[string]any{"user_id": "ada"},
			metadata: map[string]any{"assistant_id": "asst-1"}, tokens: &fakeTokens{token: "tok"}, wantToken: "tok", asked: "ada|gh|"},
		{name: "agent without an assistant id", spec: authSpec{Provider: "gh", Agent: true}, context: map[string]any{"user_id": "ada"},
			tokens: &fakeTokens{token: "tok"}, errHas: "assistant id"},
		{name: "metadata user not a string", spec: authSpec{Provider: "gh"}, metadata: map[string]any{"user_id": []any{"x"}},
			tokens: &fakeTokens{token: "tok"}, errHas: `has "user_id"`},
		{name: "no token interrupts", spec: authSpec{Provider: "gh"}, context: map[string]any{"user_id": "ada"},
			tokens: &fakeTokens{url: "https://idp.example/authorize?x"}, interrupt: true, asked: "ada|gh|"},
		{name: "token source fails", spec: authSpec{Provider: "gh"}, context: map[string]any{"user_id": "ada"},
			tokens: &fakeTokens{err: errors.New(`provider "gh" not found`)}, errHas: `provider "gh" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			var gotErr error
			g := graph.NewBuilder("t").AddChannel("x", graph.Channel{}).
				AddNode("n", func(ctx context.Context, _ map[string]any, rt *graph.Runtime) (*graph.Command, error) {
					got, gotErr = bearer(ctx, "n", &tc.spec, tc.tokens, rt)
					return nil, gotErr
				}).AddEdge(graph.Start, "n").MustCompile()
			_, out, err := graph.Run(context.Background(), g, nil, map[string]any{}, graph.Options{Context: tc.context, Metadata: tc.metadata}, nil)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if tc.errHas != "" {
				if gotErr == nil || !strings.Contains(gotErr.Error(), tc.errHas) {
					t.Errorf("error %v, want one with %q", gotErr, tc.errHas)
				}
				return
			}
			if tc.interrupt {
				ints := out.Interrupts
				if len(ints) != 1 {
					t.Fatalf("interrupts: %v", ints)
				}
				v := ints[0].Value.(map[string]any)
				if v["auth_url"] != tc.tokens.url || v["provider"] != "gh" || v["message"] == nil {
					t.Errorf("interrupt value %v", v)
				}
			} else if got != tc.wantToken {
				t.Errorf("token %q, want %q", got, tc.wantToken)
			}
			if tc.asked != "" && (len(tc.tokens.got) != 1 || tc.tokens.got[0] != tc.asked) {
				t.Errorf("asked %q, want %q", tc.tokens.got, tc.asked)
			}
		})
	}
}

// TestAuthRules: a document with auth needs agent auth on the server, and
// the schema holds the shape of auth.
func TestAuthRules(t *testing.T) {
	const doc = "state: {r: {}}\nnodes:\n  n: {kind: http, url: \"http://127.0.0.1:9/x\", auth: AUTH}\nedges: [{from: __start__, to: n}]\n"
	for _, tc := range []struct {
		auth   string
		tokens Tokens
		errHas string
	}{
		{auth: "{provider: gh, scopes: [repo]}", tokens: &fakeTokens{}},
		{auth: "{provider: gh}", tokens: &fakeTokens{}},
		{auth: "{provider: gh, scopes: [repo]}", errHas: "agent auth is not available"},
		{auth: "{scopes: [repo]}", tokens: &fakeTokens{}, errHas: "provider"},
		{auth: "{provider: gh, scopes: [\"a b\"]}", tokens: &fakeTokens{}, errHas: "scopes"},
		{auth: "{provider: gh, extra: 1}", tokens: &fakeTokens{}, errHas: "extra"},
		{auth: "{provider: gh, agent: true}", tokens: &fakeTokens{}},
		{auth: "{provider: gh, agent: yes please}", tokens: &fakeTokens{}, errHas: "agent"},
	} {
		cfg, err := Load(files(map[string]string{"g": strings.Replace(doc, "AUTH", tc.auth, 1)}), "stepgraph.yaml")
		if err == nil {
			opts := testOptions(nil)
			opts.Tokens = tc.tokens
			_, err = cfg.Compile(opts)
		}
		switch {
		case tc.errHas == "" && err != nil:
			t.Errorf("%s: %v", tc.auth, err)
		case tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)):
			t.Errorf("%s: error %v, want one with %q", tc.auth, err, tc.errHas)
		}
	}
}

// TestFunctionNodeAuth: a function node with auth interrupts without a
// token (the function is not called), and after the grant the function
// gets the token in the request's auth.
func TestFunctionNodeAuth(t *testing.T) {
	srv, calls := fakeRuntime(t, func(req map[string]any) (int, string) {
		a, _ := req["auth"].(map[string]any)
		return 200, `{"update": {"answer": "` + fmt.Sprint(a["provider"]) + `:` + fmt.Sprint(a["token"]) + `"}}`
	})
	tokens := &fakeTokens{url: "https://idp.example/authorize?state=s"}
	opts := testOptions(&HTTPRuntime{URL: srv.URL, Client: &http.Client{}, Backoff: time.Millisecond})
	opts.Tokens = tokens
	doc := strings.Replace(functionDoc, "fn: {kind: function, timeout: 5}", "fn: {kind: function, timeout: 5, auth: {provider: gh, scopes: [repo]}}", 1)
	g := compileDocs(t, opts, map[string]string{"g": doc})["g"]
	ctxOpts := graph.Options{Context: map[string]any{"user_id": "ada"}}

	cp, out := run(t, g, nil, map[string]any{}, ctxOpts)
	wantStatus(t, out, graph.Interrupted)
	if v := out.Interrupts[0].Value.(map[string]any); v["auth_url"] != tokens.url {
		t.Fatalf("interrupt %v", v)
	}
	if len(*calls) != 0 {
		t.Fatalf("the function was called without a token: %v", *calls)
	}
	tokens.token = "tok-123"
	cp, out = run(t, g, &cp, graph.Command{Resume: "done"}, ctxOpts)
	wantStatus(t, out, graph.Done)
	jsonEqual(t, cp.Values, `{"count": 0, "answer": "gh:tok-123"}`)
}

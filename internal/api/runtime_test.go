package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/calltoken"
	"github.com/stepgraph/stepgraph/internal/pyapp"
)

// callToken is a run call's token for org (by name), as the run worker
// hands it to a LangGraph app on Lambda; registered as a secret.
func (e *env) callToken(t *testing.T, signer *calltoken.Signer, org, user string) string {
	t.Helper()
	tok, _, err := signer.Issue(context.Background(), calltoken.Claims{OrgID: e.orgID(org), RunID: "run-1",
		AssistantID: "asst-1", UserID: user}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return secret(tok)
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// TestRuntimeStoreRoute: a run call's store operations through the stage's
// route land in the token's organization, visible through /store there and
// not in another organization, whose own token cannot read them.
func TestRuntimeStoreRoute(t *testing.T) {
	e := newEnv(t)
	tokA := e.callToken(t, e.callSigner, "alpha", "ada")
	tokB := e.callToken(t, e.callSigner, "beta", "bob")
	put := map[string]any{"ops": []any{map[string]any{"op": "put", "namespace": []string{"memories", "ada"}, "key": "color",
		"value": map[string]any{"likes": "teal"}, "index": nil, "ttl": nil}}}
	e.must(http.StatusOK, "POST", pyapp.RuntimeStorePath, "", put, bearer(tokA)...)

	item := e.must(http.StatusOK, "GET", "/store/items?namespace=memories.ada&key=color", e.keyA, nil)
	if v, _ := item["value"].(map[string]any); v["likes"] != "teal" {
		t.Fatalf("the item through /store: %v", item)
	}
	if other := e.must(http.StatusOK, "GET", "/store/items?namespace=memories.ada&key=color", e.keyB, nil); other != nil {
		t.Fatalf("another organization reads %v through /store, want null", other)
	}
	get := map[string]any{"ops": []any{map[string]any{"op": "get", "namespace": []string{"memories", "ada"}, "key": "color"}}}
	got := e.must(http.StatusOK, "POST", pyapp.RuntimeStorePath, "", get, bearer(tokB)...)
	if res, _ := got["results"].([]any); len(res) != 1 || res[0] != nil {
		t.Fatalf("another organization's token read %v, want [null]", got)
	}
	got = e.must(http.StatusOK, "POST", pyapp.RuntimeStorePath, "", get, bearer(tokA)...)
	if res, _ := got["results"].([]any); len(res) != 1 || res[0] == nil {
		t.Fatalf("the organization's own token read %v", got)
	}
}

// TestRuntimeRoutesRefuseBadTokens: no token, a tampered one, another
// kind of credential (an API key) or an expired one are 401 on both
// routes, naming the rule and never the token.
func TestRuntimeRoutesRefuseBadTokens(t *testing.T) {
	e := newEnv(t)
	good := e.callToken(t, e.callSigner, "alpha", "ada")
	past := *e.callSigner
	past.Now = func() time.Time { return time.Now().Add(-time.Hour) }
	expired := e.callToken(t, &past, "alpha", "ada")
	tampered := good[:len(good)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(good, "AA")]
	body := map[string]any{"ops": []any{}}
	for name, c := range map[string]struct {
		headers []string
		rule    string
	}{
		"no token":   {nil, "not a call token"},
		"an API key": {bearer(e.keyA), "not a call token"},
		"tampered":   {bearer(tampered), "signature"},
		"expired":    {bearer(expired), "expired"},
	} {
		for _, path := range []string{pyapp.RuntimeStorePath, pyapp.RuntimeTokenPath, pyapp.RuntimeEventsPath} {
			r := e.do("POST", path, e.keyA, body, c.headers...)
			d := r.detail(t)
			if r.Status != http.StatusUnauthorized || !strings.Contains(d, c.rule) {
				t.Errorf("%s on %s: %d %q, want 401 naming %q", name, path, r.Status, d, c.rule)
			}
			for _, tok := range []string{good, expired, tampered, e.keyA} {
				if strings.Contains(string(r.Body), tok) {
					t.Errorf("%s on %s: the answer names a credential", name, path)
				}
			}
		}
	}
}

// TestRuntimeTokenRouteBudget: a call's token requests are bounded
// (pyapp.MaxTokenRequests, then 429), per call: another call of the same
// run has its own budget.
func TestRuntimeTokenRouteBudget(t *testing.T) {
	e := newEnv(t)
	tok := e.callToken(t, e.callSigner, "alpha", "ada")
	req := map[string]any{"provider": "nope", "scopes": []string{"repo"}}
	for i := range pyapp.MaxTokenRequests {
		if r := e.do("POST", pyapp.RuntimeTokenPath, "", req, bearer(tok)...); r.Status != http.StatusNotFound {
			t.Fatalf("request %d: %d %s, want agent auth's 404 (no such provider)", i+1, r.Status, r.Body)
		}
	}
	r := e.do("POST", pyapp.RuntimeTokenPath, "", req, bearer(tok)...)
	if r.Status != http.StatusTooManyRequests || !strings.Contains(r.detail(t), "at most 100 requests") {
		t.Fatalf("request %d: %d %s, want 429", pyapp.MaxTokenRequests+1, r.Status, r.Body)
	}
	next := e.callToken(t, e.callSigner, "alpha", "ada")
	if r := e.do("POST", pyapp.RuntimeTokenPath, "", req, bearer(next)...); r.Status != http.StatusNotFound {
		t.Fatalf("the next call's first request: %d %s", r.Status, r.Body)
	}
}

// TestRuntimeEventsRoute: a call's posted events land in its mailbox, in
// order, in the token's organization; a batch that is not the call's
// event messages is 422 naming the field, and stores nothing.
func TestRuntimeEventsRoute(t *testing.T) {
	e := newEnv(t)
	tok, claims, err := e.callSigner.Issue(context.Background(), calltoken.Claims{OrgID: e.orgID("alpha"), RunID: "run-1"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	secret(tok)
	ev := func(seq int) map[string]any {
		return map[string]any{"type": "event", "seq": seq, "mode": "custom", "ns": []string{}, "data": map[string]any{"n": seq}}
	}
	e.must(http.StatusOK, "POST", pyapp.RuntimeEventsPath, "", map[string]any{"events": []any{ev(1), ev(2)}}, bearer(tok)...)
	e.must(http.StatusOK, "POST", pyapp.RuntimeEventsPath, "", map[string]any{"events": []any{ev(3)}}, bearer(tok)...)
	for name, c := range map[string]struct {
		body  any
		field string
	}{
		"no events":        {map[string]any{"events": []any{}}, "events"},
		"not a list":       {map[string]any{"events": "x"}, "events"},
		"no seq":           {map[string]any{"events": []any{map[string]any{"type": "event", "mode": "custom"}}}, "events[0]"},
		"a checkpoint":     {map[string]any{"events": []any{ev(4), map[string]any{"type": "checkpoint", "seq": 5}}}, "events[1]"},
		"an event too big": {map[string]any{"events": []any{map[string]any{"type": "event", "seq": 4, "data": strings.Repeat("x", 13<<10)}}}, "events[0]"},
	} {
		r := e.do("POST", pyapp.RuntimeEventsPath, "", c.body, bearer(tok)...)
		if r.Status != http.StatusUnprocessableEntity || !strings.HasPrefix(r.detail(t), c.field+":") {
			t.Errorf("%s: %d %s, want 422 naming %s", name, r.Status, r.Body, c.field)
		}
	}
	got, err := e.events.RunEvents(context.Background(), e.orgID("alpha"), pyapp.MailboxKey(claims.ID), -1, 100, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, g := range got {
		var m pyapp.Message
		if err := json.Unmarshal(g.Data, &m); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, m.Seq)
	}
	if fmt.Sprint(seqs) != "[1 2 3]" {
		t.Fatalf("the mailbox holds %v, want [1 2 3]", seqs)
	}
	if other, _ := e.events.RunEvents(context.Background(), e.orgID("beta"), pyapp.MailboxKey(claims.ID), -1, 100, time.Now()); len(other) != 0 {
		t.Fatalf("another organization's log holds the call's events: %v", other)
	}
}

package agentauth_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/agentauth"
	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/providers"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

func ptr[T any](v T) *T { return &v }

// TestWaitAnswersBeforeTheRequestDeadline: a wait longer than its request
// may last (a Lambda behind API Gateway) answers timeout, not an error.
func TestWaitAnswersBeforeTheRequestDeadline(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sec, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	org, _, err := (&auth.Keys{Store: db}).EnsureOrganization(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	prov := &providers.Service{Store: db, Secrets: sec}
	if _, err := prov.Create(ctx, org.ID, providers.CreateInput{ProviderID: ptr("gh"), Name: ptr("GitHub"), ClientID: ptr("c"),
		ClientSecret: ptr("s3cret"), AuthURL: ptr("https://idp.example/a"), TokenURL: ptr("https://idp.example/t")}); err != nil {
		t.Fatal(err)
	}
	key := &auth.OrgKey{Store: db, Secrets: sec, Name: "agentauth_pkce"}
	svc := &agentauth.Service{Store: db, Providers: prov, Vault: sec, StateKey: key.Get, CallbackBase: "https://sg.example",
		WaitPoll: 10 * time.Millisecond}
	res, err := svc.Authenticate(ctx, org.ID, agentauth.AuthenticateInput{Provider: ptr("gh"), Scopes: &[]string{"repo"}, UserID: ptr("u")})
	if err != nil || res.Status != "pending" {
		t.Fatalf("authenticate: %+v %v", res, err)
	}
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	w, err := svc.Wait(short, org.ID, res.AuthID, agentauth.MaxWait)
	if err != nil || w.Status != "timeout" {
		t.Errorf("wait under a short deadline: %+v %v, want status timeout", w, err)
	}
	if w, err := svc.Wait(ctx, org.ID, res.AuthID, 0); err != nil || w.Status != "timeout" {
		t.Errorf("wait 0: %+v %v", w, err)
	}
	if w, err := svc.Wait(ctx, "other-org", res.AuthID, 0); err != nil || w.Status != "not_found" {
		t.Errorf("another org: %+v %v", w, err)
	}
}

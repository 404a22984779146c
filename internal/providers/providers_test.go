package providers_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/providers"
	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

func ptr(s string) *string { return &s }

// TestClientSecretRotationAndDelete checks, against the real adapters, that a
// rotated client secret replaces the stored value (the old one is gone from
// the secrets store) and that deleting the provider removes its secret.
func TestClientSecretRotationAndDelete(t *testing.T) {
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
	svc := &providers.Service{Store: db, Secrets: sec}
	in := providers.CreateInput{
		ProviderID: ptr("gh"), Name: ptr("GitHub"), ClientID: ptr("Iv1.abc"), ClientSecret: ptr("first-secret"),
		AuthURL: ptr("https://github.com/login/oauth/authorize"), TokenURL: ptr("https://github.com/login/oauth/access_token"),
	}
	if _, err := svc.Create(ctx, org.ID, in); err != nil {
		t.Fatal(err)
	}
	ref := func() string {
		t.Helper()
		rec, err := db.Provider(ctx, org.ID, "gh")
		if err != nil {
			t.Fatal(err)
		}
		return rec.ClientSecretRef
	}
	firstRef := ref()
	if v, err := svc.ClientSecret(ctx, org.ID, "gh"); err != nil || v != "first-secret" {
		t.Fatalf("ClientSecret = %q, %v", v, err)
	}

	// An update without client_secret keeps the value and the reference.
	if _, err := svc.Update(ctx, org.ID, "gh", providers.UpdateInput{Name: ptr("Renamed")}); err != nil {
		t.Fatal(err)
	}
	if ref() != firstRef {
		t.Errorf("an update without client_secret changed the reference")
	}

	// Rotation: the new value is served, the old one is gone.
	if _, err := svc.Update(ctx, org.ID, "gh", providers.UpdateInput{ClientSecret: ptr("second-secret")}); err != nil {
		t.Fatal(err)
	}
	if v, err := svc.ClientSecret(ctx, org.ID, "gh"); err != nil || v != "second-secret" {
		t.Fatalf("after rotation ClientSecret = %q, %v", v, err)
	}
	secondRef := ref()
	if secondRef == firstRef {
		t.Errorf("rotation kept the reference")
	}
	if _, err := sec.Get(ctx, firstRef); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("old secret still stored after rotation: %v", err)
	}

	// A rejected update leaves the secret as it was.
	if _, err := svc.Update(ctx, org.ID, "gh", providers.UpdateInput{ClientSecret: ptr("")}); err == nil {
		t.Errorf("empty client_secret accepted")
	}
	if v, _ := svc.ClientSecret(ctx, org.ID, "gh"); v != "second-secret" || ref() != secondRef {
		t.Errorf("a rejected update changed the secret")
	}

	// Delete removes the record and the secret.
	if err := svc.Delete(ctx, org.ID, "gh"); err != nil {
		t.Fatal(err)
	}
	if _, err := sec.Get(ctx, secondRef); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("secret still stored after delete: %v", err)
	}
	if _, err := svc.ClientSecret(ctx, org.ID, "gh"); err == nil {
		t.Errorf("ClientSecret of a deleted provider answered")
	}
}

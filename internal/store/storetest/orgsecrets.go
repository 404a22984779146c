package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/store"
)

// runOrgSecrets checks the organization secret references of the port.
func runOrgSecrets(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	s := open(t)
	org := store.Organization{ID: uuid.NewString(), Name: "orgsec-" + uuid.NewString(), CreatedAt: time.Now()}
	other := store.Organization{ID: uuid.NewString(), Name: "orgsec-" + uuid.NewString(), CreatedAt: time.Now()}
	for _, o := range []store.Organization{org, other} {
		if err := s.CreateOrganization(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.OrganizationSecretRef(ctx, org.ID, "webhook"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unset ref: %v, want ErrNotFound", err)
	}
	if err := s.SetOrganizationSecretRef(ctx, org.ID, "webhook", "ref-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOrganizationSecretRef(ctx, org.ID, "webhook", "ref-2"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second set: %v, want ErrConflict", err)
	}
	if ref, err := s.OrganizationSecretRef(ctx, org.ID, "webhook"); err != nil || ref != "ref-1" {
		t.Errorf("ref %q %v, want the first one", ref, err)
	}
	if _, err := s.OrganizationSecretRef(ctx, other.ID, "webhook"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another org sees the ref: %v", err)
	}
	if err := s.SetOrganizationSecretRef(ctx, uuid.NewString(), "webhook", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown org: %v, want ErrNotFound", err)
	}
}

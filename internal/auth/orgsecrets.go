package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"

	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/store"
)

// OrgKey keeps one random server-held key per organization under Name:
// made on first use, its value in the secrets store and its reference in the
// organization's record, so every process (every Lambda) of the platform
// uses the same one and the database alone never holds it.
type OrgKey struct {
	Store   store.Organizations
	Secrets secrets.Store
	// Name is the key's name among the organization's secret references.
	Name string

	cache sync.Map // org id → []byte
}

// Get returns the organization's key, creating it once.
func (k *OrgKey) Get(ctx context.Context, orgID string) ([]byte, error) {
	if v, ok := k.cache.Load(orgID); ok {
		return v.([]byte), nil
	}
	ref, err := k.Store.OrganizationSecretRef(ctx, orgID, k.Name)
	if errors.Is(err, store.ErrNotFound) {
		ref, err = k.create(ctx, orgID)
	}
	if err != nil {
		return nil, err
	}
	v, err := k.Secrets.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	k.cache.Store(orgID, v)
	return v, nil
}

// create stores a new key and records it; when another process recorded one
// first, that one wins and ours is removed.
func (k *OrgKey) create(ctx context.Context, orgID string) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	// Hex text: a secrets store may keep values as strings (Secrets Manager).
	ref, err := k.Secrets.Create(ctx, "orgs/"+orgID+"/"+k.Name, []byte(hex.EncodeToString(raw)))
	if err != nil {
		return "", err
	}
	err = k.Store.SetOrganizationSecretRef(ctx, orgID, k.Name, ref)
	if errors.Is(err, store.ErrConflict) {
		_ = k.Secrets.Delete(context.WithoutCancel(ctx), ref)
		return k.Store.OrganizationSecretRef(ctx, orgID, k.Name)
	}
	if err != nil {
		_ = k.Secrets.Delete(context.WithoutCancel(ctx), ref)
		return "", err
	}
	return ref, nil
}

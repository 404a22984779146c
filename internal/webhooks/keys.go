package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"sync"

	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/store"
)

// secretName is the name of the signing secret among an organization's.
const secretName = "webhook_signing"

// OrgKeys keeps one signing secret per organization: made on first use, its
// value in the secrets store, its reference in the store.
type OrgKeys struct {
	Store   store.Organizations
	Secrets secrets.Store

	cache sync.Map // org id → []byte
}

// SigningSecrets implements SigningKeys: the organization's secret,
// created on first use.
func (k *OrgKeys) SigningSecrets(ctx context.Context, orgID string) ([]string, error) {
	v, err := k.signingSecret(ctx, orgID)
	if err != nil {
		return nil, err
	}
	return []string{string(v)}, nil
}

func (k *OrgKeys) signingSecret(ctx context.Context, orgID string) ([]byte, error) {
	if v, ok := k.cache.Load(orgID); ok {
		return v.([]byte), nil
	}
	ref, err := k.Store.OrganizationSecretRef(ctx, orgID, secretName)
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

// create stores a new secret and records it; when another process recorded
// one first, that one wins and ours is removed.
func (k *OrgKeys) create(ctx context.Context, orgID string) (string, error) {
	// 32 random bytes, as Standard Webhooks asks (24 to 64). Secrets made
	// before were whsec_<64 hex digits>: hex is base64 too, so they decode
	// to 48 bytes and keep verifying.
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	ref, err := k.Secrets.Create(ctx, "orgs/"+orgID+"/webhook", []byte(SecretPrefix+base64.StdEncoding.EncodeToString(raw)))
	if err != nil {
		return "", err
	}
	err = k.Store.SetOrganizationSecretRef(ctx, orgID, secretName, ref)
	if errors.Is(err, store.ErrConflict) {
		_ = k.Secrets.Delete(context.WithoutCancel(ctx), ref)
		return k.Store.OrganizationSecretRef(ctx, orgID, secretName)
	}
	if err != nil {
		_ = k.Secrets.Delete(context.WithoutCancel(ctx), ref)
		return "", err
	}
	return ref, nil
}

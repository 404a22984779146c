// Package auth owns organizations' API keys: how a key is generated, how it is
// stored (only its SHA-256 hash) and how a presented key is resolved to its
// organization.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// keyPrefix makes stepgraph keys recognisable in logs and secret scanners.
const keyPrefix = "sg_"

// ErrUnauthenticated: the key is missing or unknown.
var ErrUnauthenticated = errors.New("missing or invalid API key")

// Keys issues and checks API keys.
type Keys struct {
	Store store.Organizations
	Now   func() time.Time // time.Now when nil
	// CacheTTL, when positive, keeps what a lookup found (the key's
	// organization, or no such key) in memory for that long, by the key's
	// hash: a busy key costs one store read per TTL instead of one per
	// request. The price is revocation latency: a key deleted from the
	// store by anyone but this Keys still authenticates here for up to
	// CacheTTL. 0 (the local server): every request reads the store.
	CacheTTL time.Duration

	cache keyCache
}

func (k *Keys) now() time.Time {
	if k.Now != nil {
		return k.Now().UTC()
	}
	return time.Now().UTC()
}

// Hash is the form a key is stored in.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// EnsureOrganization returns the organization named name, creating it when
// missing; created reports whether it did.
func (k *Keys) EnsureOrganization(ctx context.Context, name string) (org store.Organization, created bool, err error) {
	if name == "" || len(name) > 64 || strings.ContainsAny(name, " \t\r\n") {
		return org, false, fail.Invalid("org", "must be 1-64 characters without spaces")
	}
	org, err = k.Store.OrganizationByName(ctx, name)
	if err == nil {
		return org, false, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return org, false, err
	}
	org = store.Organization{ID: uuid.NewString(), Name: name, CreatedAt: k.now()}
	switch err := k.Store.CreateOrganization(ctx, org); {
	case errors.Is(err, store.ErrConflict): // created concurrently: use theirs
		org, err = k.Store.OrganizationByName(ctx, name)
		return org, false, err
	case err != nil:
		return org, false, err
	}
	return org, true, nil
}

// Create issues a new key for the organization and returns it. The key itself
// is shown only here; the store keeps its hash.
func (k *Keys) Create(ctx context.Context, orgID string) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generate API key: %w", err)
	}
	key := keyPrefix + base64.RawURLEncoding.EncodeToString(raw)
	rec := store.APIKey{ID: uuid.NewString(), OrgID: orgID, Hash: Hash(key), CreatedAt: k.now()}
	if err := k.Store.CreateAPIKey(ctx, rec); err != nil {
		return "", fmt.Errorf("store API key: %w", err)
	}
	return key, nil
}

// Authenticate resolves a presented key to its organization ID.
func (k *Keys) Authenticate(ctx context.Context, key string) (orgID string, err error) {
	if key == "" {
		return "", ErrUnauthenticated
	}
	hash := Hash(key)
	now := k.now()
	if k.CacheTTL > 0 {
		if e, ok := k.cache.get(hash, now); ok {
			if e.orgID == "" {
				return "", ErrUnauthenticated
			}
			return e.orgID, nil
		}
	}
	rec, err := k.Store.APIKeyByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		// Remembered too: a flood repeating one bad key reads the store
		// once per TTL. A key created later cannot be hidden by it: keys
		// are 32 random bytes, never presented before they exist.
		if k.CacheTTL > 0 {
			k.cache.put(hash, "", now.Add(k.CacheTTL), now)
		}
		return "", ErrUnauthenticated
	}
	if err != nil {
		return "", err // not remembered: the next request asks again
	}
	// The lookup is by hash already; compare anyway in constant time so a
	// lenient adapter index (prefix or case folding) can never authenticate.
	if subtle.ConstantTimeCompare([]byte(rec.Hash), []byte(hash)) != 1 {
		return "", ErrUnauthenticated
	}
	if k.CacheTTL > 0 && rec.OrgID != "" {
		k.cache.put(hash, rec.OrgID, now.Add(k.CacheTTL), now)
	}
	return rec.OrgID, nil
}

// Revoke deletes a key: the next request with it through this Keys is
// unauthenticated; other processes that cached it (CacheTTL) accept it
// until their entry expires. ErrUnauthenticated when there is no such key.
func (k *Keys) Revoke(ctx context.Context, key string) error {
	k.cache.drop(Hash(key))
	err := k.Store.DeleteAPIKey(ctx, Hash(key))
	// Again after the delete: a lookup between the two may have cached it.
	k.cache.drop(Hash(key))
	if errors.Is(err, store.ErrNotFound) {
		return ErrUnauthenticated
	}
	return err
}

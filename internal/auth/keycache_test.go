package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// keyStore is an in-memory store.Organizations for the cache's unit tests:
// it counts lookups and can fail them.
type keyStore struct {
	store.Organizations // the methods not used here
	mu                  sync.Mutex
	keys                map[string]store.APIKey
	lookups             int
	fail                error
}

func (s *keyStore) CreateAPIKey(_ context.Context, k store.APIKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[k.Hash] = k
	return nil
}

func (s *keyStore) APIKeyByHash(_ context.Context, hash string) (store.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups++
	if s.fail != nil {
		return store.APIKey{}, s.fail
	}
	k, ok := s.keys[hash]
	if !ok {
		return store.APIKey{}, store.ErrNotFound
	}
	return k, nil
}

func (s *keyStore) DeleteAPIKey(_ context.Context, hash string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[hash]; !ok {
		return store.ErrNotFound
	}
	delete(s.keys, hash)
	return nil
}

func (s *keyStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookups
}

// The cache's rules, step by step on a fake clock: what is remembered, for
// how long, and how long a revocation made elsewhere takes to bite (at most
// the TTL, the bound docs/aws.md states).
func TestKeyCacheRevocationIsBoundedByTheTTL(t *testing.T) {
	const ttl = 30 * time.Second
	clock := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	st := &keyStore{keys: map[string]store.APIKey{}}
	k := &Keys{Store: st, Now: func() time.Time { return clock }, CacheTTL: ttl}
	ctx := context.Background()
	key, err := k.Create(ctx, "org-1")
	if err != nil {
		t.Fatal(err)
	}
	other := &Keys{Store: st} // another process: the operator's revocation
	for _, step := range []struct {
		name    string
		advance time.Duration
		do      func()
		want    string // org, or "" for unauthenticated
		lookups int    // the store's lookups so far
	}{
		{"first use reads the store", 0, nil, "org-1", 1},
		{"within the TTL: from memory", ttl - time.Second, nil, "org-1", 1},
		{"at the TTL: read again", time.Second, nil, "org-1", 2},
		{"revoked elsewhere: still accepted within the TTL", ttl - time.Millisecond, func() {
			if err := other.Revoke(ctx, key); err != nil {
				t.Fatal(err)
			}
		}, "org-1", 2},
		{"revoked elsewhere: refused once the TTL passed", time.Millisecond, nil, "", 3},
		{"an unknown key is remembered as unknown", time.Second, nil, "", 3},
	} {
		clock = clock.Add(step.advance)
		if step.do != nil {
			step.do()
		}
		got, err := k.Authenticate(ctx, key)
		if (step.want == "") != errors.Is(err, ErrUnauthenticated) || got != step.want {
			t.Fatalf("%s: %q, %v; want %q", step.name, got, err, step.want)
		}
		if n := st.count(); n != step.lookups {
			t.Fatalf("%s: %d lookups, want %d", step.name, n, step.lookups)
		}
	}
}

// A revocation through the same Keys bites at once; a failed lookup is not
// remembered; without a TTL every request reads the store.
func TestKeyCacheRevokeAndFailures(t *testing.T) {
	ctx := context.Background()
	st := &keyStore{keys: map[string]store.APIKey{}}
	k := &Keys{Store: st, CacheTTL: time.Hour}
	key, _ := k.Create(ctx, "org-1")
	if org, err := k.Authenticate(ctx, key); err != nil || org != "org-1" {
		t.Fatal(org, err)
	}
	if err := k.Revoke(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Authenticate(ctx, key); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("revoked here, then: %v", err)
	}

	key2, _ := k.Create(ctx, "org-2")
	st.fail = errors.New("throttled")
	if _, err := k.Authenticate(ctx, key2); err == nil || errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("store failure: %v, want it passed on", err)
	}
	st.fail = nil
	if org, err := k.Authenticate(ctx, key2); err != nil || org != "org-2" {
		t.Fatalf("after a failure: %q, %v (the failure was remembered)", org, err)
	}

	plain := &Keys{Store: st}
	before := st.count()
	for range 3 {
		if _, err := plain.Authenticate(ctx, key2); err != nil {
			t.Fatal(err)
		}
	}
	if st.count()-before != 3 {
		t.Fatalf("no TTL: %d lookups for 3 requests", st.count()-before)
	}
}

// A flood of made-up keys cannot grow the cache past MaxCachedKeys.
func TestKeyCacheIsBounded(t *testing.T) {
	st := &keyStore{keys: map[string]store.APIKey{}}
	k := &Keys{Store: st, CacheTTL: time.Hour}
	for i := range MaxCachedKeys + 500 {
		_, _ = k.Authenticate(context.Background(), fmt.Sprintf("sg_made_up_%d", i))
	}
	if n := k.cache.len(); n > MaxCachedKeys || n == 0 {
		t.Fatalf("%d entries after %d keys, want 1..%d", n, MaxCachedKeys+500, MaxCachedKeys)
	}
}

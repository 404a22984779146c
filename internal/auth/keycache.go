package auth

import (
	"sync"
	"time"
)

// keyCache remembers, for CacheTTL, what the store answered for a key hash:
// its organization, or that there is no such key. It holds hashes, never
// keys. On AWS each Lambda instance has its own (docs/aws.md, "The edge"):
// a key revoked in the store keeps working in an instance that resolved it
// for at most the TTL; a revocation through this Keys drops it at once.
type keyCache struct {
	mu      sync.Mutex
	entries map[string]cachedKey
}

type cachedKey struct {
	orgID   string // "" for a hash the store does not know
	expires time.Time
}

// MaxCachedKeys bounds the cache's memory (about 200 bytes an entry): past
// it, expired entries go, then half of the rest. A flood of made-up keys
// therefore costs a lookup each, as without the cache, but cannot grow it.
const MaxCachedKeys = 10000

func (c *keyCache) get(hash string, now time.Time) (cachedKey, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok || !now.Before(e.expires) {
		return cachedKey{}, false
	}
	return e, true
}

func (c *keyCache) put(hash, orgID string, expires, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]cachedKey{}
	}
	if _, ok := c.entries[hash]; !ok && len(c.entries) >= MaxCachedKeys {
		for h, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, h)
			}
		}
		for h := range c.entries {
			if len(c.entries) < MaxCachedKeys/2 {
				break
			}
			delete(c.entries, h)
		}
	}
	c.entries[hash] = cachedKey{orgID: orgID, expires: expires}
}

func (c *keyCache) drop(hash string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, hash)
}

func (c *keyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

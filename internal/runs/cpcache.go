package runs

import (
	"bytes"
	"container/list"
	"context"
	"sync"
	"sync/atomic"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Bounds of the latest-checkpoint cache (see latestCache). A cached
// checkpoint costs its stored bytes, its decoded form and its channels'
// JSON (cpEncoder), counted as cacheCostFactor times the bytes.
const (
	latestCacheBytes       = 64 << 20 // all organizations
	latestCacheBytesPerOrg = 16 << 20 // one organization: it cannot push the others out
	latestCacheEntries     = 1024
	cacheCostFactor        = 5
)

// latestCache keeps, per thread, the last checkpoint this process stored
// for it: its bytes as stored and its decoded form. A run starting from the
// thread's latest checkpoint still reads it from the store (the store is
// the truth: another process, an update_state or a partial step may have
// replaced it) but skips decoding it when the stored bytes are exactly the
// cached ones; the decoded form is then what decoding them gives, since the
// engine's checkpoints survive a JSON round trip unchanged (graph's doc)
// and the engine never modifies a checkpoint it starts from (it clones).
//
// Decoding the whole state at the start of every run is what made a turn
// of a long conversation cost in proportion to the conversation (issue 19).
//
// Memory is bounded in all and per organization (least recently used out
// first, an organization over its share losing its own entries), so one
// tenant's threads cannot fill it for the others. The zero value is ready.
type latestCache struct {
	mu      sync.Mutex
	max     int64 // 0: latestCacheBytes
	maxOrg  int64 // 0: latestCacheBytesPerOrg
	entries map[cacheKey]*list.Element
	lru     list.List // of *cacheEntry, most recently used first
	size    int64
	byOrg   map[string]int64
	hits    atomic.Int64 // runs started from a cached checkpoint (tests)
}

type cacheKey struct{ org, thread string }

type cacheEntry struct {
	key  cacheKey
	data []byte
	cp   *graph.Checkpoint
	// enc is the sink's encoder state after cp: the next run's sink
	// starts from it.
	enc  map[string]chanJSON
	cost int64
}

func (c *latestCache) limits() (all, org int64) {
	all, org = c.max, c.maxOrg
	if all <= 0 {
		all = latestCacheBytes
	}
	if org <= 0 {
		org = latestCacheBytesPerOrg
	}
	return all, min(all, org)
}

// put records that data, the bytes of cp, is what this process just stored
// as thread's newest checkpoint, enc the encoder's state after it. cp and
// enc must not be modified afterwards.
func (c *latestCache) put(orgID, threadID string, data []byte, cp *graph.Checkpoint, enc map[string]chanJSON) {
	k := cacheKey{orgID, threadID}
	cost := int64(len(data)) * cacheCostFactor
	all, perOrg := c.limits()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(k)
	if cost > perOrg {
		return // too large to keep: such a run decodes from the store
	}
	if c.entries == nil {
		c.entries, c.byOrg = map[cacheKey]*list.Element{}, map[string]int64{}
	}
	// The organization makes room within its own share first, then
	// everyone within the whole.
	for c.byOrg[orgID]+cost > perOrg && c.evictLocked(orgID) {
	}
	for (c.size+cost > all || c.lru.Len() >= latestCacheEntries) && c.evictLocked("") {
	}
	c.entries[k] = c.lru.PushFront(&cacheEntry{key: k, data: data, cp: cp, enc: enc, cost: cost})
	c.size += cost
	c.byOrg[orgID] += cost
}

// get returns the decoded form of stored when it is the checkpoint cached
// for its thread, byte for byte; nil otherwise.
func (c *latestCache) get(orgID string, stored store.Checkpoint) *graph.Checkpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[cacheKey{orgID, stored.ThreadID}]
	if !ok {
		return nil
	}
	e := el.Value.(*cacheEntry)
	if e.cp.ID != stored.ID || !bytes.Equal(e.data, stored.Data) {
		return nil
	}
	c.lru.MoveToFront(el)
	return e.cp
}

// known is what is cached for a thread: the bytes and the decoded
// checkpoint (nil, nil when nothing).
func (c *latestCache) known(orgID, threadID string) ([]byte, *graph.Checkpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[cacheKey{orgID, threadID}]
	if !ok {
		return nil, nil
	}
	c.lru.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	return e.data, e.cp
}

// encoder is the encoder state cached for a thread (nil when none): a
// sink's starting point, right whatever the run starts from (cpEncoder
// compares values before it reuses their JSON).
func (c *latestCache) encoder(orgID, threadID string) map[string]chanJSON {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[cacheKey{orgID, threadID}]; ok {
		return el.Value.(*cacheEntry).enc
	}
	return nil
}

// latestIfNot is what a store may offer besides store.Checkpoints: the
// latest checkpoint, without reading its values when it is exactly known
// (then same is true). The SQLite adapter has it.
type latestIfNot interface {
	LatestCheckpointIfNot(ctx context.Context, orgID, threadID string, known []byte) (cp store.Checkpoint, same bool, err error)
}

// latestCheckpoint reads the thread's latest checkpoint from the store and,
// when it is exactly the one this process stored last, its decoded form
// from the cache (nil otherwise: the caller decodes it).
func (s *Service) latestCheckpoint(ctx context.Context, orgID, threadID string) (store.Checkpoint, *graph.Checkpoint, error) {
	data, cp := s.latest.known(orgID, threadID)
	if st, ok := s.Store.(latestIfNot); ok && cp != nil {
		latest, same, err := st.LatestCheckpointIfNot(ctx, orgID, threadID, data)
		if err != nil || !same || latest.ID != cp.ID {
			return latest, nil, err
		}
		s.latest.hits.Add(1)
		return latest, cp, nil
	}
	latest, err := s.Store.LatestCheckpoint(ctx, orgID, threadID)
	if err != nil {
		return latest, nil, err
	}
	if cp := s.latest.get(orgID, latest); cp != nil {
		s.latest.hits.Add(1)
		return latest, cp, nil
	}
	return latest, nil, nil
}

// forget drops what is cached for a thread (it was deleted or written by
// something else than a run's sink).
func (c *latestCache) forget(orgID, threadID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(cacheKey{orgID, threadID})
}

func (c *latestCache) removeLocked(k cacheKey) {
	el, ok := c.entries[k]
	if !ok {
		return
	}
	e := el.Value.(*cacheEntry)
	c.lru.Remove(el)
	delete(c.entries, k)
	c.size -= e.cost
	if c.byOrg[k.org] -= e.cost; c.byOrg[k.org] <= 0 {
		delete(c.byOrg, k.org)
	}
}

// evictLocked removes the least recently used entry, of orgID when not "";
// false when there is none.
func (c *latestCache) evictLocked(orgID string) bool {
	for el := c.lru.Back(); el != nil; el = el.Prev() {
		if e := el.Value.(*cacheEntry); orgID == "" || e.key.org == orgID {
			c.removeLocked(e.key)
			return true
		}
	}
	return false
}

// len is the number of cached threads (tests).
func (c *latestCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

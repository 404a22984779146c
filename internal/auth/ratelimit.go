package auth

import (
	"math"
	"sync"
	"time"
)

// Limiter is a token bucket per API key: Rate requests per second on
// average, bursts up to Burst. The zero value (Rate 0) allows everything.
// Buckets live in memory: on AWS each Lambda instance limits on its own, so
// the effective limit there is per instance.
type Limiter struct {
	Rate  float64
	Burst int
	Now   func() time.Time // time.Now when nil

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxBuckets bounds memory: beyond it, full (idle) buckets are dropped.
const maxBuckets = 100000

// Allow takes a token for key. When none is left it reports how long until
// one is.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l == nil || l.Rate <= 0 {
		return true, 0
	}
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	burst := float64(max(l.Burst, 1))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b, found := l.buckets[key]
	if !found {
		if len(l.buckets) >= maxBuckets {
			l.prune(now, burst)
		}
		b = &bucket{tokens: burst, last: now}
		l.buckets[key] = b
	}
	b.tokens = math.Min(burst, b.tokens+now.Sub(b.last).Seconds()*l.Rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.Rate * float64(time.Second))
	return false, wait
}

func (l *Limiter) prune(now time.Time, burst float64) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.Rate >= burst {
			delete(l.buckets, k)
		}
	}
}

package runs

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// maxTTLMinutes bounds a thread's time to live (ten years).
const maxTTLMinutes = 10 * 366 * 24 * 60

// parseTTL checks a ttl and returns the expiry it sets from now (zero and
// "" for none).
func (s *Service) parseTTL(c *fail.Checks, in *ThreadTTL) (time.Time, string) {
	if in == nil {
		return time.Time{}, ""
	}
	strategy := deref(in.Strategy, "delete")
	c.Add(strategy != "delete" && strategy != "keep_latest", "ttl.strategy", "must be one of delete, keep_latest")
	if in.TTL == nil {
		c.Add(true, "ttl.ttl", "is required (minutes)")
		return time.Time{}, ""
	}
	minutes := *in.TTL
	if math.IsNaN(minutes) || minutes <= 0 || minutes > maxTTLMinutes {
		c.Add(true, "ttl.ttl", "must be more than 0 and at most %d minutes", maxTTLMinutes)
		return time.Time{}, ""
	}
	return s.now().Add(time.Duration(minutes * float64(time.Minute))), strategy
}

// sweepBatch bounds the threads one sweep reads at a time.
const sweepBatch = 100

// SweepExpiredThreads applies the time to live of every thread whose
// expiry has passed: delete removes it with its runs and checkpoints,
// keep_latest keeps only its latest checkpoint (and clears the expiry). A
// thread with a run inflight is left for a later sweep; one whose expiry
// moved meanwhile is left alone. It returns how many threads it swept.
func (s *Service) SweepExpiredThreads(ctx context.Context) (int, error) {
	swept := 0
	for ctx.Err() == nil {
		now := s.now()
		list, err := s.Store.ExpiredThreads(ctx, now, sweepBatch)
		if err != nil {
			return swept, err
		}
		progress := false
		for _, listed := range list {
			t, err := s.Store.Thread(ctx, listed.OrgID, listed.ID)
			switch {
			case errors.Is(err, store.ErrNotFound):
				continue
			case err != nil:
				return swept, err
			case t.ExpiresAt.IsZero() || t.ExpiresAt.After(now) || t.Status == store.ThreadBusy:
				continue
			}
			if t.TTLStrategy == "keep_latest" {
				err = s.Store.PruneCheckpoints(ctx, t.OrgID, t.ID)
				if err == nil {
					err = s.Store.SetThreadTTL(ctx, t.OrgID, t.ID, time.Time{}, "")
				}
			} else {
				err = s.Store.DeleteThread(ctx, t.OrgID, t.ID)
			}
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return swept, err
			}
			swept++
			progress = true
		}
		if len(list) < sweepBatch || !progress {
			break
		}
	}
	return swept, nil
}

// sweepThreads runs SweepExpiredThreads every sweepEvery until ctx ends.
func (s *Service) sweepThreads(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.SweepExpiredThreads(ctx); err != nil && ctx.Err() == nil {
			log.Warn("sweep expired threads", "error", err.Error())
		}
	}
}

// sweepThrottled sweeps expired threads unless this process did less than
// sweepEvery ago.
func (s *Service) sweepThrottled(ctx context.Context, log *slog.Logger) {
	now := time.Now().UnixNano()
	last := s.lastSweep.Load()
	if now-last < int64(sweepEvery) || !s.lastSweep.CompareAndSwap(last, now) || ctx.Err() != nil {
		return
	}
	if s.StageContext != nil {
		ctx = s.StageContext(ctx)
	}
	if _, err := s.SweepExpiredThreads(ctx); err != nil && ctx.Err() == nil {
		log.Warn("sweep expired threads", "error", err.Error())
	}
}

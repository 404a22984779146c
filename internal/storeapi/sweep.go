package storeapi

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Expired items are never read (the store checks expiry on every read);
// sweeping only frees their space and their bytes of the quota.

// sweepBatch is one short write of the sweep.
const sweepBatch = 500

// SweepEvery is how often a process sweeps expired items.
const SweepEvery = time.Minute

// Sweep deletes expired items, a batch at a time, until none are left or
// ctx ends; it returns how many it deleted.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, err := s.Store.DeleteExpiredItems(ctx, s.now(), sweepBatch)
		total += n
		if err != nil || n < sweepBatch {
			return total, err
		}
	}
	return total, ctx.Err()
}

// StartSweeper sweeps every SweepEvery until stop is called (the local
// server's workers).
func (s *Service) StartSweeper(log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(SweepEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				log.Warn("delete expired store items", "error", err.Error())
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// sweeper lets the writes of a process without workers (an AWS function)
// sweep one batch at most every SweepEvery.
type sweeper struct {
	mu   sync.Mutex
	last time.Time
}

// afterWrite sweeps one batch when the process has not swept for
// SweepEvery (SweepOnWrite). Its failure is the next sweep's to retry: the
// write succeeded.
func (s *Service) afterWrite(ctx context.Context) {
	if !s.SweepOnWrite {
		return
	}
	now := s.now()
	s.sweep.mu.Lock()
	due := now.Sub(s.sweep.last) >= SweepEvery
	if due {
		s.sweep.last = now
	}
	s.sweep.mu.Unlock()
	if due {
		_, _ = s.Store.DeleteExpiredItems(ctx, now, sweepBatch)
	}
}

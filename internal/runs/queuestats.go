package runs

import (
	"context"
	"errors"
	"slices"

	"github.com/stepgraph/stepgraph/internal/store"
)

// maxStatsThreads bounds the busy threads QueueStats reads (a scrape must
// not read an unbounded queue); Truncated says when there were more.
const maxStatsThreads = 1000

// QueueStats is an organization's run queue, in upstream's shape
// (langgraph-runtime-inmem ops.py Runs.stats, the "queue" of GET
// /metrics?format=json): its pending and running runs, and how long the
// pending ones have waited (seconds; null when none waits). Unblocked
// pending runs are those whose thread runs nothing.
type QueueStats struct {
	NPending                    int      `json:"n_pending"`
	NRunning                    int      `json:"n_running"`
	PendingWaitMaxSecs          *float64 `json:"pending_runs_wait_time_max_secs"`
	PendingWaitMedSecs          *float64 `json:"pending_runs_wait_time_med_secs"`
	PendingUnblockedWaitMaxSecs *float64 `json:"pending_unblocked_runs_wait_time_max_secs"`
	// Truncated: the organization has more busy threads than were read.
	Truncated bool `json:"truncated,omitempty"`
}

// QueueStats reads the organization's inflight runs (they are on its busy
// threads), at most maxStatsThreads threads' worth.
func (s *Service) QueueStats(ctx context.Context, orgID string) (QueueStats, error) {
	var out QueueStats
	threads, err := s.Store.SearchThreads(ctx, orgID, store.ThreadFilter{Status: store.ThreadBusy, Limit: maxStatsThreads + 1})
	if err != nil {
		return out, err
	}
	if len(threads) > maxStatsThreads {
		threads, out.Truncated = threads[:maxStatsThreads], true
	}
	now := s.now()
	var waits, unblocked []float64
	for _, t := range threads {
		running, err := s.Store.ListRuns(ctx, orgID, t.ID, store.RunRunning, 1000, 0)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return out, err
		}
		pending, err := s.Store.ListRuns(ctx, orgID, t.ID, store.RunPending, 1000, 0)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return out, err
		}
		out.NRunning += len(running)
		out.NPending += len(pending)
		for _, r := range pending {
			w := max(now.Sub(r.CreatedAt), 0).Seconds()
			waits = append(waits, w)
			if len(running) == 0 {
				unblocked = append(unblocked, w)
			}
		}
	}
	if len(waits) > 0 {
		slices.Sort(waits)
		out.PendingWaitMaxSecs = ptr(waits[len(waits)-1])
		out.PendingWaitMedSecs = ptr(median(waits))
	}
	if len(unblocked) > 0 {
		out.PendingUnblockedWaitMaxSecs = ptr(slices.Max(unblocked))
	}
	return out, nil
}

// median of sorted values (the mean of the middle two for an even count,
// as upstream computes it).
func median(sorted []float64) float64 {
	half := len(sorted) / 2
	if len(sorted)%2 == 1 {
		return sorted[half]
	}
	return (sorted[half-1] + sorted[half]) / 2
}

func ptr[T any](v T) *T { return &v }

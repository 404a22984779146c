package runs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// MaxBatchRuns bounds the runs of one POST /runs/batch.
const MaxBatchRuns = 100

// CreateRunBatch creates stateless background runs, one per request, as
// POST /runs would each. Every request is checked first (its fields and
// its assistant), so a bad one is a 422 or 404 naming its item and no run
// is made; a failure while storing them (a quota reached part-way) leaves
// the runs made before it.
func (s *Service) CreateRunBatch(ctx context.Context, orgID string, reqs []RunRequest) ([]Run, error) {
	if len(reqs) == 0 {
		return nil, fail.Invalid("body", "must hold at least one run")
	}
	if len(reqs) > MaxBatchRuns {
		return nil, fail.Invalid("body", "must hold at most %d runs, got %d", MaxBatchRuns, len(reqs))
	}
	for i, req := range reqs {
		if _, err := parse(req, true, s.Limits); err != nil {
			return nil, itemError(i, err)
		}
		if _, err := s.resolveAssistant(ctx, orgID, *req.AssistantID); err != nil {
			return nil, itemError(i, err)
		}
	}
	out := make([]Run, 0, len(reqs))
	for i, req := range reqs {
		r, err := s.CreateRun(ctx, orgID, "", req)
		if err != nil {
			return nil, itemError(i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// itemError names the batch item a failure is about, keeping its kind.
func itemError(i int, err error) error {
	var fe *fail.Error
	if !errors.As(err, &fe) {
		return err
	}
	return &fail.Error{Kind: fe.Kind, Message: fmt.Sprintf("item %d: %s", i, fe.Message), Err: fe.Err}
}

// RunsCancel is POST /runs/cancel: either every inflight run of the
// organization with a status (pending, running or all), or the named runs
// of one thread.
type RunsCancel struct {
	Status   *string  `json:"status"`
	ThreadID *string  `json:"thread_id"`
	RunIDs   []string `json:"run_ids"`
}

// maxCancelScan bounds the busy threads one cancel by status reads.
const maxCancelScan = 10000

// CancelRuns cancels runs with action (interrupt or rollback): the named
// ones (all must exist on the thread: a missing one is a 404 and nothing is
// cancelled), or every inflight one with the status. Terminal runs are left
// as they are. It returns how many runs it asked to stop.
func (s *Service) CancelRuns(ctx context.Context, orgID string, in RunsCancel, action string) (int, error) {
	var c fail.Checks
	if action == "" {
		action = store.CancelInterrupt
	}
	c.Add(action != store.CancelInterrupt && action != store.CancelRollback, "action", "must be one of interrupt, rollback")
	status := ""
	if in.Status != nil {
		status = strings.ToLower(*in.Status)
		c.Add(!slices.Contains([]string{"pending", "running", "all"}, status), "status", "Invalid status: must be 'pending', 'running', or 'all'")
		c.Add(in.ThreadID != nil || in.RunIDs != nil, "status",
			"When providing a 'status', 'thread_id' and 'run_ids' must be omitted. The 'status' parameter cancels all runs with the given status, regardless of thread or run ID.")
	} else {
		c.Add(in.ThreadID == nil || in.RunIDs == nil, "body", "must have either status, or thread_id and run_ids")
		if in.ThreadID != nil {
			_, err := uuid.Parse(*in.ThreadID)
			c.Add(err != nil, "thread_id", "Invalid thread ID: must be a UUID")
		}
		c.Add(len(in.RunIDs) > MaxBatchRuns*10, "run_ids", "must name at most %d runs", MaxBatchRuns*10)
		for i, id := range in.RunIDs {
			if _, err := uuid.Parse(id); err != nil {
				c.Add(true, "run_ids", "item %d: Invalid run ID: must be a UUID", i)
				break
			}
		}
	}
	if err := c.Err(); err != nil {
		return 0, err
	}
	if in.Status == nil {
		for _, id := range in.RunIDs {
			if _, err := s.run(ctx, orgID, *in.ThreadID, id); err != nil {
				return 0, err
			}
		}
		n := 0
		for _, id := range in.RunIDs {
			if _, err := s.CancelRun(ctx, orgID, *in.ThreadID, id, action); err != nil && fail.KindOf(err) != fail.KindNotFound {
				return n, err
			}
			n++
		}
		return n, nil
	}
	// The inflight runs are on busy threads.
	var targets []store.Run
	for offset := 0; offset < maxCancelScan; offset += 1000 {
		threads, err := s.Store.SearchThreads(ctx, orgID, store.ThreadFilter{Status: store.ThreadBusy, Limit: 1000, Offset: offset})
		if err != nil {
			return 0, err
		}
		for _, t := range threads {
			for _, st := range []string{store.RunPending, store.RunRunning} {
				if status != "all" && status != st {
					continue
				}
				list, err := s.Store.ListRuns(ctx, orgID, t.ID, st, 1000, 0)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return 0, err
				}
				targets = append(targets, list...)
			}
		}
		if len(threads) < 1000 {
			break
		}
	}
	n := 0
	for _, r := range targets {
		if _, err := s.CancelRun(ctx, orgID, r.ThreadID, r.ID, action); err != nil && fail.KindOf(err) != fail.KindNotFound {
			return n, err
		}
		n++
	}
	return n, nil
}

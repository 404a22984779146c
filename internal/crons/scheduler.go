package crons

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Firing is what one firing of a cron did.
type Firing struct {
	CronID string
	OrgID  string
	Slot   time.Time // the next_run_date it claimed
	RunID  string    // "" when the run was refused
	Err    error     // why the run was refused (logged)
}

// Scheduler loop bounds: a tick fires at most dueBatch×maxBatches crons
// (the next tick goes on), each run created within fireTimeout.
const (
	dueBatch    = 100
	maxBatches  = 10
	fireTimeout = 30 * time.Second
)

// DefaultTick is how often the in-process scheduler looks for due crons
// (upstream's scheduler sleeps about as long between its looks).
const DefaultTick = 5 * time.Second

// RunScheduler fires due crons at every tick until ctx ends: the local
// scheduler. ticks is a time.Ticker's channel in a server; a test sends
// ticks itself (and sets Now).
func (s *Service) RunScheduler(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			if _, err := s.FireDue(ctx); err != nil && ctx.Err() == nil {
				s.log().Error("cron scheduler", "error", err.Error())
			}
		}
	}
}

// FireDue fires every cron due now, once each, and says what it fired. A
// slot another process claimed first is not fired here. Slots missed while
// no scheduler ran are fired once, as upstream's scheduler does: the next
// slot is computed from now, not from the missed one.
func (s *Service) FireDue(ctx context.Context) ([]Firing, error) {
	var out []Firing
	for range maxBatches {
		now := s.now()
		due, err := s.Store.DueCrons(ctx, now, dueBatch)
		if err != nil {
			return out, err
		}
		claimed := 0
		for _, c := range due {
			f, ok, err := s.fire(ctx, c, now)
			if err != nil {
				return out, err
			}
			if ok {
				claimed++
				out = append(out, f)
			}
		}
		if len(due) < dueBatch || claimed == 0 {
			return out, nil
		}
	}
	return out, nil
}

// earlyTolerance is how far before a cron's next_run_date a firing from
// an external scheduler still counts for it (clocks differ a little).
const earlyTolerance = 5 * time.Second

// Fire is one firing of a cron by an external scheduler (the target of its
// EventBridge schedule), for the slot at scheduledAt. It fires nothing
// when the cron is gone, disabled, past its end or not due (a repeated or
// early delivery): fired is false then.
func (s *Service) Fire(ctx context.Context, orgID, cronID string, scheduledAt time.Time) (Firing, bool, error) {
	c, err := s.Store.Cron(ctx, orgID, cronID)
	if errors.Is(err, store.ErrNotFound) {
		if s.Scheduler != nil {
			// A schedule whose cron is gone: its delete failed halfway.
			return Firing{}, false, s.Scheduler.Remove(ctx, orgID, cronID)
		}
		return Firing{}, false, nil
	}
	if err != nil {
		return Firing{}, false, err
	}
	now := s.now()
	latest := now
	if scheduledAt.After(latest) {
		latest = scheduledAt
	}
	if !c.Enabled || c.NextRunDate.IsZero() || c.NextRunDate.After(latest.Add(earlyTolerance)) ||
		(!c.EndTime.IsZero() && c.EndTime.Before(now)) {
		if s.Scheduler != nil && c.Enabled && c.NextRunDate.After(now) {
			// A delivery for a slot already fired: the schedule of the
			// next one may have failed to be written then; write it again
			// (it is the same schedule when it did not).
			return Firing{}, false, s.Scheduler.Put(ctx, c)
		}
		return Firing{}, false, nil
	}
	return s.fire(ctx, c, now)
}

// fire claims c's slot and, when it won it, creates the run. The claim
// comes first: a crash between the two loses that firing rather than
// repeating it.
func (s *Service) fire(ctx context.Context, c store.Cron, now time.Time) (Firing, bool, error) {
	f := Firing{CronID: c.ID, OrgID: c.OrgID, Slot: c.NextRunDate}
	sched, err := parseSchedule(c.Schedule, c.Timezone)
	var next time.Time
	if err == nil {
		next = sched.Next(now)
	}
	claimed, cerr := s.Store.ClaimCronFiring(ctx, c.OrgID, c.ID, c.NextRunDate, next)
	if cerr != nil {
		if errors.Is(cerr, store.ErrStale) || errors.Is(cerr, store.ErrNotFound) {
			return f, false, nil // fired elsewhere, updated or deleted meanwhile
		}
		return f, false, cerr
	}
	if s.Scheduler != nil {
		// An external scheduler holds one schedule per cron, for its next
		// slot: move it there. A failure is logged, and repaired by the
		// next delivery of the old schedule (Fire writes it again).
		if err := s.Scheduler.Put(ctx, claimed); err != nil {
			s.log().Error("cron: schedule of the next slot not written", "cron_id", c.ID, "org_id", c.OrgID, "error", err.Error())
		}
	}
	if err != nil {
		// Stored schedules were checked when written; one that no longer
		// parses (a zone gone from the zone data) stops instead of
		// blocking the others at every tick.
		f.Err = err
		s.log().Error("cron: schedule no longer valid; it stops", "cron_id", c.ID, "org_id", c.OrgID, "error", err.Error())
		return f, true, nil
	}
	req, err := s.firingRequest(c)
	if err == nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fireTimeout)
		var run runs.Run
		run, err = s.Runs.CreateRun(rctx, c.OrgID, c.ThreadID, req)
		cancel()
		f.RunID = run.RunID
	}
	if err != nil {
		// Upstream logs a refused firing and goes on; so does this.
		f.Err = err
		s.log().Warn("cron: run not created", "cron_id", c.ID, "org_id", c.OrgID, "error", err.Error())
		s.dropIfThreadGone(ctx, c, err)
	}
	return f, true, nil
}

// dropIfThreadGone deletes a thread cron whose thread was deleted, as
// upstream's store does (its crons go with their thread): it could only
// fail at every slot.
func (s *Service) dropIfThreadGone(ctx context.Context, c store.Cron, err error) {
	if c.ThreadID == "" || fail.KindOf(err) != fail.KindNotFound {
		return
	}
	if _, terr := s.Runs.GetThread(ctx, c.OrgID, c.ThreadID); fail.KindOf(terr) != fail.KindNotFound {
		return // the thread is there (the assistant is missing), or unknown
	}
	if s.Scheduler != nil {
		if rerr := s.Scheduler.Remove(ctx, c.OrgID, c.ID); rerr != nil {
			s.log().Error("cron: schedule of a cron whose thread is gone not removed", "cron_id", c.ID, "error", rerr.Error())
			return
		}
	}
	if derr := s.Store.DeleteCron(ctx, c.OrgID, c.ID); derr != nil && !errors.Is(derr, store.ErrNotFound) {
		s.log().Error("cron: cron whose thread is gone not deleted", "cron_id", c.ID, "error", derr.Error())
		return
	}
	s.log().Info("cron: deleted with its thread", "cron_id", c.ID, "org_id", c.OrgID, "thread_id", c.ThreadID)
}

// firingRequest is the run request of one firing: the payload, with the
// cron's metadata under the payload's and the cron's id, and for a
// stateless cron what becomes of the thread.
func (s *Service) firingRequest(c store.Cron) (runs.RunRequest, error) {
	req, err := runRequest(objectOr(c.Payload))
	if err != nil {
		return req, err
	}
	meta := map[string]any{}
	_ = json.Unmarshal(objectOr(c.Metadata), &meta)
	var own map[string]any
	if json.Unmarshal(objectOr(req.Metadata), &own) == nil {
		for k, v := range own {
			meta[k] = v
		}
	}
	meta["cron_id"] = c.ID
	req.Metadata, _ = json.Marshal(meta)
	if c.ThreadID == "" {
		on := c.OnRunCompleted
		if on == "" {
			on = "delete"
		}
		req.OnCompletion = &on
	}
	return req, nil
}

package lambdaapp

import (
	"context"

	"github.com/stepgraph/stepgraph/internal/dispatch/eventbridge"
)

// HandleCronEvent is the cron-fire function's handler: one delivery of a
// cron's schedule. It fires the cron's slot when it is due (once: the
// claim is in the store) and moves the schedule on; a delivery for a cron
// that is gone, disabled or not due does nothing (crons.Service.Fire). An
// error makes EventBridge Scheduler try again (its retry policy). Webhooks
// are not delivered here: the run's are sent when it ends, by the run worker.
func (a *App) HandleCronEvent(ctx context.Context, ev eventbridge.Event) error {
	if ev.OrgID == "" || ev.CronID == "" {
		return &InvalidTaskError{Reason: "org_id and cron_id are required"}
	}
	f, fired, err := a.Crons.Fire(ctx, ev.OrgID, ev.CronID, ev.ScheduledAt())
	if err != nil {
		a.Log.Error("cron firing", "org_id", ev.OrgID, "cron_id", ev.CronID, "error", err.Error())
		return err
	}
	if fired {
		a.Log.Info("cron fired", "org_id", ev.OrgID, "cron_id", ev.CronID, "slot", f.Slot, "run_id", f.RunID)
	}
	return nil
}

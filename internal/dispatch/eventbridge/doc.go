// Package eventbridge keeps the schedules of crons on Amazon EventBridge
// Scheduler (crons.Scheduler): one schedule per cron, named
// "cron-<cron id>" in the stage's schedule group, created and updated with
// the cron and deleted with it.
//
// A schedule is a one-time at() expression for the cron's next_run_date in
// UTC, not the cron's own expression: the crons use case computes every
// slot (five-field syntax, IANA zones) with one parser, so EventBridge's
// cron dialect (six fields, "?", day-of-week 1-7) never has to agree with
// it. Its target is the cron-fire function with the input
// {"org_id", "cron_id", "scheduled_time": <aws.scheduler.scheduled-time>};
// the function claims the slot in the store and creates the run
// (crons.Service.Fire), which moves the schedule to the next slot. A
// disabled cron keeps a DISABLED schedule; a cron with no next slot has
// none.
package eventbridge

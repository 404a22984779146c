// Package crons owns scheduled runs: the rules of a cron (its schedule in
// standard five-field cron syntax with an IANA time zone, its end time, what
// happens to the thread of a stateless cron's run, the run payload it
// fires, the limits of an organization) and its firings.
//
// A firing never has its own way of making a run: it claims the cron's slot
// in the store (store.Crons.ClaimCronFiring, a compare-and-set of
// next_run_date), then creates a normal run through the runs use case, so
// webhooks, the multitask strategy, quotas and the run's rules apply as to
// any run. Claiming first makes a firing at most once per slot, however many
// processes look at the cron and whatever restarts happen between them.
//
// Who looks: locally Service.RunScheduler, an in-process loop over the
// store's due crons (its clock and ticks are injectable); on AWS the
// Scheduler port keeps one EventBridge schedule per cron, whose target
// calls Service.Fire.
package crons

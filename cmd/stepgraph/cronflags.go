package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/stepgraph/stepgraph/internal/crons"
)

// cronConfig is what the cron flags set: the in-process scheduler's tick
// and the limits of an organization's crons.
type cronConfig struct {
	Tick   time.Duration
	Limits crons.Limits
}

// addCronFlags registers the cron flags; check validates them once parsed.
func addCronFlags(fs *flag.FlagSet, c *cronConfig) (check func() error) {
	tick := envOr("STEPGRAPH_CRON_TICK", crons.DefaultTick.String())
	maxPerOrg := envOr("STEPGRAPH_MAX_CRONS_PER_ORG", strconv.Itoa(crons.DefaultMaxPerOrg))
	minInterval := envOr("STEPGRAPH_CRON_MIN_INTERVAL", crons.DefaultMinInterval.String())
	fs.StringVar(&tick, "cron-tick", tick, "how often the scheduler looks for due crons (env STEPGRAPH_CRON_TICK)")
	fs.StringVar(&maxPerOrg, "max-crons-per-org", maxPerOrg, "how many crons one organization may have; 0 = no limit (env STEPGRAPH_MAX_CRONS_PER_ORG)")
	fs.StringVar(&minInterval, "cron-min-interval", minInterval, "the shortest time a cron's schedule may leave between two firings (env STEPGRAPH_CRON_MIN_INTERVAL)")
	return func() error {
		d, err := time.ParseDuration(tick)
		if err != nil || d < 10*time.Millisecond || d > time.Minute {
			return fmt.Errorf("-cron-tick (env STEPGRAPH_CRON_TICK): must be a duration between 10ms and 1m, got %q", tick)
		}
		c.Tick = d
		n, err := strconv.Atoi(maxPerOrg)
		if err != nil || n < 0 {
			return fmt.Errorf("-max-crons-per-org (env STEPGRAPH_MAX_CRONS_PER_ORG): must be a whole number >= 0 (0 = no limit), got %q", maxPerOrg)
		}
		c.Limits.MaxPerOrg = n
		if n == 0 {
			c.Limits.MaxPerOrg = -1 // the crons service reads 0 as its default
		}
		m, err := time.ParseDuration(minInterval)
		if err != nil || m < time.Minute {
			return fmt.Errorf("-cron-min-interval (env STEPGRAPH_CRON_MIN_INTERVAL): must be a duration of at least 1m, got %q", minInterval)
		}
		c.Limits.MinInterval = m
		return nil
	}
}

// startCronScheduler runs the in-process scheduler of crons every tick
// until the returned function stops it (and waits for it).
func startCronScheduler(svc *crons.Service, tick time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	t := time.NewTicker(tick)
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RunScheduler(ctx, t.C)
	}()
	return func() {
		cancel()
		t.Stop()
		<-done
	}
}

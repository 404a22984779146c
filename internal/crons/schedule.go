package crons

import (
	"strings"
	"time"
	// Zones are read from the binary: a Lambda image may have none on disk.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	"github.com/stepgraph/stepgraph/internal/fail"
)

// parser reads the standard five-field syntax (minute hour day-of-month
// month day-of-week, with names, ranges, steps and lists) and the
// descriptors @yearly, @annually, @monthly, @weekly, @daily, @midnight and
// @hourly: what croniter, upstream's parser, reads too.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// schedule is a parsed cron expression in its time zone.
type schedule struct {
	spec cron.Schedule
	loc  *time.Location
}

// Next is the first slot strictly after t, in UTC.
func (s schedule) Next(t time.Time) time.Time {
	n := s.spec.Next(t.In(s.loc))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// upstreamScheduleRule is the reason upstream gives for a bad schedule.
const upstreamScheduleRule = "Invalid cron schedule: '%s'. Reason: Invalid cron schedule. Ensure the schedule uses the standard cron format (minute hour day_of_month month day_of_week). Example: '*/5 * * * *' for every 5 minutes."

// parseSchedule checks expr and tz (an IANA zone, "" for UTC).
func parseSchedule(expr, tz string) (schedule, error) {
	loc, err := parseTimezone(tz)
	if err != nil {
		return schedule{}, err
	}
	trimmed := strings.TrimSpace(expr)
	// The zone is the timezone field's; @every is not cron syntax.
	if trimmed == "" || len(trimmed) > 200 || strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") ||
		strings.HasPrefix(trimmed, "@every") {
		return schedule{}, fail.Invalid("schedule", upstreamScheduleRule, expr)
	}
	spec, err := parser.Parse(trimmed)
	if err != nil {
		return schedule{}, fail.Invalid("schedule", upstreamScheduleRule, expr)
	}
	s := schedule{spec: spec, loc: loc}
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		// A date that never comes (30 February): no slot in five years.
		return schedule{}, fail.Invalid("schedule", "'%s' never fires", expr)
	}
	return s, nil
}

// parseTimezone reads an IANA zone name; "" is UTC.
func parseTimezone(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	// Local is this machine's zone, not a zone of the caller's.
	if tz == "Local" || len(tz) > 64 {
		return nil, invalidTimezone(tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, invalidTimezone(tz)
	}
	return loc, nil
}

func invalidTimezone(tz string) error {
	return fail.Invalid("timezone", "Invalid timezone: '%s'. Use IANA timezone format (e.g. 'America/New_York').", tz)
}

// minGap is the shortest time between two of the next n slots after from.
func (s schedule) minGap(from time.Time, n int) time.Duration {
	prev := s.Next(from)
	gap := time.Duration(1<<63 - 1)
	for range n {
		next := s.Next(prev)
		if next.IsZero() {
			break
		}
		gap = min(gap, next.Sub(prev))
		prev = next
	}
	return gap
}

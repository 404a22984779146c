package crons

import (
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
)

func TestParseSchedule(t *testing.T) {
	from := time.Date(2026, 1, 10, 0, 2, 0, 0, time.UTC)
	cases := []struct {
		expr, tz string
		next     time.Time // zero: refused
		field    string
	}{
		{"*/5 * * * *", "", time.Date(2026, 1, 10, 0, 5, 0, 0, time.UTC), ""},
		{"0 9 * * *", "America/New_York", time.Date(2026, 1, 10, 14, 0, 0, 0, time.UTC), ""},
		{"0 9 * * *", "Asia/Kolkata", time.Date(2026, 1, 10, 3, 30, 0, 0, time.UTC), ""},
		{"30 2 * * MON-FRI", "", time.Date(2026, 1, 12, 2, 30, 0, 0, time.UTC), ""},
		{"@hourly", "", time.Date(2026, 1, 10, 1, 0, 0, 0, time.UTC), ""},
		{"@daily", "Europe/Paris", time.Date(2026, 1, 10, 23, 0, 0, 0, time.UTC), ""},
		{"0 0 1 jan *", "", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), ""},
		{"* * * *", "", time.Time{}, "schedule"},
		{"61 * * * *", "", time.Time{}, "schedule"},
		{"* * * * * *", "", time.Time{}, "schedule"},
		{"@every 1m", "", time.Time{}, "schedule"},
		{"CRON_TZ=Asia/Tokyo * * * * *", "", time.Time{}, "schedule"},
		{"", "", time.Time{}, "schedule"},
		{"0 0 30 2 *", "", time.Time{}, "schedule"},
		{"* * * * *", "Mars/Olympus", time.Time{}, "timezone"},
		{"* * * * *", "Local", time.Time{}, "timezone"},
	}
	for _, tc := range cases {
		t.Run(tc.expr+"@"+tc.tz, func(t *testing.T) {
			s, err := parseSchedule(tc.expr, tc.tz)
			if tc.field != "" {
				if fail.KindOf(err) != fail.KindInvalid || !strings.Contains(err.Error(), tc.field) {
					t.Fatalf("parseSchedule(%q, %q) = %v, want a 422 naming %s", tc.expr, tc.tz, err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseSchedule(%q, %q): %v", tc.expr, tc.tz, err)
			}
			if got := s.Next(from); !got.Equal(tc.next) || got.Location() != time.UTC {
				t.Fatalf("Next(%v) = %v, want %v in UTC", from, got, tc.next)
			}
		})
	}
}

func TestMinGap(t *testing.T) {
	from := time.Date(2026, 1, 10, 0, 2, 0, 0, time.UTC)
	cases := []struct {
		expr string
		want time.Duration
	}{
		{"*/5 * * * *", 5 * time.Minute},
		{"0,1 * * * *", time.Minute},
		{"0 */2 * * *", 2 * time.Hour},
		{"* * * * *", time.Minute},
	}
	for _, tc := range cases {
		s, err := parseSchedule(tc.expr, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := s.minGap(from, gapsChecked); got != tc.want {
			t.Errorf("minGap(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

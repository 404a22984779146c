package eventbridge

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/store"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// TestSchedulesOnTheEmulator: the schedule of a cron is created, moved,
// disabled and deleted with it, through EventBridge Scheduler's API on
// MiniStack (which stores schedules as AWS does; whether EventBridge
// invokes the target at the time is AWS's part, not exercised here).
func TestSchedulesOnTheEmulator(t *testing.T) {
	ep := awstest.Start(t)
	ctx := context.Background()
	client := scheduler.NewFromConfig(ep.Config)
	group := awstest.Prefix(t) + "crons"
	if _, err := client.CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(group)}); err != nil {
		t.Fatal(err)
	}
	s := &Scheduler{Client: client, Group: group,
		TargetARN: "arn:aws:lambda:us-east-1:000000000000:function:cron-fire",
		RoleARN:   "arn:aws:iam::000000000000:role/cron-scheduler"}
	c := store.Cron{ID: uuid.NewString(), OrgID: "org-" + uuid.NewString()[:8], Enabled: true,
		NextRunDate: time.Date(2031, 2, 3, 4, 5, 0, 0, time.UTC)}

	get := func() (*scheduler.GetScheduleOutput, error) {
		return client.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(Name(c.ID)), GroupName: aws.String(group)})
	}
	if err := s.Put(ctx, c); err != nil {
		t.Fatalf("Put (create): %v", err)
	}
	got, err := get()
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(got.ScheduleExpression) != "at(2031-02-03T04:05:00)" || aws.ToString(got.ScheduleExpressionTimezone) != "UTC" ||
		got.State != types.ScheduleStateEnabled || aws.ToString(got.Target.Arn) != s.TargetARN || aws.ToString(got.Target.RoleArn) != s.RoleARN {
		t.Fatalf("schedule = %+v", got)
	}
	var ev Event
	if err := json.Unmarshal([]byte(aws.ToString(got.Target.Input)), &ev); err != nil || ev.OrgID != c.OrgID || ev.CronID != c.ID ||
		ev.ScheduledTime != "<aws.scheduler.scheduled-time>" {
		t.Fatalf("target input %q (%v)", aws.ToString(got.Target.Input), err)
	}

	// The next slot, then disabled: the same schedule, changed.
	c.NextRunDate = c.NextRunDate.Add(time.Hour)
	if err := s.Put(ctx, c); err != nil {
		t.Fatalf("Put (update): %v", err)
	}
	c.Enabled = false
	if err := s.Put(ctx, c); err != nil {
		t.Fatalf("Put (disable): %v", err)
	}
	got, err = get()
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(got.ScheduleExpression) != "at(2031-02-03T05:05:00)" || got.State != types.ScheduleStateDisabled {
		t.Fatalf("moved and disabled schedule = %s %s", aws.ToString(got.ScheduleExpression), got.State)
	}

	// No next slot: no schedule; removing twice is no error.
	c.NextRunDate = time.Time{}
	if err := s.Put(ctx, c); err != nil {
		t.Fatalf("Put (no next slot): %v", err)
	}
	var nf *types.ResourceNotFoundException
	if _, err := get(); !errors.As(err, &nf) {
		t.Fatalf("schedule after the last slot: %v, want not found", err)
	}
	if err := s.Remove(ctx, c.OrgID, c.ID); err != nil {
		t.Fatalf("Remove of a missing schedule: %v", err)
	}
}

func TestEventScheduledAt(t *testing.T) {
	for in, want := range map[string]time.Time{
		"2031-02-03T04:05:00Z":           time.Date(2031, 2, 3, 4, 5, 0, 0, time.UTC),
		"<aws.scheduler.scheduled-time>": {},
		"":                               {},
	} {
		if got := (Event{ScheduledTime: in}).ScheduledAt(); !got.Equal(want) {
			t.Errorf("ScheduledAt(%q) = %v, want %v", in, got, want)
		}
	}
}

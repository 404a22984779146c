package eventbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Event is the input of a schedule's target, as the cron-fire function
// reads it. ScheduledTime is EventBridge's <aws.scheduler.scheduled-time>.
type Event struct {
	OrgID         string `json:"org_id"`
	CronID        string `json:"cron_id"`
	ScheduledTime string `json:"scheduled_time"`
}

// ScheduledAt is the time of the slot the event is for; zero when the
// event does not carry one it can read.
func (e Event) ScheduledAt() time.Time {
	t, err := time.Parse(time.RFC3339, e.ScheduledTime)
	if err != nil {
		return time.Time{}
	}
	return t
}

// Scheduler is a crons.Scheduler on EventBridge Scheduler.
type Scheduler struct {
	Client *scheduler.Client
	// Group is the schedule group of the stage's crons ("default" when "").
	Group string
	// TargetARN is the cron-fire function; RoleARN the role EventBridge
	// Scheduler assumes to invoke it.
	TargetARN string
	RoleARN   string
}

// New is a Scheduler through cfg.
func New(cfg aws.Config, group, targetARN, roleARN string) *Scheduler {
	return &Scheduler{Client: scheduler.NewFromConfig(cfg), Group: group, TargetARN: targetARN, RoleARN: roleARN}
}

// Name is the schedule name of a cron.
func Name(cronID string) string { return "cron-" + cronID }

func (s *Scheduler) group() *string {
	if s.Group == "" {
		return aws.String("default")
	}
	return aws.String(s.Group)
}

// Put implements crons.Scheduler: update the cron's schedule, or create it
// when there is none. A cron without a next slot has its schedule removed.
func (s *Scheduler) Put(ctx context.Context, c store.Cron) error {
	if c.NextRunDate.IsZero() {
		return s.Remove(ctx, c.OrgID, c.ID)
	}
	input, err := json.Marshal(Event{OrgID: c.OrgID, CronID: c.ID, ScheduledTime: "<aws.scheduler.scheduled-time>"})
	if err != nil {
		return err
	}
	state := types.ScheduleStateEnabled
	if !c.Enabled {
		state = types.ScheduleStateDisabled
	}
	expr := "at(" + c.NextRunDate.UTC().Format("2006-01-02T15:04:05") + ")"
	target := &types.Target{Arn: aws.String(s.TargetARN), RoleArn: aws.String(s.RoleARN), Input: aws.String(string(input)),
		// A firing that failed is tried again a few times within the hour;
		// Fire is safe to repeat (the claim is once per slot).
		RetryPolicy: &types.RetryPolicy{MaximumRetryAttempts: aws.Int32(3), MaximumEventAgeInSeconds: aws.Int32(3600)}}
	window := &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff}
	desc := aws.String("stepgraph cron " + c.ID + " of organization " + c.OrgID)
	_, err = s.Client.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
		Name: aws.String(Name(c.ID)), GroupName: s.group(), ScheduleExpression: aws.String(expr),
		ScheduleExpressionTimezone: aws.String("UTC"), FlexibleTimeWindow: window, Target: target, State: state,
		ActionAfterCompletion: types.ActionAfterCompletionNone, Description: desc,
	})
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) {
		return wrap("update schedule", err)
	}
	_, err = s.Client.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name: aws.String(Name(c.ID)), GroupName: s.group(), ScheduleExpression: aws.String(expr),
		ScheduleExpressionTimezone: aws.String("UTC"), FlexibleTimeWindow: window, Target: target, State: state,
		ActionAfterCompletion: types.ActionAfterCompletionNone, Description: desc,
	})
	var conflict *types.ConflictException
	if errors.As(err, &conflict) {
		// Made meanwhile by another writer of the same cron: ours is the
		// later state, so write it over.
		return s.Put(ctx, c)
	}
	return wrap("create schedule", err)
}

// Remove implements crons.Scheduler; a missing schedule is no error.
func (s *Scheduler) Remove(ctx context.Context, _, cronID string) error {
	_, err := s.Client.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(Name(cronID)), GroupName: s.group()})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil
	}
	return wrap("delete schedule", err)
}

// wrap makes a failure of the scheduler a 503 for the caller (a retry may
// succeed), with the cause for the log.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fail.Unavailable("the scheduler of crons", fmt.Errorf("eventbridge: %s: %w", op, err))
}

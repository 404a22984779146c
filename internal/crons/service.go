package crons

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Runs is what crons need of the runs use case (runs.Service): the rules of
// a run request, the assistant and thread a cron names, and the one way to
// create a run.
type Runs interface {
	CheckRunRequest(req runs.RunRequest, threadID string) error
	GetAssistant(ctx context.Context, orgID, id string) (runs.Assistant, error)
	GetThread(ctx context.Context, orgID, id string) (runs.Thread, error)
	CreateRun(ctx context.Context, orgID, threadID string, req runs.RunRequest) (runs.Run, error)
}

// Scheduler keeps a schedule per cron outside this process (EventBridge
// Scheduler on AWS) whose firings call Service.Fire. Nil: the in-process
// loop (RunScheduler) finds due crons in the store.
type Scheduler interface {
	// Put creates or replaces the schedule of c (a disabled cron's schedule
	// may stay: Fire skips it).
	Put(ctx context.Context, c store.Cron) error
	// Remove deletes the schedule of a cron; nil when there is none.
	Remove(ctx context.Context, orgID, cronID string) error
}

// Defaults of Limits.
const (
	DefaultMaxPerOrg = 100
	// DefaultMinInterval is the finest the five-field syntax can say.
	DefaultMinInterval = time.Minute
)

// Limits bound what one organization may schedule.
type Limits struct {
	// MaxPerOrg is how many crons an organization may have (0:
	// DefaultMaxPerOrg; negative: no limit).
	MaxPerOrg int
	// MinInterval is the shortest time a cron's schedule may leave between
	// two firings (0: DefaultMinInterval).
	MinInterval time.Duration
}

func (l Limits) maxPerOrg() int {
	switch {
	case l.MaxPerOrg < 0:
		return 0
	case l.MaxPerOrg == 0:
		return DefaultMaxPerOrg
	}
	return l.MaxPerOrg
}

func (l Limits) minInterval() time.Duration {
	if l.MinInterval <= 0 {
		return DefaultMinInterval
	}
	return l.MinInterval
}

// Service is the crons use case.
type Service struct {
	Store     store.Crons
	Runs      Runs
	Scheduler Scheduler // nil: RunScheduler fires the crons
	Limits    Limits
	Now       func() time.Time // time.Now when nil
	Log       *slog.Logger     // slog.Default when nil
}

func (s *Service) now() time.Time {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return now().UTC().Truncate(time.Microsecond)
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// gapsChecked is how many consecutive slots the minimum interval is
// checked on: enough to see every gap of an hourly or daily pattern.
const gapsChecked = 200

// Create makes a cron: on threadID's thread ("" for a new thread at every
// firing, the stateless form).
func (s *Service) Create(ctx context.Context, orgID, threadID string, in CreateRequest) (Cron, error) {
	var c fail.Checks
	c.Add(in.Schedule == nil, "schedule", "is required")
	c.Add(in.AssistantID == nil || *in.AssistantID == "", "assistant_id", "is required")
	if threadID != "" {
		_, err := uuid.Parse(threadID)
		c.Add(err != nil, "thread_id", "Invalid thread ID: must be a UUID")
	}
	if err := c.Err(); err != nil {
		return Cron{}, err
	}
	tz := deref(in.Timezone)
	sched, err := parseSchedule(*in.Schedule, tz)
	if err != nil {
		return Cron{}, err
	}
	now := s.now()
	if err := s.checkInterval(sched, *in.Schedule, now); err != nil {
		return Cron{}, err
	}
	var end time.Time
	if in.EndTime != nil {
		if end, err = parseEndTime(*in.EndTime); err != nil {
			return Cron{}, err
		}
	}
	onCompleted := ""
	fields := in.RunFields
	if threadID == "" {
		onCompleted = "delete"
		if in.OnRunCompleted != nil {
			onCompleted = *in.OnRunCompleted
			if onCompleted != "delete" && onCompleted != "keep" {
				return Cron{}, fail.Invalid("on_run_completed", "must be one of delete, keep")
			}
		}
		// Not fields of a stateless cron (CronCreate): each firing has a
		// thread of its own.
		fields.MultitaskStrategy, fields.IfNotExists = nil, nil
	}
	threadID = strings.ToLower(threadID)
	if err := s.checkRun(fields, threadID, onCompleted); err != nil {
		return Cron{}, err
	}
	a, err := s.Runs.GetAssistant(ctx, orgID, *in.AssistantID)
	if err != nil {
		if fail.KindOf(err) == fail.KindNotFound {
			return Cron{}, fail.NotFound("Assistant '%s' not found", *in.AssistantID)
		}
		return Cron{}, err
	}
	fields.AssistantID = &a.AssistantID
	if threadID != "" {
		if _, err := s.Runs.GetThread(ctx, orgID, threadID); err != nil {
			if fail.KindOf(err) == fail.KindNotFound {
				return Cron{}, fail.NotFound("Thread with ID '%s' not found. Please verify the ID is correct and the thread hasn't been deleted or expired.", threadID)
			}
			return Cron{}, err
		}
	}
	enabled := in.Enabled == nil || *in.Enabled
	rec := store.Cron{
		ID: uuid.Must(uuid.NewV7()).String(), OrgID: orgID, AssistantID: a.AssistantID, ThreadID: threadID,
		Schedule: *in.Schedule, Timezone: tz, EndTime: end, OnRunCompleted: onCompleted, Enabled: enabled,
		Payload: payloadOf(fields), Metadata: objectOr(in.Metadata), NextRunDate: sched.Next(now),
		Version: 1, CreatedAt: now, UpdatedAt: now,
	}
	switch err := s.Store.CreateCron(ctx, rec, s.Limits.maxPerOrg()); {
	case errors.Is(err, store.ErrLimit):
		return Cron{}, fail.Quota("this organization has %d crons, the most it may have; delete one first", s.Limits.maxPerOrg())
	case err != nil:
		return Cron{}, err
	}
	if s.Scheduler != nil {
		if err := s.Scheduler.Put(ctx, rec); err != nil {
			// No cron without its schedule: undo the record.
			if derr := s.Store.DeleteCron(context.WithoutCancel(ctx), orgID, rec.ID); derr != nil {
				s.log().Error("cron: undo a cron whose schedule failed", "cron_id", rec.ID, "error", derr.Error())
			}
			return Cron{}, err
		}
	}
	return view(rec), nil
}

// checkInterval refuses a schedule that fires more often than the limit.
func (s *Service) checkInterval(sched schedule, expr string, now time.Time) error {
	if limit := s.Limits.minInterval(); sched.minGap(now, gapsChecked) < limit {
		return fail.Invalid("schedule", "'%s' fires more often than this server allows (at most once every %s)", expr, limit)
	}
	return nil
}

// checkRun applies the run rules to the payload a cron would fire.
func (s *Service) checkRun(fields RunFields, threadID, onCompleted string) error {
	if fields.AssistantID == nil {
		fields.AssistantID = new(string)
		*fields.AssistantID = "checked" // the assistant is resolved on its own
	}
	req, err := runRequest(payloadOf(fields))
	if err != nil {
		return err
	}
	if onCompleted != "" {
		req.OnCompletion = &onCompleted
	}
	return s.Runs.CheckRunRequest(req, threadID)
}

// runRequest decodes a payload into a run request, naming a field of the
// wrong type.
func runRequest(payload []byte) (runs.RunRequest, error) {
	var req runs.RunRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return req, fail.Invalid(te.Field, "must be of type %s", te.Type.Kind())
		}
		return req, fail.Invalid("payload", "is not a valid run request")
	}
	return req, nil
}

// payloadOf is the JSON object of the given run fields.
func payloadOf(f RunFields) []byte {
	b, _ := json.Marshal(f)
	var all map[string]json.RawMessage
	_ = json.Unmarshal(b, &all)
	for k, v := range all {
		if string(v) == "null" {
			delete(all, k)
		}
	}
	out, _ := json.Marshal(all)
	return out
}

func parseEndTime(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		// A date-time without a zone (Python's isoformat of a naive
		// datetime, which the SDKs send as given) is read as UTC.
		t, err = time.ParseInLocation("2006-01-02T15:04:05.999999999", v, time.UTC)
	}
	if err != nil {
		return time.Time{}, fail.Invalid("end_time", "must be an RFC 3339 date-time with a zone, e.g. 2030-01-01T00:00:00Z")
	}
	return t.UTC().Truncate(time.Microsecond), nil
}

func objectOr(raw json.RawMessage) []byte {
	if len(raw) == 0 || string(raw) == "null" {
		return []byte("{}")
	}
	return raw
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Get returns one cron.
func (s *Service) Get(ctx context.Context, orgID, cronID string) (Cron, error) {
	c, err := s.get(ctx, orgID, cronID)
	if err != nil {
		return Cron{}, err
	}
	return view(c), nil
}

func (s *Service) get(ctx context.Context, orgID, cronID string) (store.Cron, error) {
	if _, err := uuid.Parse(cronID); err != nil {
		return store.Cron{}, fail.Invalid("cron_id", "Invalid cron ID: must be a UUID")
	}
	c, err := s.Store.Cron(ctx, orgID, strings.ToLower(cronID))
	if errors.Is(err, store.ErrNotFound) {
		return store.Cron{}, fail.NotFound("Cron '%s' not found", cronID)
	}
	return c, err
}

// maxUpdateTries bounds the re-reads of an update that raced a firing.
const maxUpdateTries = 5

// Update changes a cron: the schedule and zone (next_run_date moves to the
// new schedule's next slot), the end time (null clears it), enabled, what
// happens to a stateless cron's threads, metadata (merged) and the run
// payload (merged field by field; the assistant stays).
func (s *Service) Update(ctx context.Context, orgID, cronID string, in UpdateRequest) (Cron, error) {
	if in.Schedule == nil && in.Timezone == nil && len(in.EndTime) == 0 && in.OnRunCompleted == nil &&
		in.Enabled == nil && string(payloadOf(in.RunFields)) == "{}" {
		return Cron{}, fail.BadRequest("No fields to update")
	}
	for try := 0; ; try++ {
		c, err := s.get(ctx, orgID, cronID)
		if err != nil {
			return Cron{}, err
		}
		next, err := s.apply(c, in)
		if err != nil {
			return Cron{}, err
		}
		stored, err := s.Store.UpdateCron(ctx, next)
		if errors.Is(err, store.ErrStale) && try < maxUpdateTries {
			continue // a firing or another update moved it: apply to the new state
		}
		if errors.Is(err, store.ErrNotFound) {
			return Cron{}, fail.NotFound("Cron '%s' not found", cronID)
		}
		if err != nil {
			return Cron{}, err
		}
		if s.Scheduler != nil {
			if err := s.Scheduler.Put(ctx, stored); err != nil {
				return Cron{}, err
			}
		}
		return view(stored), nil
	}
}

// apply is c changed by in, checked.
func (s *Service) apply(c store.Cron, in UpdateRequest) (store.Cron, error) {
	now := s.now()
	if in.Schedule != nil || in.Timezone != nil {
		if in.Schedule != nil {
			c.Schedule = *in.Schedule
		}
		if in.Timezone != nil {
			c.Timezone = *in.Timezone
		}
		sched, err := parseSchedule(c.Schedule, c.Timezone)
		if err != nil {
			return c, err
		}
		if err := s.checkInterval(sched, c.Schedule, now); err != nil {
			return c, err
		}
		c.NextRunDate = sched.Next(now)
	}
	if len(in.EndTime) > 0 {
		var v *string
		if err := json.Unmarshal(in.EndTime, &v); err != nil {
			return c, fail.Invalid("end_time", "must be an RFC 3339 date-time or null")
		}
		c.EndTime = time.Time{}
		if v != nil {
			t, err := parseEndTime(*v)
			if err != nil {
				return c, err
			}
			c.EndTime = t
		}
	}
	if in.Enabled != nil {
		c.Enabled = *in.Enabled
	}
	if in.OnRunCompleted != nil {
		if c.ThreadID != "" {
			return c, fail.Invalid("on_run_completed", "applies only to crons without a thread (POST /runs/crons)")
		}
		if v := *in.OnRunCompleted; v != "delete" && v != "keep" {
			return c, fail.Invalid("on_run_completed", "must be one of delete, keep")
		}
		c.OnRunCompleted = *in.OnRunCompleted
	}
	if len(in.Metadata) > 0 && string(in.Metadata) != "null" {
		merged, err := mergeObjects(c.Metadata, in.Metadata)
		if err != nil {
			return c, fail.Invalid("metadata", "must be an object")
		}
		c.Metadata = merged
	}
	patch := in.RunFields
	patch.AssistantID = nil // the assistant of a cron stays
	if c.ThreadID == "" {
		patch.MultitaskStrategy, patch.IfNotExists = nil, nil
	}
	if p := payloadOf(patch); p != nil && string(p) != "{}" {
		merged, err := mergeObjects(c.Payload, p)
		if err != nil {
			return c, err
		}
		var fields RunFields
		if err := json.Unmarshal(merged, &fields); err != nil {
			return c, fail.Invalid("payload", "is not a valid run request")
		}
		if err := s.checkRun(fields, c.ThreadID, c.OnRunCompleted); err != nil {
			return c, err
		}
		c.Payload = merged
	}
	c.UpdatedAt = now
	return c, nil
}

// mergeObjects is base with patch's keys set over it (one level).
func mergeObjects(base, patch []byte) ([]byte, error) {
	var b, p map[string]json.RawMessage
	if err := json.Unmarshal(objectOr(base), &b); err != nil || b == nil {
		b = map[string]json.RawMessage{}
	}
	if err := json.Unmarshal(patch, &p); err != nil || p == nil {
		return nil, errors.New("not an object")
	}
	for k, v := range p {
		b[k] = v
	}
	return json.Marshal(b)
}

// Delete removes a cron and its schedule.
func (s *Service) Delete(ctx context.Context, orgID, cronID string) error {
	c, err := s.get(ctx, orgID, cronID)
	if err != nil {
		return err
	}
	if s.Scheduler != nil {
		// Schedule first: a cron left without one is deleted again by a
		// retry; a schedule left without its cron would fire for nothing.
		if err := s.Scheduler.Remove(ctx, orgID, c.ID); err != nil {
			return err
		}
	}
	err = s.Store.DeleteCron(ctx, orgID, c.ID)
	if errors.Is(err, store.ErrNotFound) {
		return fail.NotFound("Cron '%s' not found", cronID)
	}
	return err
}

// sortKeys are the sort_by values of a search.
var sortKeys = []string{store.CronSortID, store.CronSortAssistantID, store.CronSortThreadID, store.CronSortNextRunDate,
	store.CronSortEndTime, store.CronSortCreatedAt, store.CronSortUpdatedAt}

// MaxSearchLimit bounds a search's page.
const MaxSearchLimit = 1000

// Search lists crons, newest first unless sorted otherwise.
func (s *Service) Search(ctx context.Context, orgID string, in SearchRequest) (Page, error) {
	f, err := filterOf(in.AssistantID, in.ThreadID, in.Metadata)
	if err != nil {
		return Page{}, err
	}
	var c fail.Checks
	f.Enabled = in.Enabled
	f.Limit, f.Offset = 10, 0
	if in.Limit != nil {
		f.Limit = *in.Limit
		c.Add(f.Limit < 1 || f.Limit > MaxSearchLimit, "limit", "must be between 1 and %d", MaxSearchLimit)
	}
	if in.Offset != nil {
		f.Offset = *in.Offset
		c.Add(f.Offset < 0, "offset", "must be >= 0")
	}
	if in.SortBy != nil {
		f.SortBy = strings.ToLower(*in.SortBy)
		c.Add(!slices.Contains(sortKeys, f.SortBy), "sort_by", "Invalid sort_by field: '%s'. Valid options are: %s", *in.SortBy, strings.Join(sortKeys, ", "))
	}
	if in.SortOrder != nil {
		order := strings.ToLower(*in.SortOrder)
		c.Add(order != "asc" && order != "desc", "sort_order", "must be one of asc, desc")
		f.Ascending = order == "asc"
	}
	for _, field := range in.Select {
		c.Add(!slices.Contains(selectable, field), "select", "Invalid select field: '%s'. Valid options are: %s", field, strings.Join(selectable, ", "))
	}
	if err := c.Err(); err != nil {
		return Page{}, err
	}
	limit := f.Limit
	f.Limit++ // one more tells whether there is a next page
	list, err := s.Store.SearchCrons(ctx, orgID, f)
	if err != nil {
		return Page{}, err
	}
	page := Page{Crons: []any{}, NextOffset: -1}
	if len(list) > limit {
		list, page.NextOffset = list[:limit], f.Offset+limit
	}
	for _, rec := range list {
		page.Crons = append(page.Crons, project(view(rec), in.Select))
	}
	return page, nil
}

// project keeps the selected fields of v (all when none are).
func project(v Cron, fields []string) any {
	if len(fields) == 0 {
		return v
	}
	b, _ := json.Marshal(v)
	var all map[string]json.RawMessage
	_ = json.Unmarshal(b, &all)
	out := map[string]json.RawMessage{}
	for _, f := range fields {
		out[f] = all[f]
	}
	return out
}

// Count counts the crons a search with the same filters would find.
func (s *Service) Count(ctx context.Context, orgID string, in CountRequest) (int, error) {
	f, err := filterOf(in.AssistantID, in.ThreadID, in.Metadata)
	if err != nil {
		return 0, err
	}
	return s.Store.CountCrons(ctx, orgID, f)
}

func filterOf(assistantID, threadID *string, metadata json.RawMessage) (store.CronFilter, error) {
	var c fail.Checks
	var f store.CronFilter
	if assistantID != nil && *assistantID != "" {
		_, err := uuid.Parse(*assistantID)
		c.Add(err != nil, "assistant_id", "Invalid assistant ID: must be a UUID")
		f.AssistantID = strings.ToLower(*assistantID)
	}
	if threadID != nil && *threadID != "" {
		_, err := uuid.Parse(*threadID)
		c.Add(err != nil, "thread_id", "Invalid thread ID: must be a UUID")
		f.ThreadID = strings.ToLower(*threadID)
	}
	if len(metadata) > 0 && string(metadata) != "null" {
		var m map[string]any
		c.Add(json.Unmarshal(metadata, &m) != nil || m == nil, "metadata", "must be an object")
		f.Metadata = metadata
	}
	return f, c.Err()
}

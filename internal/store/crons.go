package store

import (
	"context"
	"errors"
	"time"
)

// ErrLimit: the organization holds as many records of the kind as the
// caller allowed (CreateCron's maxPerOrg); nothing was written.
var ErrLimit = errors.New("organization limit reached")

// Cron is a schedule of runs (the crons use case owns its rules). Payload
// is the run request each firing makes, an opaque JSON object.
type Cron struct {
	ID          string
	OrgID       string
	AssistantID string
	ThreadID    string // "" for a cron that makes a new thread per firing
	UserID      string // "" means none
	Schedule    string
	Timezone    string    // IANA name; "" means UTC
	EndTime     time.Time // zero means none
	// OnRunCompleted is "delete" or "keep" for a cron without a thread,
	// "" for one on a thread.
	OnRunCompleted string
	Enabled        bool
	Payload        []byte // JSON object
	Metadata       []byte // JSON object
	// NextRunDate is the slot the cron fires at next; zero means none
	// (past its end). Only ClaimCronFiring and UpdateCron move it.
	NextRunDate time.Time
	// Version increases by one with every write (UpdateCron and
	// ClaimCronFiring); UpdateCron must carry the Version it read.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Cron sort keys of CronFilter.SortBy.
const (
	CronSortCreatedAt   = "created_at"
	CronSortUpdatedAt   = "updated_at"
	CronSortNextRunDate = "next_run_date"
	CronSortEndTime     = "end_time"
	CronSortID          = "cron_id"
	CronSortAssistantID = "assistant_id"
	CronSortThreadID    = "thread_id"
)

// CronFilter narrows SearchCrons and CountCrons (which ignores the paging
// and the order). Zero fields match everything; Limit 0 means 10.
type CronFilter struct {
	AssistantID string
	ThreadID    string
	Enabled     *bool
	Metadata    []byte // as AssistantFilter.Metadata
	SortBy      string // one of the CronSort keys; "" means created_at
	Ascending   bool   // false: descending
	Limit       int
	Offset      int
}

// Crons stores crons, scoped to an organization, and hands the due ones to
// a scheduler.
type Crons interface {
	// CreateCron stores c (Version 1). ErrConflict when its ID exists in
	// the organization; ErrLimit when the organization already has
	// maxPerOrg crons (0: no limit) — the count and the insert are one
	// atomic step.
	CreateCron(ctx context.Context, c Cron, maxPerOrg int) error
	Cron(ctx context.Context, orgID, id string) (Cron, error)
	// SearchCrons returns the matches in the filter's order; ties in the
	// order are broken by the ID, the same way in both directions.
	SearchCrons(ctx context.Context, orgID string, f CronFilter) ([]Cron, error)
	CountCrons(ctx context.Context, orgID string, f CronFilter) (int, error)
	// UpdateCron writes c if the stored Version equals c.Version (ErrStale
	// otherwise) and returns it as stored (Version+1). CreatedAt and the
	// keys (OrgID, ID) are not changed.
	UpdateCron(ctx context.Context, c Cron) (Cron, error)
	DeleteCron(ctx context.Context, orgID, id string) error

	// DueCrons lists, across organizations, up to limit enabled crons whose
	// NextRunDate is set and not after now and whose EndTime is zero or not
	// before now, earliest NextRunDate first.
	DueCrons(ctx context.Context, now time.Time, limit int) ([]Cron, error)
	// ClaimCronFiring moves the cron's NextRunDate from slot to next (zero:
	// none) in one atomic compare-and-set and returns the cron as stored
	// (Version+1): the caller owns the firing of slot. ErrStale when the
	// stored NextRunDate is not slot (someone else fired it, or an update
	// moved it); ErrNotFound when the cron is gone.
	ClaimCronFiring(ctx context.Context, orgID, id string, slot, next time.Time) (Cron, error)
}

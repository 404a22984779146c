package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrBusy: the thread has a pending or running run and the caller asked to
// be rejected in that case (InflightReject), a state update met a busy
// thread, or a run to delete is inflight.
var ErrBusy = errors.New("thread is busy")

// Thread statuses.
const (
	ThreadIdle        = "idle"
	ThreadBusy        = "busy"
	ThreadInterrupted = "interrupted"
	ThreadError       = "error"
)

// Run statuses. Pending and running runs are "inflight".
const (
	RunPending     = "pending"
	RunRunning     = "running"
	RunSuccess     = "success"
	RunError       = "error"
	RunTimeout     = "timeout"
	RunInterrupted = "interrupted"
)

// Cancel actions.
const (
	CancelInterrupt = "interrupt" // the run ends interrupted; its checkpoints stay
	CancelRollback  = "rollback"  // the run and its checkpoints are deleted
)

// Assistant is a configured graph. JSON fields are kept as raw JSON objects
// ("{}" when empty).
type Assistant struct {
	ID          string
	OrgID       string
	GraphID     string
	Name        string
	Description string // "" means none
	Config      []byte
	Context     []byte
	Metadata    []byte
	Version     int
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// AssistantFilter narrows SearchAssistants. Zero fields match everything;
// Limit 0 means 10.
type AssistantFilter struct {
	GraphID      string
	NameContains string
	// Metadata: every key must be present in the assistant's metadata with
	// an equal JSON value (raw JSON object; nil = no filter).
	Metadata []byte
	Limit    int
	Offset   int
}

// AssistantVersionFilter narrows AssistantVersions; Limit 0 means 10.
type AssistantVersionFilter struct {
	Metadata []byte // as AssistantFilter.Metadata
	Limit    int
	Offset   int
}

// Assistants stores assistants, scoped to an organization. An assistant
// is its current version; every version it had is kept (its Version, the
// fields it had, CreatedAt the time the version was made).
type Assistants interface {
	// CreateAssistant stores the assistant as its version a.Version; it
	// fails with ErrConflict when the ID exists in the org.
	CreateAssistant(ctx context.Context, a Assistant) error
	Assistant(ctx context.Context, orgID, id string) (Assistant, error)
	// SearchAssistants returns matches, newest first.
	SearchAssistants(ctx context.Context, orgID string, f AssistantFilter) ([]Assistant, error)
	// CountAssistants counts what SearchAssistants would find with f
	// (Limit and Offset ignored).
	CountAssistants(ctx context.Context, orgID string, f AssistantFilter) (int, error)
	// UpdateAssistant stores a (GraphID, Name, Description, Config,
	// Context, Metadata) as a new version, one above the highest the
	// assistant had, and makes it current, atomically; UpdatedAt is
	// a.UpdatedAt, CreatedAt stays. It returns the assistant as stored;
	// ErrNotFound when there is none.
	UpdateAssistant(ctx context.Context, a Assistant) (Assistant, error)
	// AssistantVersions lists the assistant's versions, highest first;
	// ErrNotFound when there is no such assistant.
	AssistantVersions(ctx context.Context, orgID, id string, f AssistantVersionFilter) ([]Assistant, error)
	// SetAssistantVersion makes a stored version current again (the
	// assistant takes its fields and number; UpdatedAt becomes now) and
	// returns the assistant; ErrNotFound when the assistant or the
	// version does not exist.
	SetAssistantVersion(ctx context.Context, orgID, id string, version int, now time.Time) (Assistant, error)
	// DeleteAssistant removes the assistant with every version.
	DeleteAssistant(ctx context.Context, orgID, id string) error
}

// Thread is a conversation: its status and a summary of its latest
// checkpoint (Values, Interrupts) so reads need not decode checkpoints.
type Thread struct {
	ID         string
	OrgID      string
	Status     string
	Metadata   []byte // JSON object
	Config     []byte // JSON object
	Values     []byte // JSON of the latest state values; nil = none yet
	Interrupts []byte // JSON object task id → [{id, value}]; nil = none
	Error      []byte // JSON {error, message} of the last failed run; nil = none
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// StateUpdatedAt is when the thread's state last changed (upstream's
	// state_updated_at): CreateThread stores it as given (zero: CreatedAt),
	// a thread AddRun creates gets its CreatedAt, and FinishRun and
	// UpdateThreadState set it to their time, as they set UpdatedAt.
	// Other writes (metadata, time to live, adding or cancelling a run)
	// leave it.
	StateUpdatedAt time.Time
	// ExpiresAt is when the thread's time to live ends (zero: never);
	// TTLStrategy what happens then ("delete" or "keep_latest", the runs
	// package's rule, kept as given).
	ExpiresAt   time.Time
	TTLStrategy string
}

// Thread sort keys of ThreadFilter.SortBy.
const (
	ThreadSortCreatedAt      = "created_at"
	ThreadSortUpdatedAt      = "updated_at"
	ThreadSortStateUpdatedAt = "state_updated_at"
	ThreadSortID             = "thread_id"
	ThreadSortStatus         = "status"
)

// ThreadFilter narrows SearchThreads. Limit 0 means 10.
type ThreadFilter struct {
	IDs      []string
	Status   string
	Metadata []byte // as AssistantFilter.Metadata
	Values   []byte // every key must be in the thread's values with an equal value
	// SortBy is one of the ThreadSort keys ("": created_at); ties are in
	// the default order (newest first, then the later insert first),
	// whatever the direction.
	SortBy    string
	Ascending bool // false: descending
	Limit     int
	Offset    int
}

// Threads stores threads, scoped to an organization.
type Threads interface {
	// CreateThread fails with ErrConflict when the ID exists in the org.
	CreateThread(ctx context.Context, t Thread) error
	Thread(ctx context.Context, orgID, id string) (Thread, error)
	// SearchThreads returns the matches in the filter's order (see
	// ThreadFilter.SortBy).
	SearchThreads(ctx context.Context, orgID string, f ThreadFilter) ([]Thread, error)
	// CountThreads counts the threads SearchThreads would find with f
	// (IDs, Status, Metadata, Values; Limit and Offset are ignored).
	CountThreads(ctx context.Context, orgID string, f ThreadFilter) (int, error)
	// UpdateThreadMetadata replaces the thread's metadata (the caller merged).
	UpdateThreadMetadata(ctx context.Context, orgID, id string, metadata []byte, now time.Time) (Thread, error)
	// DeleteThread removes the thread, its runs and its checkpoints.
	DeleteThread(ctx context.Context, orgID, id string) error
	// SetThreadTTL sets (zero expiresAt: clears) the thread's expiry and
	// strategy; ErrNotFound when there is no such thread.
	SetThreadTTL(ctx context.Context, orgID, id string, expiresAt time.Time, strategy string) error
	// ExpiredThreads lists, across organizations, up to limit threads
	// whose ExpiresAt is set and not after now, the oldest expiry first.
	ExpiredThreads(ctx context.Context, now time.Time, limit int) ([]Thread, error)
}

// Run is one execution of an assistant on a thread.
type Run struct {
	ID          string
	OrgID       string
	ThreadID    string
	AssistantID string
	Status      string
	Metadata    []byte // JSON object
	Kwargs      []byte // JSON object: the run's request, owned by the runs package
	// MultitaskStrategy is kept for the runs package, which reads it back;
	// the store does not interpret it (AddRun acts on NewRun.IfInflight).
	MultitaskStrategy string
	// Temporary runs belong to a stateless request: their thread is deleted
	// with everything in it once the run is terminal.
	Temporary bool
	// NotBefore is when the run may start (after_seconds); runs of a thread
	// start oldest NotBefore first, then oldest CreatedAt.
	NotBefore time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
	StartedAt time.Time // zero until the run first started
	EndedAt   time.Time // zero until terminal
	// Result is the JSON body runs/wait answers once the run is terminal.
	Result []byte
	// CancelAction is set on an inflight run someone asked to stop; the
	// worker that owns it sees it when renewing its lease.
	CancelAction string
	// Lease: the worker that executes the run and until when it is trusted
	// to be alive. A running run whose lease expired is claimed again.
	LeaseOwner string
	LeaseUntil time.Time
	Attempt    int

	// Behind is set by AddRun only, on the run it returns: when it was
	// stored, another run of its thread was running or ahead of it in the
	// queue, so it cannot start at once (a dispatcher need not try to).
	// It is not stored: false on every read.
	Behind bool
}

// Ahead reports whether the pending run o starts before r in their
// thread's queue: oldest NotBefore first, then oldest CreatedAt, and o
// stored first on a tie.
func Ahead(o, r Run) bool {
	if !o.NotBefore.Equal(r.NotBefore) {
		return o.NotBefore.Before(r.NotBefore)
	}
	return !o.CreatedAt.After(r.CreatedAt)
}

// NewRun asks to add a run to a thread.
type NewRun struct {
	Run Run
	// CreateThread creates the thread when it does not exist (with
	// ThreadMetadata); otherwise a missing thread is ErrNotFound.
	CreateThread   bool
	ThreadMetadata []byte
	// StampMetadata (a JSON object, nil = none) is merged into an existing
	// thread's metadata in the same atomic step, key by key: a run marks
	// its thread with the graph and assistant it ran (upstream's graph_id
	// and assistant_id), which thread lists filter by.
	StampMetadata []byte
	// ThreadConfig (nil = none) is the thread's new config made from its
	// current one ("{}" for a thread AddRun creates), written in the same
	// atomic step: what a run does to its thread's config is the caller's
	// rule. An error from it fails AddRun, which writes nothing.
	ThreadConfig func(current []byte) ([]byte, error)
	// IfInflight is what AddRun does when runs are inflight on the thread;
	// the zero value enqueues the new run behind them.
	IfInflight IfInflight
	// CancelAction is the action InflightCancel gives every inflight run:
	// CancelInterrupt or CancelRollback.
	CancelAction string
}

// IfInflight is what AddRun does, in the same atomic step, when the thread
// already has pending or running runs. The store offers these mechanisms;
// which one a request gets is the caller's rule (the runs package maps the
// LangGraph multitask strategies onto them).
type IfInflight int

const (
	// InflightEnqueue stores the new run behind the inflight ones: it waits
	// its turn.
	InflightEnqueue IfInflight = iota
	// InflightReject fails with ErrBusy and writes nothing.
	InflightReject
	// InflightCancel gives every inflight run NewRun.CancelAction, as
	// CancelRun would: a pending one is settled at once (interrupted, or
	// deleted with its checkpoints for rollback), a running one by its
	// worker. The new run is then stored behind the running one.
	InflightCancel
)

// CheckInflight reports what AddRun refuses before writing anything: an
// unknown IfInflight, or InflightCancel without a known CancelAction.
func (r NewRun) CheckInflight() error {
	switch r.IfInflight {
	case InflightEnqueue, InflightReject:
		return nil
	case InflightCancel:
		if r.CancelAction != CancelInterrupt && r.CancelAction != CancelRollback {
			return fmt.Errorf("unknown cancel action %q", r.CancelAction)
		}
		return nil
	}
	return fmt.Errorf("unknown IfInflight %d", r.IfInflight)
}

// FinishedRun is what a worker reports when a run is terminal. The thread's
// status becomes ThreadStatus unless other runs are inflight on it (busy).
type FinishedRun struct {
	OrgID, ThreadID, RunID, LeaseOwner string
	Status                             string // RunSuccess, RunError, RunTimeout or RunInterrupted
	Result                             []byte
	ThreadStatus                       string
	Values, Interrupts, Error          []byte // the thread's new summary (nil Values: unchanged)
	Now                                time.Time

	// Attempt fences the finish as Checkpoint.RunAttempt fences a
	// checkpoint: when it is > 0, a run that is running under another
	// attempt (claimed again since: a retried step of the same execution,
	// whose lease owner is the same, or another owner after the lease
	// expired) is not settled: FinishRun fails with ErrSuperseded and
	// changes nothing (run, result, thread, interrupts, error). A run no
	// longer running, or gone, is ErrStale as without it. 0: not fenced.
	Attempt int
}

// RunQueue stores runs: the queue of each thread, with one run at a time
// running on it, and the leases of the workers that execute them. Every
// method is scoped to an organization except the worker methods (ClaimRun,
// ClaimRunByID, RenewLease), which act across organizations and identify a
// run by its ID alone.
type RunQueue interface {
	// AddRun atomically checks the thread (creating it when asked), applies
	// req.IfInflight to the thread's inflight runs (see IfInflight) and
	// stores the run as pending with the thread busy. It returns the stored
	// run and whether the thread was created. An unknown IfInflight, or
	// InflightCancel without a known CancelAction, is an error and writes
	// nothing.
	AddRun(ctx context.Context, req NewRun) (Run, bool, error)
	Run(ctx context.Context, orgID, threadID, id string) (Run, error)
	// ListRuns returns a thread's runs, newest first; status "" = any.
	// Newest first is by CreatedAt, then insertion; the runs package gives
	// runs UUIDv7 IDs made at their creation, in insertion order, so an
	// adapter may order by ID instead and read only a page (the DynamoDB
	// adapter does).
	ListRuns(ctx context.Context, orgID, threadID, status string, limit, offset int) ([]Run, error)
	// DeleteRun removes a terminal run (ErrBusy when it is inflight).
	DeleteRun(ctx context.Context, orgID, threadID, id string) error
	// CancelRun asks an inflight run to stop with action. A pending run is
	// settled at once (interrupted; deleted with its checkpoints for
	// rollback, and the thread's status recomputed); a running one is marked
	// for its worker. A terminal run is returned unchanged.
	CancelRun(ctx context.Context, orgID, threadID, id, action string, now time.Time) (Run, error)

	// ClaimRun gives owner the next run to execute, if any, and marks it
	// running with the lease, incrementing Attempt. A running run whose
	// lease expired (a crashed worker's) comes first: it already holds its
	// organization's slot. Otherwise it is a pending run whose NotBefore has
	// passed, whose thread has no running run and whose organization has a
	// free slot (see perOrg); organizations take turns: the run is the
	// oldest such run of the organization that comes next, in an order of
	// organizations fixed by the store, after the organization whose pending
	// run was claimed last (by any process), so that every organization
	// with a claimable run is served once per round however long the
	// others' queues are.
	//
	// perOrg > 0 caps the running runs of one organization: a pending run is
	// claimed only while fewer than perOrg runs of its organization are
	// running (by status, whatever their lease, whoever claimed them,
	// through ClaimRun or ClaimRunByID), decided atomically with the claim
	// so that the cap holds across processes. 0 means no cap.
	ClaimRun(ctx context.Context, owner string, now, leaseUntil time.Time, perOrg int) (Run, bool, error)
	// ClaimRunByID claims one given run for owner, as the execution that
	// carries exactly that run does (a Step Functions execution per run on
	// AWS): a pending run whose NotBefore has passed, that is next on its
	// thread (no running run, first in order) and whose organization has
	// fewer than perOrg running runs (as ClaimRun; 0: no cap), or a running
	// run whose lease expired or that owner already holds (a retried step
	// of the same execution; it holds its slot already). It marks the run
	// running with the lease and increments Attempt. When the run is not
	// claimed (terminal, not its turn yet, no free slot, or leased to
	// another owner) it returns the run as stored and false. ErrNotFound
	// when the run no longer exists.
	ClaimRunByID(ctx context.Context, runID, owner string, now, leaseUntil time.Time, perOrg int) (Run, bool, error)
	// RenewLease extends owner's lease and returns the run, so the worker
	// sees a CancelAction; ErrStale when owner no longer holds it. attempt
	// > 0 fences it as FinishedRun.Attempt fences a finish: a run running
	// under another attempt keeps its lease (ErrSuperseded), so the stale
	// attempt of a retried step cannot move (or give up) the lease of the
	// attempt that replaced it. 0: not fenced.
	RenewLease(ctx context.Context, runID, owner string, attempt int, until time.Time) (Run, error)
	// FinishRun settles a run owned by LeaseOwner (ErrStale otherwise;
	// ErrSuperseded when f.Attempt > 0 and the running run is at another
	// attempt) and updates its thread, atomically. A run whose CancelAction is rollback
	// is deleted with its checkpoints instead. A temporary run's thread is
	// deleted with everything in it; its Result stays readable through
	// TemporaryResult for TemporaryResultTTL.
	FinishRun(ctx context.Context, f FinishedRun) error
	// TemporaryResult returns the Result of a finished temporary run whose
	// thread is gone, so a waiter in another process still gets the answer;
	// ErrNotFound when there is none (any more).
	TemporaryResult(ctx context.Context, orgID, runID string, now time.Time) ([]byte, error)
}

// TemporaryResultTTL is how long a finished temporary run's result stays
// readable after its thread was deleted.
const TemporaryResultTTL = 10 * time.Minute

// Checkpoint is a thread's state after a super-step. Data is the engine's
// checkpoint JSON; the other fields are what the store keys and orders by.
type Checkpoint struct {
	ThreadID  string
	ID        string // time-ordered (UUIDv7): newer IDs sort after older ones
	ParentID  string
	RunID     string // the run that wrote it ("" for a state update)
	CreatedAt time.Time
	Data      []byte

	// RunAttempt fences the write (it is not stored): when it is > 0 the
	// checkpoint is written only while run RunID is running under that
	// attempt (store.Run.Attempt), else ErrSuperseded and nothing is
	// written. A superseded attempt of a run (the Lambda of a retried step
	// still going) thus cannot write a step next to the attempt that
	// replaced it. 0: not fenced (state updates, copies of checkpoints).
	RunAttempt int
}

// Checkpoints stores the checkpoints of threads, scoped to an organization.
type Checkpoints interface {
	// PutCheckpoint stores cp, replacing one with the same (thread, ID).
	// ErrSuperseded when cp.RunAttempt > 0 and run cp.RunID is not running
	// under that attempt (see Checkpoint.RunAttempt); ErrNotFound first when
	// the thread is gone.
	PutCheckpoint(ctx context.Context, orgID string, cp Checkpoint) error
	// PutCheckpoints stores several checkpoints of one thread, in order, as
	// PutCheckpoint would one by one (a write-behind buffer flushes with it:
	// one commit instead of one each). ErrNotFound when the thread is gone;
	// ErrSuperseded as PutCheckpoint: none of cps is written when the
	// attempt was superseded before the call (an adapter that commits a long
	// batch in parts stops at the first part refused).
	PutCheckpoints(ctx context.Context, orgID string, cps []Checkpoint) error
	Checkpoint(ctx context.Context, orgID, threadID, id string) (Checkpoint, error)
	// LatestCheckpoint returns the newest checkpoint (by ID); ErrNotFound
	// when the thread has none.
	LatestCheckpoint(ctx context.Context, orgID, threadID string) (Checkpoint, error)
	// ListCheckpoints returns checkpoints newest first, those with ID less
	// than before when before is not "". Limit 0 means 10.
	ListCheckpoints(ctx context.Context, orgID, threadID, before string, limit int) ([]Checkpoint, error)
	// PruneCheckpoints deletes every checkpoint of the thread but the
	// latest (the thread and its state stay); ErrNotFound when the thread
	// does not exist.
	PruneCheckpoints(ctx context.Context, orgID, threadID string) error
	// UpdateThreadState stores cp and the thread's new summary atomically,
	// failing with ErrBusy when a run is inflight on the thread.
	UpdateThreadState(ctx context.Context, orgID string, cp Checkpoint, values, interrupts []byte, status string, now time.Time) error
}

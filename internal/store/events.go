package store

import (
	"context"
	"time"
)

// RunEvent is one event of a run's stream, as clients receive it: an SSE
// event name ("values", "updates|node:<task id>", ...) and its JSON data.
type RunEvent struct {
	// Seq is the event's place in the run's stream, assigned by
	// AppendRunEvents: 0 for the run's first event, then one more for each.
	// It is the event id clients resume from (Last-Event-ID).
	Seq   int64
	Event string
	Data  []byte
}

// Events is the event log of resumable run streams (stream_resumable):
// what a client that reconnects with Last-Event-ID is replayed. Only such
// runs' events are written here; every read and write is scoped to an
// organization, and another organization's run has no events.
//
// Retention is the caller's choice, per append: events past their expiry
// are never returned, and DeleteExpiredRunEvents (or the adapter's TTL)
// removes them.
type Events interface {
	// AppendRunEvents stores events at the end of the run's log, in order,
	// numbering them after the highest Seq the run has stored (from 0 for
	// its first), atomically (all or none), and returns the Seq given to
	// the first. Appends to one run are serialized by the store: two
	// appends never get the same Seq. An empty events is a no-op.
	AppendRunEvents(ctx context.Context, orgID, runID string, events []RunEvent, expires time.Time) (int64, error)
	// RunEvents returns the run's events with Seq greater than after,
	// oldest first, at most limit (0 means 100), leaving out those expired
	// at now. after -1 reads from the start.
	RunEvents(ctx context.Context, orgID, runID string, after int64, limit int, now time.Time) ([]RunEvent, error)
	// NextRunEventSeq returns one more than the Seq of the run's last
	// event not expired at now (0 when there is none): the ids a client
	// can resume from are those below it.
	NextRunEventSeq(ctx context.Context, orgID, runID string, now time.Time) (int64, error)
	// DeleteExpiredRunEvents removes up to limit events expired at now,
	// run events and thread events alike, across organizations, and
	// returns how many it removed.
	DeleteExpiredRunEvents(ctx context.Context, now time.Time, limit int) (int, error)

	// AppendThreadEvents stores events at the end of the thread's log (the
	// thread event protocol's stream), in order, atomically, numbering them
	// after the highest Seq the thread was ever given (from 1 for its first
	// event) and returns the Seq given to the first. The numbering never
	// goes back while the thread exists, not even when every event has
	// expired: a client's since cursor stays meaningful. The thread must
	// exist in the organization (ErrNotFound otherwise); its log is
	// deleted with it. Appends to one thread are serialized by the store.
	// An empty events is a no-op.
	AppendThreadEvents(ctx context.Context, orgID, threadID string, events []ThreadEvent, expires time.Time) (int64, error)
	// ThreadEvents returns the thread's events with Seq greater than
	// after, oldest first, at most limit (0 means 100), leaving out those
	// expired at now.
	ThreadEvents(ctx context.Context, orgID, threadID string, after int64, limit int, now time.Time) ([]ThreadEvent, error)
	// LastThreadEventSeq returns the highest Seq the thread was given,
	// expired or not (0 when it has none): the cursors a client can hold.
	LastThreadEventSeq(ctx context.Context, orgID, threadID string) (int64, error)
}

// ThreadEvent is one event of a thread's event-protocol stream (POST
// /threads/{id}/stream/events): its method ("values", "lifecycle",
// "input.requested", ...) and its params as JSON, and the run it came from.
type ThreadEvent struct {
	// Seq is the event's place in the thread's stream, assigned by
	// AppendThreadEvents from 1: the protocol's seq, which a client resumes
	// after (since).
	Seq   int64
	RunID string
	Event string
	Data  []byte
}

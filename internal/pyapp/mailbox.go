package pyapp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Live events on Lambda (docs/runtime-protocol.md, "Live events on
// Lambda"): Lambda answers an invocation when it ends, so a run call on a
// function posts its events as it runs (RunRequest.Events, the stage's
// /runtime/events), each numbered in the call (Message.Seq). The stage
// appends them to the call's mailbox: a private log of the event log port
// (store.Events) keyed by the call, which the run worker reads while the
// invocation lasts and hands to the run's stream in order. The
// invocation's answer carries the events not acknowledged; each seq is
// handed on once.

// Mailbox is where one call's posted events are kept: a log of the event
// log port under the call's organization and key.
type Mailbox struct {
	OrgID string
	Key   string // MailboxKey of the call; "" when the call posts nothing
}

// MailboxKey is the event log key of a call's mailbox: apart from every
// run's (no run id has a colon).
func MailboxKey(callID string) string { return "call:" + callID }

// MailboxEvent is the event name of a posted message in a mailbox.
const MailboxEvent = "runtime"

// MailboxPoll is how often the run worker reads a call's mailbox.
var MailboxPoll = 250 * time.Millisecond

// EventLog is what LambdaClient reads mailboxes from (store.Events).
type EventLog interface {
	RunEvents(ctx context.Context, orgID, runID string, after int64, limit int, now time.Time) ([]store.RunEvent, error)
}

// mailboxReader hands a call's posted events on in seq order, each once.
type mailboxReader struct {
	log   EventLog
	box   Mailbox
	after int64 // the log's seq read up to
	next  int64 // the event seq handed on next
}

// drain hands on the events posted since the last read, in order; it
// stops at a gap (a later batch read before an earlier one cannot happen:
// the runtime posts in order and stops at its first failure).
func (m *mailboxReader) drain(ctx context.Context, handle func(Message) error) error {
	for {
		evs, err := m.log.RunEvents(ctx, m.box.OrgID, m.box.Key, m.after, 100, time.Now())
		if err != nil {
			return err
		}
		for _, e := range evs {
			m.after = e.Seq
			var msg Message
			if err := json.Unmarshal(e.Data, &msg); err != nil {
				return fmt.Errorf("a posted event is not a message: %w", err)
			}
			if msg.Seq != m.next {
				continue // a batch posted again (its answer was lost)
			}
			m.next++
			if err := handle(msg); err != nil {
				return err
			}
		}
		if len(evs) < 100 {
			return nil
		}
	}
}

package store

import (
	"context"
	"time"
)

// CallBudgets counts what one runtime call of a LangGraph app spends on the
// platform's routes (its graph's token requests, its posted events): on AWS
// those requests reach any API function instance, so the count must be
// shared to be a bound (internal/calltoken). Both store adapters implement
// it (the contract suite holds them to it).
type CallBudgets interface {
	// SpendCall adds request (unique within the call) of size bytes to
	// the counters of id (created at its first request) and answers the
	// totals after it. A request already counted is not counted again (a
	// retry), its call answers the totals. The counters are kept at least
	// until expires, and may be forgotten after.
	SpendCall(ctx context.Context, id, request string, size int64, expires time.Time) (CallSpent, error)
}

// CallSpent is what a call has spent so far.
type CallSpent struct {
	Requests int64
	Bytes    int64
}

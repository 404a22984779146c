package store

import "context"

// Usage is what an organization stores, as the store counts it: its
// threads, and the bytes of the documents its threads hold — each thread's
// metadata, each run's metadata, kwargs and result, each checkpoint's data,
// as stored (a nil metadata or kwargs is stored, and counted, as "{}").
// The long-term memory store's items count too (Item.Bytes), in the
// transactions that write them. A thread's summary of its latest state
// (values, interrupts, error: a copy of what a checkpoint holds) and other
// records outside threads (assistants, deployments, temporary results)
// are not counted.
type Usage struct {
	Threads int64
	Bytes   int64
}

// Accounting keeps each organization's Usage: every write that changes it
// updates the organization's counters in the same transaction, so they are
// exact at every commit. The rule of how much an organization may store is
// the use case's; it reads Usage and decides.
type Accounting interface {
	// Usage returns the organization's counters (zero when it stores
	// nothing).
	Usage(ctx context.Context, orgID string) (Usage, error)
}

package store

import "context"

// RunParking keeps the wake-up of queued runs whose executions wait to be
// told it is their turn (on AWS, a Step Functions task token: the run's
// execution parks on a .waitForTaskToken task instead of polling, and the
// worker that ends the thread's current run wakes the next; review #12).
// The token is stored with the run, so a wake-up is never lost with a
// process: whoever ends a run reads the thread's parked runs from here.
// Both store adapters implement it (the contract suite holds them to it);
// only the AWS functions use it.
type RunParking interface {
	// ParkRun stores token with a pending run, replacing the one it had
	// (an execution parks again with a new token). It reports false, and
	// stores nothing, when the run is no longer pending (it was claimed or
	// ended meanwhile); ErrNotFound when it does not exist in the org's
	// thread.
	ParkRun(ctx context.Context, orgID, threadID, runID, token string) (bool, error)
	// ParkedRuns lists the thread's pending runs with a stored token,
	// oldest NotBefore first, then oldest CreatedAt (the order they start
	// in); none for a missing thread.
	ParkedRuns(ctx context.Context, orgID, threadID string) ([]ParkedRun, error)
}

// ParkedRun is a pending run and the token that wakes its execution.
type ParkedRun struct {
	Run   Run
	Token string
}

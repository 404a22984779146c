package store

import "context"

// Sized is a number of stored records and the bytes they occupy.
type Sized struct {
	Count int64
	Bytes int64
}

// ThreadStorage is what a thread's checkpoints occupy as the adapter stores
// them (GET /threads/{thread_id}/storage, upstream's report of its built-in
// checkpointer): the checkpoint records, the channel values stored apart
// from them (per channel: Count is the number of stored versions) and the
// pending writes stored apart from them. An adapter that keeps a
// checkpoint's channel values and writes inside the checkpoint record
// reports them under Checkpoints and leaves the other sections empty:
// nothing is counted twice.
type ThreadStorage struct {
	Checkpoints   Sized
	ChannelValues Sized
	ByChannel     map[string]Sized
	PendingWrites Sized
}

// CheckpointStorage measures a thread's stored checkpoints.
type CheckpointStorage interface {
	// ThreadStorage reports the thread's checkpoints as stored (bytes of
	// their data); ErrNotFound when the thread does not exist in the
	// organization.
	ThreadStorage(ctx context.Context, orgID, threadID string) (ThreadStorage, error)
}

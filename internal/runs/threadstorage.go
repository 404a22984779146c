package runs

import (
	"context"
	"strings"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// ThreadStorage is GET /threads/{thread_id}/storage: the bytes a thread's
// checkpoints occupy as stored, in upstream's shape (langgraph-api
// api/threads.py get_thread_storage; langgraph-runtime-inmem
// checkpoint.py thread_storage). TotalBytes is the sum of the three
// sections.
type ThreadStorage struct {
	ThreadID      string         `json:"thread_id"`
	TotalBytes    int64          `json:"total_bytes"`
	Checkpoints   StorageSection `json:"checkpoints"`
	ChannelValues ChannelStorage `json:"channel_values"`
	PendingWrites StorageSection `json:"pending_writes"`
}

// StorageSection is a number of stored records and their bytes.
type StorageSection struct {
	Count int64 `json:"count"`
	Bytes int64 `json:"bytes"`
}

// ChannelStorage is the channel values stored apart from the checkpoints,
// per channel (versions stored and their bytes).
type ChannelStorage struct {
	Count     int64                      `json:"count"`
	Bytes     int64                      `json:"bytes"`
	ByChannel map[string]ChannelVersions `json:"by_channel"`
}

// ChannelVersions is one channel's stored versions.
type ChannelVersions struct {
	Versions int64 `json:"versions"`
	Bytes    int64 `json:"bytes"`
}

// ThreadStorage reports what the thread's checkpoints occupy; 404 for a
// missing thread or another organization's.
func (s *Service) ThreadStorage(ctx context.Context, orgID, id string) (ThreadStorage, error) {
	if _, err := uuid.Parse(id); err != nil {
		return ThreadStorage{}, fail.Invalid("thread_id", "Invalid thread ID: must be a UUID")
	}
	id = strings.ToLower(id)
	st, err := s.Store.ThreadStorage(ctx, orgID, id)
	if err != nil {
		return ThreadStorage{}, notFoundAs(err, "thread %s not found", id)
	}
	return storageOf(id, st), nil
}

// storageOf is the answer for what the store reported.
func storageOf(id string, st store.ThreadStorage) ThreadStorage {
	out := ThreadStorage{
		ThreadID:      id,
		Checkpoints:   StorageSection(st.Checkpoints),
		PendingWrites: StorageSection(st.PendingWrites),
		ChannelValues: ChannelStorage{Count: st.ChannelValues.Count, Bytes: st.ChannelValues.Bytes,
			ByChannel: make(map[string]ChannelVersions, len(st.ByChannel))},
	}
	for name, c := range st.ByChannel {
		out.ChannelValues.ByChannel[name] = ChannelVersions{Versions: c.Count, Bytes: c.Bytes}
	}
	out.TotalBytes = out.Checkpoints.Bytes + out.ChannelValues.Bytes + out.PendingWrites.Bytes
	return out
}

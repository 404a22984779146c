package runs

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// checkpointSink stores a run's checkpoints as its durability asks:
//   - sync: each one before the next step starts;
//   - async: in the background, in order, flushed before the run's result is
//     reported;
//   - exit: only the run's latest checkpoint, when the run ends (as
//     LangGraph's "exit": one checkpoint per run in the thread's history).
//
// Temporary (stateless) runs keep nothing: their thread is deleted at the end.
type checkpointSink struct {
	s    *Service
	run  store.Run
	mode string
	// detached is the run's context without its end: async writes behind.
	detached context.Context

	// exit: the latest checkpoint, the only one the run will write (its
	// tasks carry the pending writes of a step that did not complete), and
	// the id of the latest checkpoint of its lineage that is stored, which
	// becomes its parent. Memory stays one checkpoint however long the run.
	latest *graph.Checkpoint
	anchor string

	// quota checks the writes against the organization's byte quota; one
	// goroutine at a time stores (the run's, or async's writer).
	quota quotaGuard
	// enc serializes the checkpoints, reusing the JSON of what did not change.
	enc cpEncoder

	mu    sync.Mutex
	err   error
	queue chan graph.Checkpoint
	done  chan struct{}
}

// streamSink makes the sink of a run that starts from checkpoint from (nil
// for a new thread) and the put its graph stores checkpoints through: put
// stops the run once the stream's event log has failed, as for the store.
func (s *Service) streamSink(ctx context.Context, run store.Run, durability string, from *graph.Checkpoint, stream *streamer) (*checkpointSink, func(context.Context, graph.Checkpoint) error) {
	fromID := ""
	if from != nil {
		fromID = from.ID
	}
	sink := s.sink(ctx, run, durability, fromID)
	put := func(ctx context.Context, cp graph.Checkpoint) error {
		if err := stream.failed(); err != nil {
			return err
		}
		return sink.put(ctx, cp)
	}
	return sink, put
}

// sink makes the sink of a run that starts from the checkpoint whose id is
// from ("" for a new thread). Its background writes run under ctx's values
// (the tenant session of the run's organization on AWS), not its end.
func (s *Service) sink(ctx context.Context, run store.Run, durability, from string) *checkpointSink {
	k := &checkpointSink{s: s, run: run, mode: durability, anchor: from, quota: quotaGuard{s: s, orgID: run.OrgID},
		detached: context.WithoutCancel(ctx)}
	if run.Temporary {
		k.mode = "none"
	} else {
		k.enc.ch = s.latest.encoder(run.OrgID, run.ThreadID)
	}
	if k.mode == "async" {
		k.queue = make(chan graph.Checkpoint, 64)
		k.done = make(chan struct{})
		go k.writeBehind()
	}
	return k
}

func (k *checkpointSink) put(ctx context.Context, cp graph.Checkpoint) error {
	switch k.mode {
	case "sync":
		return k.store(ctx, cp)
	case "async":
		k.mu.Lock()
		err := k.err
		k.mu.Unlock()
		if err != nil {
			return err
		}
		k.queue <- cp
	case "exit":
		k.latest = &cp
	}
	return nil
}

// writeBehind stores queued checkpoints in order, each time all that have
// piled up in one batch: one commit for many steps when the run is faster
// than the disk. Consecutive versions of one checkpoint in a batch are
// stored once, the latest (a store's put replaces a checkpoint by its id).
func (k *checkpointSink) writeBehind() {
	defer close(k.done)
	for cp := range k.queue {
		batch := []graph.Checkpoint{cp}
	drain:
		for {
			select {
			case more, ok := <-k.queue:
				if !ok {
					break drain
				}
				if last := len(batch) - 1; batch[last].ID == more.ID {
					// The same checkpoint again (a foreign runtime sends it
					// anew with each step's pending writes): only its latest
					// version is stored, as writing both in order would leave.
					batch[last] = more
					continue
				}
				batch = append(batch, more)
			default:
				break drain
			}
		}
		k.mu.Lock()
		failed := k.err != nil
		k.mu.Unlock()
		if failed {
			continue
		}
		if err := k.store(k.detached, batch...); err != nil {
			k.mu.Lock()
			k.err = err
			k.mu.Unlock()
		}
	}
}

// flush writes what is still buffered; it must be called once, at the end.
func (k *checkpointSink) flush(ctx context.Context) error {
	switch k.mode {
	case "async":
		close(k.queue)
		<-k.done
		return k.err
	case "exit":
		return k.storeLatest(ctx)
	}
	return nil
}

// keep stores cp now when the sink's mode would not have: a run that stops
// at cp to be resumed later (by a later step of its execution) needs it.
// Flush still has to be called.
func (k *checkpointSink) keep(ctx context.Context, cp graph.Checkpoint) error {
	switch k.mode {
	case "none":
		return k.store(ctx, cp)
	case "exit":
		return k.storeLatest(ctx)
	}
	return nil // sync stored it, async flushes it
}

// storeLatest stores an exit run's latest checkpoint, if it has one that is
// not stored yet. Its parent becomes the latest stored checkpoint of its
// lineage (the ones between were never written), as LangGraph links the
// checkpoint it writes at exit to the last one it wrote.
func (k *checkpointSink) storeLatest(ctx context.Context) error {
	if k.latest == nil {
		return nil
	}
	cp := *k.latest
	if cp.ID != k.anchor {
		cp.ParentID = k.anchor
	}
	if err := k.store(ctx, cp); err != nil {
		return err
	}
	k.latest, k.anchor = nil, cp.ID
	return nil
}

func (k *checkpointSink) store(ctx context.Context, cps ...graph.Checkpoint) error {
	stored := make([]store.Checkpoint, 0, len(cps))
	var size int64
	for _, cp := range cps {
		data, err := k.enc.marshal(cp)
		if err != nil {
			return err
		}
		size += int64(len(data))
		stored = append(stored, store.Checkpoint{ThreadID: k.run.ThreadID, ID: cp.ID, ParentID: cp.ParentID,
			RunID: k.run.ID, CreatedAt: cp.CreatedAt, Data: data, RunAttempt: k.run.Attempt})
	}
	if err := k.quota.allow(ctx, size); err != nil {
		return err
	}
	if err := k.s.Store.PutCheckpoints(ctx, k.run.OrgID, stored); err != nil {
		k.s.latest.forget(k.run.OrgID, k.run.ThreadID)
		return err
	}
	if len(cps) > 0 && !k.run.Temporary { // a temporary thread is deleted at the run's end
		last := cps[len(cps)-1]
		k.s.latest.put(k.run.OrgID, k.run.ThreadID, stored[len(stored)-1].Data, &last, k.enc.ch)
	}
	return nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

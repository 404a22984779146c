package runs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// StateUpdate is POST /threads/{id}/state: write values as if node as_node
// had (LangGraph's update_state), on the latest checkpoint or, to fork, on
// the one named by checkpoint / checkpoint_id.
type StateUpdate struct {
	Values       json.RawMessage `json:"values"`
	Checkpoint   *CheckpointRef  `json:"checkpoint"`
	CheckpointID *string         `json:"checkpoint_id"`
	AsNode       *string         `json:"as_node"`
}

// StateUpdated is upstream's answer to an update: the new checkpoint, with
// the deprecated configurable and checkpoint_id beside it.
type StateUpdated struct {
	Checkpoint   map[string]any `json:"checkpoint"`
	Configurable map[string]any `json:"configurable"`
	CheckpointID string         `json:"checkpoint_id"`
}

// StatePatch is PATCH /threads/{id}/state: metadata merged into a
// checkpoint's (the latest unless one is named).
type StatePatch struct {
	Metadata     json.RawMessage `json:"metadata"`
	Checkpoint   *CheckpointRef  `json:"checkpoint"`
	CheckpointID *string         `json:"checkpoint_id"`
}

// StateAtRequest is POST /threads/{id}/state/checkpoint.
type StateAtRequest struct {
	Checkpoint *CheckpointRef `json:"checkpoint"`
	Subgraphs  *bool          `json:"subgraphs"`
}

// Messages of upstream's server, kept word for word.
const (
	msgStateBusy  = "Thread is busy with a running job. Cannot update state."
	msgNoGraphFmt = "Thread '%s' has no assigned graph ID. This usually occurs when no runs have been made on this particular thread. This operation requires a graph ID. Please ensure a run has been made for the thread or manually update the thread metadata (by setting the 'graph_id' field) before running this operation."
)

// UpdateState writes a new checkpoint (metadata source "update") on the
// thread, as LangGraph's update_state does: values go through the graph's
// reducers as if as_node had written them and the next tasks are its
// successors. The graph is the thread's (metadata graph_id, stamped by its
// runs); a thread without one is a 400, a busy thread a 409.
func (s *Service) UpdateState(ctx context.Context, orgID, id string, in StateUpdate) (StateUpdated, error) {
	var c fail.Checks
	fromID := refID(&c, "checkpoint", in.Checkpoint, in.CheckpointID)
	var writes graph.Writes
	if len(in.Values) > 0 && string(in.Values) != "null" {
		c.Add(json.Unmarshal(in.Values, &writes) != nil, "values", "must be an object or a list of [key, value] pairs")
	}
	asNode := deref(in.AsNode, "")
	if err := c.Err(); err != nil {
		return StateUpdated{}, err
	}
	t, err := s.thread(ctx, orgID, id)
	if err != nil {
		return StateUpdated{}, err
	}
	r, err := s.threadRunnable(ctx, orgID, t)
	if err != nil {
		return StateUpdated{}, err
	}
	from, err := s.checkpointOrLatest(ctx, orgID, t.ID, fromID)
	if err != nil {
		return StateUpdated{}, err
	}
	if err := s.checkQuota(ctx, orgID, 0); err != nil {
		return StateUpdated{}, err
	}
	var cp graph.Checkpoint
	if fg := r.foreign(); fg != nil {
		// LangGraph applies it, with the graph's own reducers.
		cp, err = fg.UpdateState(ctx, ForeignUpdate{OrgID: orgID, ThreadID: t.ID, From: from, CheckpointID: fromID, Values: in.Values, AsNode: asNode})
	} else {
		cp, err = graph.UpdateState(r.g, from, writes, asNode)
		err = updateError(err)
	}
	if err != nil {
		return StateUpdated{}, err
	}
	if err := s.putState(ctx, orgID, t.ID, cp); err != nil {
		return StateUpdated{}, err
	}
	s.publishStateUpdate(orgID, t.ID, cp)
	ref := map[string]any{"thread_id": t.ID, "checkpoint_ns": "", "checkpoint_id": cp.ID}
	return StateUpdated{Checkpoint: ref, Configurable: ref, CheckpointID: cp.ID}, nil
}

// publishStateUpdate tells the thread's stream followers in this process
// that a client wrote the thread's state: a state_update event, {state,
// thread_id}, the state as GET /threads/{id}/state shows it (the Python
// server publishes the same from Threads.State.post). It is not logged:
// thread streams do not replay.
func (s *Service) publishStateUpdate(orgID, threadID string, cp graph.Checkpoint) {
	key := threadKey(orgID, threadID)
	if !s.streams.watched(key) {
		return
	}
	data, err := json.Marshal(map[string]any{"state": stateView(threadID, cp), "thread_id": threadID})
	if err != nil {
		return // a stored state is JSON
	}
	s.streams.publish([]StreamEvent{{ID: -1, Event: ThreadModeStateUpdate, Data: data}}, key)
}

// updateError names the field an engine refusal of an update is about.
func updateError(err error) error {
	var ge *graph.Error
	if !errors.As(err, &ge) {
		return err
	}
	field := "values"
	if strings.HasPrefix(ge.Message, "as_node") || strings.Contains(ge.Message, "specify as_node") {
		field = "as_node"
	}
	return fail.Invalid(field, "%s: %s", ge.Kind, ge.Message)
}

// stateStatus is the status of a thread whose state a client wrote (an
// update, supersteps), as upstream sets it: interrupted while tasks are
// left to run (next) or an interrupt is pending, else idle.
func stateStatus(cp graph.Checkpoint) string {
	if len(cp.Next) > 0 || len(cp.PendingInterrupts()) > 0 {
		return store.ThreadInterrupted
	}
	return store.ThreadIdle
}

// putState stores a checkpoint an update made and makes it the thread's
// state; ErrBusy when a run is inflight (the run owns the state).
func (s *Service) putState(ctx context.Context, orgID, threadID string, cp graph.Checkpoint) error {
	data, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	status := stateStatus(cp)
	s.latest.forget(orgID, threadID) // another writer than a run: the cache would only miss
	err = s.Store.UpdateThreadState(ctx, orgID, store.Checkpoint{ThreadID: threadID, ID: cp.ID, ParentID: cp.ParentID,
		CreatedAt: cp.CreatedAt, Data: data}, mustJSON(cp.Values), mustJSON(cp.InterruptsByTask()), status, s.now())
	switch {
	case errors.Is(err, store.ErrBusy):
		return fail.Conflict(msgStateBusy)
	case errors.Is(err, store.ErrNotFound):
		return fail.NotFound("thread %s not found", threadID)
	}
	return err
}

// PatchState merges metadata into a checkpoint's metadata (the keys the
// engine sets — source, step, writes, parents — stay the engine's). The
// thread's state is otherwise unchanged; a busy thread is a 409.
func (s *Service) PatchState(ctx context.Context, orgID, id string, in StatePatch) error {
	var c fail.Checks
	c.Add(len(in.Metadata) == 0 || string(in.Metadata) == "null", "metadata", "is required")
	checkMetadata(&c, "metadata", in.Metadata, s.Limits)
	fromID := refID(&c, "checkpoint", in.Checkpoint, in.CheckpointID)
	if err := c.Err(); err != nil {
		return err
	}
	t, err := s.thread(ctx, orgID, id)
	if err != nil {
		return err
	}
	cp, err := s.checkpointOrLatest(ctx, orgID, t.ID, fromID)
	if err != nil {
		return err
	}
	if cp == nil {
		return fail.NotFound("thread %s has no checkpoint to patch", id)
	}
	var add map[string]any
	_ = json.Unmarshal(in.Metadata, &add)
	extra := map[string]any{}
	for k, v := range cp.Metadata.Extra {
		extra[k] = v
	}
	for k, v := range add {
		extra[k] = v
	}
	if max := s.Limits.maxMetadataBytes(); len(mustJSON(extra)) > max {
		return fail.Invalid("metadata", "must be at most %d bytes of JSON once merged into the checkpoint's", max)
	}
	if err := s.checkQuota(ctx, orgID, 0); err != nil {
		return err
	}
	cp.Metadata.Extra = extra
	data, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	stored := store.Checkpoint{ThreadID: t.ID, ID: cp.ID, ParentID: cp.ParentID, CreatedAt: cp.CreatedAt, Data: data}
	// The thread's summary is kept as it is (nil values, its interrupts,
	// no status): only the checkpoint's metadata changes.
	s.latest.forget(orgID, t.ID)
	err = s.Store.UpdateThreadState(ctx, orgID, stored, nil, t.Interrupts, "", s.now())
	switch {
	case errors.Is(err, store.ErrBusy):
		return fail.Conflict(msgStateBusy)
	case errors.Is(err, store.ErrNotFound):
		return fail.NotFound("thread %s not found", id)
	}
	return err
}

// StateAt is POST /threads/{id}/state/checkpoint: the state at the named
// checkpoint, or the latest when the reference names none.
func (s *Service) StateAt(ctx context.Context, orgID, id string, in StateAtRequest) (ThreadState, error) {
	var c fail.Checks
	c.Add(in.Checkpoint == nil, "checkpoint", "is required")
	cpID := refID(&c, "checkpoint", in.Checkpoint, nil)
	if in.Checkpoint != nil && in.Checkpoint.CheckpointNS != "" {
		c.Add(true, "checkpoint.checkpoint_ns", "must be empty: graphs here have no subgraph namespaces")
	}
	if err := c.Err(); err != nil {
		return ThreadState{}, err
	}
	if in.Subgraphs != nil && *in.Subgraphs {
		return s.ThreadStateSubgraphs(ctx, orgID, id, cpID)
	}
	if cpID == "" {
		return s.ThreadState(ctx, orgID, id)
	}
	return s.ThreadStateAt(ctx, orgID, id, cpID)
}

// refID is the checkpoint id a request names through a CheckpointRef or a
// bare checkpoint_id ("" for none); a present one must be a UUID.
func refID(c *fail.Checks, field string, ref *CheckpointRef, bare *string) string {
	id := ""
	if bare != nil {
		id = *bare
		field = "checkpoint_id"
	}
	if ref != nil && ref.CheckpointID != "" {
		id, field = ref.CheckpointID, field+".checkpoint_id"
	}
	if id != "" {
		_, err := uuid.Parse(id)
		c.Add(err != nil, field, "Invalid checkpoint ID: must be a UUID")
	}
	return strings.ToLower(id)
}

// checkpointOrLatest reads the checkpoint id names, or the thread's latest
// (nil when it has none) when id is "".
func (s *Service) checkpointOrLatest(ctx context.Context, orgID, threadID, id string) (*graph.Checkpoint, error) {
	var stored store.Checkpoint
	var err error
	if id != "" {
		stored, err = s.Store.Checkpoint(ctx, orgID, threadID, id)
		if err != nil {
			return nil, notFoundAs(err, "checkpoint %s of thread %s not found", id, threadID)
		}
	} else {
		stored, err = s.Store.LatestCheckpoint(ctx, orgID, threadID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
	}
	var cp graph.Checkpoint
	if err := json.Unmarshal(stored.Data, &cp); err != nil {
		return nil, err
	}
	return &cp, nil
}

// threadGraph is the graph a thread's state belongs to: its metadata's
// graph_id, which its runs stamp (upstream's rule).
func (s *Service) threadGraph(ctx context.Context, orgID string, t store.Thread) (*graph.Graph, error) {
	r, err := s.threadRunnable(ctx, orgID, t)
	return r.g, err
}

// threadRunnable is threadGraph with what executes it.
func (s *Service) threadRunnable(ctx context.Context, orgID string, t store.Thread) (runnable, error) {
	var meta struct {
		GraphID any `json:"graph_id"`
	}
	_ = json.Unmarshal(t.Metadata, &meta)
	graphID, _ := meta.GraphID.(string)
	if graphID == "" {
		return runnable{}, fail.BadRequest(msgNoGraphFmt, t.ID)
	}
	return s.runnableByID(ctx, orgID, graphID, "metadata.graph_id")
}

// graphByID resolves a graph id (built-in or deployed) to the graph a new
// run would execute; an unknown one is a 422 naming field.
func (s *Service) graphByID(ctx context.Context, orgID, graphID, field string) (*graph.Graph, error) {
	r, err := s.runnableByID(ctx, orgID, graphID, field)
	return r.g, err
}

// runnableByID is graphByID with what executes the graph.
func (s *Service) runnableByID(ctx context.Context, orgID, graphID, field string) (runnable, error) {
	r, err := s.currentGraph(ctx, orgID, graphID)
	if fail.KindOf(err) == fail.KindNotFound {
		names, nerr := s.graphNames(ctx, orgID)
		if nerr != nil {
			return runnable{}, nerr
		}
		return runnable{}, fail.Invalid(field, "graph %q is not registered; the registered graphs: %s", graphID, strings.Join(names, ", "))
	}
	if err != nil {
		return runnable{}, err
	}
	return r, nil
}

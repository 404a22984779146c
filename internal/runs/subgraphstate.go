package runs

import (
	"context"
	"encoding/json"
	"errors"
	"maps"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// ThreadStateSubgraphs is a thread's state (at checkpointID, or its latest
// when empty) with subgraphs=true: the tasks that run a subgraph of a
// LangGraph app's graph carry that subgraph's state (tasks[].state), as
// upstream answers. The engine's graphs keep no separate subgraph states:
// their answer is the plain state.
func (s *Service) ThreadStateSubgraphs(ctx context.Context, orgID, id, checkpointID string) (ThreadState, error) {
	t, err := s.thread(ctx, orgID, id)
	if err != nil {
		return ThreadState{}, err
	}
	var stored store.Checkpoint
	if checkpointID == "" {
		stored, err = s.Store.LatestCheckpoint(ctx, orgID, t.ID)
		if errors.Is(err, store.ErrNotFound) {
			return emptyState(), nil
		}
	} else {
		stored, err = s.Store.Checkpoint(ctx, orgID, t.ID, checkpointID)
		err = notFoundAs(err, "checkpoint %s of thread %s not found", checkpointID, id)
	}
	if err != nil {
		return ThreadState{}, err
	}
	var cp graph.Checkpoint
	if err := json.Unmarshal(stored.Data, &cp); err != nil {
		return ThreadState{}, err
	}
	st := stateView(t.ID, cp)
	if len(cp.Native) == 0 || len(cp.Tasks) == 0 {
		return st, nil // not an app graph's checkpoint, or nothing runs next
	}
	r, err := s.threadRunnable(ctx, orgID, t)
	if err != nil {
		return ThreadState{}, err
	}
	fs, ok := r.foreign().(ForeignState)
	if !ok {
		return st, nil
	}
	subs, err := fs.SubgraphStates(ctx, ForeignStateQuery{OrgID: orgID, ThreadID: t.ID, At: cp})
	if err != nil {
		return ThreadState{}, err
	}
	graftSubgraphStates(t.ID, st.Tasks, subs, map[string]string{"": cp.ID}, 0)
	return st, nil
}

// graftSubgraphStates puts each task's subgraph state on it, its
// checkpoint in the subgraph's namespace (name:task id, as LangGraph's)
// with LangGraph's checkpoint_map: the checkpoint of each enclosing
// namespace (ancestors), then its own.
func graftSubgraphStates(threadID string, tasks []ThreadTask, subs map[string]ForeignSubgraphState, ancestors map[string]string, depth int) {
	if depth > 64 { // bounds whatever the runtime answers
		return
	}
	for i, task := range tasks {
		sub, ok := subs[task.ID]
		if !ok {
			continue
		}
		st := stateView(threadID, sub.Checkpoint)
		st.Metadata = checkpointMetadata(sub.Checkpoint.Metadata, true) // LangGraph's, like its parent's
		ns := task.Name + ":" + task.ID
		st.Checkpoint.CheckpointNS = ns
		st.Checkpoint.CheckpointMap = checkpointMap(ancestors, ns, st.Checkpoint.CheckpointID)
		if st.ParentCheckpoint != nil {
			st.ParentCheckpoint.CheckpointNS = ns
			st.ParentCheckpoint.CheckpointMap = checkpointMap(ancestors, ns, st.ParentCheckpoint.CheckpointID)
		}
		inner := maps.Clone(ancestors)
		inner[ns] = st.Checkpoint.CheckpointID
		graftSubgraphStates(threadID, st.Tasks, sub.Tasks, inner, depth+1)
		tasks[i].State, tasks[i].Checkpoint = st, nil
	}
}

// checkpointMap is LangGraph's checkpoint_map of checkpoint id in
// namespace ns: its ancestors' checkpoints and its own.
func checkpointMap(ancestors map[string]string, ns, id string) json.RawMessage {
	m := maps.Clone(ancestors)
	m[ns] = id
	return mustJSON(m)
}

package runs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// ThreadInput creates a thread.
type ThreadInput struct {
	ThreadID *string         `json:"thread_id"`
	Metadata json.RawMessage `json:"metadata"`
	IfExists *string         `json:"if_exists"`
	// Supersteps are state updates applied to the new thread, in order
	// (upstream's bulk update_state), through metadata.graph_id's graph.
	Supersteps []Superstep `json:"supersteps"`
	TTL        *ThreadTTL  `json:"ttl"`
}

// ThreadTTL is upstream's time to live of a thread: ttl minutes from now,
// then the strategy (delete: the thread goes; keep_latest: only its
// latest checkpoint stays), applied by the workers' sweep.
type ThreadTTL struct {
	Strategy *string  `json:"strategy"`
	TTL      *float64 `json:"ttl"`
}

// Superstep is one step of a new thread's initial updates.
type Superstep struct {
	Updates []SuperstepUpdate `json:"updates"`
}

// SuperstepUpdate is one update of a superstep: values (or command.update)
// written as node as_node.
type SuperstepUpdate struct {
	Values  json.RawMessage `json:"values"`
	Command *CommandInput   `json:"command"`
	AsNode  *string         `json:"as_node"`
}

// ThreadPatch merges metadata into a thread and sets its time to live.
type ThreadPatch struct {
	Metadata json.RawMessage `json:"metadata"`
	TTL      *ThreadTTL      `json:"ttl"`
}

// ThreadSearch filters threads.
type ThreadSearch struct {
	IDs      []string        `json:"ids"`
	Metadata json.RawMessage `json:"metadata"`
	Values   json.RawMessage `json:"values"`
	Status   string          `json:"status"`
	Limit    int             `json:"limit"`
	Offset   int             `json:"offset"`
	// SortBy is one of threadSortKeys (nil: created_at); SortOrder asc or
	// desc (nil: desc).
	SortBy    *string `json:"sort_by"`
	SortOrder *string `json:"sort_order"`
	// Select names the fields of each thread to answer (all when empty).
	Select []string `json:"select"`
}

// threadSortKeys are the sort_by values of a thread search (upstream's).
var threadSortKeys = []string{store.ThreadSortID, store.ThreadSortStatus, store.ThreadSortCreatedAt,
	store.ThreadSortUpdatedAt, store.ThreadSortStateUpdatedAt}

// ThreadCount filters the threads to count.
type ThreadCount struct {
	Metadata json.RawMessage `json:"metadata"`
	Values   json.RawMessage `json:"values"`
	Status   string          `json:"status"`
}

// HistoryQuery selects a thread's checkpoints. Before is a checkpoint id, a
// CheckpointRef object or, as the JS SDK sends it, a config
// {"configurable": {"checkpoint_id": ...}}; Metadata keeps the checkpoints
// whose metadata has every key with an equal value; Checkpoint narrows to
// one checkpoint (its checkpoint_id) or namespace.
type HistoryQuery struct {
	Limit      int             `json:"limit"`
	Before     json.RawMessage `json:"before"`
	Metadata   json.RawMessage `json:"metadata"`
	Checkpoint *CheckpointRef  `json:"checkpoint"`
}

var threadStatuses = []string{store.ThreadIdle, store.ThreadBusy, store.ThreadInterrupted, store.ThreadError}

// CreateThread creates a thread; with if_exists "do_nothing" an existing one
// is returned instead of a 409.
func (s *Service) CreateThread(ctx context.Context, orgID string, in ThreadInput) (Thread, error) {
	var c fail.Checks
	id := uuid.NewString()
	if in.ThreadID != nil {
		_, err := uuid.Parse(*in.ThreadID)
		c.Add(err != nil, "thread_id", "must be a UUID")
		id = strings.ToLower(*in.ThreadID)
	}
	ifExists := deref(in.IfExists, "raise")
	c.Add(ifExists != "raise" && ifExists != "do_nothing", "if_exists", "must be one of raise, do_nothing")
	checkMetadata(&c, "metadata", in.Metadata, s.Limits)
	expires, strategy := s.parseTTL(&c, in.TTL)
	if err := c.Err(); err != nil {
		return Thread{}, err
	}
	if err := s.checkQuota(ctx, orgID, 1); err != nil {
		if existing, gerr := s.GetThread(ctx, orgID, id); ifExists == "do_nothing" && gerr == nil {
			return existing, nil // nothing to create
		}
		return Thread{}, err
	}
	var steps []graph.Checkpoint
	if len(in.Supersteps) > 0 {
		var err error
		if steps, err = s.superstepCheckpoints(ctx, orgID, id, in.Metadata, in.Supersteps); err != nil {
			return Thread{}, err
		}
	}
	now := s.now()
	t := store.Thread{ID: id, OrgID: orgID, Status: store.ThreadIdle, Metadata: objectOr(in.Metadata),
		Config: []byte("{}"), CreatedAt: now, UpdatedAt: now, StateUpdatedAt: now, ExpiresAt: expires, TTLStrategy: strategy}
	if len(steps) > 0 {
		last := steps[len(steps)-1]
		t.Values, t.Interrupts = mustJSON(last.Values), mustJSON(last.InterruptsByTask())
		t.Status = stateStatus(last)
	}
	err := s.Store.CreateThread(ctx, t)
	if errors.Is(err, store.ErrConflict) {
		if ifExists == "do_nothing" {
			return s.GetThread(ctx, orgID, id)
		}
		return Thread{}, fail.Conflict("thread %s already exists", id)
	}
	if err != nil {
		return Thread{}, err
	}
	if len(steps) > 0 {
		if err := s.putSteps(ctx, orgID, id, steps); err != nil {
			// A thread whose history did not fit is not left half made.
			_ = s.Store.DeleteThread(context.WithoutCancel(ctx), orgID, id)
			return Thread{}, err
		}
	}
	return threadView(t), nil
}

// putSteps stores a new thread's superstep checkpoints, a page at a time.
func (s *Service) putSteps(ctx context.Context, orgID, threadID string, steps []graph.Checkpoint) error {
	for len(steps) > 0 {
		n := min(len(steps), copyPage)
		page := make([]store.Checkpoint, 0, n)
		for _, cp := range steps[:n] {
			data, err := json.Marshal(cp)
			if err != nil {
				return err
			}
			page = append(page, store.Checkpoint{ThreadID: threadID, ID: cp.ID, ParentID: cp.ParentID, CreatedAt: cp.CreatedAt, Data: data})
		}
		if err := s.Store.PutCheckpoints(ctx, orgID, page); err != nil {
			return err
		}
		steps = steps[n:]
	}
	return nil
}

// GetThread returns one thread.
func (s *Service) GetThread(ctx context.Context, orgID, id string) (Thread, error) {
	t, err := s.thread(ctx, orgID, id)
	if err != nil {
		return Thread{}, err
	}
	return threadView(t), nil
}

// SearchThreads lists threads, newest first unless sorted otherwise.
func (s *Service) SearchThreads(ctx context.Context, orgID string, in ThreadSearch) ([]Thread, error) {
	var c fail.Checks
	f := store.ThreadFilter{IDs: in.IDs, Status: in.Status, Metadata: nullIsNil(in.Metadata),
		Values: nullIsNil(in.Values), Limit: in.Limit, Offset: in.Offset}
	if in.SortBy != nil {
		f.SortBy = *in.SortBy
		c.Add(!slices.Contains(threadSortKeys, f.SortBy), "sort_by", "must be one of %s", strings.Join(threadSortKeys, ", "))
	}
	if in.SortOrder != nil {
		c.Add(*in.SortOrder != "asc" && *in.SortOrder != "desc", "sort_order", "must be one of asc, desc")
		f.Ascending = *in.SortOrder == "asc"
	}
	c.Add(in.Limit < 0 || in.Limit > 1000, "limit", "must be between 1 and 1000")
	c.Add(in.Offset < 0, "offset", "must be >= 0")
	c.Add(in.Status != "" && !slices.Contains(threadStatuses, in.Status), "status", "must be one of %s", strings.Join(threadStatuses, ", "))
	checkObject(&c, "metadata", in.Metadata)
	checkObject(&c, "values", in.Values)
	checkSelect(&c, in.Select, threadFields)
	if err := c.Err(); err != nil {
		return nil, err
	}
	list, err := s.Store.SearchThreads(ctx, orgID, f)
	if err != nil {
		return nil, err
	}
	out := make([]Thread, 0, len(list))
	for _, t := range list {
		out = append(out, threadView(t))
	}
	return out, nil
}

// PatchThread merges metadata into the thread's.
func (s *Service) PatchThread(ctx context.Context, orgID, id string, in ThreadPatch) (Thread, error) {
	var c fail.Checks
	checkMetadata(&c, "metadata", in.Metadata, s.Limits)
	expires, strategy := s.parseTTL(&c, in.TTL)
	if err := c.Err(); err != nil {
		return Thread{}, err
	}
	t, err := s.thread(ctx, orgID, id)
	if err != nil {
		return Thread{}, err
	}
	if in.TTL != nil {
		if err := s.Store.SetThreadTTL(ctx, orgID, t.ID, expires, strategy); err != nil {
			return Thread{}, notFoundAs(err, "thread %s not found", id)
		}
	}
	if err := s.checkQuota(ctx, orgID, 0); err != nil {
		return Thread{}, err
	}
	merged := map[string]json.RawMessage{}
	_ = json.Unmarshal(t.Metadata, &merged)
	var add map[string]json.RawMessage
	_ = json.Unmarshal(objectOr(in.Metadata), &add)
	for k, v := range add {
		merged[k] = v
	}
	// Patches merge: each within the bound could still add up without one.
	raw := mustJSON(merged)
	if max := s.Limits.maxMetadataBytes(); len(raw) > max {
		return Thread{}, fail.Invalid("metadata", "must be at most %d bytes of JSON once merged into the thread's, would be %d", max, len(raw))
	}
	t, err = s.Store.UpdateThreadMetadata(ctx, orgID, t.ID, raw, s.now())
	if err != nil {
		return Thread{}, notFoundAs(err, "thread %s not found", id)
	}
	return threadView(t), nil
}

// DeleteThread removes a thread with its runs and checkpoints.
func (s *Service) DeleteThread(ctx context.Context, orgID, id string) error {
	t, err := s.thread(ctx, orgID, id)
	if err != nil {
		return err
	}
	return notFoundAs(s.deleteThread(ctx, orgID, t.ID), "thread %s not found", id)
}

// deleteThread deletes a thread with its runs, then wakes the parked
// executions of its runs: each finds its run gone and ends.
func (s *Service) deleteThread(ctx context.Context, orgID, threadID string) error {
	s.latest.forget(orgID, threadID)
	parked := s.parkedBefore(ctx, orgID, threadID, slog.Default())
	if err := s.Store.DeleteThread(ctx, orgID, threadID); err != nil {
		return err
	}
	s.wakeEnded(ctx, parked, func(store.Run) bool { return true }, slog.Default())
	return nil
}

// ThreadState returns the latest state of a thread (an empty state when it
// has no checkpoint yet).
func (s *Service) ThreadState(ctx context.Context, orgID, id string) (ThreadState, error) {
	t, err := s.thread(ctx, orgID, id)
	if err != nil {
		return ThreadState{}, err
	}
	cp, err := s.Store.LatestCheckpoint(ctx, orgID, t.ID)
	if errors.Is(err, store.ErrNotFound) {
		return emptyState(), nil
	}
	if err != nil {
		return ThreadState{}, err
	}
	return s.decodeState(t.ID, cp)
}

// ThreadStateAt returns the state at one checkpoint.
func (s *Service) ThreadStateAt(ctx context.Context, orgID, id, checkpointID string) (ThreadState, error) {
	t, err := s.thread(ctx, orgID, id)
	if err != nil {
		return ThreadState{}, err
	}
	cp, err := s.Store.Checkpoint(ctx, orgID, t.ID, checkpointID)
	if err != nil {
		return ThreadState{}, notFoundAs(err, "checkpoint %s of thread %s not found", checkpointID, id)
	}
	return s.decodeState(t.ID, cp)
}

// History lists a thread's states, newest first.
func (s *Service) History(ctx context.Context, orgID, id string, q HistoryQuery) ([]ThreadState, error) {
	var c fail.Checks
	c.Add(q.Limit < 0 || q.Limit > 1000, "limit", "must be between 1 and 1000")
	before := beforeID(&c, q.Before)
	checkObject(&c, "metadata", q.Metadata)
	only := refID(&c, "checkpoint", q.Checkpoint, nil)
	filter, ferr := store.ParseJSONFilter("metadata", nullIsNil(q.Metadata))
	c.AddErr(ferr)
	if err := c.Err(); err != nil {
		return nil, err
	}
	t, err := s.thread(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = 10
	}
	out := []ThreadState{}
	if q.Checkpoint != nil && q.Checkpoint.CheckpointNS != "" {
		return out, nil // no subgraph has checkpoints of its own here
	}
	keep := func(st ThreadState) bool {
		return filter == nil || filter.Matches(mustJSON(st.Metadata))
	}
	if only != "" {
		cp, err := s.Store.Checkpoint(ctx, orgID, t.ID, only)
		if errors.Is(err, store.ErrNotFound) || (err == nil && before != "" && cp.ID >= before) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		st, err := s.decodeState(t.ID, cp)
		if err != nil || !keep(st) {
			return out, err
		}
		return append(out, st), nil
	}
	// A metadata filter reads pages until it has limit matches, at most
	// maxHistoryScan checkpoints: a thread's history is unbounded.
	scanned, page := 0, limit
	if filter != nil {
		page = 100
	}
	for len(out) < limit && scanned < maxHistoryScan {
		list, err := s.Store.ListCheckpoints(ctx, orgID, t.ID, before, page)
		if err != nil {
			return nil, err
		}
		for _, cp := range list {
			st, err := s.decodeState(t.ID, cp)
			if err != nil {
				return nil, err
			}
			if keep(st) && len(out) < limit {
				out = append(out, st)
			}
		}
		scanned += len(list)
		if len(list) < page {
			break
		}
		before = list[len(list)-1].ID
	}
	return out, nil
}

// maxHistoryScan bounds the checkpoints one filtered history request reads.
const maxHistoryScan = 10000

// beforeID reads history's before: a checkpoint id, {"checkpoint_id": ...}
// or {"configurable": {"checkpoint_id": ...}} (the JS SDK's config).
func beforeID(c *fail.Checks, raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var id string
	if json.Unmarshal(raw, &id) != nil {
		var ref struct {
			CheckpointID *string `json:"checkpoint_id"`
			Configurable *struct {
				CheckpointID *string `json:"checkpoint_id"`
			} `json:"configurable"`
		}
		ok := json.Unmarshal(raw, &ref) == nil
		switch {
		case ok && ref.CheckpointID != nil:
			id = *ref.CheckpointID
		case ok && ref.Configurable != nil && ref.Configurable.CheckpointID != nil:
			id = *ref.Configurable.CheckpointID
		default:
			c.Add(true, "before", `must be a checkpoint id, {"checkpoint_id": ...} or {"configurable": {"checkpoint_id": ...}}`)
			return ""
		}
	}
	if id == "" {
		return ""
	}
	_, err := uuid.Parse(id)
	c.Add(err != nil, "before", "Invalid checkpoint ID: must be a UUID")
	return strings.ToLower(id)
}

func (s *Service) decodeState(threadID string, stored store.Checkpoint) (ThreadState, error) {
	var cp graph.Checkpoint
	if err := json.Unmarshal(stored.Data, &cp); err != nil {
		return ThreadState{}, err
	}
	return stateView(threadID, cp), nil
}

// thread loads a thread by its path id: a non-UUID is a 422 (Python's
// "Invalid thread ID"), an unknown one a 404.
func (s *Service) thread(ctx context.Context, orgID, id string) (store.Thread, error) {
	if _, err := uuid.Parse(id); err != nil {
		return store.Thread{}, fail.Invalid("thread_id", "Invalid thread ID: must be a UUID")
	}
	t, err := s.Store.Thread(ctx, orgID, strings.ToLower(id))
	return t, notFoundAs(err, "thread %s not found", id)
}

// threadConfigAfterRun is what a run does to its thread's config, as
// upstream (langgraph_runtime_inmem's Runs.put): the assistant's config
// under the thread's, the run's config over both, and as configurable the
// assistant's under the thread's (the run's own configurable stays the
// run's). A thread that never had a run thus gets {"configurable": {}}.
func threadConfigAfterRun(assistantConfig []byte, runConfig map[string]any) func(current []byte) ([]byte, error) {
	return func(current []byte) ([]byte, error) {
		var assistant, thread map[string]any
		if err := json.Unmarshal(objectOr(assistantConfig), &assistant); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(objectOr(current), &thread); err != nil {
			return nil, err
		}
		merged := map[string]any{}
		for _, layer := range []map[string]any{assistant, thread, runConfig} {
			for k, v := range layer {
				merged[k] = v
			}
		}
		configurable := map[string]any{}
		for _, layer := range []map[string]any{assistant, thread} {
			if c, ok := layer["configurable"].(map[string]any); ok {
				for k, v := range c {
					configurable[k] = v
				}
			}
		}
		merged["configurable"] = configurable
		return json.Marshal(merged)
	}
}

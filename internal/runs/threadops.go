package runs

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// threadFields are the fields a thread search may select (upstream's
// THREAD_FIELDS).
var threadFields = []string{"thread_id", "created_at", "updated_at", "state_updated_at", "metadata", "config", "status", "values", "interrupts", "error"}

// checkSelect: every selected field must be one of fields.
func checkSelect(c *fail.Checks, sel []string, fields []string) {
	for i, f := range sel {
		if !slices.Contains(fields, f) {
			c.Add(true, "select", "item %d (%q) must be one of %s", i, f, strings.Join(fields, ", "))
			return
		}
	}
}

// project keeps the selected fields of each answer (all when sel is empty).
func project[T any](list []T, sel []string) (any, error) {
	if len(sel) == 0 {
		return list, nil
	}
	out := make([]map[string]json.RawMessage, 0, len(list))
	for _, v := range list {
		var all map[string]json.RawMessage
		if err := json.Unmarshal(mustJSON(v), &all); err != nil {
			return nil, err
		}
		kept := make(map[string]json.RawMessage, len(sel))
		for _, f := range sel {
			if raw, ok := all[f]; ok {
				kept[f] = raw
			}
		}
		out = append(out, kept)
	}
	return out, nil
}

// SearchThreadsSelected is SearchThreads with the request's select applied.
func (s *Service) SearchThreadsSelected(ctx context.Context, orgID string, in ThreadSearch) (any, error) {
	list, err := s.SearchThreads(ctx, orgID, in)
	if err != nil {
		return nil, err
	}
	return project(list, in.Select)
}

// CountThreads counts the organization's threads that match the filters.
func (s *Service) CountThreads(ctx context.Context, orgID string, in ThreadCount) (int, error) {
	var c fail.Checks
	c.Add(in.Status != "" && !slices.Contains(threadStatuses, in.Status), "status", "must be one of %s", strings.Join(threadStatuses, ", "))
	checkObject(&c, "metadata", in.Metadata)
	checkObject(&c, "values", in.Values)
	if err := c.Err(); err != nil {
		return 0, err
	}
	return s.Store.CountThreads(ctx, orgID, store.ThreadFilter{Status: in.Status,
		Metadata: nullIsNil(in.Metadata), Values: nullIsNil(in.Values)})
}

// copyPage is how many checkpoints a copy moves per store write.
const copyPage = 100

// CopyThread makes a new thread with the thread's metadata, config, state
// and every checkpoint (its history, so the copy can be forked and
// resumed); runs are not copied, and the copy is idle unless its state is
// interrupted or failed.
func (s *Service) CopyThread(ctx context.Context, orgID, id string) (Thread, error) {
	src, err := s.thread(ctx, orgID, id)
	if err != nil {
		return Thread{}, err
	}
	if err := s.checkQuota(ctx, orgID, 1); err != nil {
		return Thread{}, err
	}
	now := s.now()
	status := src.Status
	if status == store.ThreadBusy {
		status = store.ThreadIdle
		if len(src.Interrupts) > 0 && string(src.Interrupts) != "{}" {
			status = store.ThreadInterrupted
		}
	}
	cp := store.Thread{ID: uuid.NewString(), OrgID: orgID, Status: status, Metadata: src.Metadata,
		Config: src.Config, Values: src.Values, Interrupts: src.Interrupts, Error: src.Error,
		CreatedAt: now, UpdatedAt: now, StateUpdatedAt: now}
	if err := s.Store.CreateThread(ctx, cp); err != nil {
		return Thread{}, err
	}
	// The copy is written page by page; on failure it is deleted, so no
	// half-copied thread is left behind (a crash in between can leave one
	// with part of the history, never with a state it did not have).
	if err := s.copyCheckpoints(ctx, orgID, src.ID, cp.ID); err != nil {
		_ = s.Store.DeleteThread(context.WithoutCancel(ctx), orgID, cp.ID)
		return Thread{}, err
	}
	return s.GetThread(ctx, orgID, cp.ID)
}

func (s *Service) copyCheckpoints(ctx context.Context, orgID, from, to string) error {
	before := ""
	for {
		list, err := s.Store.ListCheckpoints(ctx, orgID, from, before, copyPage)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return nil
		}
		page := make([]store.Checkpoint, len(list))
		for i, cp := range list {
			cp.ThreadID, cp.RunID = to, "" // the copy has none of the source's runs
			page[len(list)-1-i] = cp
		}
		if err := s.Store.PutCheckpoints(ctx, orgID, page); err != nil {
			return err
		}
		if len(list) < copyPage {
			return nil
		}
		before = list[len(list)-1].ID
	}
}

// ThreadPrune is POST /threads/prune.
type ThreadPrune struct {
	ThreadIDs []string `json:"thread_ids"`
	Strategy  *string  `json:"strategy"`
}

// Pruned is the answer of a prune.
type Pruned struct {
	PrunedCount int `json:"pruned_count"`
}

// maxPrune bounds the threads one prune request names.
const maxPrune = 1000

// PruneThreads deletes the named threads (strategy delete: with their runs
// and checkpoints) or keeps only their latest checkpoint (keep_latest).
// Threads that do not exist (or are another organization's) are not
// counted; the answer is how many were pruned.
func (s *Service) PruneThreads(ctx context.Context, orgID string, in ThreadPrune) (Pruned, error) {
	var c fail.Checks
	c.Add(in.ThreadIDs == nil, "thread_ids", "is required")
	c.Add(len(in.ThreadIDs) > maxPrune, "thread_ids", "must name at most %d threads, got %d", maxPrune, len(in.ThreadIDs))
	for i, id := range in.ThreadIDs {
		if _, err := uuid.Parse(id); err != nil {
			c.Add(true, "thread_ids", "item %d: Invalid thread ID: must be a UUID", i)
			break
		}
	}
	strategy := deref(in.Strategy, "delete")
	c.Add(strategy != "delete" && strategy != "keep_latest", "strategy", "Invalid strategy: %s. Expected 'delete' or 'keep_latest'.", strategy)
	if err := c.Err(); err != nil {
		return Pruned{}, err
	}
	pruned := 0
	seen := map[string]bool{}
	for _, id := range in.ThreadIDs {
		id = strings.ToLower(id)
		if seen[id] {
			continue
		}
		seen[id] = true
		var err error
		if strategy == "delete" {
			err = s.deleteThread(ctx, orgID, id)
		} else {
			err = s.Store.PruneCheckpoints(ctx, orgID, id)
		}
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return Pruned{}, err
		}
		pruned++
	}
	return Pruned{PrunedCount: pruned}, nil
}

// maxSuperstepUpdates bounds the updates of one thread creation.
const maxSuperstepUpdates = 1000

// superstepCheckpoints applies a new thread's supersteps, in order, through
// the graph of metadata.graph_id: on the engine each update as LangGraph's
// update_state would (a checkpoint each, source "update"); a foreign graph
// applies them itself (bulk_update_state: a checkpoint per superstep).
func (s *Service) superstepCheckpoints(ctx context.Context, orgID, threadID string, metadata json.RawMessage, steps []Superstep) ([]graph.Checkpoint, error) {
	updates, err := superstepUpdates(steps)
	if err != nil {
		return nil, err
	}
	var meta struct {
		GraphID any `json:"graph_id"`
	}
	_ = json.Unmarshal(metadata, &meta)
	graphID, _ := meta.GraphID.(string)
	if graphID == "" {
		return nil, fail.Invalid("supersteps", "need metadata.graph_id: the graph whose state they update")
	}
	r, err := s.runnableByID(ctx, orgID, graphID, "metadata.graph_id")
	if err != nil {
		return nil, err
	}
	if fg := r.foreign(); fg != nil {
		return foreignSupersteps(ctx, fg, orgID, threadID, updates)
	}
	var out []graph.Checkpoint
	var from *graph.Checkpoint
	i := 0
	for _, step := range updates {
		for _, u := range step {
			cp, err := graph.UpdateState(r.g, from, u.writes, u.asNode)
			if err != nil {
				var ge *graph.Error
				if errors.As(err, &ge) {
					return nil, fail.Invalid("supersteps", "update %d: %s: %s", i, ge.Kind, ge.Message)
				}
				return nil, err
			}
			out = append(out, cp)
			from = &out[len(out)-1]
			i++
		}
	}
	return out, nil
}

// superstepUpdate is one update of a superstep, read: its writes for the
// engine, its raw values for a foreign graph.
type superstepUpdate struct {
	writes graph.Writes
	raw    json.RawMessage
	asNode string
}

// superstepUpdates checks and reads the supersteps' updates, by superstep.
func superstepUpdates(steps []Superstep) ([][]superstepUpdate, error) {
	var c fail.Checks
	total := 0
	out := make([][]superstepUpdate, 0, len(steps))
	for i, st := range steps {
		c.Add(st.Updates == nil, "supersteps", "item %d: updates is required", i)
		var step []superstepUpdate
		for j, u := range st.Updates {
			total++
			field := "supersteps[" + strconv.Itoa(i) + "].updates[" + strconv.Itoa(j) + "]"
			var w graph.Writes
			var raw json.RawMessage
			if len(u.Values) > 0 && string(u.Values) != "null" {
				c.Add(json.Unmarshal(u.Values, &w) != nil, field+".values", "must be an object or a list of [key, value] pairs")
				raw = u.Values
			}
			if u.Command != nil {
				c.Add(len(u.Command.Goto) > 0 && string(u.Command.Goto) != "null", field+".command.goto", "is not supported in supersteps")
				c.Add(len(u.Command.Resume) > 0 && string(u.Command.Resume) != "null", field+".command.resume", "is not supported in supersteps")
				if len(u.Command.Update) > 0 && string(u.Command.Update) != "null" {
					c.Add(json.Unmarshal(u.Command.Update, &w) != nil, field+".command.update", "must be an object or a list of [key, value] pairs")
					raw = u.Command.Update
				}
			}
			step = append(step, superstepUpdate{w, raw, deref(u.AsNode, "")})
		}
		out = append(out, step)
	}
	c.Add(total > maxSuperstepUpdates, "supersteps", "must hold at most %d updates, got %d", maxSuperstepUpdates, total)
	return out, c.Err()
}

// foreignSupersteps has a foreign graph apply the supersteps.
func foreignSupersteps(ctx context.Context, fg ForeignGraph, orgID, threadID string, updates [][]superstepUpdate) ([]graph.Checkpoint, error) {
	bulk, ok := fg.(ForeignSupersteps)
	if !ok {
		return nil, fail.Invalid("supersteps", "are not supported for this graph (use update_state after creating the thread)")
	}
	in := ForeignBulkUpdate{OrgID: orgID, ThreadID: threadID}
	for _, step := range updates {
		var us []ForeignStateUpdate
		for _, u := range step {
			us = append(us, ForeignStateUpdate{Values: u.raw, AsNode: u.asNode})
		}
		in.Supersteps = append(in.Supersteps, us)
	}
	return bulk.BulkUpdateState(ctx, in)
}

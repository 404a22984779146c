package runs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// ForeignGraph is a deployed graph that a language runtime executes instead
// of the engine: a LangGraph Python app's graph (internal/pyapp). The run
// keeps everything else — the thread, the lease, the multitask rules, the
// stream and every checkpoint, which the runtime hands back to be stored
// like the engine's (graph.Checkpoint, its Native field holding the
// runtime's own).
type ForeignGraph interface {
	// Run executes the graph once from in.From (nil: a new thread). It
	// passes each checkpoint to put, in order (a checkpoint that changes,
	// as pending writes are added to it, comes again with the same id), and
	// each stream event to emit. It returns the outcome and the last
	// checkpoint; an error means the runtime could not be used (the run
	// resumes later), a failure of the graph is an outcome.
	Run(ctx context.Context, in ForeignRun, put func(context.Context, graph.Checkpoint) error, emit func(ForeignEvent)) (graph.Outcome, *graph.Checkpoint, error)
	// UpdateState writes values as asNode would have on from (nil: the
	// thread has no checkpoint yet), with the graph's reducers, and returns
	// the new checkpoint.
	UpdateState(ctx context.Context, in ForeignUpdate) (graph.Checkpoint, error)
	// Info draws the graph (xray: false, true or a depth) and answers its schemas.
	Info(ctx context.Context, xray any) (graph.Info, GraphSchemas, error)
}

// ForeignSupersteps is a foreign graph that applies a new thread's
// supersteps itself (LangGraph's bulk_update_state: one checkpoint per
// superstep, its updates applied together).
type ForeignSupersteps interface {
	BulkUpdateState(ctx context.Context, in ForeignBulkUpdate) ([]graph.Checkpoint, error)
}

// ForeignBulkUpdate is a new thread's supersteps, each a list of updates.
type ForeignBulkUpdate struct {
	OrgID, ThreadID string
	Supersteps      [][]ForeignStateUpdate
}

// ForeignStateUpdate is one update of a superstep: values as AsNode wrote them.
type ForeignStateUpdate struct {
	Values json.RawMessage `json:"values"`
	AsNode string          `json:"as_node,omitempty"`
}

// ForeignSubgraphs is a foreign graph that answers its subgraphs' schemas
// (LangGraph's get_subgraphs): by namespace, node names joined by "|".
type ForeignSubgraphs interface {
	Subgraphs(ctx context.Context, namespace string, recurse bool) (map[string]SubgraphSchemas, error)
}

// ForeignState is a foreign graph that answers the states of the
// subgraphs a checkpoint's tasks run (LangGraph's get_state with
// subgraphs): by task id, each with its own tasks' subgraph states.
type ForeignState interface {
	SubgraphStates(ctx context.Context, in ForeignStateQuery) (map[string]ForeignSubgraphState, error)
}

// ForeignStateQuery names the checkpoint whose subgraph states are asked.
type ForeignStateQuery struct {
	OrgID, ThreadID string
	At              graph.Checkpoint
}

// ForeignSubgraphState is the state of the subgraph one task runs.
type ForeignSubgraphState struct {
	Checkpoint graph.Checkpoint
	Tasks      map[string]ForeignSubgraphState // by task id
}

// ForeignRun is one execution of a foreign graph.
type ForeignRun struct {
	OrgID, ThreadID, RunID, AssistantID, GraphID string
	Input                                        json.RawMessage // the run's input, or nil
	Command                                      json.RawMessage // the run's command, or nil
	From                                         *graph.Checkpoint
	// CheckpointID is set when the run starts from a checkpoint the client
	// named (a fork); Superseded when that is not the thread's latest.
	CheckpointID string
	Superseded   bool
	Config       map[string]any
	Context      json.RawMessage
	// Metadata is the run's metadata (a JSON object): where a graph may
	// find the run's user (pyapp.RunUser).
	Metadata json.RawMessage
	// StreamMode are LangGraph's modes the run's stream needs.
	StreamMode      []string
	Subgraphs       bool
	InterruptBefore []string
	InterruptAfter  []string
	Durability      string
	RecursionLimit  int
	// Attempt counts the run's executions (1, then 2 after a crash).
	Attempt int
	// YieldAt, when set, is the end of the run-worker step's budget: a
	// graph whose call yielded (a runtime's own budget, which it continues
	// in another call) past YieldAt stops there with ErrForeignYield and
	// its last checkpoint, and the next step continues the run from it.
	// Zero: the graph runs to its end in this call.
	YieldAt time.Time
}

// ErrForeignYield is a foreign graph that stopped at ForeignRun.YieldAt
// on a checkpoint (it returns the checkpoint with it): not a failure.
var ErrForeignYield = errors.New("the step's budget is used up: the run continues in the next step")

// ForeignUpdate is a state update of a foreign graph's thread.
type ForeignUpdate struct {
	OrgID, ThreadID string
	From            *graph.Checkpoint
	// CheckpointID is set when the client named the checkpoint to update
	// from (a fork), as it is in upstream's update config.
	CheckpointID string
	Values       json.RawMessage
	AsNode       string
}

// ForeignEvent is one event of LangGraph's stream: its mode, the
// namespace of the subgraph it comes from, and the mode's payload.
type ForeignEvent struct {
	Mode string
	NS   []string
	Data json.RawMessage
}

// foreignModes are LangGraph's stream modes for a run's API modes (events
// has no LangGraph counterpart here: it is not streamed for such graphs).
func foreignModes(api []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range api {
		if m == modeMessagesTuple {
			m = modeMessages
		}
		if m == modeEvents || seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, m)
	}
	return out
}

// runForeign executes a foreign graph's run: from the checkpoint the run
// starts from, storing what the runtime reports through the run's sink.
// With a non-zero yieldAt the graph may stop at a checkpoint past it (a
// call that yielded: ErrForeignYield), which is then stored whatever the
// durability, and the run ends the step with errYield, as an engine run
// does.
func (s *Service) runForeign(ctx context.Context, run store.Run, kw kwargs, graphID string, fg ForeignGraph, stream *streamer, yieldAt time.Time) (graph.Outcome, *graph.Checkpoint, error) {
	from, resumed, err := s.startingPoint(ctx, run, kw)
	if err != nil {
		return failedOutcome(graph.KindValue, err.Error()), nil, nil
	}
	sink, put := s.streamSink(ctx, run, kw.Durability, from, stream)
	in := ForeignRun{OrgID: run.OrgID, ThreadID: run.ThreadID, RunID: run.ID, AssistantID: run.AssistantID, GraphID: graphID,
		From: from, Config: kw.Config, Context: kw.Context, Metadata: run.Metadata, StreamMode: foreignModes(kw.StreamMode), Subgraphs: kw.Subgraphs,
		InterruptBefore: kw.InterruptBefore, InterruptAfter: kw.InterruptAfter, Durability: kw.Durability,
		RecursionLimit: kw.RecursionLimit, Attempt: run.Attempt, YieldAt: yieldAt}
	switch {
	case resumed:
		// The run's own work, after a crash: LangGraph continues the
		// pending step of its last checkpoint (no input).
	case kw.Command != nil:
		in.Command = mustJSON(kw.Command)
	case len(kw.Input) > 0 && string(kw.Input) != "null":
		in.Input = kw.Input
	}
	if !resumed && kw.CheckpointID != "" && from != nil {
		in.CheckpointID = from.ID
		if latest, err := s.Store.LatestCheckpoint(ctx, run.OrgID, run.ThreadID); err == nil && latest.ID != from.ID {
			in.Superseded = true
		}
	}
	out, cp, err := fg.Run(ctx, in, put, stream.foreign)
	if errors.Is(err, ErrForeignYield) {
		if cp == nil {
			err = errors.New("the foreign graph stopped at the step's budget without a checkpoint")
		} else if kerr := sink.keep(ctx, *cp); kerr != nil {
			err = kerr
		} else {
			err = errYield
		}
	}
	if ferr := sink.flush(context.WithoutCancel(ctx)); ferr != nil && (err == nil || errors.Is(err, errYield)) {
		err = ferr // a yield needs its checkpoint stored
	}
	if serr := stream.failed(); err == nil {
		err = serr
	}
	if fail.KindOf(err) == fail.KindQuota {
		return failedOutcome(graph.KindLimit, fail.MessageOf(err)), cp, nil
	}
	if errors.Is(err, errYield) {
		return out, cp, err
	}
	if err != nil && ctx.Err() != nil {
		err = nil // reported through the context's cause
	}
	return out, cp, err
}

// foreign reports one of LangGraph's stream events in the run's modes.
func (st *streamer) foreign(e ForeignEvent) {
	if len(e.NS) > 0 && !st.kw.Subgraphs {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil {
		return
	}
	var out []StreamEvent
	switch e.Mode {
	case modeMessages:
		var pair []json.RawMessage
		if json.Unmarshal(e.Data, &pair) != nil || len(pair) != 2 {
			return
		}
		if st.modes[modeMessagesTuple] {
			out = append(out, rawEvent("messages", e.NS, e.Data))
		}
		if st.modes[modeMessages] {
			out = st.foreignMessage(out, pair)
		}
		st.sendChunks(out)
		return
	default:
		if st.modes[e.Mode] {
			out = append(out, rawEvent(e.Mode, e.NS, e.Data))
		}
	}
	st.send(out)
}

// foreignMessage is the Python server's messages mode for one of
// LangGraph's (message, metadata) pairs: metadata once per message, then
// the message so far (a chunk added to the ones before), or the whole
// message when it did not come in chunks.
func (st *streamer) foreignMessage(out []StreamEvent, pair []json.RawMessage) []StreamEvent {
	var msg, meta map[string]any
	if decodeNumbers(pair[0], &msg) != nil || decodeNumbers(pair[1], &meta) != nil || msg == nil {
		return out
	}
	id, _ := msg["id"].(string)
	if !st.described[id] {
		st.described[id] = true
		out = st.add(out, "messages/metadata", nil, map[string]any{id: map[string]any{"metadata": meta}})
	}
	if typ, _ := msg["type"].(string); strings.HasSuffix(typ, "Chunk") {
		sum := graph.AddMessageChunks(st.partial[id], msg)
		st.partial[id] = sum
		return st.add(out, "messages/partial", nil, []any{graph.ChunkMessage(sum)})
	}
	delete(st.partial, id)
	return st.add(out, "messages/complete", nil, []any{msg})
}

func rawEvent(mode string, ns []string, data json.RawMessage) StreamEvent {
	name := mode
	if len(ns) > 0 {
		name += "|" + strings.Join(ns, "|")
	}
	return StreamEvent{ID: -1, Event: name, Data: data}
}

func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytesReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

package graph

import (
	"context"
	"encoding/json"
	"slices"
)

// DefaultRecursionLimit is the number of super-steps a run may execute when
// Options.RecursionLimit is unset (LangGraph's long-standing default).
const DefaultRecursionLimit = 25

// Options are a run's settings; pass the same ones to Begin and every Step.
type Options struct {
	// RecursionLimit caps the super-steps a run executes (applying the
	// input does not count); 0 means DefaultRecursionLimit.
	RecursionLimit int `json:"recursion_limit,omitempty"`
	// InterruptBefore / InterruptAfter stop the run before / after these
	// nodes run ("*": any node).
	InterruptBefore Nodes `json:"interrupt_before,omitempty"`
	InterruptAfter  Nodes `json:"interrupt_after,omitempty"`
	// Context is handed to nodes as Runtime.Context.
	Context map[string]any `json:"context,omitempty"`
	// Metadata is the run's metadata (the caller's, with the platform's
	// assistant_id), handed to nodes as Runtime.Metadata: nodes read who
	// the run is for there when the context does not say. It is the run
	// record's, not a setting, so it is never encoded.
	Metadata map[string]any `json:"-"`
	// Limits bound the run's work (see Limits); the zero value bounds
	// nothing.
	Limits Limits `json:"-"`

	// shared is the account of the run a subgraph run belongs to (see
	// Runtime.SubgraphOptions); zero for a run of its own.
	shared account

	// Observe, when set, receives the run's events as they happen (see
	// Event); it is not part of a run's settings, so it is never encoded.
	Observe Observer `json:"-"`

	// Pending, when set, is called while a super-step of several tasks
	// runs, each time one of them completes and others have not yet: with
	// the checkpoint the step started from (same ID), recording every task
	// completed so far (Task.Result). Storing it in place of that
	// checkpoint is LangGraph's pending writes: a step cut short (its
	// process crashed, or ran into its time limit) and replayed from it
	// runs only the tasks that had not completed, so their model calls and
	// side effects are not repeated. Calls are one at a time; the step
	// waits for them. Subgraph runs do not inherit it.
	Pending func(Checkpoint) `json:"-"`

	namespace []string // set by Runtime.Subgraph
}

func (o Options) limit() int {
	if o.RecursionLimit == 0 {
		return DefaultRecursionLimit
	}
	return o.RecursionLimit
}

// Nodes selects nodes by name; All ("*") selects every node.
type Nodes []string

// All selects every node.
var All = Nodes{"*"}

func (n Nodes) match(node string) bool {
	if node == Start {
		return false
	}
	return slices.Contains(n, "*") || slices.Contains(n, node)
}

// UnmarshalJSON accepts "*" or a list of node names, as the API does.
func (n *Nodes) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*n = Nodes{s}
		return nil
	}
	var list []string
	err := json.Unmarshal(b, &list)
	*n = list
	return err
}

// CheckOptions reports options the graph cannot honour (a ValueError), so
// the API can reject them before a run exists.
func (g *Graph) CheckOptions(o Options) error {
	if e := g.checkOptions(o); e != nil {
		return e
	}
	return nil
}

func (g *Graph) checkOptions(o Options) *Error {
	if o.RecursionLimit < 0 {
		return Errorf(KindValue, "recursion_limit must be positive, got %d", o.RecursionLimit)
	}
	if e := g.checkNodes("interrupt_before", o.InterruptBefore); e != nil {
		return e
	}
	return g.checkNodes("interrupt_after", o.InterruptAfter)
}

func (g *Graph) checkNodes(field string, nodes Nodes) *Error {
	for _, n := range nodes {
		if _, ok := g.nodes[n]; !ok && n != "*" {
			return Errorf(KindValue, "%s: graph %q has no node %q", field, g.name, n)
		}
	}
	return nil
}

// Status is where a run stands after Begin or Step.
type Status string

const (
	// Running: call Step again.
	Running Status = "running"
	// Done: no node is left to run.
	Done Status = "done"
	// Interrupted: stopped at a static or dynamic interrupt; a later run
	// resumes it (nil input, or a Command).
	Interrupted Status = "interrupted"
	// Failed: Outcome.Error says why; a later run with nil input retries the
	// failed tasks.
	Failed Status = "error"
)

// Outcome reports what Begin or Step did.
type Outcome struct {
	Status Status `json:"status"`
	// Interrupts are the pending dynamic interrupts (none for a static one).
	Interrupts []Interrupt `json:"interrupts,omitempty"`
	Error      *Error      `json:"error,omitempty"`
	// Changed says the returned checkpoint differs from the one passed in
	// and must be persisted: as a new checkpoint when its ID is new, else as
	// a replacement of the stored one.
	Changed bool `json:"changed"`
}

func failed(e *Error, changed bool) Outcome {
	return Outcome{Status: Failed, Error: e, Changed: changed}
}

// Sink receives every checkpoint a run produces or changes, in order, as soon
// as it exists; a Sink that stores synchronously gives "sync" durability, one
// that buffers gives "async" or "exit". A checkpoint ID it has seen before
// comes back when a step recorded progress on it (interrupts, resume values,
// completed tasks): it replaces the earlier copy. An error from the sink stops
// the run.
type Sink func(ctx context.Context, cp Checkpoint) error

// Run executes a run to its end: Begin, then Step until the outcome is not
// Running, handing each changed checkpoint to sink (which may be nil) and
// then, as an EventCheckpoint, to opts.Observe. from
// is the thread's latest checkpoint (nil for a new thread) or an older one to
// fork from; input is a state object, a Command, or nil to resume. The error
// is only ever ctx's or the sink's: failures of the run itself are in the
// outcome.
func Run(ctx context.Context, g *Graph, from *Checkpoint, input any, opts Options, sink Sink) (Checkpoint, Outcome, error) {
	cp, out := Begin(g, from, input, opts)
	return loop(ctx, g, cp, out, opts, sink)
}

// Continue carries on a run from its own latest checkpoint, after the
// process executing it stopped or it yielded: it steps on from cp as Run
// would have, with the run's counts (its recursion limit, its node
// executions) going on from where they were. Run with nil input, by
// contrast, starts a new run on cp's pending tasks, counting from zero, so a
// run continued that way after every yield or crash would never meet its
// limits. cp is not handed to sink again: it is stored already.
func Continue(ctx context.Context, g *Graph, cp Checkpoint, opts Options, sink Sink) (Checkpoint, Outcome, error) {
	if e := g.checkCheckpoint(cp); e != nil {
		return cp, failed(e, false), nil
	}
	if e := g.checkOptions(opts); e != nil {
		return cp, failed(e, false), nil
	}
	return loop(ctx, g, cp, Outcome{Status: Running}, opts, sink)
}

// loop steps from cp (whose outcome is out) until the outcome is not Running.
func loop(ctx context.Context, g *Graph, cp Checkpoint, out Outcome, opts Options, sink Sink) (Checkpoint, Outcome, error) {
	for {
		if out.Changed && sink != nil {
			if err := sink(ctx, cp); err != nil {
				return cp, out, err
			}
		}
		if out.Changed {
			opts.observe(Event{Kind: EventCheckpoint, Step: cp.Metadata.Step, Checkpoint: cp, Outcome: out})
		}
		if out.Status != Running {
			return cp, out, nil
		}
		var err error
		if cp, out, err = Step(ctx, g, cp, opts); err != nil {
			return cp, out, err
		}
	}
}

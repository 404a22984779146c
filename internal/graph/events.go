package graph

// Observing a run. A caller that wants to follow a run as it happens (the
// streaming API) sets Options.Observe; the engine then reports, in order,
// what each super-step does: the tasks about to run, what each task
// produced, and every checkpoint the run makes or changes. Nodes add their
// own events (Runtime.Emit), and a node that runs a graph of its own (a
// subgraph) passes the observer on with Runtime.SubgraphOptions (which also
// carries the run's limits and account) or Runtime.Subgraph, so the child's
// events arrive too, under the node's namespace. The engine only reports:
// what is streamed, in which shape, is the observer's business.

// EventKind says what an Event reports.
type EventKind string

const (
	// EventCheckpoint: Checkpoint was made or changed (what a Sink gets),
	// with the Outcome of the Begin or Step that made it. It is reported
	// after the Sink accepted the checkpoint.
	EventCheckpoint EventKind = "checkpoint"
	// EventTaskStart: Task is about to run on Values (the state its node
	// gets), in the step Step.
	EventTaskStart EventKind = "task_start"
	// EventTaskEnd: Task ran; its Result, Interrupts or Error say how it
	// went, Values is the state it ran on. Cached marks a task whose result
	// was recorded by an earlier attempt of the step and is reused, not
	// run again.
	EventTaskEnd EventKind = "task_end"
	// EventCustom: the node of Task emitted Data (Runtime.Emit).
	EventCustom EventKind = "custom"
)

// Event is one thing a run did. Its values are the engine's own: an
// observer must not change them.
type Event struct {
	Kind EventKind
	// Namespace locates the graph that produced the event: empty for the
	// run's graph, one "node:task_id" element per subgraph level below it
	// (LangGraph's checkpoint namespace).
	Namespace []string
	// Step is the super-step: the checkpoint's for EventCheckpoint, the one
	// being executed for task events.
	Step       int
	Checkpoint Checkpoint
	Outcome    Outcome
	Task       Task
	Values     map[string]any
	Cached     bool
	Data       any
}

// Observer receives a run's events. It is called from the goroutine that
// drives the run and, for Runtime.Emit and subgraphs, from the goroutines
// of concurrent nodes: it must be safe for concurrent use, and quick (the
// run waits for it).
type Observer func(Event)

// observe reports e when the run is observed.
func (o Options) observe(e Event) {
	if o.Observe == nil {
		return
	}
	e.Namespace = o.namespace
	o.Observe(e)
}

// Emit reports data as a custom event of the running task (LangGraph's
// stream writer, the "custom" stream mode). It does nothing when the run is
// not observed. data must be a JSON value; it is normalized first.
func (rt *Runtime) Emit(data any) error {
	if rt.opts.Observe == nil {
		return nil
	}
	v, err := normalize(data)
	if err != nil {
		return Errorf(KindValue, "node %q: the custom event is not JSON: %v", rt.Node, err)
	}
	rt.opts.observe(Event{Kind: EventCustom, Step: rt.Step, Task: Task{ID: rt.TaskID, Name: rt.Node}, Data: v})
	return nil
}

// Subgraph returns the options a node passes to the runs of a graph it
// executes as part of its task: o, observed by the same observer under
// the task's namespace, so the child's events reach the run's observer.
func (rt *Runtime) Subgraph(o Options) Options {
	o.Observe = rt.opts.Observe
	o.namespace = append(append([]string(nil), rt.opts.namespace...), rt.Node+":"+rt.TaskID)
	return o
}

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
	// EventMessageChunk: the node of Task produced a piece of a chat
	// message it is writing (a chat model's token chunk), Data
	// (Runtime.EmitMessageChunk). The chunks of one message share its id,
	// which the message the node writes in the end has too.
	EventMessageChunk EventKind = "message_chunk"
	// EventCallStart and EventCallEnd: the node of Task started or ended a
	// call it makes on the run's behalf (a chat model, a tool), described
	// by Call (Runtime.StartCall, Runtime.EndCall): LangChain's nested
	// runs, which the events stream mode shows.
	EventCallStart EventKind = "call_start"
	EventCallEnd   EventKind = "call_end"
)

// Call is a call a node makes on the run's behalf, as EventCallStart and
// EventCallEnd report it. Its values are JSON values.
type Call struct {
	// ID identifies the call within the run (LangChain's run id).
	ID string
	// Type is what is called: "chat_model" or "tool".
	Type string
	// Name is the callee's name (a model's class, a tool's name).
	Name string
	// Input is what the callee was given; Output (EventCallEnd) what it
	// answered, nil when it failed.
	Input  any
	Output any
	// Metadata is added to the node's metadata for the call (a model's
	// ls_provider, ls_model_name, ...).
	Metadata map[string]any
	// ToolCallID is, for a tool, the id of the model's tool call it
	// answers (what the thread event protocol's tools channel names).
	ToolCallID string
}

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
	Call       *Call
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

// Observed says whether the run's events are reported: a node may skip
// preparing events no one receives.
func (rt *Runtime) Observed() bool { return rt.opts.Observe != nil }

// EmitMessageChunk reports chunk, a piece of a chat message the node is
// producing (a LangChain AIMessageChunk: type "AIMessageChunk", the
// message's id, the content and tool call chunks of this piece), for the
// messages stream modes. It does nothing when the run is not observed.
// chunk must be a JSON value; it is normalized first.
func (rt *Runtime) EmitMessageChunk(chunk map[string]any) error {
	if rt.opts.Observe == nil {
		return nil
	}
	v, err := normalize(chunk)
	if err != nil {
		return Errorf(KindValue, "node %q: the message chunk is not JSON: %v", rt.Node, err)
	}
	rt.opts.observe(Event{Kind: EventMessageChunk, Step: rt.Step, Task: Task{ID: rt.TaskID, Name: rt.Node}, Data: v})
	return nil
}

// StartCall reports that the node starts c, EndCall that c ended (with
// c.Output set, or nil when it failed). They do nothing when the run is not
// observed. c's values must be JSON values; they are normalized first.
func (rt *Runtime) StartCall(c Call) error { return rt.reportCall(EventCallStart, c) }

// EndCall: see StartCall.
func (rt *Runtime) EndCall(c Call) error { return rt.reportCall(EventCallEnd, c) }

func (rt *Runtime) reportCall(kind EventKind, c Call) error {
	if rt.opts.Observe == nil {
		return nil
	}
	var err error
	if c.Input, err = normalize(c.Input); err == nil {
		c.Output, err = normalize(c.Output)
	}
	if err == nil && c.Metadata != nil {
		var m any
		if m, err = normalize(c.Metadata); err == nil {
			c.Metadata, _ = m.(map[string]any)
		}
	}
	if err != nil {
		return Errorf(KindValue, "node %q: the call %q is not JSON: %v", rt.Node, c.Name, err)
	}
	rt.opts.observe(Event{Kind: kind, Step: rt.Step, Task: Task{ID: rt.TaskID, Name: rt.Node}, Call: &c})
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

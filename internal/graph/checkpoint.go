package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// FormatVersion is the version of the checkpoint JSON shape ("v").
const FormatVersion = 1

// Checkpoint sources, as in LangGraph's checkpoint metadata.
const (
	SourceInput  = "input"  // a run's input (or input command) was applied
	SourceLoop   = "loop"   // a super-step completed
	SourceUpdate = "update" // UpdateState edited the state
)

// Checkpoint is the complete execution state between two super-steps: the
// state values, the tasks of the next step (with any progress a partial step
// made on them) and the run-control marks the engine needs to continue. It is
// a plain value that round-trips through encoding/json unchanged; treat it as
// immutable.
//
// A checkpoint's ID is a time-ordered UUIDv7. When a step stops part-way (an
// interrupt, a node error) or a run resumes, the engine returns the same
// checkpoint (same ID) with progress recorded on its tasks: a store should
// replace the stored copy, exactly like LangGraph's pending writes.
type Checkpoint struct {
	V         int            `json:"v"`
	ID        string         `json:"id"`
	ParentID  string         `json:"parent_id,omitempty"`
	CreatedAt time.Time      `json:"created_at"`
	Values    map[string]any `json:"values"`
	// Next names the tasks still to run in the next super-step (tasks that
	// completed in a partial step are not listed): ThreadState.next.
	Next []string `json:"next"`
	// Tasks are all tasks of the next super-step, sorted by node name.
	Tasks    []Task   `json:"tasks"`
	Metadata Metadata `json:"metadata"`
	// RunStartStep is the step of the first counted super-step of the run
	// that is driving this checkpoint; the recursion limit counts from it.
	RunStartStep int `json:"run_start_step"`
	// RunExecutions counts the node executions of the run driving this
	// checkpoint (subgraph runs' included), for Limits.MaxNodeExecutions.
	RunExecutions int `json:"run_executions,omitempty"`
	// BreakpointStep is the step at which a static interrupt last fired or a
	// run last resumed: static interrupts do not fire again at that step,
	// which is how a resumed run moves past its breakpoint.
	BreakpointStep *int `json:"breakpoint_step,omitempty"`
	// Native is the checkpoint of a graph that another runtime executes (a
	// LangGraph Python app's: internal/pyapp), as that runtime restores it.
	// The engine never reads it; the checkpoint's other fields describe the
	// same state for the API (values, next, tasks, metadata).
	Native json.RawMessage `json:"langgraph,omitempty"`

	// sizes are the JSON sizes of Values' channels measured so far
	// (statesize.go); not part of the checkpoint's JSON.
	sizes channelSizes
}

// Metadata is LangGraph's checkpoint metadata.
type Metadata struct {
	Source string `json:"source"`
	Step   int    `json:"step"`
	// Writes maps each node that wrote in the step to its update.
	Writes map[string]any `json:"writes"`
	// Parents is always empty: there are no subgraphs.
	Parents map[string]any `json:"parents"`
	// Extra is metadata a client added to this checkpoint afterwards
	// (PATCH /threads/{id}/state); a child checkpoint does not inherit it.
	Extra map[string]any `json:"extra,omitempty"`
}

// Task is one node scheduled for the next super-step.
type Task struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Result is set once the task completed while the step as a whole
	// could not (another task interrupted or failed); it is reused, not rerun.
	Result *TaskResult `json:"result,omitempty"`
	// Interrupts holds the task's pending dynamic interrupt.
	Interrupts []Interrupt `json:"interrupts,omitempty"`
	// Resume holds the values for the task's interrupts, by call index.
	Resume []any `json:"resume,omitempty"`
	// Error is the task's failure in the last attempt.
	Error *Error `json:"error,omitempty"`
	// Path is the task's path as another runtime reports it (a LangGraph
	// Python app's: ["__pregel_push", 0, false] for a Send); the engine
	// leaves it empty and never reads it.
	Path []any `json:"path,omitempty"`
	// CheckpointNS is the namespace of the subgraph the task runs, as
	// another runtime reports it ("node:task id"); the engine leaves it empty.
	CheckpointNS string `json:"checkpoint_ns,omitempty"`
}

// TaskResult is what a completed task contributes to its step.
type TaskResult struct {
	Writes Writes `json:"writes"`
	// Goto lists the nodes the task triggers: its edges, its routers' choices
	// and its command's goto (END removed), sorted.
	Goto []string `json:"goto"`
}

// Interrupt is a pending dynamic interrupt, in the API's shape.
type Interrupt struct {
	ID    string `json:"id"`
	Value any    `json:"value"`
}

// UnmarshalJSON decodes with json.Number for numbers, which is what makes the
// round trip lossless.
func (c *Checkpoint) UnmarshalJSON(b []byte) error {
	type plain Checkpoint
	var p plain
	if err := decodeJSON(b, &p); err != nil {
		return err
	}
	*c = Checkpoint(p)
	return nil
}

// PendingInterrupts lists the pending dynamic interrupts in task order.
func (c Checkpoint) PendingInterrupts() []Interrupt {
	var out []Interrupt
	for _, t := range c.Tasks {
		out = append(out, t.Interrupts...)
	}
	return out
}

// InterruptsByTask maps task ids to their pending interrupts (the shape of a
// thread's "interrupts").
func (c Checkpoint) InterruptsByTask() map[string][]Interrupt {
	out := map[string][]Interrupt{}
	for _, t := range c.Tasks {
		if len(t.Interrupts) > 0 {
			out[t.ID] = append([]Interrupt(nil), t.Interrupts...)
		}
	}
	return out
}

// clone copies everything the engine may change, so a step never alters the
// checkpoint it was given. The values are copied at the top level only, as
// for a child: the engine replaces a channel's value, never changes one in
// place (nodes and routers work on copies: stateOf), so a deep copy of the
// whole state at every step would only make a step's cost grow with it.
func (c Checkpoint) clone() Checkpoint {
	out := c
	out.Values = maps.Clone(c.Values)
	out.sizes = c.sizes.copySizes()
	out.Next = append([]string{}, c.Next...)
	out.Tasks = make([]Task, len(c.Tasks))
	for i, t := range c.Tasks {
		t.Interrupts = append([]Interrupt(nil), t.Interrupts...)
		t.Resume = append([]any(nil), t.Resume...)
		out.Tasks[i] = t
	}
	if c.BreakpointStep != nil {
		out.BreakpointStep = intPtr(*c.BreakpointStep)
	}
	return out
}

// syncNext recomputes Next from the tasks still to run. The __start__ task
// carries its result (the input) from the outset but has not run yet.
func (c *Checkpoint) syncNext() {
	c.Next = []string{}
	for _, t := range c.Tasks {
		if t.Result == nil || t.Name == Start {
			c.Next = append(c.Next, t.Name)
		}
	}
}

// markResumed records that a run continues from c: its breakpoint is passed
// and the recursion limit counts from its next step.
func (c *Checkpoint) markResumed() {
	c.BreakpointStep = intPtr(c.Metadata.Step)
	c.RunStartStep = c.Metadata.Step
	c.RunExecutions = 0
	if len(c.Tasks) == 1 && c.Tasks[0].Name == Start {
		c.RunStartStep++ // applying the input is not counted
	}
}

// child starts the checkpoint that follows c, with c's values. They are
// shared with c key by key: writes are applied by replacing a key's value
// (reducers make a new value, never change the one they fold into), and a
// checkpoint is never changed once made, so a step copies the state's top
// level only — a deep copy of a large state per step is what made a step's
// memory a multiple of the state's.
func (c Checkpoint) child(source string, writes map[string]any) Checkpoint {
	next := c
	next.Values = maps.Clone(c.Values)
	next.sizes = c.sizes.copySizes()
	if next.Values == nil {
		next.Values = map[string]any{}
	}
	if c.BreakpointStep != nil {
		next.BreakpointStep = intPtr(*c.BreakpointStep)
	}
	next.ID = newCheckpointID()
	next.ParentID = c.ID
	next.CreatedAt = time.Now().UTC()
	next.Tasks = []Task{}
	next.Next = []string{}
	next.Metadata = Metadata{Source: source, Step: c.Metadata.Step + 1, Writes: writes, Parents: map[string]any{}}
	return next
}

// newTasks schedules nodes (sorted, unique) on checkpoint c.
func (c *Checkpoint) newTasks(nodes []string) {
	c.Tasks = make([]Task, len(nodes))
	for i, name := range nodes {
		c.Tasks[i] = Task{ID: taskID(c.ID, name), Name: name}
	}
	c.syncNext()
}

func newCheckpointID() string {
	id, err := uuid.NewV7()
	if err != nil { // only if the system's random source fails
		panic(fmt.Sprintf("graph: cannot create a checkpoint id: %v", err))
	}
	return id.String()
}

// taskID is derived from the checkpoint and node so every replay of a step
// (after a crash, or on resume) sees the same task and interrupt ids.
func taskID(checkpointID, node string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(checkpointID+"|"+node)).String()
}

// interruptID identifies a node's index-th interrupt call in a task.
func interruptID(taskID string, index int) string {
	sum := sha256.Sum256([]byte(taskID + "|" + strconv.Itoa(index)))
	return hex.EncodeToString(sum[:16])
}

func intPtr(i int) *int { return &i }

// checkCheckpoint rejects checkpoints this graph cannot continue: another
// format, or tasks for nodes it does not have (say, after a deployment
// renamed a node).
func (g *Graph) checkCheckpoint(cp Checkpoint) *Error {
	if cp.V != FormatVersion {
		return Errorf(KindValue, "checkpoint %q: unsupported format version %d", cp.ID, cp.V)
	}
	if cp.ID == "" {
		return Errorf(KindValue, "checkpoint has no id")
	}
	for i, t := range cp.Tasks {
		_, known := g.nodes[t.Name]
		switch {
		case t.Name == Start && t.Result == nil, t.Name != Start && !known:
			return Errorf(KindValue, "checkpoint %q: graph %q cannot run task %q", cp.ID, g.name, t.Name)
		case i > 0 && cp.Tasks[i-1].Name >= t.Name:
			return Errorf(KindValue, "checkpoint %q: tasks are not sorted by name", cp.ID)
		}
	}
	return nil
}

package graph

import "runtime"

// Runtime is a node's handle on the engine during one task.
type Runtime struct {
	// Node is the running node's name.
	Node string
	// TaskID identifies the task; it is stable across replays of the step.
	TaskID string
	// Step is the super-step being executed.
	Step int
	// Context is the run's context (the assistant's configuration); the
	// node gets its own copy.
	Context map[string]any
	// Metadata is the run's metadata (Options.Metadata); the node gets its
	// own copy.
	Metadata map[string]any

	opts    Options // the run's options: its limits, observer and namespace
	account account // the run's node executions and this run's depth

	resume []any // resume values, by interrupt call index
	calls  int   // Interrupt calls so far
	raised *Interrupt
	failed *Error
}

// Answered says whether the node's next Interrupt returns an answer (the
// run was resumed that far) instead of stopping the node.
func (rt *Runtime) Answered() bool { return rt.calls < len(rt.resume) }

// Interrupt pauses the run for human input. When the run is resumed, the node
// runs again from its start and this call returns the resume value; until
// then it does not return: it stops the node (with runtime.Goexit, so
// deferred calls run) and the engine reports the interrupt as
// {id, value}. A node may interrupt several times; each call is matched to its
// resume value by position.
//
// Like testing.T.FailNow, it must be called from the node's own goroutine.
func (rt *Runtime) Interrupt(value any) any {
	index := rt.calls
	rt.calls++
	if index < len(rt.resume) {
		return cloneValue(rt.resume[index])
	}
	v, err := normalize(value)
	if err != nil {
		rt.failed = Errorf(KindValue, "node %q: the interrupt value is not JSON: %v", rt.Node, err)
	} else {
		rt.raised = &Interrupt{ID: interruptID(rt.TaskID, index), Value: v}
	}
	runtime.Goexit()
	return nil // not reached
}

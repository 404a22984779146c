package graph

import (
	"regexp"
	"sort"
)

// Begin applies a run's input and returns the checkpoint the run's first
// Step continues from. from is the checkpoint to start at: the thread's
// latest, an older one (a fork), or nil for a new thread. input is
//
//   - a state object (map[string]any, or anything that encodes as a JSON
//     object): a new input checkpoint whose __start__ task writes it; tasks
//     pending on from are discarded;
//   - a Command (or *Command): resume values go to pending interrupts, an
//     update and gotos make a new input checkpoint that keeps from's tasks;
//   - nil: continue from's pending tasks (after an interrupt, an error, or a
//     crash).
//
// Continuing (nil or a Command) passes a static breakpoint at from and
// restarts the recursion count there. The outcome is Running unless there is
// nothing to run (Done) or the input is invalid (Failed).
func Begin(g *Graph, from *Checkpoint, input any, opts Options) (Checkpoint, Outcome) {
	base := g.emptyCheckpoint()
	if from != nil {
		if e := g.checkCheckpoint(*from); e != nil {
			return *from, failed(e, false)
		}
		base = from.clone()
	}
	if e := g.checkOptions(opts); e != nil {
		return base, failed(e, false)
	}
	switch in := input.(type) {
	case nil:
		return g.resume(base)
	case *Command:
		if in == nil {
			return g.resume(base)
		}
		return g.command(base, *in, opts)
	case Command:
		return g.command(base, in, opts)
	}
	v, err := normalize(input)
	obj, ok := v.(map[string]any)
	if err != nil || !ok {
		return base, failed(invalidUpdate("Expected an object as input, got %s", jsonType(v)), false)
	}
	return g.input(base, obj, opts)
}

// input makes the input checkpoint: values unchanged, one __start__ task
// that carries the input as its writes.
func (g *Graph) input(base Checkpoint, in map[string]any, opts Options) (Checkpoint, Outcome) {
	writes, e := g.checkWrites(WritesOf(in), opts.Limits.MaxStateBytes, "the input")
	if e != nil {
		return base, failed(e, false)
	}
	res, e := g.taskResult(Start, base.Values, &Command{Update: writes}, 0)
	if e != nil {
		return base, failed(e, false)
	}
	cp := base.child(SourceInput, map[string]any{Start: writes.Map()})
	cp.Tasks = []Task{{ID: taskID(cp.ID, Start), Name: Start, Result: res}}
	cp.syncNext()
	cp.RunStartStep = cp.Metadata.Step + 1
	cp.RunExecutions = 0
	return cp, Outcome{Status: Running, Changed: true}
}

// resume continues base's pending tasks.
func (g *Graph) resume(base Checkpoint) (Checkpoint, Outcome) {
	if base.ID == "" {
		return base, failed(Errorf(KindEmptyInput, "Received no input for %s", Start), false)
	}
	if len(base.Tasks) == 0 {
		return base, Outcome{Status: Done}
	}
	base.markResumed()
	return base, Outcome{Status: Running, Changed: true}
}

// command applies an input command: resume first (interrupt ids belong to
// base's tasks), then update and goto as a new input checkpoint.
func (g *Graph) command(base Checkpoint, cmd Command, opts Options) (Checkpoint, Outcome) {
	cp := base.clone()
	if cmd.Resume != nil {
		resume, err := normalize(cmd.Resume)
		if err != nil {
			return base, failed(invalidUpdate("resume: the value is not JSON: %v", err), false)
		}
		if e := resumeTasks(&cp, resume); e != nil {
			return base, failed(e, false)
		}
	}
	if len(cmd.Update) > 0 || len(cmd.Goto) > 0 {
		var e *Error
		if cp, e = g.applyCommand(cp, cmd, opts.Limits.MaxStateBytes); e != nil {
			return base, failed(e, false)
		}
	}
	if cp.ID == "" {
		return base, failed(Errorf(KindEmptyInput, "Received no input for %s", Start), false)
	}
	if len(cp.Tasks) == 0 {
		return cp, Outcome{Status: Done, Changed: cp.ID != base.ID}
	}
	cp.markResumed()
	return cp, Outcome{Status: Running, Changed: true}
}

// applyCommand makes the checkpoint that applies cmd's update to cp and adds
// its gotos to cp's tasks, which keep their ids (and so their interrupt ids).
func (g *Graph) applyCommand(cp Checkpoint, cmd Command, maxBytes int) (Checkpoint, *Error) {
	writes, e := g.checkWrites(cmd.Update, maxBytes, "the command's update")
	if e != nil {
		return cp, e
	}
	meta := map[string]any{}
	if len(writes) > 0 {
		meta[Start] = writes.Map()
	}
	child := cp.child(SourceInput, meta)
	if e := g.applyTo(&child, writes); e != nil {
		return cp, e
	}
	child.Tasks = cp.Tasks
	for _, name := range uniqueSorted(cmd.Goto) {
		if _, ok := g.nodes[name]; !ok && name != End {
			return cp, invalidUpdate("goto: graph %q has no node %q", g.name, name)
		}
		if name != End && !hasTask(child.Tasks, name) {
			child.Tasks = append(child.Tasks, Task{ID: taskID(child.ID, name), Name: name})
		}
	}
	sort.Slice(child.Tasks, func(i, j int) bool { return child.Tasks[i].Name < child.Tasks[j].Name })
	child.syncNext()
	return child, nil
}

func hasTask(tasks []Task, name string) bool {
	for _, t := range tasks {
		if t.Name == name {
			return true
		}
	}
	return false
}

// interruptIDPattern is the shape of interrupt ids; a resume object whose
// keys all have it is a map from interrupt id to value.
var interruptIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// resumeTasks hands resume values to interrupted tasks of cp: by interrupt id,
// or a single value to the first pending interrupt (in task order). A single
// value with nothing to resume is ignored, as in LangGraph; an unknown id is
// an error, since the caller meant a specific interrupt.
func resumeTasks(cp *Checkpoint, resume any) *Error {
	if byID, ok := resume.(map[string]any); ok && len(byID) > 0 && allIDs(byID) {
		for _, id := range sortedKeys(byID) {
			if !resumeOne(cp, id, byID[id]) {
				return invalidUpdate("resume: no pending interrupt has id %q", id)
			}
		}
		return nil
	}
	for _, t := range cp.Tasks {
		if len(t.Interrupts) > 0 {
			resumeOne(cp, t.Interrupts[0].ID, resume)
			break
		}
	}
	return nil
}

func allIDs(m map[string]any) bool {
	for k := range m {
		if !interruptIDPattern.MatchString(k) {
			return false
		}
	}
	return true
}

// resumeOne answers the pending interrupt id with value.
func resumeOne(cp *Checkpoint, id string, value any) bool {
	for i := range cp.Tasks {
		t := &cp.Tasks[i]
		if len(t.Interrupts) > 0 && t.Interrupts[0].ID == id {
			t.Resume = append(append([]any(nil), t.Resume...), value)
			t.Interrupts = nil
			return true
		}
	}
	return false
}

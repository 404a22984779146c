package graph

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
)

// Step executes one super-step of a run (see Begin): it runs every
// pending task of cp concurrently, merges their writes in a fixed order (node
// name, then write order) and returns the next checkpoint. When the step
// cannot complete (an interrupt, a node error) it returns cp itself, same ID,
// with the progress recorded on its tasks, so the step can be replayed.
//
// Step never changes cp. The error is only ever ctx's: the step was abandoned
// and cp is still the state to continue from.
func Step(ctx context.Context, g *Graph, cp Checkpoint, opts Options) (Checkpoint, Outcome, error) {
	if err := ctx.Err(); err != nil {
		return cp, Outcome{Status: Running}, err
	}
	if e := g.checkOptions(opts); e != nil {
		return cp, failed(e, false), nil
	}
	if e := g.checkCheckpoint(cp); e != nil {
		return cp, failed(e, false), nil
	}
	if len(cp.Tasks) == 0 {
		return cp, Outcome{Status: Done}, nil
	}
	if e := checkLimit(cp, opts.limit()); e != nil {
		return cp, failed(e, false), nil
	}
	if breakpoint(cp, opts.InterruptBefore) {
		next := cp.clone()
		next.BreakpointStep = intPtr(next.Metadata.Step)
		return next, Outcome{Status: Interrupted, Changed: true}, nil
	}
	acct := opts.accountFor(cp)
	g.observeStart(cp, opts)
	runs := g.runTasks(ctx, cp, opts, acct)
	if err := ctx.Err(); err != nil {
		return cp, Outcome{Status: Running}, err
	}
	g.observeEnd(cp, runs, opts)
	next, out := g.finishStep(cp, runs, opts)
	if out.Changed {
		next.RunExecutions = int(acct.executions.Load())
	}
	return next, out, nil
}

// checkLimit counts the step about to run against the recursion limit; the
// step that applies the input is not counted.
func checkLimit(cp Checkpoint, limit int) *Error {
	if len(cp.Tasks) == 1 && cp.Tasks[0].Name == Start {
		return nil
	}
	if cp.Metadata.Step+1-cp.RunStartStep > limit {
		return recursionError(limit)
	}
	return nil
}

// breakpoint says whether a static interrupt stops the run before cp's step:
// a pending task matches and the breakpoint was not already passed there.
func breakpoint(cp Checkpoint, nodes Nodes) bool {
	if cp.BreakpointStep != nil && *cp.BreakpointStep == cp.Metadata.Step {
		return false
	}
	for _, t := range cp.Tasks {
		if t.Result == nil && nodes.match(t.Name) {
			return true
		}
	}
	return false
}

// observeStart reports the tasks of cp's step about to run, and those whose
// result an earlier attempt of the step recorded (they are not run again).
// __start__ only carries the input: it is not a node, and is not reported.
func (g *Graph) observeStart(cp Checkpoint, opts Options) {
	if opts.Observe == nil {
		return
	}
	step := cp.Metadata.Step + 1
	for _, t := range cp.Tasks {
		switch {
		case t.Name == Start:
		case t.Result != nil:
			opts.observe(Event{Kind: EventTaskEnd, Step: step, Task: t, Values: cp.Values, Cached: true})
		default:
			opts.observe(Event{Kind: EventTaskStart, Step: step, Task: t, Values: g.stateOf(cp.Values)})
		}
	}
}

// observeEnd reports what each task run in cp's step produced, in task
// order (so the report does not depend on which task finished first).
func (g *Graph) observeEnd(cp Checkpoint, runs []taskRun, opts Options) {
	if opts.Observe == nil {
		return
	}
	for i, run := range runs {
		t := cp.Tasks[i]
		if t.Result != nil {
			continue
		}
		t.Result, t.Error, t.Interrupts = run.result, run.err, nil
		if run.err != nil {
			t.Result = nil
		} else if run.interrupt != nil {
			t.Result, t.Interrupts = nil, []Interrupt{*run.interrupt}
		}
		opts.observe(Event{Kind: EventTaskEnd, Step: cp.Metadata.Step + 1, Task: t, Values: cp.Values})
	}
}

// taskRun is what one task's execution produced.
type taskRun struct {
	returned  bool // the node function returned
	result    *TaskResult
	interrupt *Interrupt
	err       *Error
}

// runTasks runs cp's pending tasks, one goroutine each; runs[i] belongs to
// cp.Tasks[i] (zero for tasks completed earlier). Each task is counted
// against the run's node executions before it starts (acct); past the
// limit it fails instead, so a fan-out of subgraphs stops as soon as the
// run's budget is spent, not once every branch has run.
func (g *Graph) runTasks(ctx context.Context, cp Checkpoint, opts Options, acct account) []taskRun {
	runs := make([]taskRun, len(cp.Tasks))
	var wg sync.WaitGroup
	pending := g.pendingWrites(cp, opts)
	for i, t := range cp.Tasks {
		if t.Result != nil {
			continue
		}
		if max := opts.Limits.MaxNodeExecutions; !acct.take(max) {
			runs[i] = taskRun{err: executionsError(max)}
			continue
		}
		rt := &Runtime{Node: t.Name, TaskID: t.ID, Step: cp.Metadata.Step + 1,
			Context: cloneMap(opts.Context), Metadata: cloneMap(opts.Metadata), resume: t.Resume, opts: opts, account: acct}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Interrupt ends the goroutine with runtime.Goexit, so the
			// outcome is settled in a deferred call, which also turns a
			// panic into a node error instead of a crashed process.
			defer func() {
				runs[i] = settle(rt, runs[i], recover())
				pending.done(i, runs[i])
			}()
			runs[i] = g.runTask(ctx, cp.Values, rt)
		}()
	}
	wg.Wait()
	return runs
}

// pendingTasks reports the tasks of a step as they complete (Options.Pending).
type pendingTasks struct {
	report func(Checkpoint)
	mu     sync.Mutex
	cp     Checkpoint // the step's checkpoint with the results so far
	left   int        // tasks still running
}

// pendingWrites is nil (reporting nothing) unless opts.Pending is set and
// more than one task of cp will run: a step of one task is recorded by the
// checkpoint that follows it.
func (g *Graph) pendingWrites(cp Checkpoint, opts Options) *pendingTasks {
	if opts.Pending == nil {
		return nil
	}
	left := 0
	for _, t := range cp.Tasks {
		if t.Result == nil {
			left++
		}
	}
	if left < 2 {
		return nil
	}
	return &pendingTasks{report: opts.Pending, cp: cp.clone(), left: left}
}

// done records task i's run; a completed task is reported while others run.
func (p *pendingTasks) done(i int, run taskRun) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.left--
	if run.err != nil || run.interrupt != nil || run.result == nil || p.left == 0 {
		return
	}
	t := &p.cp.Tasks[i]
	t.Result, t.Error, t.Interrupts = run.result, nil, nil
	p.cp.syncNext()
	p.report(p.cp.clone())
}

func (g *Graph) runTask(ctx context.Context, values map[string]any, rt *Runtime) taskRun {
	cmd, err := g.nodes[rt.Node](ctx, g.stateOf(values), rt)
	if err != nil {
		return taskRun{returned: true, err: asError(err)}
	}
	res, e := g.taskResult(rt.Node, values, cmd, rt.opts.Limits.MaxStateBytes)
	return taskRun{returned: true, result: res, err: e}
}

func settle(rt *Runtime, run taskRun, recovered any) taskRun {
	switch {
	case recovered != nil:
		return taskRun{err: Errorf(KindPanic, "node %q panicked: %v", rt.Node, recovered)}
	case rt.failed != nil:
		return taskRun{err: rt.failed}
	case rt.raised != nil:
		return taskRun{interrupt: rt.raised}
	case !run.returned:
		return taskRun{err: Errorf(KindGeneric, "node %q stopped without returning", rt.Node)}
	}
	return run
}

// taskResult checks what node returned and works out where control goes,
// from the state as the node's own writes leave it.
func (g *Graph) taskResult(node string, values map[string]any, cmd *Command, maxBytes int) (*TaskResult, *Error) {
	if cmd == nil {
		cmd = &Command{}
	}
	if cmd.Resume != nil {
		return nil, invalidUpdate("node %q returned a command with resume: resume is only valid as run input", node)
	}
	writes, e := g.checkWrites(cmd.Update, maxBytes, "the update of node "+strconv.Quote(node))
	if e != nil {
		return nil, e
	}
	if node != Start {
		g.identifyMessages(writes)
	}
	// The node's own writes on the state (for its routers, which get a copy
	// of their own): a top-level copy will do, as for a checkpoint's child.
	local := maps.Clone(values)
	if local == nil {
		local = map[string]any{}
	}
	if e := g.applyWrites(local, writes); e != nil {
		return nil, e
	}
	next, e := g.successors(node, local, cmd.Goto)
	if e != nil {
		return nil, e
	}
	return &TaskResult{Writes: writes, Goto: next}, nil
}

// finishStep records the runs on a copy of cp and, when every task has
// completed, advances to the next checkpoint. A node error outranks
// interrupts, and the first error in task order is the one reported.
func (g *Graph) finishStep(cp Checkpoint, runs []taskRun, opts Options) (Checkpoint, Outcome) {
	next := cp.clone()
	var first *Error
	for i, run := range runs {
		t := &next.Tasks[i]
		if t.Result != nil {
			continue
		}
		t.Error, t.Interrupts = run.err, nil
		switch {
		case run.err != nil:
			if first == nil {
				first = run.err
			}
		case run.interrupt != nil:
			t.Interrupts = []Interrupt{*run.interrupt}
		default:
			t.Result = run.result
		}
	}
	next.syncNext()
	if first != nil {
		return next, failed(first, true)
	}
	if pending := next.PendingInterrupts(); len(pending) > 0 {
		return next, Outcome{Status: Interrupted, Interrupts: pending, Changed: true}
	}
	return g.advance(next, opts)
}

// advance merges the completed step of cp into a new checkpoint.
func (g *Graph) advance(cp Checkpoint, opts Options) (Checkpoint, Outcome) {
	var writes Writes
	var next []string
	meta := map[string]any{}
	for _, t := range cp.Tasks {
		writes = append(writes, t.Result.Writes...)
		next = append(next, t.Result.Goto...)
		meta[t.Name] = nil
		if len(t.Result.Writes) > 0 {
			meta[t.Name] = t.Result.Writes.Map()
		}
	}
	// Each task's writes are within the state limit; together they must be
	// too, before they are merged, and so must the state they make.
	maxBytes := opts.Limits.MaxStateBytes
	if maxBytes > 0 {
		if size := writesSize(writes, maxBytes); size > maxBytes {
			return cp, failed(stateSizeError(fmt.Sprintf("the update of step %d", cp.Metadata.Step+1), size, maxBytes), true)
		}
	}
	child := cp.child(SourceLoop, meta)
	if e := g.applyTo(&child, writes); e != nil {
		return cp, failed(e, true)
	}
	if maxBytes > 0 {
		if size := child.stateSize(maxBytes); size > maxBytes {
			return cp, failed(stateSizeError(fmt.Sprintf("the state after step %d", child.Metadata.Step), size, maxBytes), true)
		}
	}
	child.newTasks(uniqueSorted(next))
	if len(child.Tasks) == 0 {
		return child, Outcome{Status: Done, Changed: true}
	}
	if ranAny(cp.Tasks, opts.InterruptAfter) {
		child.BreakpointStep = intPtr(child.Metadata.Step)
		return child, Outcome{Status: Interrupted, Changed: true}
	}
	return child, Outcome{Status: Running, Changed: true}
}

func ranAny(tasks []Task, nodes Nodes) bool {
	for _, t := range tasks {
		if nodes.match(t.Name) {
			return true
		}
	}
	return false
}

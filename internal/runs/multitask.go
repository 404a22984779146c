package runs

import "github.com/stepgraph/stepgraph/internal/store"

// Multitask strategies (multitask_strategy): what a new run does when its
// thread already has a pending or running run.
const (
	multitaskReject    = "reject"
	multitaskEnqueue   = "enqueue"
	multitaskInterrupt = "interrupt"
	multitaskRollback  = "rollback"
)

// multitasks are the strategies a request may name, in the order the
// validation message lists them.
var multitasks = []string{multitaskReject, multitaskEnqueue, multitaskInterrupt, multitaskRollback}

// ifInflight decides a multitask strategy: it maps it onto the mechanism the
// store applies atomically when it adds the run (store.IfInflight and, for
// a cancel, the action the inflight runs get):
//   - reject: the run is refused (store.ErrBusy, answered 409) and nothing
//     is written;
//   - enqueue: the run waits its turn behind the inflight ones;
//   - interrupt: every inflight run is cancelled with interrupt: a pending
//     one ends interrupted at once, a running one is stopped by its worker,
//     its checkpoints kept;
//   - rollback: the same with rollback: the inflight runs are deleted with
//     their checkpoints (a running one once its worker stopped).
//
// Any other strategy (parse admits none) enqueues.
func ifInflight(strategy string) (store.IfInflight, string) {
	switch strategy {
	case multitaskReject:
		return store.InflightReject, ""
	case multitaskInterrupt:
		return store.InflightCancel, store.CancelInterrupt
	case multitaskRollback:
		return store.InflightCancel, store.CancelRollback
	}
	return store.InflightEnqueue, ""
}

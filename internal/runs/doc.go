// Package runs owns assistants, threads and runs: the LangGraph Platform
// semantics of creating a run (assistant resolution, if_not_exists,
// multitask strategies, after_seconds, durability), executing it on the
// graph engine with a lease (so a crashed worker's run resumes from its last
// checkpoint elsewhere), answering runs/wait with the final values,
// "__interrupt__" or "__error__", and streaming runs: the stream modes made
// from what the engine reports (stream.go), the in-memory hub through which
// waiters and streams follow a run (feeds.go), and following a run's or a
// thread's stream with replay from the event log, store.Events (follow.go),
// and, where runs execute in another process (Service.TailEvents: the AWS
// functions), following them by tailing that log (tail.go).
//
// The multitask strategy of a run (reject, enqueue, interrupt, rollback) is
// decided here (multitask.go): it is mapped onto what the store does with
// the thread's inflight runs when it adds the new one (store.IfInflight:
// reject, enqueue, or cancel them with interrupt or rollback).
//
// Limits (limits.go) bound what a run may use — its recursion limit, state
// size, node executions (subgraphs included), subgraph depth, time and
// starts — and quota.go what an organization may store: the store counts it
// (store.Accounting), the quotas are decided here before each write.
//
// Storage is the Store port (store.Assistants, Threads, RunQueue,
// Checkpoints and Accounting). The store applies that choice, and the one-run-per-thread
// and FIFO rules, atomically (one transaction, or one conditional write), so
// they hold across processes. Workers (StartWorkers) claim runs from the
// store: a queued run wakes one at once, and one idle worker is woken every
// poll interval (pollQueue) for what no wake-up announces — another
// process's runs, a NotBefore that came, an expired lease —, waking the
// next while it finds runs; a waiter is woken in-process when the run
// finished here, and polls the store otherwise.
//
// An assistant's graph is a built-in one (Service.Graphs) or one of the
// organization's deployed graphs, through the DeployedGraphs port
// (internal/deployedgraphs implements it): a run records the deployment
// revision it is created on (kwargs.graph_revision) and executes on it to
// the end, whatever is deployed meanwhile. Deployed graphs have default
// assistants too (DeployedAssistantID), and their documents' input schemas
// are checked when a run is created. A deployed graph a language runtime
// executes (a LangGraph app's) is a ForeignGraph; the optional
// ForeignSupersteps, ForeignSubgraphs and ForeignState let it answer a new
// thread's supersteps, its subgraphs' schemas and its subgraphs' states
// itself (LangGraph's bulk_update_state, get_subgraphs, get_state).
package runs

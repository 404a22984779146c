// Package store defines the storage ports of stepgraph: the records it keeps and
// the small interfaces, one per resource, that the use-case packages depend on:
//
//   - Organizations: tenants, their API keys and secret references (auth,
//     webhooks);
//   - Providers: OAuth provider registrations (providers);
//   - Deployments: deployments and their revisions (deployments);
//   - Idempotency: the outcomes of requests sent with an Idempotency-Key
//     (api);
//   - Assistants, Threads, RunQueue (the runs of each thread, their claims
//     and leases) and Checkpoints (runs);
//   - CheckpointStorage: the bytes a thread's checkpoints occupy as the
//     adapter stores them (runs: GET /threads/{thread_id}/storage);
//   - Accounting: what each organization stores, counted in the
//     transactions that change it (runs decides the quotas);
//   - Events: the event log of resumable run streams (runs).
//
// Store embeds them all but Events, which an adapter offers on its own (both
// adapters do; a composition root passes it separately): a server without it
// refuses resumable streams.
// Store is what an adapter implements. Adapters live in
// subpackages (sqlite, the embedded default; dynamo, for AWS) and are chosen
// only in a composition root.
//
// The store knows how records are keyed, ordered, filtered and written
// atomically; it knows nothing about the rules that make a record valid. Those
// live in the use-case packages. Where a rule needs a check and a write in one
// atomic step, the store offers the mechanism and the use case chooses it: AddRun
// applies NewRun.IfInflight, which the runs package derives from a run's
// multitask strategy. Where a record's body is owned by a use case
// (a deployment's configuration, a revision's source), the store keeps it as an
// opaque JSON document (Doc) so adapters never need to change when the rules do.
//
// Every read and write is scoped to an organization (except the worker
// methods of RunQueue, which name a run by its ID alone): a record of another
// organization is reported exactly like a missing one (ErrNotFound).
//
// The contract every adapter must honour is the test suite in storetest.
package store

// Package store defines the storage ports of stepgraph: the records it keeps and
// the small interfaces the use-case packages (providers, deployments, runs)
// depend on. Adapters live in subpackages (sqlite, the embedded default;
// dynamo, for AWS) and are chosen only in a composition root.
//
// The store knows how records are keyed, ordered, filtered and written
// atomically; it knows nothing about the rules that make a record valid. Those
// live in the use-case packages. Where a record's body is owned by a use case
// (a deployment's configuration, a revision's source), the store keeps it as an
// opaque JSON document (Doc) so adapters never need to change when the rules do.
//
// Every read and write is scoped to an organization: a record of another
// organization is reported exactly like a missing one (ErrNotFound).
//
// The contract every adapter must honour is the test suite in storetest.
package store

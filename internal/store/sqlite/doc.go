// Package sqlite is the embedded default adapter of the store ports: one SQLite
// file holding organizations, API keys, providers, deployments, revisions,
// idempotency keys, assistants, threads, runs and checkpoints, through the
// pure-Go driver modernc.org/sqlite (no cgo).
//
// It owns the database schema and its migrations, and the translation between
// rows and store records; it knows nothing about what makes a record valid.
// Open returns a *DB that implements store.Store and store.Events; the
// contracts it honours are the suites in package storetest (Run,
// EventsContract and ThreadEventsContract), run by this package's tests.
//
// # Files
//
//   - sqlite.go: Open, Close, IntegrityCheck, the connection string, the
//     transaction helper and the mapping of driver errors to store errors
//     and storage failures.
//   - migrate.go: the migration runner.
//   - migrations/NNNN_name.sql: the schema, embedded, applied in order.
//   - organizations.go, providers.go, deployments.go (with revisions),
//     idempotency.go, assistants.go, threads.go, runs.go (with claim.go:
//     ClaimRunByID and temporary results), checkpoints.go (in the
//     store/cpcodec format: heads and manifests in checkpoints, one row of
//     checkpoint_blobs per version of a channel, appends as deltas; a
//     thread's values and a run's result reach the same rows) and events.go
//     (the event log of resumable run streams, store.Events): one file per
//     record family, as in package dynamo.
//   - query.go: the helpers every family's queries share (JSON binding,
//     paging, scanning rows, metadata and values filters).
//
// # Connections and pragmas
//
// Open passes a file: URI whose _pragma parameters the driver runs on every new
// connection of the pool:
//
//   - busy_timeout(10000): a connection that finds the database locked by
//     another writer (another goroutine, DB handle or process) waits up to ten
//     seconds instead of failing at once with SQLITE_BUSY.
//   - journal_mode(WAL): readers do not block the writer nor the writer the
//     readers, and a commit is one append to the log. Open fails when the mode
//     cannot be switched (a file system without shared memory support).
//   - synchronous(FULL): the log is synced on every commit, so a committed
//     write survives a power loss, not only a crash of the process.
//   - foreign_keys(1): SQLite leaves foreign keys off unless asked, per
//     connection; API keys need their organization and revisions are deleted
//     with their deployment.
//   - query_only(1): a pooled connection only reads; the writer connection
//     (see Writes) turns it off, the only one that writes.
//   - temp_store(MEMORY): temporary files stay in memory, above all the
//     sub-journal of the savepoint each caller of a group commit runs in
//     (the page images a savepoint could roll back to): in a file, it cost
//     one pwrite per page a savepoint first touched, about a tenth of the
//     CPU of counter/20 (bench/results/2026-12-07-cpu.md). It holds no
//     more than the pages one commit's savepoints touch.
//
// and _txlock=immediate, so every transaction begins with BEGIN IMMEDIATE: it
// takes the write lock (waiting under busy_timeout) before its first read.
// A deferred transaction that reads and then writes must upgrade its lock, and
// two of them doing so at once deadlock, one failing with SQLITE_BUSY that no
// timeout can cure. Read-only methods run outside transactions and never take
// the write lock.
//
// # Schema
//
// Times are INTEGER unix microseconds in UTC (read back as time.Time in UTC,
// truncated to the microsecond). Documents (Doc, Body) are BLOBs kept byte for
// byte. Listed tables have an INTEGER PRIMARY KEY seq, the rowid, which orders
// records with equal created_at by insertion; their string id is UNIQUE.
// Uniqueness rules are table constraints: organizations.name, api_keys.hash,
// providers (org_id, provider_id), deployments (org_id, name) and
// idempotency_keys (org_id, scope, key); breaking one is store.ErrConflict,
// recognised by the SQLite extended result code, not by the message.
//
// Migrations run in one write transaction at Open: those not yet recorded in
// schema_migrations are applied in version order and recorded, so reopening
// applies nothing twice and concurrent openers serialise. Open refuses a file
// recording a migration this program does not know (written by a newer one).
//
// # Writes
//
// Optimistic writes are compare-and-set updates (… SET version = version+1
// WHERE id = ? AND org_id = ? AND version = ?); when no row changes, the same
// transaction tells a missing record (store.ErrNotFound) from a changed one
// (store.ErrStale). CreateDeployment and AddRevision write the deployment and
// the revision in one transaction; the revision takes its OrgID and
// DeploymentID from the deployment, and new records start at Version 1.
//
// # A failing disk
//
// Open first opens the file for writing itself, so that a database it cannot
// write (a directory in its place, a read-only file or file system) fails
// with the system's reason, not SQLite's "unable to open database file" or a
// silent read-only fallback. While serving, an error of the files under the
// database (SQLITE_FULL, SQLITE_IOERR, SQLITE_READONLY, SQLITE_CANTOPEN) is
// returned as fail.Unavailable, which the API answers 503: SQLite rolled the
// statement or transaction back (a commit that fails is rolled back by the
// driver), so nothing is half-written, earlier commits are intact, and the
// same handle writes again once the disk has room.
//
// # Runs
//
// Every multi-record write of the run queue, threads and checkpoints
// (AddRun, CancelRun, ClaimRun, RenewLease, FinishRun, DeleteRun,
// DeleteThread, PutCheckpoint, UpdateThreadState) is one BEGIN IMMEDIATE
// transaction, so its checks and writes see no other writer, in this process
// or another: a thread never has two running runs, a rejected run writes
// nothing, and two workers never claim one run.
//
// Write transactions of one process that queue for the write lock commit
// together (group commit, groupcommit.go): each runs in its own SAVEPOINT of
// one BEGIN IMMEDIATE transaction with one commit, so one fsync serves many
// concurrent writers; a failing one is rolled back to its savepoint alone,
// and every caller returns after the commit that made it durable. A
// single-statement write (an event, a store item) needs no savepoint: SQLite
// undoes a refused statement by itself. (A checkpoint, once one statement,
// is up to three since issue 19: its parent's manifest read, its new
// values, its row; it takes a savepoint.) A commit takes the oldest queued
// transaction and then those whose weight (rows written, about: a batch of
// checkpoints weighs one per checkpoint) fits in 64, so one organization's
// write-behind batches do not hold the others' one-row writes for long (the
// fairness rule of docs/reliability.md). Write transactions run on one dedicated
// connection, whose page cache stays valid from one to the next.
//
// Every write of the process runs on the writer connection under writeMu:
// a write transaction or exec (one statement). A write straight on a
// pooled connection would wait for the writer inside SQLite, whose busy
// handler polls the lock every 100 ms: when commits follow each other
// without a gap at those instants (many run workers' claims on a loaded
// machine) it fails with SQLITE_BUSY after busy_timeout. CreateThread, once
// such an INSERT, answered 503 "the database is busy" that way; pooled
// connections are query_only since, so such a write fails at once, in
// every test.
//
// Statements are prepared once and reused (stmtcache.go): database/sql
// prepares a statement again only on a connection it has not run on, and
// idle connections are kept. Queries built per call beyond the cache's 256
// entries run unprepared.
//
// ClaimRun first takes back a running run whose lease ended before now (a
// running run with an expired lease still holds its thread: it is claimed
// again, never passed by a later run of the same thread). Otherwise it
// serves the organizations in turn: claim_turn (one row) names the
// organization served last; the organizations with pending runs are walked
// in org_id order from the next one, wrapping around, each a seek in
// runs_org_claim (status, org_id, not_before, created_at, seq), and the
// first one with a free slot gives its oldest pending run whose not_before
// has come on a thread with no running run. An organization's slots are
// counted (running runs, same index) in the claiming transaction, which
// holds the write lock: the per-organization cap holds for every process on
// the file, with nothing to keep in step. The worker methods name a run by its ID
// alone, so run IDs are unique across organizations. RenewLease and FinishRun
// answer store.ErrStale also for a run that no longer exists.
//
// JSON fields are TEXT, bound as Go strings: SQLite's json functions read a
// BLOB as JSONB. Metadata and values filters are narrowed in SQL with
// json_each (key present, same JSON type, equal scalar) and decided in Go by
// comparing the decoded values (so 1 equals 1.0 and key order does not
// matter); a filtered search pages after that check. Zero run times
// (started_at, ended_at, lease_until) are NULL.
//
// ReserveIdempotencyKey judges a stored in-progress record stale when it was
// created more than staleAfter before the new record's CreatedAt (now, when
// that is zero).
package sqlite

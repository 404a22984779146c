// Package dynamo is the DynamoDB adapter of the store ports: organizations,
// API keys, providers, deployments and revisions, idempotency records,
// assistants, threads, runs and checkpoints, crons (crons.go), in seven tables, and the event log
// of resumable run streams and of the thread event protocol (events.go). New
// returns a *DB that implements store.Store and store.Events; the contracts
// it honours are the suites in package storetest (Run, EventsContract,
// ThreadEventsContract), run by this package's tests against MiniStack (see
// internal/awstest).
//
// # Tables
//
// Every table is named Options.TablePrefix + its name, bills per request and
// has a string partition key "pk" and a string sort key "sk". TableDefinitions
// gives the exact CreateTable inputs (CreateTables uses them; the CDK app
// declares the same). Times are numbers of unix microseconds (UTC, read back
// truncated to the microsecond; a zero time is an absent attribute),
// documents are binary attributes kept byte for byte, and "ins" is an
// insertion stamp (nanoseconds, increasing within a process) that breaks ties
// of equal creation times the way SQLite's rowid does.
//
// crons — see crons.go: pk <org>, sk C#<id> the cron; sk #count the
// organization's count (CreateCron's limit); the sparse index "due"
// (dpk DUE, dsk <next run date>#<org>#<id>) of enabled crons with a next
// run date.
//
// organizations — tenants and what authentication needs:
//
//	pk ORG#<id>       sk ORG         the organization (id, name, created)
//	pk NAME#<name>    sk NAME        the same record under its name: the
//	                                 name's uniqueness and OrganizationByName
//	pk KEY#<hash>     sk KEY         an API key under its hash (APIKeyByHash)
//	pk KEYID#<id>     sk KEYID       marker: API key IDs are unique
//	pk ORG#<id>       sk SECRET#<n>  an organization secret reference
//
// CreateOrganization writes ORG and NAME in one transaction, each on
// attribute_not_exists; CreateAPIKey checks ORG and writes KEY and KEYID in
// one; SetOrganizationSecretRef checks ORG and writes SECRET.
//
// providers — pk <org>, sk <provider_id>. ListProviders is a query of the
// organization's partition, ordered by (created, ins) here. Agent auth
// (store.AgentAuth) keeps its records in partitions of their own in the
// same table (agentauth.go): attempts (pk agentauth-attempt#<org>), their
// state markers (agentauth-state#<hash>), tokens
// (agentauth-token#<org>#<provider>, sk <user>\x1f<scopes>[\x1f<agent>]) and token ids
// (agentauth-tokenid#<org>).
//
// deployments — deployments and their revisions:
//
//	pk ORG#<org>          sk DEP#<id>    a deployment (version: its Version)
//	pk ORG#<org>          sk NAME#<name> marker: names are unique per org
//	pk DEP#<org>#<dep>    sk REV#<id>    a revision (version: its Version)
//
// Index "status" (gpk, gsk): gpk is DEP#<status> on deployments and
// REV#<status> on revisions, gsk created#ins; it serves DeploymentsInStatus
// and UnsettledRevisions across organizations. It projects keys only: each
// item is then read from the table (documents are not copied into it). CreateDeployment writes the
// marker, the deployment and the first revision in one transaction.
// UpdateDeployment and AddRevision are compare-and-set: the deployment is
// written on condition "version = <the Version read>" (a rename moves the
// marker in the same transaction; AddRevision adds the revision to it), so
// of concurrent writers exactly one wins and the others get store.ErrStale
// (store.ErrNotFound when the deployment is gone). UpdateRevision is the
// same on the revision. DeleteDeployment deletes the deployment, its marker
// and its revisions in one transaction conditioned on the deployment's
// version; beyond 98 revisions the oldest are deleted first, so a crash
// leaves the deployment with part of its history and a retry finishes.
//
// assistants — pk <org>, sk <id>. Each version of an assistant is an item
// sk V#<id>#<version, 10 digits> beside it; the assistant item's maxv is its
// highest version, the condition of UpdateAssistant's transaction. Each
// assistant has a listing entry sk L#<created>#<ins>#<id> (its id, graph and
// name), written in the transactions that change the assistant:
// SearchAssistants and CountAssistants query the entries newest first and
// read only a page's assistants (assistantlist.go); the item sk #LISTED
// marks an organization whose assistants all have entries.
//
// idempotency — pk <org>, sk <scope>#<key> (scopes are operation names
// without "#"). ReserveIdempotencyKey is one conditional put (a one-item
// transaction, see Retries):
// attribute_not_exists(pk) OR (status = 0 AND created < <now - staleAfter>),
// returning the stored record (ReturnValuesOnConditionCheckFailure) when the
// condition fails. With Options.IdempotencyTTL the attribute "ttl" (epoch
// seconds) lets DynamoDB expire records; CreateTables enables TTL on it.
//
// threads — threads, runs and checkpoints, keyed by thread:
//
//	pk T#<org>#<thread>  sk THREAD              the thread
//	pk T#<org>#<thread>  sk RUN#<id>            a run
//	pk T#<org>#<thread>  sk CP#<id>             a checkpoint
//	pk T#<org>#<thread>  sk CPD#<id>#<gen>#<n>  a chunk of checkpoint data (its head)
//	pk T#<org>#<thread>  sk CPV#<root>#<depth>#<id>  a checkpoint value (store/cpcodec: one per
//	                                             version of a channel, appends as deltas;
//	                                             cpvalues.go), CPVD#<id>#<gen>#<n> its chunks
//	pk T#<org>#<thread>  sk TVAL#<gen>#<n>      a chunk of the thread's values
//	pk T#<org>#<thread>  sk TEVSEQ              the counter of the thread's
//	                                            event log (events.go)
//	pk T#<org>#<thread>  sk TEV#<seq>           an event of the thread event
//	                                            protocol (TTL)
//	pk RUNID#<id>        sk RUNID               marker: run IDs are unique
//	                                            across organizations; it
//	                                            locates a run by ID alone
//	pk SLOTS#<org>       sk SLOTS               the organization's running
//	                                            runs ("runs", a string set)
//	pk TURN              sk TURN                the organization ClaimRun
//	                                            served last ("org")
//	pk EVR#<org>#<run>   sk NEXT | E#<seq>      a resumable run's stream
//	                                            events and their counter,
//	                                            expiring by TTL (events.go)
//	pk ITEMS#<org>       sk <ns>\x1f<key>        a long-term memory item
//	                                            (store.Items, items.go)
//
// Checkpoint IDs are time-ordered, so the sort key orders a thread's
// checkpoints: LatestCheckpoint and ListCheckpoints are descending queries
// (with a strongly consistent read) that stop at the limit. PutCheckpoints
// writes a batch (up to 99 checkpoints and 3 MB) in one transaction with one
// increment of the thread's version, each put conditioned on its ID being
// new; a batch that replaces a stored checkpoint falls back to one
// PutCheckpoint each (which reads the old item to delete its blob).
//
// Indexes: "org" (gpk ORG#<org>, gsk created#ins) on thread items, for
// SearchThreads, keys only (SearchThreads reads each thread a page reaches
// from the table, so a thread's changes never rewrite the index); "queue"
// (qpk, qsk) on runs that may be claimed; "lease" (lpk, lsk) on running
// runs, by lease expiry, and, in its partition X, on threads with a time to
// live, by expiry (ExpiredThreads). The three are sparse: an item is in an index only
// while it carries its key attributes. With Options.ExecutionsOwnRuns (the
// deployed stage: DeployedOptions) no run carries the queue or lease keys
// and the queue index does not exist: only ClaimRun reads the runs'
// entries, and there a Step Functions execution per run claims it by ID.
// The lease index is kept there for partitions of other records.
//
// # One run per thread, FIFO, and the thread as the lock
//
// The thread item records its inflight runs: "running" (the ID of its
// running run, absent when none) and "pending" (a map from each pending
// run's ID to its order key: NotBefore, CreatedAt, the thread's insertion
// counter "nseq", the insertion stamp). Every change to that set — AddRun,
// claiming a pending run, cancelling one, FinishRun, DeleteThread,
// UpdateThreadState's busy check — is one TransactWriteItems that includes an
// update of the thread item on condition "ver = <the ver read>" and
// increments ver. Two such changes of one thread never both commit: the
// loser re-reads and tries again (or fails, for an InflightReject request
// that now finds the thread busy). So at most one run is running per
// thread, across processes and Lambdas, without locks. Next to "running",
// "rattempt" is the attempt the running run was last claimed under: every
// claim writes it on the thread's version, and a checkpoint write of a run
// is refused when it comes from another attempt (fence.go).
//
// Only the head of a thread's queue — its least pending order key, when the
// thread has no running run — carries the queue index keys (qpk "Q", qsk:
// the organization, "#", then NotBefore, CreatedAt, insertion stamp,
// counter). AddRun, ClaimRun, CancelRun and FinishRun move them in the same
// transaction as the thread, so the index holds one run per thread and FIFO
// order within a thread comes from the pending map, not from the index.
// ClaimRun first takes back a running run whose lease expired (the lease
// index, in (NotBefore, CreatedAt, insertion) order) with an update
// conditioned on that lease. Otherwise it serves the organizations in turn:
// the index holds each organization's heads in one stretch, oldest first,
// so it walks the stretches (the first entry after the previous stretch,
// then the stretch's entries up to now) from the one after the organization
// in TURN, wrapping around, and claims the oldest ready head of the first
// organization that has a free slot, with a transaction on the thread's
// version; then it records the organization in TURN (a plain put: two
// processes claiming at once may cost an organization a turn, never a run).
// An index entry that is behind (the indexes are eventually consistent on
// AWS) is checked against the thread item and skipped, and a lost race
// moves on to the next candidate. An entry written before the queue was
// keyed by organization (time first) is claimed where it sorts. The index
// partitions are single keys: ample for the rate at which runs start here
// (the AWS dispatcher starts one Step Functions execution per run, which
// claims its run by ID, without the index); shard qpk/lpk if that ever
// changes.
//
// # Slots: the per-organization cap
//
// SLOTS#<org> holds the IDs of the organization's running runs. Claiming a
// pending run (ClaimRun, ClaimRunByID) adds its ID in the transaction that
// marks it running, on condition "size(runs) < cap" when the caller gives a
// cap, so the cap holds across processes and Lambdas without a lock; the
// set is kept whatever the cap, so every claimer counts the same runs.
// Taking back a running run (an expired lease, a retried step) leaves the
// set alone: the run holds its slot. Every way out of running removes the
// ID in the transaction that takes it: FinishRun (also of a rolled back or
// temporary run) and deleting the thread (in the one transaction, or in the
// one that marks a large thread deleting). Should an ID ever stay behind,
// an organization would lose a slot for good; so a claim that finds no
// free slot first reads the set's runs (two BatchGetItem calls) and removes
// those that are not running, which can never run again, then tries once
// more. The set is one item per organization: every start and end of its
// runs writes it, well within an item's write rate for the runs one
// organization starts.
//
// # Retries
//
// Every conditional write is a TransactWriteItems (write1 for single items):
// the SDK retries a request whose answer it did not receive (a dropped
// connection), and a plain conditional put or delete would then fail on its
// own first attempt and report a conflict or a missing record. The
// transaction's ClientRequestToken, set once per call and reused by the
// SDK's retries, makes DynamoDB answer the retry with the first outcome.
// Transactions cancelled by a concurrent transaction (TransactionConflict)
// are retried here with backoff.
//
// # Items over 400 KB
//
// With Options.Payloads (every deployed function), no item exceeds 400 KB:
// any string or binary value over PayloadThreshold (16 KiB) is written to
// the payload store first and the item keeps a pointer, by one middleware
// on the client; reads resolve pointers transparently (payloads.go, and
// docs/aws.md, "Sizes"). A thread's values and checkpoint data over the
// threshold are blobs kept as one payload object per generation.
//
// Without a payload store, checkpoint data and a thread's values are
// inline up to 350 000 and 100 000 bytes (the thread item holds more);
// beyond, they are a blob: chunks of at most
// 350 000 bytes in items of the same partition whose sort keys carry a
// random generation. Either way, the blob is written first; then the
// checkpoint (or thread) item is switched to the new generation, in the
// transaction that writes it; then the previous generation is deleted. A
// reader reads the record and then the blob of its generation; when it is
// gone (replaced meanwhile) it reads the record again. Blobs of a write
// that did not commit are deleted at once, or, after a crash, with the
// thread. Without a payload store, other fields (a run's input and result,
// metadata, config, interrupts, the pending map) must fit their item.
//
// # Deleting a thread
//
// DeleteThread (and FinishRun of a temporary run) deletes the thread item on
// condition of its version, with every item of its partition and the markers
// of its runs, in one transaction when that is at most 100 items. A larger
// thread is first marked "deleting" (it reads as missing and takes no more
// writes; its queue entry is removed), then swept, then deleted; a
// DeleteThread of a thread left marked by a crash finishes the sweep.
//
// # Consistency
//
// Reads of single records and of partitions are strongly consistent. The
// index reads are not, on AWS (MiniStack's indexes are immediately
// consistent): SearchThreads without IDs, DeploymentsInStatus and
// UnsettledRevisions may miss a record written a moment ago, and ClaimRun
// may claim a run that became ready a moment ago slightly later.
package dynamo

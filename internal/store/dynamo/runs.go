package dynamo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Index partition values of the queue and lease indexes.
const (
	queuePK = "Q"
	leasePK = "L"
)

// pendingKey orders a thread's pending runs: NotBefore, CreatedAt, then the
// thread's own insertion counter (exact), then the insertion stamp.
func pendingKey(nb, created time.Time, seq int64, ins string) string {
	return sortTime(nb) + "#" + sortTime(created) + "#" + fmt.Sprintf("%020d", seq) + "#" + ins
}

// timeOrder orders runs across threads by start: NotBefore, CreatedAt, the
// insertion stamp, then the thread's counter.
func timeOrder(pending string) string {
	p := strings.Split(pending, "#")
	if len(p) != 4 {
		return pending
	}
	return p[0] + "#" + p[1] + "#" + p[3] + "#" + p[2]
}

// queueKey is a run's key in the queue index: its organization, then
// timeOrder, so that the index holds each organization's queue in one
// stretch (ClaimRun serves them in turn) and a query of one stretch up to
// now finds the organization's runs whose NotBefore has come.
func queueKey(orgID, pending string) string { return orgQueueStart(orgID) + timeOrder(pending) }

func runOrder(it item) string {
	return timeOrder(it.str("pkey"))
}

func runFrom(it item) store.Run {
	return store.Run{
		ID: it.str("id"), OrgID: it.str("org"), ThreadID: it.str("thread"),
		AssistantID: it.str("assistant"), Status: it.str("status"),
		Metadata: it.bytes("metadata"), Kwargs: it.bytes("kwargs"),
		MultitaskStrategy: it.str("mts"), Temporary: it.boolean("temp"),
		NotBefore: it.time("nb"), CreatedAt: it.time("created"), UpdatedAt: it.time("updated"),
		StartedAt: it.time("started"), EndedAt: it.time("ended"), Result: it.bytes("result"),
		CancelAction: it.str("cancel"), LeaseOwner: it.str("owner"), LeaseUntil: it.time("lease"),
		Attempt: int(it.num("attempt")),
	}
}

// canonRun is r as it reads back.
func canonRun(r store.Run) store.Run {
	r.NotBefore, r.CreatedAt, r.UpdatedAt = canon(r.NotBefore), canon(r.CreatedAt), canon(r.UpdatedAt)
	r.StartedAt, r.EndedAt, r.LeaseUntil = canon(r.StartedAt), canon(r.EndedAt), canon(r.LeaseUntil)
	return r
}

func isInflight(status string) bool { return status == store.RunPending || status == store.RunRunning }

// errNoClaimIndexes is ClaimRun's error under Options.ExecutionsOwnRuns.
var errNoClaimIndexes = errors.New("dynamo: ClaimRun needs the queue and lease indexes, which Options.ExecutionsOwnRuns leaves out (claim runs by ID)")

// leaseIndex keys a running run in the lease index by its lease expiry
// (and takes it out of the queue index), unless the indexes are off.
func (db *DB) leaseIndex(until time.Time) func(*upd) {
	return func(u *upd) {
		if db.claimIndexes() {
			u.set("lpk", s(leasePK)).set("lsk", s(sortTime(until))).remove("qpk").remove("qsk")
		}
	}
}

// setHead indexes run id of orgID (pending, with pending key pkey) in the queue.
func setHead(table, orgID, threadPK, id, pkey string) types.TransactWriteItem {
	return newUpd().set("qpk", s(queuePK)).set("qsk", s(queueKey(orgID, pkey))).
		cond("status", "$ = ?", s(store.RunPending)).update(table, key(threadPK, runSK(id)))
}

// AddRun implements store.RunQueue: one transaction writes the run, a marker
// item for its ID (unique across organizations), the thread (created, or
// updated on condition of its version) and the inflight runs InflightCancel
// settles; InflightReject is decided on the thread item that transaction is
// conditioned on. The run is stored as given except for the fields of its
// execution; nil Metadata or Kwargs are stored as "{}".
func (db *DB) AddRun(ctx context.Context, req store.NewRun) (store.Run, bool, error) {
	if err := req.CheckInflight(); err != nil {
		return store.Run{}, false, wrap("add run", err)
	}
	r := req.Run
	if r.OrgID == "" || r.ThreadID == "" || r.ID == "" {
		if r.ID != "" && !req.CreateThread {
			return store.Run{}, false, store.ErrNotFound
		}
		return store.Run{}, false, wrap("add run", errEmptyID)
	}
	table := db.tables.threads
	now := r.CreatedAt
	var out store.Run
	var created bool
	var rolledBack []string
	pk := threadPK(r.OrgID, r.ThreadID)
	err := retry(ctx, "add run", func() error {
		created, rolledBack = false, nil
		t, err := db.loadThread(ctx, r.OrgID, r.ThreadID)
		switch {
		case errors.Is(err, store.ErrNotFound) && req.CreateThread:
			t = &threadRec{orgID: r.OrgID, id: r.ThreadID, pk: pk, pending: map[string]string{}}
			created = true
		case err != nil:
			return err
		}
		if req.IfInflight == store.InflightReject && t.inflight() {
			return store.ErrBusy
		}
		action := "" // the CancelAction of the inflight runs
		if req.IfInflight == store.InflightCancel {
			action = req.CancelAction
		}
		var tx []types.TransactWriteItem
		pending := map[string]string{}
		for id, k := range t.pending {
			pending[id] = k
		}
		oldHead := ""
		if t.running == "" {
			oldHead = head(t.pending)
		}
		settled := map[string]bool{}
		var uncounted int64 // the bytes of pending runs rolled back
		if action != "" {
			if t.running != "" {
				tx = append(tx, newUpd().set("cancel", s(action)).set("updated", n(micros(now))).
					cond("status", "$ = ?", s(store.RunRunning)).update(table, key(pk, runSK(t.running))))
			}
			for id := range t.pending {
				settled[id] = true
				delete(pending, id)
				if action == store.CancelRollback {
					pit, err := db.get(ctx, table, key(pk, runSK(id)))
					if err != nil {
						return err
					}
					if pit != nil {
						uncounted += pit.num("bytes")
					}
					tx = append(tx,
						newUpd().cond("status", "$ = ?", s(store.RunPending)).del(table, key(pk, runSK(id))),
						types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: runMarkerKey(id)}})
					rolledBack = append(rolledBack, id)
				} else {
					tx = append(tx, newUpd().set("status", s(store.RunInterrupted)).set("cancel", s(action)).
						set("ended", n(micros(now))).set("updated", n(micros(now))).remove("qpk").remove("qsk").
						cond("status", "$ = ?", s(store.RunPending)).update(table, key(pk, runSK(id))))
				}
			}
		}
		seq := t.nseq + 1
		ins := insStamp()
		pkey := pendingKey(r.NotBefore, r.CreatedAt, seq, ins)
		pending[r.ID] = pkey
		newHead := ""
		if t.running == "" {
			newHead = head(pending)
		}
		if oldHead != "" && oldHead != newHead && !settled[oldHead] {
			tx = append(tx, newUpd().remove("qpk").remove("qsk").
				cond("status", "$ = ?", s(store.RunPending)).update(table, key(pk, runSK(oldHead))))
		}
		rb := runBytes(jsonObject(r.Metadata), jsonObject(r.Kwargs), nil)
		if created {
			config, err := newThreadConfig(req, []byte("{}"))
			if err != nil {
				return err
			}
			th := store.Thread{ID: r.ThreadID, OrgID: r.OrgID, Status: store.ThreadBusy,
				Metadata: req.ThreadMetadata, Config: config, CreatedAt: now, UpdatedAt: now}
			it := newThreadItem(th, blobRef{}, pending, "", seq)
			size := int64(len(jsonObject(req.ThreadMetadata))) + rb
			it["bytes"] = n(size)
			tx = append(tx, newUpd().cond("", notExists, nil).put(table, it), db.usageAdd(r.OrgID, r.ThreadID, 1, size))
		} else {
			grown := rb - uncounted
			u := threadCond(t).set("status", s(store.ThreadBusy)).set("updated", n(micros(now))).
				set("nseq", n(seq)).set(entry("pending", r.ID), s(pkey))
			if req.StampMetadata != nil {
				old := t.it.bytes("metadata")
				meta, err := store.MergeObjects(old, req.StampMetadata)
				if err != nil {
					return err
				}
				u.set("metadata", b(meta))
				grown += int64(len(meta) - len(old))
			}
			if req.ThreadConfig != nil {
				config, err := newThreadConfig(req, jsonObject(t.it.bytes("config")))
				if err != nil {
					return err
				}
				u.set("config", b(config))
			}
			u.add("bytes", grown)
			for id := range settled {
				u.remove(entry("pending", id))
			}
			tx = append(tx, u.update(table, threadKey(r.OrgID, r.ThreadID)), db.usageAdd(r.OrgID, r.ThreadID, 0, grown))
		}
		iMarker := len(tx)
		tx = append(tx, newUpd().cond("", notExists, nil).put(table, with(runMarkerKey(r.ID),
			map[string]types.AttributeValue{"org": s(r.OrgID), "thread": s(r.ThreadID)})))
		stored := r
		stored.Status = store.RunPending
		stored.StartedAt, stored.EndedAt, stored.LeaseUntil = time.Time{}, time.Time{}, time.Time{}
		stored.Result, stored.CancelAction, stored.LeaseOwner, stored.Attempt = nil, "", "", 0
		stored.Metadata, stored.Kwargs = jsonObject(r.Metadata), jsonObject(r.Kwargs)
		it := with(key(pk, runSK(r.ID)), map[string]types.AttributeValue{
			"id": s(r.ID), "org": s(r.OrgID), "thread": s(r.ThreadID), "assistant": s(r.AssistantID),
			"status": s(store.RunPending), "metadata": b(stored.Metadata), "kwargs": b(stored.Kwargs),
			"mts": s(r.MultitaskStrategy), "temp": boolean(r.Temporary), "nb": n(micros(r.NotBefore)),
			"created": n(micros(r.CreatedAt)), "updated": n(micros(r.UpdatedAt)),
			"cancel": s(""), "owner": s(""), "attempt": n(0), "seq": n(seq), "ins": s(ins), "pkey": s(pkey),
			"bytes": n(rb),
		})
		if newHead == r.ID && db.claimIndexes() {
			it["qpk"], it["qsk"] = s(queuePK), s(queueKey(r.OrgID, pkey))
		}
		iRun := len(tx)
		tx = append(tx, newUpd().cond("", notExists, nil).put(table, it))
		if len(tx) > maxTxItems {
			return fmt.Errorf("thread %s has too many inflight runs to %s them in one step", r.ThreadID, action)
		}
		reasons, err := db.transact(ctx, tx)
		if err != nil {
			return err
		}
		if reasons != nil {
			if txFailedAt(reasons, iMarker) || txFailedAt(reasons, iRun) {
				return store.ErrConflict
			}
			return errRetry
		}
		out = canonRun(stored)
		out.Behind = t.running != "" || newHead != r.ID
		return nil
	})
	if err != nil {
		return store.Run{}, false, err
	}
	for _, id := range rolledBack {
		if _, err := db.deleteRunCheckpoints(ctx, r.OrgID, r.ThreadID, id); err != nil {
			return store.Run{}, false, wrap("add run: delete checkpoints of a rolled back run", err)
		}
	}
	return out, created, nil
}

// newThreadConfig is the config req.ThreadConfig makes of current (current
// itself when there is none).
func newThreadConfig(req store.NewRun, current []byte) ([]byte, error) {
	if req.ThreadConfig == nil {
		return current, nil
	}
	config, err := req.ThreadConfig(current)
	if err != nil {
		return nil, fmt.Errorf("thread config: %w", err)
	}
	return jsonObject(config), nil
}

// Run implements store.RunQueue.
func (db *DB) Run(ctx context.Context, orgID, threadID, id string) (store.Run, error) {
	if orgID == "" || threadID == "" || id == "" {
		return store.Run{}, store.ErrNotFound
	}
	it, err := db.get(ctx, db.tables.threads, key(threadPK(orgID, threadID), runSK(id)))
	if err != nil {
		return store.Run{}, wrap("run", err)
	}
	if it == nil {
		return store.Run{}, store.ErrNotFound
	}
	r, err := db.fullRun(ctx, it)
	return r, wrap("run", err)
}

// ListRuns implements store.RunQueue: newest first by ID (the runs
// package's IDs are UUIDv7s made at creation, in insertion order: see
// store.RunQueue), so a page is a bounded read of the partition's run
// items in reverse key order: the offset's runs are passed over with their
// keys and status only (no documents, no payloads), then the page's limit
// runs are read whole, and the read stops there (review #10). ErrNotFound
// when the thread does not exist. With a status, the page's runs are
// found by key and status and then read by key.
func (db *DB) ListRuns(ctx context.Context, orgID, threadID, status string, limit, offset int) ([]store.Run, error) {
	t, err := db.loadThread(ctx, orgID, threadID)
	if err != nil {
		return nil, wrap("list runs", err)
	}
	if limit <= 0 {
		limit = 20
	}
	if status != "" {
		// A status filters what a query evaluates: its pages overshoot, so
		// they read keys and status, and the page's runs are read by key.
		keys, err := db.runsFrom(ctx, t.pk, status, nil, max(offset, 0)+limit, true)
		if err != nil {
			return nil, wrap("list runs", err)
		}
		out := []store.Run{}
		for _, k := range keys[min(max(offset, 0), len(keys)):] {
			it, err := db.get(ctx, db.tables.threads, key(t.pk, k.str("sk")))
			if err != nil {
				return nil, wrap("list runs", err)
			}
			if it == nil || it.str("status") != status { // deleted or moved on since
				continue
			}
			r, err := db.fullRun(ctx, it)
			if err != nil {
				return nil, wrap("list runs", err)
			}
			out = append(out, r)
		}
		return out, nil
	}
	var start map[string]types.AttributeValue
	if offset > 0 {
		skipped, err := db.runsFrom(ctx, t.pk, status, nil, offset, true)
		if err != nil {
			return nil, wrap("list runs", err)
		}
		if len(skipped) < offset {
			return []store.Run{}, nil
		}
		start = key(t.pk, skipped[len(skipped)-1].str("sk"))
	}
	items, err := db.runsFrom(ctx, t.pk, status, start, limit, false)
	if err != nil {
		return nil, wrap("list runs", err)
	}
	out := make([]store.Run, 0, len(items))
	for _, it := range items {
		r, err := db.fullRun(ctx, it)
		if err != nil {
			return nil, wrap("list runs", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// runsFrom reads up to n run items of partition pk with status ("": any),
// newest first, after start (nil: from the newest), page by page: a page
// evaluates what is still wanted (at least listPageMin items when a status
// filters them, so that a rare status does not cost a request per run).
// keysOnly reads the sort key and status only.
func (db *DB) runsFrom(ctx context.Context, pk, status string, start map[string]types.AttributeValue, n int, keysOnly bool) ([]item, error) {
	in := &dynamodb.QueryInput{
		TableName: aws.String(db.tables.threads), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": s(pk), ":p": s("RUN#"),
		},
		ScanIndexForward: aws.Bool(false), ExclusiveStartKey: start,
	}
	if status != "" {
		in.ExpressionAttributeNames = map[string]string{"#st": "status"}
	}
	if status != "" {
		in.FilterExpression = aws.String("#st = :st")
		in.ExpressionAttributeValues[":st"] = s(status)
	}
	if keysOnly {
		if in.ExpressionAttributeNames == nil {
			in.ExpressionAttributeNames = map[string]string{}
		}
		in.ExpressionAttributeNames["#st"], in.ExpressionAttributeNames["#sk"] = "status", "sk"
		in.ProjectionExpression = aws.String("#sk, #st")
	}
	out := make([]item, 0, min(n, 100))
	for len(out) < n {
		want := n - len(out)
		if status != "" {
			want = max(want, listPageMin)
		}
		in.Limit = aws.Int32(int32(min(want, listPageMax)))
		pg, err := db.client.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, raw := range pg.Items {
			if len(out) < n {
				out = append(out, item(raw))
			}
		}
		if len(pg.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = pg.LastEvaluatedKey
	}
	return out, nil
}

// Bounds of a page of runsFrom.
const (
	listPageMin = 50
	listPageMax = 1000
)

// DeleteRun implements store.RunQueue. The checkpoints the run wrote stay: they
// are the thread's history. The run's bytes leave the counters in the same
// transaction, on the thread's version (see deleteThread).
func (db *DB) DeleteRun(ctx context.Context, orgID, threadID, id string) error {
	table := db.tables.threads
	split := false
	err := retry(ctx, "delete run", func() error {
		r, err := db.Run(ctx, orgID, threadID, id)
		if err != nil {
			return err
		}
		if isInflight(r.Status) {
			return store.ErrBusy
		}
		t, err := db.loadThread(ctx, orgID, threadID)
		if err != nil {
			return err
		}
		it, err := db.get(ctx, table, key(t.pk, runSK(id)))
		if err != nil {
			return err
		}
		if it == nil {
			return store.ErrNotFound
		}
		size := it.num("bytes")
		split = it.has("result_manifest")
		reasons, err := db.transact(ctx, []types.TransactWriteItem{
			newUpd().cond("status", "$ = ?", s(r.Status)).del(table, key(t.pk, runSK(id))),
			{Delete: &types.Delete{TableName: aws.String(table), Key: runMarkerKey(id)}},
			threadCond(t).add("bytes", -size).update(table, threadKey(orgID, threadID)),
			db.usageAdd(orgID, threadID, 0, -size),
		})
		if err != nil {
			return err
		}
		if reasons != nil {
			return errRetry
		}
		return nil
	})
	if err != nil || !split {
		return err
	}
	// Its result may have been the last to reach some values.
	return wrap("delete run", db.collectValues(ctx, orgID, threadID))
}

// CancelRun implements store.RunQueue. A pending run settled by rollback is
// returned as it was last (interrupted, with the action) and is gone. The
// thread of a settled pending run is busy when another run is inflight, idle
// otherwise. A running run already marked gets the new action.
func (db *DB) CancelRun(ctx context.Context, orgID, threadID, id, action string, now time.Time) (store.Run, error) {
	if action != store.CancelInterrupt && action != store.CancelRollback {
		return store.Run{}, fmt.Errorf("dynamo: cancel run: unknown action %q", action)
	}
	table := db.tables.threads
	pk := threadPK(orgID, threadID)
	var out store.Run
	rolledBack := false
	err := retry(ctx, "cancel run", func() error {
		rolledBack = false
		r, err := db.Run(ctx, orgID, threadID, id)
		if err != nil {
			return err
		}
		switch r.Status {
		case store.RunRunning:
			res, err := db.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: key(pk, runSK(id)),
				UpdateExpression:          aws.String("SET cancel = :a, updated = :u"),
				ConditionExpression:       aws.String("#st = :running"),
				ExpressionAttributeNames:  map[string]string{"#st": "status"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":a": s(action), ":u": n(micros(now)), ":running": s(store.RunRunning)},
				ReturnValues:              types.ReturnValueAllNew,
			})
			if isCondFailed(err) {
				return errRetry
			}
			if err != nil {
				return err
			}
			out = runFrom(item(res.Attributes))
			return nil
		case store.RunPending:
		default:
			out = r
			return nil
		}
		t, err := db.loadThread(ctx, orgID, threadID)
		if err != nil {
			return err
		}
		pending := map[string]string{}
		for k, v := range t.pending {
			if k != id {
				pending[k] = v
			}
		}
		status := store.ThreadIdle
		if t.running != "" || len(pending) > 0 {
			status = store.ThreadBusy
		}
		tu := threadCond(t).remove(entry("pending", id)).set("status", s(status)).set("updated", n(micros(now)))
		var uncount []types.TransactWriteItem
		if action == store.CancelRollback {
			it, err := db.get(ctx, table, key(pk, runSK(id)))
			if err != nil {
				return err
			}
			if size := it.num("bytes"); size != 0 {
				tu.add("bytes", -size)
				uncount = append(uncount, db.usageAdd(orgID, threadID, 0, -size))
			}
		}
		tx := append([]types.TransactWriteItem{tu.update(table, threadKey(orgID, threadID))}, uncount...)
		if t.running == "" && head(t.pending) == id {
			if h := head(pending); h != "" && db.claimIndexes() {
				tx = append(tx, setHead(table, orgID, pk, h, pending[h]))
			}
		}
		runCond := newUpd().cond("status", "$ = ?", s(store.RunPending))
		if action == store.CancelRollback {
			tx = append(tx, runCond.del(table, key(pk, runSK(id))),
				types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: runMarkerKey(id)}})
		} else {
			tx = append(tx, runCond.set("status", s(store.RunInterrupted)).set("cancel", s(action)).
				set("ended", n(micros(now))).set("updated", n(micros(now))).remove("qpk").remove("qsk").
				update(table, key(pk, runSK(id))))
		}
		reasons, err := db.transact(ctx, tx)
		if err != nil {
			return err
		}
		if reasons != nil {
			return errRetry
		}
		r.Status, r.CancelAction, r.EndedAt, r.UpdatedAt = store.RunInterrupted, action, canon(now), canon(now)
		out = r
		rolledBack = action == store.CancelRollback
		return nil
	})
	if err != nil {
		return store.Run{}, err
	}
	if rolledBack {
		if _, err := db.deleteRunCheckpoints(ctx, orgID, threadID, id); err != nil {
			return store.Run{}, wrap("cancel run: delete checkpoints", err)
		}
	}
	return out, nil
}

// ClaimRun implements store.RunQueue. A running run whose lease expired
// comes first: the lease index holds running runs by lease expiry, and the
// first in (NotBefore, CreatedAt, insertion) order is claimed with an update
// conditioned on the lease it expired with. Otherwise claimInTurn walks the
// queue index (the head of each thread's queue, keyed by organization)
// organization by organization from the one after the organization served
// last, and claims the oldest ready head of the first organization with a
// free slot, with a transaction on the thread's version that also takes the
// slot. A lost race moves on to the next candidate. On AWS the indexes are
// eventually consistent: a run enqueued a moment ago may be claimed a
// moment later, and an index entry that is already stale is checked
// against the thread and skipped.
func (db *DB) ClaimRun(ctx context.Context, owner string, now, leaseUntil time.Time, perOrg int) (store.Run, bool, error) {
	if !db.claimIndexes() {
		return store.Run{}, false, errNoClaimIndexes
	}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		expired, err := db.queryAll(ctx, &dynamodb.QueryInput{
			TableName: aws.String(db.tables.threads), IndexName: aws.String(indexLease),
			KeyConditionExpression: aws.String("lpk = :l AND lsk < :now"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":l": s(leasePK), ":now": s(sortTime(now)),
			},
		})
		if err != nil {
			return store.Run{}, false, wrap("claim run", err)
		}
		sort.SliceStable(expired, func(i, j int) bool { return runOrder(expired[i]) < runOrder(expired[j]) })
		lost := false
		for _, it := range expired {
			r, ok, err := db.claimExpired(ctx, it, owner, now, leaseUntil)
			if errors.Is(err, errThreadGone) {
				continue // its deletion removes it
			}
			if err != nil {
				return store.Run{}, false, wrap("claim run", err)
			}
			if ok {
				return r, true, nil
			}
			lost = true
		}
		r, ok, lostPending, err := db.claimInTurn(ctx, owner, now, leaseUntil, perOrg)
		if err != nil {
			return store.Run{}, false, wrap("claim run", err)
		}
		if ok {
			return r, true, nil
		}
		if !lost && !lostPending {
			return store.Run{}, false, nil
		}
	}
	return store.Run{}, false, fmt.Errorf("dynamo: claim run: gave up after %d attempts under contention", maxAttempts)
}

// What claimPending did.
type claimResult int

const (
	claimLost claimResult = iota // not claimed: the index was behind, or another claim won
	claimWon
	claimFull // not claimed: the organization has no free slot
)

// claimPending claims the pending run of queue entry c for owner when it
// is the head of its thread's queue, the thread has no running run and its
// organization has a free slot (perOrg 0: always): one transaction updates
// the thread on its version, marks the run running and takes the slot.
// When the slots are full it checks them once (reclaimSlots) before it
// answers claimFull.
func (db *DB) claimPending(ctx context.Context, c item, owner string, now, leaseUntil time.Time, perOrg int) (store.Run, claimResult, error) {
	table := db.tables.threads
	id := c.str("id")
	t, err := db.loadThread(ctx, c.str("org"), c.str("thread"))
	if errors.Is(err, store.ErrNotFound) {
		return store.Run{}, claimLost, nil
	}
	if err != nil {
		return store.Run{}, claimLost, err
	}
	if t.running != "" || head(t.pending) != id {
		return store.Run{}, claimLost, nil // the index is behind
	}
	runKey := key(t.pk, runSK(id))
	tx := []types.TransactWriteItem{
		threadCond(t).set("running", s(id)).remove(entry("pending", id)).apply(claimedAttempt(c.num("attempt"))).
			update(table, threadKey(t.orgID, t.id)),
		newUpd().set("status", s(store.RunRunning)).setExpr("started", "if_not_exists($, ?)", n(micros(now))).
			set("owner", s(owner)).set("lease", n(micros(leaseUntil))).setExpr("attempt", "$ + ?", n(1)).
			set("updated", n(micros(now))).apply(db.leaseIndex(leaseUntil)).
			cond("status", "$ = ?", s(store.RunPending)).cond("nb", "$ <= ?", n(micros(now))).
			cond("attempt", "$ = ?", n(c.num("attempt"))).
			update(table, runKey),
		db.takeSlot(t.orgID, id, perOrg),
	}
	const iSlot = 2
	for checked := false; ; checked = true {
		reasons, err := db.transact(ctx, tx)
		if err != nil {
			return store.Run{}, claimLost, err
		}
		if reasons == nil {
			break
		}
		if !txFailedAt(reasons, iSlot) {
			return store.Run{}, claimLost, nil
		}
		if checked {
			return store.Run{}, claimFull, nil
		}
		freed, err := db.reclaimSlots(ctx, t.orgID)
		if err != nil || !freed {
			return store.Run{}, claimFull, err
		}
	}
	it, err := db.get(ctx, table, runKey)
	if err != nil || it == nil {
		return store.Run{}, claimLost, err
	}
	return runFrom(it), claimWon, nil
}

func (db *DB) claimExpired(ctx context.Context, c item, owner string, now, leaseUntil time.Time) (store.Run, bool, error) {
	u := newUpd().set("owner", s(owner)).set("lease", n(micros(leaseUntil))).setExpr("attempt", "$ + ?", n(1)).
		set("updated", n(micros(now))).apply(db.leaseIndex(leaseUntil)).
		cond("status", "$ = ?", s(store.RunRunning)).cond("owner", "$ = ?", s(c.str("owner"))).
		cond("lease", "$ = ?", n(c.num("lease"))).cond("attempt", "$ = ?", n(c.num("attempt")))
	k := key(c.str("pk"), c.str("sk"))
	// The thread records the new attempt (fence.go) in the same transaction.
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		u.update(db.tables.threads, k),
		reclaimThread(db.tables.threads, c.str("org"), c.str("thread"), c.str("id"), c.num("attempt")),
	})
	if err != nil {
		return store.Run{}, false, err
	}
	if reasons != nil {
		if !txFailedAt(reasons, 0) && txFailedAt(reasons, 1) {
			return store.Run{}, false, errThreadGone
		}
		return store.Run{}, false, nil
	}
	it, err := db.get(ctx, db.tables.threads, k)
	if err != nil || it == nil {
		return store.Run{}, false, err
	}
	return runFrom(it), true, nil
}

// RenewLease implements store.RunQueue. ErrStale also when the run no longer
// exists (its thread was deleted): owner does not hold it. An expired lease
// nobody claimed since is still owner's. ErrSuperseded: fence.go.
func (db *DB) RenewLease(ctx context.Context, runID, owner string, attempt int, until time.Time) (store.Run, error) {
	if runID == "" {
		return store.Run{}, store.ErrStale
	}
	m, err := db.get(ctx, db.tables.threads, runMarkerKey(runID))
	if err != nil {
		return store.Run{}, wrap("renew lease", err)
	}
	if m == nil {
		return store.Run{}, store.ErrStale
	}
	u := newUpd().set("lease", n(micros(until))).apply(db.leaseIndex(until)).
		cond("status", "$ = ?", s(store.RunRunning)).cond("owner", "$ = ?", s(owner)).apply(renewalFence(attempt))
	runKey := key(threadPK(m.str("org"), m.str("thread")), runSK(runID))
	out, err := db.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(db.tables.threads), Key: runKey,
		UpdateExpression: u.updateExpr(), ConditionExpression: aws.String(*u.condExpr() + " AND attribute_exists(pk)"),
		ExpressionAttributeNames: u.namesOrNil(), ExpressionAttributeValues: u.valuesOrNil(),
		ReturnValues: types.ReturnValueAllNew,
	})
	if isCondFailed(err) {
		return store.Run{}, db.fenceRenewal(ctx, runKey, runID, attempt)
	}
	if err != nil {
		return store.Run{}, wrap("renew lease", err)
	}
	return runFrom(item(out.Attributes)), nil
}

// FinishRun implements store.RunQueue. ErrStale when the run is not running under
// f.LeaseOwner, including when it no longer exists; ErrSuperseded when it is
// running under another attempt than f.Attempt (> 0, fence.go). A finished run keeps its
// CancelAction; its lease is cleared. After a rollback the thread's summary is
// left as it was (the run's writes are undone) and its status is idle unless
// another run is inflight.
func (db *DB) FinishRun(ctx context.Context, f store.FinishedRun) error {
	if f.OrgID == "" || f.ThreadID == "" || f.RunID == "" {
		return store.ErrStale
	}
	table := db.tables.threads
	pk := threadPK(f.OrgID, f.ThreadID)
	runKey := key(pk, runSK(f.RunID))
	return retry(ctx, "finish run", func() error {
		rit, err := db.get(ctx, table, runKey)
		if err != nil {
			return err
		}
		if rit == nil {
			return store.ErrStale
		}
		if err := fenceFinish(rit, f); err != nil {
			return err
		}
		if rit.str("status") != store.RunRunning || rit.str("owner") != f.LeaseOwner {
			return store.ErrStale
		}
		t, err := db.loadThread(ctx, f.OrgID, f.ThreadID)
		if errors.Is(err, store.ErrNotFound) {
			return store.ErrStale
		}
		if err != nil {
			return err
		}
		runCond := func() *upd {
			return newUpd().cond("status", "$ = ?", s(store.RunRunning)).cond("owner", "$ = ?", s(f.LeaseOwner)).
				cond("cancel", "$ = ?", s(rit.str("cancel"))).apply(finishFence(f.Attempt))
		}
		if rit.boolean("temp") {
			if err := db.keepTemporaryResult(ctx, f); err != nil {
				return err
			}
			extra := runCond().del(table, runKey)
			return db.deleteThread(ctx, t, &extra)
		}
		status := f.ThreadStatus
		if len(t.pending) > 0 {
			status = store.ThreadBusy
		}
		var tx []types.TransactWriteItem
		if h := head(t.pending); h != "" && db.claimIndexes() {
			tx = append(tx, setHead(table, f.OrgID, pk, h, t.pending[h]))
		}
		tu := threadCond(t).remove("running").set("updated", n(micros(f.Now))).set("supd", n(micros(f.Now)))
		var ref blobRef
		if rit.str("cancel") == store.CancelRollback {
			deleted, err := db.deleteRunCheckpoints(ctx, f.OrgID, f.ThreadID, f.RunID)
			if err != nil {
				return err
			}
			if deleted {
				return errRetry // the thread's version moved: read it again
			}
			if len(t.pending) == 0 {
				status = store.ThreadIdle
			}
			size := rit.num("bytes")
			tu.add("bytes", -size)
			tx = append(tx, runCond().del(table, runKey),
				types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: runMarkerKey(f.RunID)}},
				db.usageAdd(f.OrgID, f.ThreadID, 0, -size))
		} else {
			// The values and the result are the state of the run's last
			// checkpoint: split against its manifest (cpvalues.go) they
			// write a manifest, not the state again.
			latest, err := db.latestManifest(ctx, pk)
			if err != nil {
				return err
			}
			vals, err := db.encodeDoc(ctx, pk, f.Values, latest)
			if err != nil {
				return err
			}
			res, err := db.encodeDoc(ctx, pk, f.Result, latest)
			if err != nil {
				return err
			}
			if vals.M != nil {
				setSplitValues(tu, vals.Manifest)
			} else {
				if ref, err = db.putValues(ctx, pk, f.Values); err != nil {
					return err
				}
				setValues(tu, f.Values, ref)
				if f.Values != nil {
					tu.remove("values_manifest")
				}
			}
			tu.setOrRemove("interrupts", f.Interrupts).setOrRemove("error", f.Error)
			// A running run has no result yet: the result is what it adds
			// (its length as put, however it is stored).
			size := int64(len(f.Result))
			ru := runCond().set("status", s(f.Status)).
				set("ended", n(micros(f.Now))).set("updated", n(micros(f.Now))).set("owner", s("")).
				remove("lease").remove("lpk").remove("lsk").add("bytes", size)
			if res.M != nil {
				ru.set("result_manifest", b(res.Manifest))
			} else {
				ru.setOrRemove("result", f.Result)
			}
			tu.add("bytes", size)
			tx = append(tx, ru.update(table, runKey), db.usageAdd(f.OrgID, f.ThreadID, 0, size))
		}
		tu.set("status", s(status))
		tx = append(tx, tu.update(table, threadKey(f.OrgID, f.ThreadID)), db.freeSlot(f.OrgID, f.RunID))
		reasons, err := db.transact(ctx, tx)
		if err != nil || reasons != nil {
			_ = db.deleteBlob(ctx, pk, valuesBase, ref)
			if err != nil {
				return err
			}
			return errRetry
		}
		if f.Values != nil {
			_ = db.deleteBlob(ctx, pk, valuesBase, blobOf(t.it, "values"))
		}
		return nil
	})
}

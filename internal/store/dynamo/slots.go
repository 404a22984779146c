package dynamo

import (
	"context"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Fair claims: an organization's running runs are its "slots", a string
// set of run IDs in one item, so that a claim can be conditioned on the
// set's size in the transaction that marks the run running (the cap holds
// across processes and Lambdas without a lock); the queue index is keyed by
// organization first, so that ClaimRun can walk the organizations in turn;
// one item remembers the organization served last. See doc.go.

const slotsAttr = "runs"

func slotsKey(orgID string) map[string]types.AttributeValue { return key("SLOTS#"+orgID, "SLOTS") }

// turnKey is the item naming the organization whose pending run ClaimRun
// claimed last ("org").
func turnKey() map[string]types.AttributeValue { return key("TURN", "TURN") }

func stringSet(v ...string) types.AttributeValue { return &types.AttributeValueMemberSS{Value: v} }

// stringSet reads a string set; nil when absent.
func (it item) stringSet(name string) []string {
	if v, ok := it[name].(*types.AttributeValueMemberSS); ok {
		return v.Value
	}
	return nil
}

// takeSlot is the transaction item that adds runID to its organization's
// slots, on condition that fewer than perOrg are taken (none for perOrg 0:
// the set is kept whatever the caller's cap, so that every claimer counts
// the same runs).
func (db *DB) takeSlot(orgID, runID string, perOrg int) types.TransactWriteItem {
	u := newUpd().addToSet(slotsAttr, stringSet(runID))
	if perOrg > 0 {
		u.cond(slotsAttr, "attribute_not_exists($) OR size($) < ?", n(int64(perOrg)))
	}
	return u.update(db.tables.threads, slotsKey(orgID))
}

// freeSlot is the transaction item that removes runID from its
// organization's slots: unconditional, since removing an ID that is not
// there changes nothing, and a condition here would cancel the transaction
// that ends the run.
func (db *DB) freeSlot(orgID, runID string) types.TransactWriteItem {
	return newUpd().drop(slotsAttr, stringSet(runID)).update(db.tables.threads, slotsKey(orgID))
}

// reclaimSlots removes from orgID's slots the runs that are not running any
// more and reports whether it removed any. Every way out of running
// (FinishRun, deleting the thread) frees the slot in its own transaction,
// so this only repairs what nothing should leave behind; but an
// organization whose slots leaked would never start a run again, so a claim
// that finds no free slot checks before it gives up. A run that is not
// running cannot run again (runs only go from pending to running to an end,
// and run IDs are unique), so removing it cannot race with its own claim.
func (db *DB) reclaimSlots(ctx context.Context, orgID string) (bool, error) {
	table := db.tables.threads
	it, err := db.get(ctx, table, slotsKey(orgID))
	if err != nil || it == nil {
		return false, err
	}
	ids := it.stringSet(slotsAttr)
	markers := make([]map[string]types.AttributeValue, len(ids))
	for i, id := range ids {
		markers[i] = runMarkerKey(id)
	}
	found, err := db.batchGet(ctx, table, markers)
	if err != nil {
		return false, err
	}
	var runKeys []map[string]types.AttributeValue
	for _, m := range found {
		id := strings.TrimPrefix(m.str("pk"), "RUNID#")
		runKeys = append(runKeys, key(threadPK(m.str("org"), m.str("thread")), runSK(id)))
	}
	runs, err := db.batchGet(ctx, table, runKeys)
	if err != nil {
		return false, err
	}
	running := map[string]bool{}
	for _, r := range runs {
		if r.str("status") == store.RunRunning {
			running[r.str("id")] = true
		}
	}
	var stale []string
	for _, id := range ids {
		if !running[id] {
			stale = append(stale, id)
		}
	}
	if len(stale) == 0 {
		return false, nil
	}
	// An unconditional DELETE of set elements: safe for the SDK to retry.
	_, err = db.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: slotsKey(orgID),
		UpdateExpression:          aws.String("DELETE #r :stale"),
		ExpressionAttributeNames:  map[string]string{"#r": slotsAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":stale": stringSet(stale...)},
	})
	return err == nil, err
}

// batchGet reads keys of table with strongly consistent reads, in batches
// of 100, and returns the items found (in no particular order).
func (db *DB) batchGet(ctx context.Context, table string, keys []map[string]types.AttributeValue) ([]item, error) {
	var out []item
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 100)]
		keys = keys[len(batch):]
		for attempt := 0; len(batch) > 0; attempt++ {
			res, err := db.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems: map[string]types.KeysAndAttributes{table: {Keys: batch, ConsistentRead: aws.Bool(true)}},
			})
			if err != nil {
				return nil, err
			}
			for _, it := range res.Responses[table] {
				out = append(out, item(it))
			}
			batch = res.UnprocessedKeys[table].Keys
			if len(batch) > 0 {
				// Throttled: back off a little before the rest.
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Duration(min(attempt+1, 20)) * 10 * time.Millisecond):
				}
			}
		}
	}
	return out, nil
}

// orgQueueStart and orgQueueEnd bound the queue keys of orgID's runs (see
// queueKey): every key of the organization sorts between them, and the
// keys of no other organization do (organization IDs hold no "#", as in
// every key of the threads table).
func orgQueueStart(orgID string) string { return orgID + "#" }
func orgQueueEnd(orgID string) string   { return orgID + "#\U0010FFFF" }

// lastTurn returns the organization whose pending run ClaimRun claimed
// last ("" when none yet).
func (db *DB) lastTurn(ctx context.Context) (string, error) {
	it, err := db.get(ctx, db.tables.threads, turnKey())
	if err != nil || it == nil {
		return "", err
	}
	return it.str("org"), nil
}

// setTurn records orgID as served last. An unconditional put: two
// processes that claim at once may each record theirs, and the next walk
// starts after either, which costs an organization at most a turn.
func (db *DB) setTurn(ctx context.Context, orgID string) error {
	_, err := db.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(db.tables.threads),
		Item: with(turnKey(), map[string]types.AttributeValue{"org": s(orgID)})})
	return err
}

// firstQueued returns the queue entry with the least queue key after from
// (nil when none).
func (db *DB) firstQueued(ctx context.Context, from string) (item, error) {
	in := &dynamodb.QueryInput{
		TableName: aws.String(db.tables.threads), IndexName: aws.String(indexQueue),
		KeyConditionExpression:    aws.String("qpk = :q"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":q": s(queuePK)},
		Limit:                     aws.Int32(1),
	}
	if from != "" {
		in.KeyConditionExpression = aws.String("qpk = :q AND qsk > :from")
		in.ExpressionAttributeValues[":from"] = s(from)
	}
	res, err := db.client.Query(ctx, in)
	if err != nil || len(res.Items) == 0 {
		return nil, err
	}
	return item(res.Items[0]), nil
}

// readyHeads returns up to 10 queue entries of orgID whose NotBefore has
// come, oldest first.
func (db *DB) readyHeads(ctx context.Context, orgID string, now time.Time) ([]item, error) {
	res, err := db.client.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(db.tables.threads), IndexName: aws.String(indexQueue),
		KeyConditionExpression: aws.String("qpk = :q AND qsk BETWEEN :lo AND :hi"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":q": s(queuePK), ":lo": s(orgQueueStart(orgID)), ":hi": s(orgQueueStart(orgID) + sortTime(now) + "#~"),
		},
		Limit: aws.Int32(10),
	})
	if err != nil {
		return nil, err
	}
	out := make([]item, len(res.Items))
	for i, it := range res.Items {
		out[i] = item(it)
	}
	return out, nil
}

// claimInTurn claims a pending run, serving the organizations in turn: it
// walks the queue index organization by organization (two queries each: the
// next organization's first entry, then its entries whose NotBefore has
// come), from the one after the organization served last, wrapping around
// to that one, and claims the first run it can. lost reports that a
// candidate was lost to a concurrent claim (the caller tries again).
func (db *DB) claimInTurn(ctx context.Context, owner string, now, leaseUntil time.Time, perOrg int) (r store.Run, ok, lost bool, err error) {
	last, err := db.lastTurn(ctx)
	if err != nil {
		return store.Run{}, false, false, err
	}
	from, wrapped := "", last == ""
	if last != "" {
		from = orgQueueEnd(last)
	}
	for {
		first, err := db.firstQueued(ctx, from)
		if err != nil {
			return store.Run{}, false, lost, err
		}
		if first == nil {
			if wrapped {
				return store.Run{}, false, lost, nil
			}
			from, wrapped = "", true
			continue
		}
		qsk := first.str("qsk")
		if wrapped && last != "" && qsk > orgQueueEnd(last) {
			return store.Run{}, false, lost, nil // every organization had its turn
		}
		org := first.str("org")
		var cands []item
		if strings.HasPrefix(qsk, orgQueueStart(org)) {
			from = orgQueueEnd(org)
			if cands, err = db.readyHeads(ctx, org, now); err != nil {
				return store.Run{}, false, lost, err
			}
		} else {
			// An entry written before the queue was keyed by organization
			// (time first): a candidate of its own, in the order it sorts.
			from = qsk
			if !first.time("nb").After(now) {
				cands = []item{first}
			}
		}
		for _, c := range cands {
			r, res, err := db.claimPending(ctx, c, owner, now, leaseUntil, perOrg)
			if err != nil {
				return store.Run{}, false, lost, err
			}
			if res == claimFull {
				break // the organization has no free slot: the next one's turn
			}
			if res == claimLost {
				lost = true
				continue
			}
			// The run is claimed whatever becomes of the record of the
			// turn: a turn not recorded costs an organization a turn, an
			// error here would cost the run its lease.
			_ = db.setTurn(ctx, org)
			return r, true, false, nil
		}
	}
}

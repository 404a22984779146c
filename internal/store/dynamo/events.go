package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/payloads"
	"github.com/stepgraph/stepgraph/internal/store"
)

// The event log of resumable run streams (store.Events), in the threads
// table, one partition per run (see doc.go):
//
//	pk EVR#<org>#<run>  sk NEXT          the run's counter: next (the Seq
//	                                     of its next event), exp (the
//	                                     expiry of its last append)
//	pk EVR#<org>#<run>  sk E#<seq>       an event (seq zero-padded, so the
//	                                     sort key orders them)
//
// Every item carries exp (unix microseconds, what reads check) and ttl
// (epoch seconds, for DynamoDB's TTL, which deletes expired items within
// days). An append is one transaction: the counter, compare-and-set on the
// next it read, and the events; two appends of one run never share a Seq,
// and a lost race reads the counter again.

// Limits of one append: a transaction takes 100 items (the counter and 99
// events) and 4 MB, an item 400 KB. The streamer appends a few events at a
// time; without a payload store an event whose data is larger than
// maxEventBytes is refused (the run stops, see runs). With one, an event's
// data goes to the payload store above PayloadThreshold (payloads.go), so
// an event may be as large as payloads.MaxBytes and an append carries up to
// maxEventsPerAppend events of any size.
const (
	maxEventsPerAppend = 99
	maxEventBytes      = 350_000
	maxAppendBytes     = 3_500_000
)

// maxEventBytes is the largest event one append takes; maxAppend the
// bytes of all its events.
func (db *DB) maxEventBytes() int {
	if db.payloads != nil {
		return payloads.MaxBytes
	}
	return maxEventBytes
}

func (db *DB) maxAppendBytes() int {
	if db.payloads != nil {
		return payloads.MaxBytes
	}
	return maxAppendBytes
}

func eventsPK(orgID, runID string) string { return "EVR#" + orgID + "#" + runID }

func eventSK(seq int64) string { return fmt.Sprintf("E#%016d", seq) }

// AppendRunEvents implements store.Events.
func (db *DB) AppendRunEvents(ctx context.Context, orgID, runID string, events []store.RunEvent, expires time.Time) (int64, error) {
	if len(events) == 0 {
		return 0, nil
	}
	if orgID == "" || runID == "" {
		return 0, errEmptyID
	}
	total := 0
	for _, e := range events {
		n := len(e.Data) + len(e.Event)
		if n > db.maxEventBytes() {
			return 0, fmt.Errorf("dynamo: append run events: an event of %d bytes is over the %d an item holds", n, db.maxEventBytes())
		}
		total += n
	}
	if len(events) > maxEventsPerAppend || total > db.maxAppendBytes() {
		return 0, fmt.Errorf("dynamo: append run events: %d events of %d bytes are over one transaction (%d events, %d bytes)",
			len(events), total, maxEventsPerAppend, db.maxAppendBytes())
	}
	pk := eventsPK(orgID, runID)
	exp, ttl := n(micros(expires)), n(expires.Unix())
	for attempt := 0; ; attempt++ {
		counter, err := db.get(ctx, db.tables.threads, key(pk, "NEXT"))
		if err != nil {
			return 0, wrap("append run events", err)
		}
		first := int64(0)
		var guard types.TransactWriteItem
		next := item(key(pk, "NEXT"))
		if counter == nil {
			next["next"], next["exp"], next[ttlAttribute] = n(int64(len(events))), exp, ttl
			guard = types.TransactWriteItem{Put: &types.Put{TableName: aws.String(db.tables.threads), Item: next,
				ConditionExpression: aws.String("attribute_not_exists(pk)")}}
		} else {
			first = counter.num("next")
			guard = types.TransactWriteItem{Update: &types.Update{TableName: aws.String(db.tables.threads), Key: key(pk, "NEXT"),
				UpdateExpression:         aws.String("SET #next = :new, exp = :exp, #ttl = :ttl"),
				ConditionExpression:      aws.String("#next = :old"),
				ExpressionAttributeNames: map[string]string{"#next": "next", "#ttl": ttlAttribute},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":new": n(first + int64(len(events))), ":old": n(first), ":exp": exp, ":ttl": ttl}}}
		}
		items := []types.TransactWriteItem{guard}
		for i, e := range events {
			it := item(key(pk, eventSK(first+int64(i))))
			it["event"], it["data"], it["exp"], it[ttlAttribute] = s(e.Event), b(e.Data), exp, ttl
			items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(db.tables.threads), Item: it}})
		}
		cancelled, err := db.transact(ctx, items)
		switch {
		case err != nil:
			return 0, wrap("append run events", err)
		case cancelled == nil:
			return first, nil
		case txFailedAt(cancelled, 0) && attempt < maxAttempts:
			continue // another append took these numbers: read the counter again
		}
		return 0, txErr("append run events", cancelled)
	}
}

// RunEvents implements store.Events: a strongly consistent query of the
// run's partition from after's successor; expired events are skipped here
// (TTL deletes them late).
func (db *DB) RunEvents(ctx context.Context, orgID, runID string, after int64, limit int, now time.Time) ([]store.RunEvent, error) {
	if limit <= 0 {
		limit = 100
	}
	if orgID == "" || runID == "" {
		return nil, nil
	}
	from := "E#"
	if after >= 0 {
		from = eventSK(after)
	}
	in := &dynamodb.QueryInput{
		TableName:              aws.String(db.tables.threads),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :from AND :to"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": s(eventsPK(orgID, runID)), ":from": s(from), ":to": s("E#~")},
		ConsistentRead: aws.Bool(true),
	}
	var out []store.RunEvent
	for {
		page, err := db.client.Query(ctx, in)
		if err != nil {
			return nil, wrap("run events", err)
		}
		for _, raw := range page.Items {
			it := item(raw)
			var seq int64
			if _, err := fmt.Sscanf(it.str("sk"), "E#%d", &seq); err != nil || seq <= after {
				continue // after itself: BETWEEN is inclusive
			}
			if !it.time("exp").After(now) {
				continue
			}
			out = append(out, store.RunEvent{Seq: seq, Event: it.str("event"), Data: it.bytes("data")})
			if len(out) == limit {
				return out, nil
			}
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// NextRunEventSeq implements store.Events: the counter, unless its last
// append (the latest expiry) has expired.
func (db *DB) NextRunEventSeq(ctx context.Context, orgID, runID string, now time.Time) (int64, error) {
	if orgID == "" || runID == "" {
		return 0, nil
	}
	counter, err := db.get(ctx, db.tables.threads, key(eventsPK(orgID, runID), "NEXT"))
	if err != nil {
		return 0, wrap("next run event", err)
	}
	if counter == nil || !counter.time("exp").After(now) {
		return 0, nil
	}
	return counter.num("next"), nil
}

// DeleteExpiredRunEvents implements store.Events with a scan of the table
// for expired event items (of runs and threads): correct, but it reads the whole table, so it is
// for tests and small setups. Deployed tables leave expired events to
// DynamoDB's TTL, and the AWS functions never call it.
func (db *DB) DeleteExpiredRunEvents(ctx context.Context, now time.Time, limit int) (int, error) {
	in := &dynamodb.ScanInput{
		TableName:        aws.String(db.tables.threads),
		FilterExpression: aws.String("((begins_with(pk, :p) AND begins_with(sk, :e)) OR (begins_with(pk, :t) AND begins_with(sk, :te))) AND exp <= :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("EVR#"), ":e": s("E#"),
			":t": s("T#"), ":te": s(threadEventPrefix), ":now": n(micros(now))},
		ProjectionExpression: aws.String("pk, sk"),
		ConsistentRead:       aws.Bool(true),
	}
	var keys []map[string]types.AttributeValue
	for len(keys) < limit {
		page, err := db.client.Scan(ctx, in)
		if err != nil {
			return 0, wrap("delete expired run events", err)
		}
		for _, it := range page.Items {
			if len(keys) < limit {
				keys = append(keys, map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]})
			}
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	if len(keys) == 0 {
		return 0, nil
	}
	if err := db.batchWrite(ctx, db.tables.threads, deletes(keys)); err != nil {
		return 0, wrap("delete expired run events", err)
	}
	return len(keys), nil
}

// The thread-keyed log of the thread event protocol, in the thread's own
// partition (so it is deleted with the thread):
//
//	pk T#<org>#<thread>  sk TEVSEQ       the thread's counter: last (the
//	                                     highest Seq given); no expiry, so
//	                                     the numbering never goes back
//	pk T#<org>#<thread>  sk TEV#<seq>    an event (run, event, data, exp,
//	                                     ttl)
//
// An append is one transaction: a check that the thread exists and is not
// being deleted, the counter (compare-and-set on the last it read) and the
// events, within the limits of a run's append.
const (
	threadEventPrefix  = "TEV#"
	threadEventCounter = "TEVSEQ"
)

func threadEventSK(seq int64) string { return fmt.Sprintf("TEV#%016d", seq) }

// AppendThreadEvents implements store.Events.
func (db *DB) AppendThreadEvents(ctx context.Context, orgID, threadID string, events []store.ThreadEvent, expires time.Time) (int64, error) {
	if len(events) == 0 {
		return 0, nil
	}
	if orgID == "" || threadID == "" {
		return 0, store.ErrNotFound
	}
	total := 0
	for _, e := range events {
		size := len(e.Data) + len(e.Event) + len(e.RunID)
		if size > db.maxEventBytes() {
			return 0, fmt.Errorf("dynamo: append thread events: an event of %d bytes is over the %d an item holds", size, db.maxEventBytes())
		}
		total += size
	}
	if len(events) > maxEventsPerAppend-1 || total > db.maxAppendBytes() {
		return 0, fmt.Errorf("dynamo: append thread events: %d events of %d bytes are over one transaction (%d events, %d bytes)",
			len(events), total, maxEventsPerAppend-1, db.maxAppendBytes())
	}
	table, pk := db.tables.threads, threadPK(orgID, threadID)
	exp, ttl := n(micros(expires)), n(expires.Unix())
	for attempt := 0; ; attempt++ {
		counter, err := db.get(ctx, table, key(pk, threadEventCounter))
		if err != nil {
			return 0, wrap("append thread events", err)
		}
		last := int64(0)
		thread := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: threadKey(orgID, threadID),
			ConditionExpression:       aws.String("attribute_exists(pk) AND (attribute_not_exists(deleting) OR deleting = :f)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":f": &types.AttributeValueMemberBOOL{Value: false}}}}
		var guard types.TransactWriteItem
		if counter == nil {
			next := item(key(pk, threadEventCounter))
			next["last"] = n(int64(len(events)))
			guard = types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: next,
				ConditionExpression: aws.String("attribute_not_exists(pk)")}}
		} else {
			last = counter.num("last")
			guard = types.TransactWriteItem{Update: &types.Update{TableName: aws.String(table), Key: key(pk, threadEventCounter),
				UpdateExpression:          aws.String("SET #last = :new"),
				ConditionExpression:       aws.String("#last = :old"),
				ExpressionAttributeNames:  map[string]string{"#last": "last"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":new": n(last + int64(len(events))), ":old": n(last)}}}
		}
		items := []types.TransactWriteItem{thread, guard}
		for i, e := range events {
			it := item(key(pk, threadEventSK(last+1+int64(i))))
			it["run"], it["event"], it["data"], it["exp"], it[ttlAttribute] = s(e.RunID), s(e.Event), b(e.Data), exp, ttl
			items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: it}})
		}
		cancelled, err := db.transact(ctx, items)
		switch {
		case err != nil:
			return 0, wrap("append thread events", err)
		case cancelled == nil:
			return last + 1, nil
		case txFailedAt(cancelled, 0):
			return 0, store.ErrNotFound
		case txFailedAt(cancelled, 1) && attempt < maxAttempts:
			continue // another append took these numbers: read the counter again
		}
		return 0, txErr("append thread events", cancelled)
	}
}

// ThreadEvents implements store.Events: a strongly consistent query of the
// thread's event items from after's successor; expired ones are skipped.
func (db *DB) ThreadEvents(ctx context.Context, orgID, threadID string, after int64, limit int, now time.Time) ([]store.ThreadEvent, error) {
	if limit <= 0 {
		limit = 100
	}
	if orgID == "" || threadID == "" {
		return nil, nil
	}
	from := threadEventSK(max(after, 0))
	in := &dynamodb.QueryInput{
		TableName:              aws.String(db.tables.threads),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :from AND :to"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": s(threadPK(orgID, threadID)), ":from": s(from), ":to": s(threadEventPrefix + "~")},
		ConsistentRead: aws.Bool(true),
	}
	var out []store.ThreadEvent
	for {
		page, err := db.client.Query(ctx, in)
		if err != nil {
			return nil, wrap("thread events", err)
		}
		for _, raw := range page.Items {
			it := item(raw)
			var seq int64
			if _, err := fmt.Sscanf(it.str("sk"), threadEventPrefix+"%d", &seq); err != nil || seq <= after {
				continue // after itself: BETWEEN is inclusive
			}
			if !it.time("exp").After(now) {
				continue
			}
			out = append(out, store.ThreadEvent{Seq: seq, RunID: it.str("run"), Event: it.str("event"), Data: it.bytes("data")})
			if len(out) == limit {
				return out, nil
			}
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// LastThreadEventSeq implements store.Events: the counter.
func (db *DB) LastThreadEventSeq(ctx context.Context, orgID, threadID string) (int64, error) {
	if orgID == "" || threadID == "" {
		return 0, nil
	}
	counter, err := db.get(ctx, db.tables.threads, key(threadPK(orgID, threadID), threadEventCounter))
	if err != nil {
		return 0, wrap("last thread event", err)
	}
	if counter == nil {
		return 0, nil
	}
	return counter.num("last"), nil
}

var _ store.Events = (*DB)(nil)

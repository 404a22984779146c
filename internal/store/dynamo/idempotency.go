package dynamo

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// idempotencyKey: one partition per organization; the sort key is the scope
// and the key. Scopes are operation names without "#".
func idempotencyKey(orgID, scope, k string) map[string]types.AttributeValue {
	return key(orgID, scope+"#"+k)
}

func idempotencyFrom(it item) store.IdempotencyRecord {
	return store.IdempotencyRecord{
		OrgID: it.str("org"), Scope: it.str("scope"), Key: it.str("key"),
		RequestHash: it.str("hash"), Status: int(it.num("status")), Body: it.bytes("body"),
		CreatedAt: it.time("created"),
	}
}

// ReserveIdempotencyKey implements store.Idempotency with one conditional
// put: the record is written when none exists or the stored one is in
// progress (status 0) and was created more than staleAfter before
// rec.CreatedAt (now, when that is zero). Otherwise the stored record is
// returned.
func (db *DB) ReserveIdempotencyKey(ctx context.Context, rec store.IdempotencyRecord, staleAfter time.Duration) (store.IdempotencyRecord, bool, error) {
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = time.Now()
	}
	rec.CreatedAt = canon(rec.CreatedAt)
	rec.Status, rec.Body = 0, nil
	k := idempotencyKey(rec.OrgID, rec.Scope, rec.Key)
	it := with(idempotencyKey(rec.OrgID, rec.Scope, rec.Key), map[string]types.AttributeValue{
		"org": s(rec.OrgID), "scope": s(rec.Scope), "key": s(rec.Key), "hash": s(rec.RequestHash),
		"status": n(0), "created": n(micros(rec.CreatedAt)),
	})
	if db.opts.IdempotencyTTL > 0 {
		it[ttlAttribute] = n(rec.CreatedAt.Add(db.opts.IdempotencyTTL).Unix())
	}
	var out store.IdempotencyRecord
	var fresh bool
	err := retry(ctx, "reserve idempotency key", func() error {
		put := types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(db.tables.idempotency), Item: it,
			ConditionExpression:      aws.String("attribute_not_exists(pk) OR (#st = :zero AND created < :cutoff)"),
			ExpressionAttributeNames: map[string]string{"#st": "status"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":zero": n(0), ":cutoff": n(micros(rec.CreatedAt) - staleAfter.Microseconds()),
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}
		failed, stored, err := db.write1(ctx, put)
		if err != nil {
			return err
		}
		if !failed {
			out, fresh = rec, true
			return nil
		}
		if stored == nil {
			if stored, err = db.get(ctx, db.tables.idempotency, k); err != nil {
				return err
			}
		}
		if stored == nil {
			return errRetry // released meanwhile
		}
		out, fresh = idempotencyFrom(stored), false
		return nil
	})
	if err != nil {
		return store.IdempotencyRecord{}, false, err
	}
	return out, fresh, nil
}

// CompleteIdempotencyKey implements store.Idempotency; ErrNotFound when the
// key is not reserved.
func (db *DB) CompleteIdempotencyKey(ctx context.Context, orgID, scope, k string, status int, body []byte) error {
	_, err := db.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(db.tables.idempotency), Key: idempotencyKey(orgID, scope, k),
		ConditionExpression:      aws.String(exists),
		UpdateExpression:         aws.String("SET #st = :st, body = :body"),
		ExpressionAttributeNames: map[string]string{"#st": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":st": n(int64(status)), ":body": b(body),
		},
	})
	if isCondFailed(err) {
		return store.ErrNotFound
	}
	return wrap("complete idempotency key", err)
}

// ReleaseIdempotencyKey implements store.Idempotency; releasing an unknown key
// is not an error.
func (db *DB) ReleaseIdempotencyKey(ctx context.Context, orgID, scope, k string) error {
	_, err := db.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(db.tables.idempotency), Key: idempotencyKey(orgID, scope, k),
	})
	return wrap("release idempotency key", err)
}

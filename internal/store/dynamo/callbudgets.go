package dynamo

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// A call's counters (store.CallBudgets) are one item of the threads table,
// pk CALL#<id>, sk C, removed by the table's TTL an hour after the call's
// token expired. Each request is one conditional update: add to the
// counters and put the request's id in the item's set of counted requests,
// unless it is there already (a retry after a lost answer), so concurrent
// requests on any function instance count once each. The functions serving
// the runtime's routes already write that table (the store's items live
// there). A call's requests are bounded by its budget, so the set stays
// small.
func callBudgetKey(id string) map[string]types.AttributeValue { return key("CALL#"+id, "C") }

// SpendCall implements store.CallBudgets.
func (db *DB) SpendCall(ctx context.Context, id, request string, size int64, expires time.Time) (store.CallSpent, error) {
	u := newUpd().add("requests", 1).add("bytes", size).set(ttlAttribute, n(expires.Add(time.Hour).Unix())).
		addToSet("counted", &types.AttributeValueMemberSS{Value: []string{request}}).
		cond("counted", "attribute_not_exists($) OR NOT contains($, ?)", s(request))
	out, err := db.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(db.tables.threads), Key: callBudgetKey(id),
		UpdateExpression: u.updateExpr(), ConditionExpression: u.condExpr(),
		ExpressionAttributeNames: u.namesOrNil(), ExpressionAttributeValues: u.valuesOrNil(),
		ReturnValues: types.ReturnValueAllNew,
	})
	if isCondFailed(err) { // counted before: the totals as they are
		got, gerr := db.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(db.tables.threads),
			Key: callBudgetKey(id), ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("requests, #b"),
			ExpressionAttributeNames: map[string]string{"#b": "bytes"}})
		if gerr != nil {
			return store.CallSpent{}, wrap("spend call", gerr)
		}
		return callSpent(got.Item), nil
	}
	if err != nil {
		return store.CallSpent{}, wrap("spend call", err)
	}
	return callSpent(out.Attributes), nil
}

func callSpent(it item) store.CallSpent {
	return store.CallSpent{Requests: it.num("requests"), Bytes: it.num("bytes")}
}

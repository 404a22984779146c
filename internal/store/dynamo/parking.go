package dynamo

import (
	"context"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// wakeTokenAttr is the run item's attribute holding its parked
// execution's task token (store.RunParking).
const wakeTokenAttr = "wtok"

// ParkRun implements store.RunParking: one update of the run item,
// conditioned on the run being pending. A plain conditional UpdateItem (not
// a one-item transaction): the write sets a value, so an SDK retry of a
// write whose answer was lost finds the same token stored, or the run
// claimed meanwhile, which is also the answer it should get (false).
func (db *DB) ParkRun(ctx context.Context, orgID, threadID, runID, token string) (bool, error) {
	if orgID == "" || threadID == "" || runID == "" {
		return false, store.ErrNotFound
	}
	_, err := db.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(db.tables.threads),
		Key:                       key(threadPK(orgID, threadID), runSK(runID)),
		UpdateExpression:          aws.String("SET #w = :w"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND #s = :pending"),
		ExpressionAttributeNames:  map[string]string{"#w": wakeTokenAttr, "#s": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":w": s(token), ":pending": s(store.RunPending)},
	})
	switch {
	case err == nil:
		return true, nil
	case !isCondFailed(err):
		return false, wrap("park run", err)
	}
	if _, err := db.Run(ctx, orgID, threadID, runID); err != nil {
		return false, err // ErrNotFound: gone
	}
	return false, nil // no longer pending
}

// ParkedRuns implements store.RunParking: the thread's run items (one
// partition, as ListRuns reads them), the pending ones with a token.
func (db *DB) ParkedRuns(ctx context.Context, orgID, threadID string) ([]store.ParkedRun, error) {
	if orgID == "" || threadID == "" {
		return nil, nil
	}
	items, err := db.queryPartition(ctx, db.tables.threads, threadPK(orgID, threadID), "RUN#")
	if err != nil {
		return nil, wrap("parked runs", err)
	}
	var parked []item
	for _, it := range items {
		if it.str("status") == store.RunPending && it.str(wakeTokenAttr) != "" {
			parked = append(parked, it)
		}
	}
	sort.SliceStable(parked, func(i, j int) bool { // start order, as the claim's
		a, b := parked[i], parked[j]
		if a.num("nb") != b.num("nb") {
			return a.num("nb") < b.num("nb")
		}
		if a.num("created") != b.num("created") {
			return a.num("created") < b.num("created")
		}
		return a.num("seq") < b.num("seq")
	})
	out := make([]store.ParkedRun, 0, len(parked))
	for _, it := range parked {
		out = append(out, store.ParkedRun{Run: runFrom(it), Token: it.str(wakeTokenAttr)})
	}
	return out, nil
}

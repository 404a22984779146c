package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// getWritten reads an item that is never changed once written — only
// created or deleted: an API key, an organization's name and secret
// references, an assistant's stored version. An eventually consistent read
// costs half a strongly consistent one (review #20) and, for such an item,
// can only be wrong in two ways, both handled:
//   - it misses an item just created: a miss is read again, strongly, so a
//     key or version used right after its creation is found;
//   - it finds an item deleted a moment ago (DynamoDB's replicas agree
//     within about a second): a revoked API key can authenticate that much
//     longer, which the API functions' key cache (30 s) exceeds anyway.
//
// Everything that changes in place — threads, runs, checkpoints, events,
// assistants, deployments and their revisions, slots, idempotency records
// — stays strongly consistent (get): the version checks of the
// transactions read what they compare, the SDKs read their own writes (an
// assistant patched then fetched), and the deploy worker branches on the
// revision status it just wrote.
func (db *DB) getWritten(ctx context.Context, table string, k map[string]types.AttributeValue) (item, error) {
	out, err := db.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: k, ConsistentRead: aws.Bool(false),
	})
	if err != nil {
		return nil, err
	}
	if out.Item != nil {
		return item(out.Item), nil
	}
	return db.get(ctx, table, k)
}

package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// ThreadStorage implements store.CheckpointStorage. A checkpoint item holds
// its channel values and step writes (inline, or in a blob of chunk items),
// and records its data's size in "bytes": the query projects that
// attribute only, page by page, so no checkpoint's data is read or held.
func (db *DB) ThreadStorage(ctx context.Context, orgID, threadID string) (store.ThreadStorage, error) {
	t, err := db.loadThread(ctx, orgID, threadID)
	if err != nil {
		return store.ThreadStorage{}, wrap("thread storage", err)
	}
	out := store.ThreadStorage{ByChannel: map[string]store.Sized{}}
	p := dynamodb.NewQueryPaginator(db.client, &dynamodb.QueryInput{
		TableName: aws.String(db.tables.threads), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": s(t.pk), ":p": s(cpPrefix),
		},
		ProjectionExpression:     aws.String("#b"),
		ExpressionAttributeNames: map[string]string{"#b": "bytes"},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return store.ThreadStorage{}, wrap("thread storage", err)
		}
		for _, it := range page.Items {
			out.Checkpoints.Count++
			out.Checkpoints.Bytes += item(it).num("bytes")
		}
	}
	return out, nil
}

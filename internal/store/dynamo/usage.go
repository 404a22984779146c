package dynamo

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// What an organization stores (store.Usage) is counted in the transactions
// that change it, on three levels:
//
//   - each run and checkpoint item carries "bytes", what it counts (its
//     metadata, kwargs and result; its data);
//   - each thread item carries "bytes", what the thread counts: its
//     metadata and its items' bytes;
//   - the organization's counters are usageShards items of the threads
//     table (not the organizations table: the functions that write threads
//     and runs then need no write on the table of keys), pk USAGE#<org>,
//     sk S#<nn>, with "threads" and
//     "bytes": a thread's writes go to the shard of its ID, so that the
//     runs of one organization do not all update one item (concurrent
//     transactions on an item conflict, and are retried).
//
// Every transaction that writes a counted item adds the difference to the
// thread and to its shard; deleting a thread subtracts the thread's bytes.
// Items written before the counting (without "bytes") count 0 at every
// level, so the levels agree: the counters cover what was written since.
const usageShards = 16

func usageKey(orgID, threadID string) map[string]types.AttributeValue {
	h := fnv.New32a()
	h.Write([]byte(threadID))
	return key("USAGE#"+orgID, fmt.Sprintf("S#%02d", h.Sum32()%usageShards))
}

// usageAdd is the update of threadID's shard of orgID's counters.
func (db *DB) usageAdd(orgID, threadID string, threads, size int64) types.TransactWriteItem {
	return newUpd().add("threads", threads).add("bytes", size).update(db.tables.threads, usageKey(orgID, threadID))
}

// runBytes is what a run item counts.
func runBytes(metadata, kwargs, result []byte) int64 {
	return int64(len(metadata) + len(kwargs) + len(result))
}

// Usage implements store.Accounting: the sum of the organization's shards,
// read consistently.
func (db *DB) Usage(ctx context.Context, orgID string) (store.Usage, error) {
	var u store.Usage
	if orgID == "" {
		return u, nil
	}
	items, err := db.queryAll(ctx, &dynamodb.QueryInput{
		TableName: aws.String(db.tables.threads), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s("USAGE#" + orgID)},
	})
	if err != nil {
		return store.Usage{}, wrap("usage", err)
	}
	for _, it := range items {
		u.Threads += it.num("threads")
		u.Bytes += it.num("bytes")
	}
	return u, nil
}

package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableDefinitions returns the CreateTable input of every table under prefix
// for the default Options (every index, as the local adapter and the
// contract suite use them): TableDefinitionsFor(Options{TablePrefix: prefix}).
func TableDefinitions(prefix string) []*dynamodb.CreateTableInput {
	return TableDefinitionsFor(Options{TablePrefix: prefix})
}

// TableDefinitionsFor returns the CreateTable input of every table of opts:
// on-demand billing, string keys pk/sk, the indexes doc.go describes (the
// queue index only without Options.ExecutionsOwnRuns). The CDK app declares
// exactly these, for DeployedOptions.
func TableDefinitionsFor(opts Options) []*dynamodb.CreateTableInput {
	prefix := opts.TablePrefix
	str := func(names ...string) []types.AttributeDefinition {
		var out []types.AttributeDefinition
		for _, n := range names {
			out = append(out, types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS})
		}
		return out
	}
	keys := func(hash, rng string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange},
		}
	}
	gsi := func(name, hash, rng string, projection types.ProjectionType) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{
			IndexName:  aws.String(name),
			KeySchema:  keys(hash, rng),
			Projection: &types.Projection{ProjectionType: projection},
		}
	}
	// The org and status indexes are keys only: their readers get each
	// item by its key (strongly consistent, and only as many as a page
	// needs), so the index is not rewritten with whole thread values or
	// revision documents on every change.
	threads := []types.GlobalSecondaryIndex{gsi(indexOrg, "gpk", "gsk", types.ProjectionTypeKeysOnly)}
	threadAttrs := []string{"pk", "sk", "gpk", "gsk"}
	if !opts.ExecutionsOwnRuns {
		threads = append(threads, gsi(indexQueue, "qpk", "qsk", types.ProjectionTypeAll))
		threadAttrs = append(threadAttrs, "qpk", "qsk")
	}
	// The lease index stays with ExecutionsOwnRuns too: other partitions
	// of it than the runs' may be read there (store items by expiry, when
	// that store is merged in); only running runs stop writing it.
	threads = append(threads, gsi(indexLease, "lpk", "lsk", types.ProjectionTypeAll))
	threadAttrs = append(threadAttrs, "lpk", "lsk")
	table := func(name string, attrs []types.AttributeDefinition, gsis ...types.GlobalSecondaryIndex) *dynamodb.CreateTableInput {
		in := &dynamodb.CreateTableInput{
			TableName:            aws.String(prefix + name),
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: attrs,
			KeySchema:            keys("pk", "sk"),
		}
		if len(gsis) > 0 {
			in.GlobalSecondaryIndexes = gsis
		}
		return in
	}
	return []*dynamodb.CreateTableInput{
		table(TableOrganizations, str("pk", "sk")),
		table(TableProviders, str("pk", "sk")),
		table(TableDeployments, str("pk", "sk", "gpk", "gsk"), gsi(indexStatus, "gpk", "gsk", types.ProjectionTypeKeysOnly)),
		table(TableThreads, str(threadAttrs...), threads...),
		table(TableAssistants, str("pk", "sk")),
		table(TableIdempotency, str("pk", "sk")),
		table(TableCrons, str("pk", "sk", "dpk", "dsk"), gsi(indexDue, "dpk", "dsk", types.ProjectionTypeAll)),
	}
}

// ttlAttribute is the TTL attribute of the idempotency and threads tables.
const ttlAttribute = "ttl"

// CreateTables creates the tables under the DB's prefix, waits until they are
// active and enables TTL on the idempotency table. Tables that exist already
// are left as they are. For tests and local setups; deployed tables come
// from the CDK app.
func (db *DB) CreateTables(ctx context.Context) error {
	for _, in := range TableDefinitionsFor(db.opts) {
		_, err := db.client.CreateTable(ctx, in)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("dynamo: create table %s: %w", aws.ToString(in.TableName), err)
		}
	}
	waiter := dynamodb.NewTableExistsWaiter(db.client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 2*time.Second
	})
	for _, in := range TableDefinitionsFor(db.opts) {
		if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName}, 5*time.Minute); err != nil {
			return fmt.Errorf("dynamo: wait for table %s: %w", aws.ToString(in.TableName), err)
		}
	}
	for _, table := range []string{db.tables.idempotency, db.tables.threads} {
		_, err := db.client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName: aws.String(table),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{
				AttributeName: aws.String(ttlAttribute), Enabled: aws.Bool(true),
			},
		})
		if err != nil && !isTTLAlreadyEnabled(err) {
			return fmt.Errorf("dynamo: enable TTL on %s: %w", table, err)
		}
	}
	return nil
}

func isTTLAlreadyEnabled(err error) bool {
	var ve interface{ ErrorMessage() string }
	return errors.As(err, &ve) && strings.Contains(strings.ToLower(ve.ErrorMessage()), "already enabled")
}

// DeleteTables deletes the tables under the DB's prefix (missing ones are
// skipped). For tests.
func (db *DB) DeleteTables(ctx context.Context) error {
	for _, in := range TableDefinitionsFor(db.opts) {
		_, err := db.client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: in.TableName})
		var nf *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			return fmt.Errorf("dynamo: delete table %s: %w", aws.ToString(in.TableName), err)
		}
	}
	return nil
}

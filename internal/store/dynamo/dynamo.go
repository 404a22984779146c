package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/stepgraph/stepgraph/internal/payloads"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Table names, without the prefix of Options.TablePrefix.
const (
	TableOrganizations = "organizations"
	TableProviders     = "providers"
	TableDeployments   = "deployments"
	TableThreads       = "threads"
	TableAssistants    = "assistants"
	TableIdempotency   = "idempotency"
	TableCrons         = "crons"
)

// Index names.
const (
	indexStatus = "status" // deployments: deployments / revisions by status
	indexOrg    = "org"    // threads: an organization's threads by creation
	indexQueue  = "queue"  // threads: runs ready to be claimed
	indexLease  = "lease"  // threads: running runs by lease expiry
	indexDue    = "due"    // crons: enabled crons by next run date
)

// Options configure a DB.
type Options struct {
	// TablePrefix is prepended to every table name, e.g. "stepgraph-prod-".
	TablePrefix string
	// IdempotencyTTL, when positive, makes idempotency records expire that
	// long after they were reserved (DynamoDB's TTL on attribute "ttl",
	// enabled by CreateTables). Zero keeps them.
	IdempotencyTTL time.Duration
	// Payloads, when set, keeps every value over PayloadThreshold in this
	// store with a pointer in the item, so no item exceeds 400 KB (see
	// payloads.go). The deployed functions always set it (an S3 bucket);
	// without it documents stay inline or in chunk items, and a run result
	// or input near 400 KB cannot be stored.
	Payloads payloads.Store
	// ExecutionsOwnRuns is set where an execution per run claims it by ID
	// (ClaimRunByID: a Step Functions execution on AWS) and nothing calls
	// ClaimRun. Only ClaimRun reads the runs' entries of the queue and
	// lease indexes, and every claim, renewal and enqueue rewrites their
	// keys (an index delete plus put each, on one partition key per index):
	// with this set no run carries those keys, the queue index is not
	// declared (TableDefinitionsFor; the lease index is, for its other
	// partitions), and ClaimRun fails.
	ExecutionsOwnRuns bool
}

// DeployedOptions are the options of the deployed (AWS) stage: the
// functions of internal/lambdaapp and the tables of the CDK app agree on
// them through this value.
func DeployedOptions(tablePrefix string) Options {
	return Options{TablePrefix: tablePrefix, ExecutionsOwnRuns: true, IdempotencyTTL: DeployedIdempotencyTTL}
}

// DeployedIdempotencyTTL is how long an idempotency record lives on AWS:
// a client retries within minutes, and records kept forever grow storage.
const DeployedIdempotencyTTL = 24 * time.Hour

// claimIndexes reports whether the queue and lease index keys are written.
func (db *DB) claimIndexes() bool { return !db.opts.ExecutionsOwnRuns }

// DB is a store.Store on DynamoDB. It is safe for concurrent use.
type DB struct {
	client   *dynamodb.Client
	opts     Options
	tables   tableNames
	payloads payloads.Store // nil: documents stay in DynamoDB
	listed   sync.Map       // organizations whose assistants have listing entries (assistantlist.go)
	off      *offloader     // the payload middleware (nil without payloads)
}

type tableNames struct {
	orgs, providers, deployments, threads, assistants, idempotency string
	crons                                                          string
}

var _ store.Store = (*DB)(nil)

// New returns a DB on the tables named with opts.TablePrefix, through cfg
// (region, credentials, endpoint). The tables must exist (CreateTables).
func New(cfg aws.Config, opts Options) *DB {
	return NewFromClient(dynamodb.NewFromConfig(cfg), opts)
}

// NewFromClient is New with a client built by the caller.
func NewFromClient(client *dynamodb.Client, opts Options) *DB {
	p := opts.TablePrefix
	var off *offloader
	if opts.Payloads != nil {
		off = &offloader{store: opts.Payloads, now: time.Now}
		client = dynamodb.New(client.Options(), func(o *dynamodb.Options) {
			o.APIOptions = append(slices.Clone(o.APIOptions), func(st *middleware.Stack) error {
				return st.Initialize.Add(off, middleware.After)
			})
		})
		off.client = client
	}
	return &DB{
		client:   client,
		payloads: opts.Payloads,
		off:      off,
		opts:     opts,
		tables: tableNames{
			orgs:        p + TableOrganizations,
			providers:   p + TableProviders,
			deployments: p + TableDeployments,
			threads:     p + TableThreads,
			assistants:  p + TableAssistants,
			idempotency: p + TableIdempotency,
			crons:       p + TableCrons,
		},
	}
}

// Close implements store.Store. The client holds no resources that need
// releasing; Close may be called more than once.
func (db *DB) Close() error { return nil }

// ---- encoding -------------------------------------------------------------------

// micros is t as unix microseconds (the precision kept).
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros is the inverse of micros, in UTC.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// canon is t as it reads back: UTC, truncated to the microsecond.
func canon(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return fromMicros(micros(t))
}

// sortTime encodes t as a fixed-width string that sorts like the time.
func sortTime(t time.Time) string {
	return fmt.Sprintf("%020d", micros(t)+timeOffset)
}

// timeOffset makes every representable year's micros non-negative.
const timeOffset = 100_000_000_000_000_000

// insStamp is an insertion stamp: increasing within the process, close to
// wall-clock order across processes. It breaks ties of equal creation times.
func insStamp() string {
	for {
		last := lastStamp.Load()
		now := time.Now().UnixNano()
		if now <= last {
			now = last + 1
		}
		if lastStamp.CompareAndSwap(last, now) {
			return fmt.Sprintf("%020d", now)
		}
	}
}

var lastStamp atomic.Int64

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func b(v []byte) types.AttributeValue {
	if v == nil {
		v = []byte{}
	}
	return &types.AttributeValueMemberB{Value: v}
}

func boolean(v bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: v} }

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": s(pk), "sk": s(sk)}
}

// item reads attributes of a stored item; missing attributes read as zero.
type item map[string]types.AttributeValue

func (it item) str(name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func (it item) num(name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		x, _ := strconv.ParseInt(v.Value, 10, 64)
		return x
	}
	return 0
}

func (it item) has(name string) bool {
	_, ok := it[name]
	if !ok {
		return false
	}
	_, null := it[name].(*types.AttributeValueMemberNULL)
	return !null
}

// bytes returns a binary attribute; nil when absent.
func (it item) bytes(name string) []byte {
	if v, ok := it[name].(*types.AttributeValueMemberB); ok {
		if v.Value == nil {
			return []byte{}
		}
		return v.Value
	}
	return nil
}

func (it item) boolean(name string) bool {
	if v, ok := it[name].(*types.AttributeValueMemberBOOL); ok {
		return v.Value
	}
	return false
}

// time reads a micros attribute; the zero time when absent.
func (it item) time(name string) time.Time {
	if !it.has(name) {
		return time.Time{}
	}
	return fromMicros(it.num(name))
}

// stringMap reads a map of strings (M of S).
func (it item) stringMap(name string) map[string]string {
	out := map[string]string{}
	if v, ok := it[name].(*types.AttributeValueMemberM); ok {
		for k, av := range v.Value {
			if sv, ok := av.(*types.AttributeValueMemberS); ok {
				out[k] = sv.Value
			}
		}
	}
	return out
}

// setTime sets a micros attribute, or leaves it out for the zero time.
func setTime(m map[string]types.AttributeValue, name string, t time.Time) {
	if !t.IsZero() {
		m[name] = n(micros(t))
	}
}

// setBytes sets a binary attribute, or leaves it out for nil.
func setBytes(m map[string]types.AttributeValue, name string, v []byte) {
	if v != nil {
		m[name] = b(v)
	}
}

// jsonObject is a JSON object field that is never absent: nil or empty
// is stored as "{}".
func jsonObject(v []byte) []byte {
	if len(v) == 0 {
		return []byte("{}")
	}
	return v
}

// ---- errors ---------------------------------------------------------------------

func isCondFailed(err error) bool {
	var cf *types.ConditionalCheckFailedException
	return errors.As(err, &cf)
}

// txReasons returns the cancellation reason code of each item of a
// cancelled transaction ("None" for an item that did not fail), or ok false
// when err is not a cancelled transaction.
func txReasons(err error) (reasons []string, ok bool) {
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		return nil, false
	}
	for _, r := range tc.CancellationReasons {
		reasons = append(reasons, aws.ToString(r.Code))
	}
	return reasons, true
}

// txFailedAt reports whether the transaction failed on item i's condition.
func txFailedAt(reasons []string, i int) bool {
	return i < len(reasons) && reasons[i] == "ConditionalCheckFailed"
}

// txRetryable reports whether a transaction lost to a concurrent one (or was
// throttled) and can be tried again as is.
func txRetryable(err error) bool {
	var tcf *types.TransactionConflictException
	if errors.As(err, &tcf) {
		return true
	}
	var tip *types.TransactionInProgressException
	if errors.As(err, &tip) {
		return true
	}
	reasons, ok := txReasons(err)
	if !ok {
		return false
	}
	retry := false
	for _, r := range reasons {
		switch r {
		case "None", "":
		case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
			retry = true
		default:
			return false
		}
	}
	return retry
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) ||
		errors.Is(err, store.ErrStale) || errors.Is(err, store.ErrBusy) {
		return err
	}
	return fmt.Errorf("dynamo: %s: %w", op, err)
}

// errRetry asks an optimistic loop to read again and retry.
var errRetry = errors.New("dynamo: retry")

// maxAttempts bounds optimistic retry loops; each lost attempt means another
// writer made progress, so the bound is only reached under extreme contention.
const maxAttempts = 200

// retry runs fn until it returns something other than errRetry (or a
// retryable transaction error), backing off a little between attempts.
func retry(ctx context.Context, op string, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if !errors.Is(err, errRetry) && !txRetryable(err) {
			return wrap(op, err)
		}
		if attempt >= maxAttempts {
			return fmt.Errorf("dynamo: %s: gave up after %d attempts under contention", op, attempt+1)
		}
		d := time.Duration(rand.IntN(5+min(attempt, 20)*5)) * time.Millisecond
		select {
		case <-ctx.Done():
			return wrap(op, ctx.Err())
		case <-time.After(d):
		}
	}
}

// ---- reads ------------------------------------------------------------------------

// get reads one item with a strongly consistent read; nil when absent.
func (db *DB) get(ctx context.Context, table string, k map[string]types.AttributeValue) (item, error) {
	out, err := db.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: k, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	if out.Item == nil {
		return nil, nil
	}
	return item(out.Item), nil
}

// queryAll runs in to the end, following pages.
func (db *DB) queryAll(ctx context.Context, in *dynamodb.QueryInput) ([]item, error) {
	var out []item
	p := dynamodb.NewQueryPaginator(db.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			out = append(out, item(it))
		}
	}
	return out, nil
}

// queryPartition returns every item of partition pk in table whose sort key
// begins with prefix, with a strongly consistent read.
func (db *DB) queryPartition(ctx context.Context, table, pk, prefix string) ([]item, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk)},
	}
	if prefix != "" {
		in.KeyConditionExpression = aws.String("pk = :pk AND begins_with(sk, :p)")
		in.ExpressionAttributeValues[":p"] = s(prefix)
	}
	return db.queryAll(ctx, in)
}

// deletes returns the requests that delete keys.
func deletes(keys []map[string]types.AttributeValue) []types.WriteRequest {
	reqs := make([]types.WriteRequest, len(keys))
	for i, k := range keys {
		reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}}
	}
	return reqs
}

// puts returns the requests that write items.
func puts(items []map[string]types.AttributeValue) []types.WriteRequest {
	reqs := make([]types.WriteRequest, len(items))
	for i, it := range items {
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
	}
	return reqs
}

// batchWrite sends reqs (see deletes and puts) to table, 25 at a time,
// retrying unprocessed ones.
func (db *DB) batchWrite(ctx context.Context, table string, reqs []types.WriteRequest) error {
	for len(reqs) > 0 {
		chunk := reqs[:min(25, len(reqs))]
		reqs = reqs[len(chunk):]
		pending := map[string][]types.WriteRequest{table: chunk}
		for attempt := 0; len(pending) > 0; attempt++ {
			out, err := db.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return err
			}
			pending = out.UnprocessedItems
			if len(pending) > 0 {
				if attempt > 20 {
					return errors.New("batch write: items left unprocessed")
				}
				time.Sleep(time.Duration(10*(attempt+1)) * time.Millisecond)
			}
		}
	}
	return nil
}

// page applies offset and limit (limit <= 0 means def) to a sorted slice.
func page[T any](all []T, limit, offset, def int) []T {
	if limit <= 0 {
		limit = def
	}
	if offset < 0 {
		offset = 0
	}
	if offset >= len(all) {
		return []T{}
	}
	all = all[offset:]
	if len(all) > limit {
		all = all[:limit]
	}
	return all
}

// transact runs a transaction, trying again while it loses to concurrent
// transactions. A transaction cancelled by a condition returns the reasons
// (see txFailedAt) and a nil error; any other failure returns the error.
func (db *DB) transact(ctx context.Context, items []types.TransactWriteItem) (cancelled []string, err error) {
	err = retry(ctx, "transaction", func() error {
		_, err := db.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			cancelled = nil
			return nil
		}
		if txRetryable(err) {
			return err
		}
		if reasons, ok := txReasons(err); ok {
			cancelled = reasons
			return nil
		}
		return err
	})
	return cancelled, err
}

// txErr describes a transaction cancelled for reasons the caller did not
// expect.
func txErr(op string, reasons []string) error {
	return fmt.Errorf("dynamo: %s: transaction cancelled: %v", op, reasons)
}

var errEmptyID = errors.New("empty organization or ID")

// write1 runs one conditional write as a transaction of one item. A plain
// PutItem/UpdateItem/DeleteItem is not safe to retry: when the first attempt
// succeeds but its answer is lost (a dropped connection), the SDK's retry
// finds its own write and fails the condition, and a create reports a
// conflict, a delete a missing record. TransactWriteItems carries a
// ClientRequestToken the SDK sets once per call and reuses on its retries,
// and DynamoDB answers a repeated token with the first outcome, so every
// conditional write goes through here. condFailed reports that the condition
// did not hold; old is the item as it was then when the write asked for it
// (ReturnValuesOnConditionCheckFailure ALL_OLD).
func (db *DB) write1(ctx context.Context, w types.TransactWriteItem) (condFailed bool, old item, err error) {
	err = retry(ctx, "write", func() error {
		_, err := db.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{w}})
		if err == nil {
			condFailed, old = false, nil
			return nil
		}
		if txRetryable(err) {
			return err
		}
		var tc *types.TransactionCanceledException
		if errors.As(err, &tc) && len(tc.CancellationReasons) == 1 &&
			aws.ToString(tc.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
			condFailed = true
			if it := tc.CancellationReasons[0].Item; it != nil {
				old = item(it)
			}
			return nil
		}
		return err
	})
	return condFailed, old, err
}

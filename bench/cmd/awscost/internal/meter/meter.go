// Package meter records every AWS API call a function makes, through an
// aws-sdk-go-v2 middleware added to the function's aws.Config, and prices
// each DynamoDB call in read and write request units from the sizes of the
// items it touched, by DynamoDB's on-demand rules:
//
//   - GetItem: 1 RRU per started 4 KB of the whole item (a projection does
//     not make it cheaper), at least 1; eventually consistent reads half;
//   - Query (one page): the sizes of every item the page evaluated (before
//     any filter, whole items) summed, then 1 RRU per started 4 KB, at
//     least 1; half when not strongly consistent (index queries);
//   - PutItem / UpdateItem: 1 WRU per started KB of the larger of the item
//     before and after; DeleteItem: of the item deleted; at least 1 — also
//     when a condition fails (the item is then unchanged);
//   - TransactWriteItems: every Put, Update, Delete and ConditionCheck as
//     above, times 2;
//   - BatchWriteItem: every put and delete as above;
//   - each global secondary index the write changes (an ALL index copies
//     the whole item; a KEYS_ONLY one only the keys, so only key changes
//     reach it): an item that enters the index is 1 WRU per
//     started KB of the new item, one that leaves it of the old item, one
//     whose index keys change both, one that stays with other attributes
//     changed 1 per started KB of the new item; an item outside the index
//     before and after costs nothing there.
//
// The sizes come from the items themselves: the meter reads each written
// item before and after the write, and re-runs a filtered or projected
// query without its filter and projection, on a client of its own that
// the meter does not record. The time this takes is the meter's overhead,
// reported so that it can be taken out of the measured durations.
// MiniStack's own ConsumedCapacity (asked for on every call) is recorded
// beside, for comparison: it counts 1 unit per item whatever its size.
package meter

import (
	"context"
	"errors"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

// Phases of a function's life.
const (
	PhaseInit   = "init"   // wiring, before the first invocation
	PhaseInvoke = "invoke" // serving invocations
	// PhaseReplay: serving an event the function has already answered (the
	// same request ID again). MiniStack's Runtime API hands the event out
	// again if the process asks for the next one before it is stopped; AWS
	// never does, and bills nothing for it.
	PhaseReplay = "replay"
)

// Call is one AWS API call as the meter saw it.
type Call struct {
	Kind    string `json:"kind"` // "call"
	Fn      string `json:"fn"`
	Phase   string `json:"phase"`
	Service string `json:"service"`
	Op      string `json:"op"`
	Err     string `json:"err,omitempty"`
	// Micros is how long the call took; OverheadMicros how long the meter
	// spent around it (its own reads).
	Micros         int64  `json:"us"`
	OverheadMicros int64  `json:"overhead_us,omitempty"`
	Dynamo         *Units `json:"dynamo,omitempty"`
	// Target names what a DynamoDB call touched: table:kind for each item,
	// the kind being its sort key up to the first '#' (THREAD, RUN, CP,
	// KEY, ...), or table:index for a query of an index.
	Target string `json:"target,omitempty"`
}

// Units is what a DynamoDB call costs.
type Units struct {
	RRU float64 `json:"rru,omitempty"`
	// WRU is the table's write units; IndexWRU the global secondary
	// indexes' (both are billed as write request units).
	WRU      float64 `json:"wru,omitempty"`
	IndexWRU float64 `json:"index_wru,omitempty"`
	// Items read or written, and the largest of them in bytes.
	Items        int `json:"items"`
	MaxItemBytes int `json:"max_item_bytes"`
	// Reported is the ConsumedCapacity the emulator answered (0 when none).
	Reported float64 `json:"reported_cu,omitempty"`
	// Unmodelled: an operation the meter does not price (it is listed so
	// that it cannot go unnoticed).
	Unmodelled bool `json:"unmodelled,omitempty"`
}

// Recorder is the meter of one function (one process).
type Recorder struct {
	fn     string
	prefix string
	sink   func(Call)
	shadow *dynamodb.Client
	tables map[string]table

	mu       sync.Mutex
	phase    string
	overhead atomic.Int64 // nanoseconds
}

type table struct {
	key     []string // partition and sort key attributes
	indexes []index
}

type index struct {
	name string
	keys []string
	// keysOnly, for a KEYS_ONLY index, names the attributes it projects
	// (the table's keys and its own); nil for an index projecting ALL.
	keysOnly []string
}

// New makes the meter of function fn on the AWS services of cfg, whose
// DynamoDB tables are named tablePrefix + ... (dynamo.TableDefinitions).
// Every call is handed to sink, from whichever goroutine made it. Attach it
// to the configuration the function's clients are made from.
func New(fn string, cfg aws.Config, tablePrefix string, sink func(Call)) *Recorder {
	plain := cfg.Copy()
	plain.APIOptions = append([]func(*middleware.Stack) error(nil), cfg.APIOptions...)
	r := &Recorder{fn: fn, prefix: tablePrefix, sink: sink, shadow: dynamodb.NewFromConfig(plain), tables: map[string]table{}, phase: PhaseInit}
	for _, def := range dynamo.TableDefinitionsFor(dynamo.DeployedOptions(tablePrefix)) {
		t := table{key: keyNames(def.KeySchema)}
		for _, g := range def.GlobalSecondaryIndexes {
			ix := index{name: aws.ToString(g.IndexName), keys: keyNames(g.KeySchema)}
			if g.Projection != nil && g.Projection.ProjectionType == types.ProjectionTypeKeysOnly {
				ix.keysOnly = append(keyNames(def.KeySchema), ix.keys...)
			}
			t.indexes = append(t.indexes, ix)
		}
		r.tables[aws.ToString(def.TableName)] = t
	}
	return r
}

func keyNames(ks []types.KeySchemaElement) []string {
	var out []string
	for _, k := range ks {
		out = append(out, aws.ToString(k.AttributeName))
	}
	return out
}

// Attach adds the meter to cfg: clients made from it afterwards are recorded.
func (r *Recorder) Attach(cfg *aws.Config) {
	opts := append([]func(*middleware.Stack) error(nil), cfg.APIOptions...)
	cfg.APIOptions = append(opts, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("stepgraphAWSCostMeter", r.handle), middleware.After)
	})
}

// SetPhase sets the phase recorded with the calls that follow.
func (r *Recorder) SetPhase(p string) {
	r.mu.Lock()
	r.phase = p
	r.mu.Unlock()
}

// Overhead is the time the meter has spent on its own work so far.
func (r *Recorder) Overhead() time.Duration { return time.Duration(r.overhead.Load()) }

func (r *Recorder) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	r.mu.Lock()
	c := Call{Kind: "call", Fn: r.fn, Phase: r.phase, Service: awsmiddleware.GetServiceID(ctx), Op: awsmiddleware.GetOperationName(ctx)}
	r.mu.Unlock()

	var p *plan
	var overhead time.Duration
	if c.Service == dynamodb.ServiceID {
		t := time.Now()
		p = r.before(ctx, in.Parameters)
		overhead += time.Since(t)
	}
	t0 := time.Now()
	out, md, err := next.HandleInitialize(ctx, in)
	c.Micros = time.Since(t0).Microseconds()
	if err != nil {
		c.Err = errorCode(err)
	}
	if p != nil {
		t := time.Now()
		c.Target = r.target(p)
		c.Dynamo = r.after(ctx, p, out.Result, err)
		overhead += time.Since(t)
	}
	c.OverheadMicros = overhead.Microseconds()
	r.overhead.Add(int64(overhead))
	r.sink(c)
	return out, md, err
}

func errorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "Canceled"
	}
	return "Error"
}

// target describes what p touches (Call.Target).
func (r *Recorder) target(p *plan) string {
	short := func(tn string) string { return strings.TrimPrefix(tn, r.prefix) }
	switch {
	case p.read != nil && p.read.get != nil:
		return short(p.read.table) + ":" + kindOf(p.read.get.Key)
	case p.read != nil && p.read.query != nil:
		if ix := aws.ToString(p.read.query.IndexName); ix != "" {
			return short(p.read.table) + ":index " + ix
		}
		return short(p.read.table) + ":query"
	}
	var parts []string
	for _, w := range p.writes {
		part := short(w.table) + ":" + kindOf(w.key)
		if w.kind == "check" {
			part += "(check)"
		}
		parts = append(parts, part)
	}
	sort.Strings(parts)
	return strings.Join(parts, "+")
}

// kindOf is the sort key of key up to its first '#'.
func kindOf(key map[string]types.AttributeValue) string {
	if v, ok := key["sk"].(*types.AttributeValueMemberS); ok {
		k, _, _ := strings.Cut(v.Value, "#")
		return k
	}
	return "?"
}

// A plan is what the meter needs to price one call, gathered before it.
type plan struct {
	read    *readPlan
	writes  []*write
	unknown bool
}

type readPlan struct {
	table      string
	consistent bool
	// full: the call returns whole items (no projection, no filter), so the
	// answer gives the sizes; otherwise shadow reads them.
	full  bool
	get   *dynamodb.GetItemInput
	query *dynamodb.QueryInput
}

type write struct {
	table         string
	key           map[string]types.AttributeValue
	kind          string // put, update, delete, check
	transactional bool
	before, after map[string]types.AttributeValue
}

func (r *Recorder) before(ctx context.Context, params any) *plan {
	p := &plan{}
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		setRCC(&in.ReturnConsumedCapacity)
		p.read = &readPlan{table: aws.ToString(in.TableName), consistent: aws.ToBool(in.ConsistentRead),
			full: in.ProjectionExpression == nil && len(in.AttributesToGet) == 0, get: in}
	case *dynamodb.QueryInput:
		setRCC(&in.ReturnConsumedCapacity)
		p.read = &readPlan{table: aws.ToString(in.TableName), consistent: aws.ToBool(in.ConsistentRead),
			full: in.FilterExpression == nil && in.ProjectionExpression == nil && len(in.QueryFilter) == 0 &&
				len(in.AttributesToGet) == 0 && (in.Select == "" || in.Select == types.SelectAllAttributes),
			query: in}
	case *dynamodb.PutItemInput:
		setRCC(&in.ReturnConsumedCapacity)
		tn := aws.ToString(in.TableName)
		p.writes = append(p.writes, &write{table: tn, key: r.keyOf(tn, in.Item), kind: "put"})
	case *dynamodb.UpdateItemInput:
		setRCC(&in.ReturnConsumedCapacity)
		p.writes = append(p.writes, &write{table: aws.ToString(in.TableName), key: in.Key, kind: "update"})
	case *dynamodb.DeleteItemInput:
		setRCC(&in.ReturnConsumedCapacity)
		p.writes = append(p.writes, &write{table: aws.ToString(in.TableName), key: in.Key, kind: "delete"})
	case *dynamodb.TransactWriteItemsInput:
		setRCC(&in.ReturnConsumedCapacity)
		for _, ti := range in.TransactItems {
			w := &write{transactional: true}
			switch {
			case ti.Put != nil:
				w.table, w.kind = aws.ToString(ti.Put.TableName), "put"
				w.key = r.keyOf(w.table, ti.Put.Item)
			case ti.Update != nil:
				w.table, w.kind, w.key = aws.ToString(ti.Update.TableName), "update", ti.Update.Key
			case ti.Delete != nil:
				w.table, w.kind, w.key = aws.ToString(ti.Delete.TableName), "delete", ti.Delete.Key
			case ti.ConditionCheck != nil:
				w.table, w.kind, w.key = aws.ToString(ti.ConditionCheck.TableName), "check", ti.ConditionCheck.Key
			default:
				p.unknown = true
				continue
			}
			p.writes = append(p.writes, w)
		}
	case *dynamodb.BatchWriteItemInput:
		setRCC(&in.ReturnConsumedCapacity)
		for tn, reqs := range in.RequestItems {
			for _, wr := range reqs {
				switch {
				case wr.PutRequest != nil:
					p.writes = append(p.writes, &write{table: tn, key: r.keyOf(tn, wr.PutRequest.Item), kind: "put"})
				case wr.DeleteRequest != nil:
					p.writes = append(p.writes, &write{table: tn, key: wr.DeleteRequest.Key, kind: "delete"})
				}
			}
		}
	case *dynamodb.DescribeTableInput, *dynamodb.CreateTableInput, *dynamodb.UpdateTimeToLiveInput,
		*dynamodb.DescribeTimeToLiveInput, *dynamodb.ListTablesInput, *dynamodb.DeleteTableInput:
		return nil // control plane: not billed per request
	default:
		p.unknown = true
	}
	for _, w := range p.writes {
		w.before = r.get(ctx, w.table, w.key)
	}
	return p
}

func setRCC(v *types.ReturnConsumedCapacity) {
	if *v == "" {
		*v = types.ReturnConsumedCapacityTotal
	}
}

// keyOf is the primary key of item in table tn.
func (r *Recorder) keyOf(tn string, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{}
	for _, name := range r.tables[tn].key {
		if v, ok := item[name]; ok {
			k[name] = v
		}
	}
	return k
}

// get reads an item whole, strongly consistent, unrecorded (nil: absent).
func (r *Recorder) get(ctx context.Context, tn string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	out, err := r.shadow.GetItem(context.WithoutCancel(ctx), &dynamodb.GetItemInput{TableName: aws.String(tn), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || len(out.Item) == 0 {
		return nil
	}
	return out.Item
}

func (r *Recorder) after(ctx context.Context, p *plan, result any, callErr error) *Units {
	u := &Units{Unmodelled: p.unknown, Reported: reported(result)}
	switch {
	case p.read != nil:
		r.priceRead(ctx, u, p.read, result, callErr)
	case len(p.writes) > 0:
		for _, w := range p.writes {
			if w.kind != "check" {
				w.after = r.get(ctx, w.table, w.key)
			} else {
				w.after = w.before
			}
			r.priceWrite(u, w)
		}
	}
	return u
}

func (r *Recorder) priceRead(ctx context.Context, u *Units, rp *readPlan, result any, callErr error) {
	var items []map[string]types.AttributeValue
	switch {
	case rp.get != nil:
		var item map[string]types.AttributeValue
		if out, ok := result.(*dynamodb.GetItemOutput); ok && rp.full && !mayHoldPointers(out.Item) {
			item = out.Item
		} else if callErr == nil {
			item = r.get(ctx, rp.table, rp.get.Key)
		}
		if item != nil {
			items = append(items, item)
		}
	case rp.query != nil:
		if out, ok := result.(*dynamodb.QueryOutput); ok && rp.full && !mayHoldPointers(out.Items...) {
			items = out.Items
		} else if callErr == nil {
			q := *rp.query
			q.FilterExpression, q.ProjectionExpression, q.QueryFilter, q.AttributesToGet, q.Select = nil, nil, nil, nil, ""
			q.ConditionalOperator = ""
			q.ReturnConsumedCapacity = ""
			if q.ExpressionAttributeNames != nil || q.ExpressionAttributeValues != nil {
				q.ExpressionAttributeNames = usedNames(q)
				q.ExpressionAttributeValues = usedValues(q)
			}
			if out, err := r.shadow.Query(context.WithoutCancel(ctx), &q); err == nil {
				items = out.Items
			}
		}
	}
	total := 0
	for _, it := range items {
		n := dynamo.ItemSize(it)
		total += n
		u.MaxItemBytes = max(u.MaxItemBytes, n)
	}
	u.Items = len(items)
	u.RRU = ReadUnits(total, rp.consistent)
}

// mayHoldPointers reports whether an item read through the adapter may
// have been stored with payload pointers: the payload middleware
// (dynamo.Options.Payloads) runs inside the meter and hands back items
// with their values resolved, but DynamoDB bills the item as stored, with
// the pointer. Values of 1 KiB or more may have moved (the threshold, or
// an item's or transaction's budget); such items are read again as
// stored, by the meter's own client (unrecorded, its time taken out).
func mayHoldPointers(items ...map[string]types.AttributeValue) bool {
	for _, it := range items {
		for _, v := range it {
			switch v := v.(type) {
			case *types.AttributeValueMemberS:
				if len(v.Value) >= 1<<10 {
					return true
				}
			case *types.AttributeValueMemberB:
				if len(v.Value) >= 1<<10 {
					return true
				}
			}
		}
	}
	return false
}

func (r *Recorder) priceWrite(u *Units, w *write) {
	b, a := dynamo.ItemSize(w.before), dynamo.ItemSize(w.after)
	u.Items++
	u.MaxItemBytes = max(u.MaxItemBytes, b, a)
	var units float64
	switch w.kind {
	case "delete":
		units = WriteUnits(b)
	default: // put, update, check; a failed condition leaves after == before
		units = WriteUnits(max(b, a))
	}
	if w.transactional {
		units *= 2
	}
	u.WRU += units
	if w.kind == "check" {
		return
	}
	for _, ix := range r.tables[w.table].indexes {
		u.IndexWRU += indexWrite(ix, w.before, w.after)
	}
}

// indexWrite is what propagating a write from before to after costs index ix.
func indexWrite(ix index, before, after map[string]types.AttributeValue) float64 {
	if ix.keysOnly != nil {
		// A keys-only index holds the table and index keys: a write that
		// changes neither costs it nothing, whatever else changes.
		before, after = only(before, ix.keysOnly), only(after, ix.keysOnly)
	}
	inB, inA := hasAll(before, ix.keys), hasAll(after, ix.keys)
	switch {
	case !inB && !inA:
		return 0
	case !inB && inA:
		return WriteUnits(dynamo.ItemSize(after))
	case inB && !inA:
		return WriteUnits(dynamo.ItemSize(before))
	}
	for _, k := range ix.keys {
		if !valueEqual(before[k], after[k]) {
			return WriteUnits(dynamo.ItemSize(before)) + WriteUnits(dynamo.ItemSize(after))
		}
	}
	if Equal(before, after) {
		return 0
	}
	return WriteUnits(dynamo.ItemSize(after))
}

// only returns item's attributes named in names (nil for a nil item).
func only(item map[string]types.AttributeValue, names []string) map[string]types.AttributeValue {
	if item == nil {
		return nil
	}
	out := map[string]types.AttributeValue{}
	for _, n := range names {
		if v, ok := item[n]; ok {
			out[n] = v
		}
	}
	return out
}

func hasAll(item map[string]types.AttributeValue, keys []string) bool {
	if item == nil {
		return false
	}
	for _, k := range keys {
		if _, ok := item[k]; !ok {
			return false
		}
	}
	return true
}

// reported sums the ConsumedCapacity of an answer.
func reported(result any) float64 {
	sum := func(cs ...types.ConsumedCapacity) float64 {
		t := 0.0
		for _, c := range cs {
			t += aws.ToFloat64(c.CapacityUnits)
		}
		return t
	}
	one := func(c *types.ConsumedCapacity) float64 {
		if c == nil {
			return 0
		}
		return sum(*c)
	}
	switch out := result.(type) {
	case *dynamodb.GetItemOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.TransactWriteItemsOutput:
		return sum(out.ConsumedCapacity...)
	case *dynamodb.BatchWriteItemOutput:
		return sum(out.ConsumedCapacity...)
	}
	return 0
}

// exprToken finds the #names and :values an expression refers to.
var exprToken = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// usedNames and usedValues keep what the key condition of q refers to (a
// query stripped of its filter and projection must not carry the others:
// DynamoDB rejects unused names and values).
func usedNames(q dynamodb.QueryInput) map[string]string {
	used := tokens(aws.ToString(q.KeyConditionExpression))
	var out map[string]string
	for k, v := range q.ExpressionAttributeNames {
		if used[k] {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

func usedValues(q dynamodb.QueryInput) map[string]types.AttributeValue {
	used := tokens(aws.ToString(q.KeyConditionExpression))
	var out map[string]types.AttributeValue
	for k, v := range q.ExpressionAttributeValues {
		if used[k] {
			if out == nil {
				out = map[string]types.AttributeValue{}
			}
			out[k] = v
		}
	}
	return out
}

func tokens(expr string) map[string]bool {
	out := map[string]bool{}
	for _, t := range exprToken.FindAllString(expr, -1) {
		out[t] = true
	}
	return out
}

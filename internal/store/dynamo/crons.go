package dynamo

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Crons live in their own table: pk the organization, sk "C#<id>"; the
// organization's count is the item sk "#count" of its partition, changed
// in the transactions that create and delete crons, so the limit of
// CreateCron holds under concurrency. An enabled cron with a next run date
// is in the sparse index "due" (dpk "DUE", dsk the next run date, then
// organization and ID), which DueCrons reads in order: one partition for
// every organization's crons, read only by the in-process scheduler (on
// AWS, EventBridge Scheduler fires each cron and this index is not read).

const (
	cronPrefix = "C#"
	cronCount  = "#count"
	duePK      = "DUE"
)

func cronKey(orgID, id string) map[string]types.AttributeValue { return key(orgID, cronPrefix+id) }

func cronFrom(it item) store.Cron {
	return store.Cron{
		ID: it.str("id"), OrgID: it.str("org"), AssistantID: it.str("assistant"), ThreadID: it.str("thread"),
		UserID: it.str("user"), Schedule: it.str("schedule"), Timezone: it.str("tz"), EndTime: it.time("end"),
		OnRunCompleted: it.str("orc"), Enabled: it.boolean("enabled"), Payload: it.bytes("payload"),
		Metadata: it.bytes("metadata"), NextRunDate: it.time("next"), Version: it.num("version"),
		CreatedAt: it.time("created"), UpdatedAt: it.time("updated"),
	}
}

// cronItem is c as stored, with its place in the due index.
func cronItem(c store.Cron) map[string]types.AttributeValue {
	it := with(cronKey(c.OrgID, c.ID), map[string]types.AttributeValue{
		"id": s(c.ID), "org": s(c.OrgID), "assistant": s(c.AssistantID), "thread": s(c.ThreadID), "user": s(c.UserID),
		"schedule": s(c.Schedule), "tz": s(c.Timezone), "orc": s(c.OnRunCompleted), "enabled": boolean(c.Enabled),
		"payload": b(jsonObject(c.Payload)), "metadata": b(jsonObject(c.Metadata)), "version": n(c.Version),
		"created": n(micros(c.CreatedAt)), "updated": n(micros(c.UpdatedAt)),
	})
	setTime(it, "end", c.EndTime)
	setTime(it, "next", c.NextRunDate)
	if c.Enabled && !c.NextRunDate.IsZero() {
		it["dpk"] = s(duePK)
		it["dsk"] = s(sortTime(c.NextRunDate) + "#" + c.OrgID + "#" + c.ID)
	}
	return it
}

// CreateCron implements store.Crons: the cron and its organization's count
// in one transaction.
func (db *DB) CreateCron(ctx context.Context, c store.Cron, maxPerOrg int) error {
	if c.OrgID == "" || c.ID == "" {
		return fmt.Errorf("dynamo: create cron: %w", errEmptyID)
	}
	c.Version = 1
	count := newUpd().add("n", 1)
	if maxPerOrg > 0 {
		count.cond("n", "attribute_not_exists($) OR $ < ?", n(int64(maxPerOrg)))
	}
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		newUpd().cond("", notExists, nil).put(db.tables.crons, cronItem(c)),
		count.update(db.tables.crons, key(c.OrgID, cronCount)),
	})
	switch {
	case err != nil:
		return wrap("create cron", err)
	case txFailedAt(reasons, 0):
		return store.ErrConflict
	case txFailedAt(reasons, 1):
		return store.ErrLimit
	case reasons != nil:
		return txErr("create cron", reasons)
	}
	return nil
}

// Cron implements store.Crons.
func (db *DB) Cron(ctx context.Context, orgID, id string) (store.Cron, error) {
	if orgID == "" || id == "" {
		return store.Cron{}, store.ErrNotFound
	}
	it, err := db.get(ctx, db.tables.crons, cronKey(orgID, id))
	if err != nil {
		return store.Cron{}, wrap("cron", err)
	}
	if it == nil {
		return store.Cron{}, store.ErrNotFound
	}
	return cronFrom(it), nil
}

// orgCrons reads the organization's crons that match f (one partition,
// bounded by the limit of crons per organization).
func (db *DB) orgCrons(ctx context.Context, orgID string, f store.CronFilter) ([]store.Cron, error) {
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return nil, err
	}
	if orgID == "" {
		return nil, nil
	}
	items, err := db.queryPartition(ctx, db.tables.crons, orgID, cronPrefix)
	if err != nil {
		return nil, wrap("search crons", err)
	}
	var out []store.Cron
	for _, it := range items {
		c := cronFrom(it)
		if (f.AssistantID != "" && c.AssistantID != f.AssistantID) || (f.ThreadID != "" && c.ThreadID != f.ThreadID) ||
			(f.Enabled != nil && c.Enabled != *f.Enabled) || !meta.Matches(c.Metadata) {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// cronOrder compares two crons by a sort key, a missing time before every
// time.
func cronOrder(key string) (func(a, b store.Cron) int, error) {
	byTime := func(get func(store.Cron) time.Time) func(a, b store.Cron) int {
		return func(a, b store.Cron) int {
			x, y := get(a), get(b)
			switch {
			case x.IsZero() && y.IsZero():
				return 0
			case x.IsZero():
				return -1
			case y.IsZero():
				return 1
			}
			return x.Compare(y)
		}
	}
	switch key {
	case "", store.CronSortCreatedAt:
		return byTime(func(c store.Cron) time.Time { return c.CreatedAt }), nil
	case store.CronSortUpdatedAt:
		return byTime(func(c store.Cron) time.Time { return c.UpdatedAt }), nil
	case store.CronSortNextRunDate:
		return byTime(func(c store.Cron) time.Time { return c.NextRunDate }), nil
	case store.CronSortEndTime:
		return byTime(func(c store.Cron) time.Time { return c.EndTime }), nil
	case store.CronSortID:
		return func(a, b store.Cron) int { return cmp.Compare(a.ID, b.ID) }, nil
	case store.CronSortAssistantID:
		return func(a, b store.Cron) int { return cmp.Compare(a.AssistantID, b.AssistantID) }, nil
	case store.CronSortThreadID:
		return func(a, b store.Cron) int { return cmp.Compare(a.ThreadID, b.ThreadID) }, nil
	}
	return nil, fmt.Errorf("dynamo: unknown cron sort key %q", key)
}

// SearchCrons implements store.Crons, ordered and paged here.
func (db *DB) SearchCrons(ctx context.Context, orgID string, f store.CronFilter) ([]store.Cron, error) {
	order, err := cronOrder(f.SortBy)
	if err != nil {
		return nil, err
	}
	list, err := db.orgCrons(ctx, orgID, f)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list, func(a, b store.Cron) int {
		c := order(a, b)
		if c == 0 {
			c = cmp.Compare(a.ID, b.ID)
		}
		if !f.Ascending {
			c = -c
		}
		return c
	})
	return page(list, f.Limit, f.Offset, 10), nil
}

// CountCrons implements store.Crons.
func (db *DB) CountCrons(ctx context.Context, orgID string, f store.CronFilter) (int, error) {
	list, err := db.orgCrons(ctx, orgID, f)
	return len(list), err
}

// putCronIf writes c in place of the stored cron when cond holds on it;
// ErrNotFound when it is gone, ErrStale when cond failed.
func (db *DB) putCronIf(ctx context.Context, op string, c store.Cron, cond *upd) (store.Cron, error) {
	if c.OrgID == "" || c.ID == "" {
		return store.Cron{}, store.ErrNotFound
	}
	failed, _, err := db.write1(ctx, cond.cond("", exists, nil).put(db.tables.crons, cronItem(c)))
	if err != nil {
		return store.Cron{}, wrap(op, err)
	}
	if failed {
		if _, err := db.Cron(ctx, c.OrgID, c.ID); err != nil {
			return store.Cron{}, err
		}
		return store.Cron{}, store.ErrStale
	}
	return db.Cron(ctx, c.OrgID, c.ID)
}

// UpdateCron implements store.Crons.
func (db *DB) UpdateCron(ctx context.Context, c store.Cron) (store.Cron, error) {
	old, err := db.Cron(ctx, c.OrgID, c.ID)
	if err != nil {
		return store.Cron{}, err
	}
	if old.Version != c.Version {
		return store.Cron{}, store.ErrStale
	}
	c.CreatedAt, c.Version = old.CreatedAt, c.Version+1
	return db.putCronIf(ctx, "update cron", c, newUpd().cond("version", "$ = ?", n(old.Version)))
}

// DeleteCron implements store.Crons: the cron and its place in the count.
func (db *DB) DeleteCron(ctx context.Context, orgID, id string) error {
	if orgID == "" || id == "" {
		return store.ErrNotFound
	}
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		newUpd().cond("", exists, nil).del(db.tables.crons, cronKey(orgID, id)),
		newUpd().add("n", -1).update(db.tables.crons, key(orgID, cronCount)),
	})
	switch {
	case err != nil:
		return wrap("delete cron", err)
	case txFailedAt(reasons, 0):
		return store.ErrNotFound
	case reasons != nil:
		return txErr("delete cron", reasons)
	}
	return nil
}

// DueCrons implements store.Crons: the due index up to now, in order,
// without the crons past their end.
func (db *DB) DueCrons(ctx context.Context, now time.Time, limit int) ([]store.Cron, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("dynamo: DueCrons needs a positive limit")
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(db.tables.crons), IndexName: aws.String(indexDue),
		KeyConditionExpression:   aws.String("dpk = :d AND dsk < :upto"),
		FilterExpression:         aws.String("attribute_not_exists(#end) OR #end >= :now"),
		ExpressionAttributeNames: map[string]string{"#end": "end"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":d": s(duePK), ":upto": s(sortTime(now.Add(time.Microsecond))), ":now": n(micros(now)),
		},
	}
	out := []store.Cron{}
	p := dynamodb.NewQueryPaginator(db.client, in)
	for p.HasMorePages() && len(out) < limit {
		pg, err := p.NextPage(ctx)
		if err != nil {
			return nil, wrap("due crons", err)
		}
		for _, it := range pg.Items {
			if len(out) < limit {
				out = append(out, cronFrom(item(it)))
			}
		}
	}
	return out, nil
}

// ClaimCronFiring implements store.Crons: a conditional write on the stored
// next run date.
func (db *DB) ClaimCronFiring(ctx context.Context, orgID, id string, slot, next time.Time) (store.Cron, error) {
	c, err := db.Cron(ctx, orgID, id)
	if err != nil {
		return store.Cron{}, err
	}
	if !c.NextRunDate.Equal(canon(slot)) || slot.IsZero() {
		return store.Cron{}, store.ErrStale
	}
	// The whole item is written back: the version condition keeps a
	// concurrent update from being overwritten (the claim then fails as
	// stale, and the next look finds the slot still due).
	old := c.Version
	c.NextRunDate, c.Version = canon(next), c.Version+1
	return db.putCronIf(ctx, "claim cron firing", c,
		newUpd().cond("next", "$ = ?", n(micros(slot))).cond("version", "$ = ?", n(old)))
}

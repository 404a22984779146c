package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

func assistantKey(orgID, id string) map[string]types.AttributeValue { return key(orgID, id) }

func assistantFrom(it item) store.Assistant {
	return store.Assistant{
		ID: it.str("id"), OrgID: it.str("org"), GraphID: it.str("graph"), Name: it.str("name"),
		Description: it.str("description"), Config: it.bytes("config"), Context: it.bytes("context"),
		Metadata: it.bytes("metadata"), Version: int(it.num("version")),
		CreatedAt: it.time("created"), UpdatedAt: it.time("updated"),
	}
}

// Version items share the organization's partition: sort key
// V#<assistant id>#<version, 10 digits>, apart from the assistants' (their
// ids), which searches skip.
const versionPrefix = "V#"

func versionKey(orgID, id string, v int) map[string]types.AttributeValue {
	return key(orgID, fmt.Sprintf("%s%s#%010d", versionPrefix, id, v))
}

// assistantAttrs are the attributes of a version's fields.
func assistantAttrs(a store.Assistant) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"id": s(a.ID), "org": s(a.OrgID), "graph": s(a.GraphID), "name": s(a.Name),
		"description": s(a.Description), "config": b(jsonObject(a.Config)),
		"context": b(jsonObject(a.Context)), "metadata": b(jsonObject(a.Metadata)),
		"version": n(int64(a.Version)),
	}
}

// versionItem is the item of a's version a.Version, made at.
func versionItem(a store.Assistant, at time.Time) map[string]types.AttributeValue {
	it := with(versionKey(a.OrgID, a.ID, a.Version), assistantAttrs(a))
	it["created"], it["updated"] = n(micros(at)), n(micros(at))
	return it
}

// CreateAssistant implements store.Assistants (the assistant and its first
// version in one transaction). Nil JSON fields are stored as "{}".
func (db *DB) CreateAssistant(ctx context.Context, a store.Assistant) error {
	if a.OrgID == "" || a.ID == "" {
		return fmt.Errorf("dynamo: create assistant: empty organization or ID")
	}
	it := with(assistantKey(a.OrgID, a.ID), assistantAttrs(a))
	it["created"], it["updated"], it["ins"], it["maxv"] = n(micros(a.CreatedAt)), n(micros(a.UpdatedAt)), s(insStamp()), n(int64(a.Version))
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		newUpd().cond("", notExists, nil).put(db.tables.assistants, it),
		{Put: &types.Put{TableName: aws.String(db.tables.assistants), Item: versionItem(a, a.CreatedAt)}},
		db.putListEntry(a.OrgID, it, a.GraphID, a.Name),
	})
	if reasons != nil {
		if txFailedAt(reasons, 0) {
			return store.ErrConflict
		}
		return wrap("create assistant", txErr("create assistant", reasons))
	}
	return wrap("create assistant", err)
}

// UpdateAssistant implements store.Assistants: on the assistant's highest
// version (maxv; an assistant made before versions were kept has its
// version as the highest).
func (db *DB) UpdateAssistant(ctx context.Context, a store.Assistant) (store.Assistant, error) {
	var out store.Assistant
	err := retry(ctx, "update assistant", func() error {
		cur, err := db.get(ctx, db.tables.assistants, assistantKey(a.OrgID, a.ID))
		if err != nil {
			return err
		}
		if cur == nil {
			return store.ErrNotFound
		}
		high := cur.num("maxv")
		if _, ok := cur["maxv"]; !ok {
			high = cur.num("version")
		}
		next := a
		next.Version = int(high) + 1
		u := sameAssistant(cur) // its listing entry is the one of cur
		if _, ok := cur["maxv"]; ok {
			u.cond("maxv", "$ = ?", n(high))
		} else {
			u.cond("maxv", "attribute_not_exists($)", nil)
		}
		for k, v := range assistantAttrs(next) {
			if k != "id" && k != "org" {
				u.set(k, v)
			}
		}
		u.set("maxv", n(int64(next.Version))).set("updated", n(micros(a.UpdatedAt)))
		var legacy []types.TransactWriteItem
		if _, ok := cur["maxv"]; !ok {
			// The version the assistant had before versions were kept.
			old := assistantFrom(cur)
			legacy = append(legacy, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(db.tables.assistants),
				Item: versionItem(old, old.UpdatedAt)}})
		}
		reasons, err := db.transact(ctx, append([]types.TransactWriteItem{
			u.update(db.tables.assistants, assistantKey(a.OrgID, a.ID)),
			{Put: &types.Put{TableName: aws.String(db.tables.assistants), Item: versionItem(next, a.UpdatedAt)}},
			db.putListEntry(a.OrgID, cur, next.GraphID, next.Name),
		}, legacy...))
		if err != nil {
			return err
		}
		if reasons != nil {
			return errRetry
		}
		it, err := db.get(ctx, db.tables.assistants, assistantKey(a.OrgID, a.ID))
		if err != nil {
			return err
		}
		if it == nil {
			return store.ErrNotFound
		}
		out = assistantFrom(it)
		return nil
	})
	if err != nil {
		return store.Assistant{}, wrap("update assistant", err)
	}
	return out, nil
}

// AssistantVersions implements store.Assistants.
func (db *DB) AssistantVersions(ctx context.Context, orgID, id string, f store.AssistantVersionFilter) ([]store.Assistant, error) {
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return nil, err
	}
	cur, err := db.Assistant(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	items, err := db.queryPartition(ctx, db.tables.assistants, orgID, versionPrefix+id+"#")
	if err != nil {
		return nil, wrap("assistant versions", err)
	}
	var all []store.Assistant
	for i := len(items) - 1; i >= 0; i-- { // highest version first
		all = append(all, assistantFrom(items[i]))
	}
	if len(all) == 0 {
		cur.CreatedAt = cur.UpdatedAt // made before versions were kept
		all = append(all, cur)
	}
	kept := []store.Assistant{}
	for _, v := range all {
		if meta.Matches(v.Metadata) {
			kept = append(kept, v)
		}
	}
	return page(kept, f.Limit, f.Offset, 10), nil
}

// SetAssistantVersion implements store.Assistants.
func (db *DB) SetAssistantVersion(ctx context.Context, orgID, id string, version int, now time.Time) (store.Assistant, error) {
	if orgID == "" || id == "" {
		return store.Assistant{}, store.ErrNotFound
	}
	it, err := db.getWritten(ctx, db.tables.assistants, versionKey(orgID, id, version))
	if err != nil {
		return store.Assistant{}, wrap("set assistant version", err)
	}
	if it == nil {
		cur, err := db.Assistant(ctx, orgID, id)
		if err != nil || cur.Version != version {
			return store.Assistant{}, store.ErrNotFound
		}
		it = with(versionKey(orgID, id, version), assistantAttrs(cur)) // made before versions were kept
	}
	v := assistantFrom(it)
	cur, err := db.get(ctx, db.tables.assistants, assistantKey(orgID, id))
	if err != nil {
		return store.Assistant{}, wrap("set assistant version", err)
	}
	if cur == nil {
		return store.Assistant{}, store.ErrNotFound
	}
	// On the assistant as read (its listing entry's key is its creation's):
	// one deleted and made again since fails the condition.
	u := sameAssistant(cur)
	for k, val := range assistantAttrs(v) {
		if k != "id" && k != "org" {
			u.set(k, val)
		}
	}
	u.set("updated", n(micros(now)))
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		u.update(db.tables.assistants, assistantKey(orgID, id)),
		db.putListEntry(orgID, cur, v.GraphID, v.Name),
	})
	if err != nil {
		return store.Assistant{}, wrap("set assistant version", err)
	}
	if reasons != nil {
		return store.Assistant{}, store.ErrNotFound
	}
	return db.Assistant(ctx, orgID, id)
}

// Assistant implements store.Assistants.
func (db *DB) Assistant(ctx context.Context, orgID, id string) (store.Assistant, error) {
	if orgID == "" || id == "" {
		return store.Assistant{}, store.ErrNotFound
	}
	it, err := db.get(ctx, db.tables.assistants, assistantKey(orgID, id))
	if err != nil {
		return store.Assistant{}, wrap("assistant", err)
	}
	if it == nil {
		return store.Assistant{}, store.ErrNotFound
	}
	return assistantFrom(it), nil
}

// SearchAssistants implements store.Assistants: newest first, ties broken by
// insertion order (the later insert first), a page read through the
// organization's listing entries (assistantlist.go).
func (db *DB) SearchAssistants(ctx context.Context, orgID string, f store.AssistantFilter) ([]store.Assistant, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 10
	}
	out := []store.Assistant{}
	err := db.matchAssistants(ctx, orgID, f, max(f.Offset, 0), limit, true, func(it item) bool {
		out = append(out, assistantFrom(it))
		return len(out) < limit
	})
	if err != nil {
		return nil, wrap("search assistants", err)
	}
	return out, nil
}

// CountAssistants implements store.Assistants: without a filter it counts
// the listing entries (Select COUNT); with graph or name it reads entries
// only; a metadata filter reads the assistants whose entries match.
func (db *DB) CountAssistants(ctx context.Context, orgID string, f store.AssistantFilter) (int, error) {
	if f.GraphID == "" && f.NameContains == "" && f.Metadata == nil && orgID != "" {
		if err := db.ensureListed(ctx, orgID); err != nil {
			return 0, wrap("count assistants", err)
		}
		count, err := db.countQuery(ctx, db.listQuery(orgID))
		return count, wrap("count assistants", err)
	}
	count := 0
	err := db.matchAssistants(ctx, orgID, f, 0, 0, false, func(item) bool { count++; return true })
	return count, wrap("count assistants", err)
}

// DeleteAssistant implements store.Assistants. Runs that name the assistant stay.
func (db *DB) DeleteAssistant(ctx context.Context, orgID, id string) error {
	if orgID == "" || id == "" {
		return store.ErrNotFound
	}
	// The versions first: a version left by a crash in between would be
	// found by an assistant made later with the same id.
	versions, err := db.queryPartition(ctx, db.tables.assistants, orgID, versionPrefix+id+"#")
	if err != nil {
		return wrap("delete assistant", err)
	}
	var keys []map[string]types.AttributeValue
	for _, it := range versions {
		keys = append(keys, key(orgID, it.str("sk")))
	}
	if err := db.batchWrite(ctx, db.tables.assistants, deletes(keys)); err != nil {
		return wrap("delete assistant", err)
	}
	cur, err := db.get(ctx, db.tables.assistants, assistantKey(orgID, id))
	if err != nil {
		return wrap("delete assistant", err)
	}
	if cur == nil {
		return store.ErrNotFound
	}
	// With its listing entry, on the assistant as read.
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		sameAssistant(cur).del(db.tables.assistants, assistantKey(orgID, id)),
		db.delListEntry(orgID, cur),
	})
	if err != nil {
		return wrap("delete assistant", err)
	}
	if reasons != nil {
		return store.ErrNotFound
	}
	return nil
}

// sameAssistant conditions a write on the assistant item cur as read: the
// same creation (its insertion stamp), so not one deleted and made again
// with the same id since (whose listing entry is another).
func sameAssistant(cur item) *upd {
	if _, ok := cur["ins"]; !ok {
		return newUpd().cond("", exists, nil).cond("ins", "attribute_not_exists($)", nil)
	}
	return newUpd().cond("ins", "$ = ?", s(cur.str("ins")))
}

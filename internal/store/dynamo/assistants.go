package dynamo

import (
	"context"
	"fmt"
	"strings"
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
		u := newUpd().cond("", exists, nil)
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
	u := newUpd().cond("", exists, nil)
	for k, val := range assistantAttrs(v) {
		if k != "id" && k != "org" {
			u.set(k, val)
		}
	}
	u.set("updated", n(micros(now)))
	failed, _, err := db.write1(ctx, u.update(db.tables.assistants, assistantKey(orgID, id)))
	if failed {
		return store.Assistant{}, store.ErrNotFound
	}
	if err != nil {
		return store.Assistant{}, wrap("set assistant version", err)
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
// insertion order (the later insert first). The organization's assistants
// are read whole (one partition) and filtered here.
func (db *DB) SearchAssistants(ctx context.Context, orgID string, f store.AssistantFilter) ([]store.Assistant, error) {
	kept, err := db.matchAssistants(ctx, orgID, f)
	if err != nil {
		return nil, wrap("search assistants", err)
	}
	out := []store.Assistant{}
	for _, it := range page(kept, f.Limit, f.Offset, 10) {
		out = append(out, assistantFrom(it))
	}
	return out, nil
}

// CountAssistants implements store.Assistants.
func (db *DB) CountAssistants(ctx context.Context, orgID string, f store.AssistantFilter) (int, error) {
	kept, err := db.matchAssistants(ctx, orgID, f)
	return len(kept), wrap("count assistants", err)
}

func (db *DB) matchAssistants(ctx context.Context, orgID string, f store.AssistantFilter) ([]item, error) {
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return nil, err
	}
	if orgID == "" {
		return nil, nil
	}
	items, err := db.queryPartition(ctx, db.tables.assistants, orgID, "")
	if err != nil {
		return nil, err
	}
	var kept []item
	for _, it := range items {
		if strings.HasPrefix(it.str("sk"), versionPrefix) {
			continue
		}
		if f.GraphID != "" && it.str("graph") != f.GraphID {
			continue
		}
		if f.NameContains != "" && !strings.Contains(it.str("name"), f.NameContains) {
			continue
		}
		if !meta.Matches(it.bytes("metadata")) {
			continue
		}
		kept = append(kept, it)
	}
	byCreated(kept, true)
	return kept, nil
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
	failed, _, err := db.write1(ctx, newUpd().cond("", exists, nil).del(db.tables.assistants, assistantKey(orgID, id)))
	if failed {
		return store.ErrNotFound
	}
	return wrap("delete assistant", err)
}

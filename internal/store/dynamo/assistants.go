package dynamo

import (
	"context"
	"fmt"
	"strings"

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

// CreateAssistant implements store.Assistants. Nil JSON fields are stored as "{}".
func (db *DB) CreateAssistant(ctx context.Context, a store.Assistant) error {
	if a.OrgID == "" || a.ID == "" {
		return fmt.Errorf("dynamo: create assistant: empty organization or ID")
	}
	failed, _, err := db.write1(ctx, newUpd().cond("", notExists, nil).put(db.tables.assistants,
		with(assistantKey(a.OrgID, a.ID), map[string]types.AttributeValue{
			"id": s(a.ID), "org": s(a.OrgID), "graph": s(a.GraphID), "name": s(a.Name),
			"description": s(a.Description), "config": b(jsonObject(a.Config)),
			"context": b(jsonObject(a.Context)), "metadata": b(jsonObject(a.Metadata)),
			"version": n(int64(a.Version)), "created": n(micros(a.CreatedAt)),
			"updated": n(micros(a.UpdatedAt)), "ins": s(insStamp()),
		})))
	if failed {
		return store.ErrConflict
	}
	return wrap("create assistant", err)
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
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return nil, err
	}
	out := []store.Assistant{}
	if orgID == "" {
		return out, nil
	}
	items, err := db.queryPartition(ctx, db.tables.assistants, orgID, "")
	if err != nil {
		return nil, wrap("search assistants", err)
	}
	var kept []item
	for _, it := range items {
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
	for _, it := range page(kept, f.Limit, f.Offset, 10) {
		out = append(out, assistantFrom(it))
	}
	return out, nil
}

// DeleteAssistant implements store.Assistants. Runs that name the assistant stay.
func (db *DB) DeleteAssistant(ctx context.Context, orgID, id string) error {
	if orgID == "" || id == "" {
		return store.ErrNotFound
	}
	failed, _, err := db.write1(ctx, newUpd().cond("", exists, nil).del(db.tables.assistants, assistantKey(orgID, id)))
	if failed {
		return store.ErrNotFound
	}
	return wrap("delete assistant", err)
}

package dynamo

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

func deploymentKey(orgID, id string) map[string]types.AttributeValue {
	return key("ORG#"+orgID, "DEP#"+id)
}

func deploymentNameKey(orgID, name string) map[string]types.AttributeValue {
	return key("ORG#"+orgID, "NAME#"+name)
}

func revisionPK(orgID, deploymentID string) string { return "DEP#" + orgID + "#" + deploymentID }

func revisionKey(orgID, deploymentID, id string) map[string]types.AttributeValue {
	return key(revisionPK(orgID, deploymentID), "REV#"+id)
}

func deploymentItem(d store.Deployment, version int64, ins string) map[string]types.AttributeValue {
	return with(deploymentKey(d.OrgID, d.ID), map[string]types.AttributeValue{
		"id": s(d.ID), "org": s(d.OrgID), "name": s(d.Name), "status": s(d.Status),
		"latest": s(d.LatestRevisionID), "active": s(d.ActiveRevisionID), "doc": b(d.Doc),
		"version": n(version), "created": n(micros(d.CreatedAt)), "updated": n(micros(d.UpdatedAt)),
		"ins": s(ins), "gpk": s("DEP#" + d.Status), "gsk": s(sortTime(d.CreatedAt) + "#" + ins),
	})
}

func deploymentFrom(it item) store.Deployment {
	return store.Deployment{
		ID: it.str("id"), OrgID: it.str("org"), Name: it.str("name"), Status: it.str("status"),
		LatestRevisionID: it.str("latest"), ActiveRevisionID: it.str("active"), Doc: it.bytes("doc"),
		Version: it.num("version"), CreatedAt: it.time("created"), UpdatedAt: it.time("updated"),
	}
}

// revisionItem is r as a new revision (Version 1) of deployment d.
func revisionItem(d store.Deployment, r store.Revision) map[string]types.AttributeValue {
	ins := insStamp()
	return with(revisionKey(d.OrgID, d.ID, r.ID), map[string]types.AttributeValue{
		"id": s(r.ID), "org": s(d.OrgID), "dep": s(d.ID), "status": s(r.Status),
		"reason": s(r.StatusReason), "doc": b(r.Doc), "version": n(1),
		"created": n(micros(r.CreatedAt)), "updated": n(micros(r.UpdatedAt)),
		"ins": s(ins), "gpk": s("REV#" + r.Status), "gsk": s(sortTime(r.CreatedAt) + "#" + ins),
	})
}

func revisionFrom(it item) store.Revision {
	return store.Revision{
		ID: it.str("id"), OrgID: it.str("org"), DeploymentID: it.str("dep"), Status: it.str("status"),
		StatusReason: it.str("reason"), Doc: it.bytes("doc"), Version: it.num("version"),
		CreatedAt: it.time("created"), UpdatedAt: it.time("updated"),
	}
}

// byCreated sorts items by their "created" attribute, then insertion stamp;
// newest first when desc.
func byCreated(items []item, desc bool) {
	sort.SliceStable(items, func(i, j int) bool {
		ci, cj := items[i].num("created"), items[j].num("created")
		if ci != cj {
			return (ci < cj) != desc
		}
		return (items[i].str("ins") < items[j].str("ins")) != desc
	})
}

// CreateDeployment implements store.Deployments: the name marker, the
// deployment and its first revision in one transaction.
func (db *DB) CreateDeployment(ctx context.Context, d store.Deployment, first store.Revision) error {
	t := db.tables.deployments
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(t), Item: with(deploymentNameKey(d.OrgID, d.Name), map[string]types.AttributeValue{"dep": s(d.ID)}), ConditionExpression: aws.String(notExists)}},
		{Put: &types.Put{TableName: aws.String(t), Item: deploymentItem(d, 1, insStamp()), ConditionExpression: aws.String(notExists)}},
		{Put: &types.Put{TableName: aws.String(t), Item: revisionItem(d, first), ConditionExpression: aws.String(notExists)}},
	})
	if err != nil {
		return wrap("create deployment", err)
	}
	if reasons != nil {
		if txFailedAt(reasons, 0) || txFailedAt(reasons, 1) || txFailedAt(reasons, 2) {
			return store.ErrConflict
		}
		return txErr("create deployment", reasons)
	}
	return nil
}

// Deployment implements store.Deployments.
func (db *DB) Deployment(ctx context.Context, orgID, id string) (store.Deployment, error) {
	it, err := db.get(ctx, db.tables.deployments, deploymentKey(orgID, id))
	if err != nil {
		return store.Deployment{}, wrap("deployment", err)
	}
	if it == nil {
		return store.Deployment{}, store.ErrNotFound
	}
	return deploymentFrom(it), nil
}

// ListDeployments implements store.Deployments: newest first, ties broken by
// insertion order (the later insert first). The organization's deployments
// are read whole and filtered here (NameContains is a case-sensitive
// substring, which DynamoDB's contains() is too, but offsets count filtered
// records).
func (db *DB) ListDeployments(ctx context.Context, orgID string, f store.DeploymentFilter) ([]store.Deployment, error) {
	items, err := db.queryPartition(ctx, db.tables.deployments, "ORG#"+orgID, "DEP#")
	if err != nil {
		return nil, wrap("list deployments", err)
	}
	var kept []item
	for _, it := range items {
		if f.Status != "" && it.str("status") != f.Status {
			continue
		}
		if f.NameContains != "" && !strings.Contains(it.str("name"), f.NameContains) {
			continue
		}
		if f.Name != "" && it.str("name") != f.Name {
			continue
		}
		kept = append(kept, it)
	}
	byCreated(kept, true)
	out := []store.Deployment{}
	for _, it := range page(kept, f.Limit, f.Offset, 20) {
		out = append(out, deploymentFrom(it))
	}
	return out, nil
}

// casDeployment writes d over the stored deployment cur (same key) on
// condition that the stored Version is still d.Version, together with extra
// transaction items; a rename moves the name marker in the same transaction.
// It returns the deployment as stored.
func (db *DB) casDeployment(ctx context.Context, op string, d store.Deployment, extra []types.TransactWriteItem) (store.Deployment, []string, error) {
	t := db.tables.deployments
	cur, err := db.get(ctx, t, deploymentKey(d.OrgID, d.ID))
	if err != nil {
		return store.Deployment{}, nil, wrap(op, err)
	}
	if cur == nil {
		return store.Deployment{}, nil, store.ErrNotFound
	}
	if cur.num("version") != d.Version {
		return store.Deployment{}, nil, store.ErrStale
	}
	stored := d
	stored.CreatedAt = cur.time("created")
	stored.Version = d.Version + 1
	newItem := deploymentItem(stored, stored.Version, cur.str("ins"))
	items := []types.TransactWriteItem{{Put: &types.Put{
		TableName: aws.String(t), Item: newItem,
		ConditionExpression:       aws.String("version = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(d.Version)},
	}}}
	oldName := cur.str("name")
	if oldName != d.Name {
		items = append(items,
			types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(t), Key: deploymentNameKey(d.OrgID, oldName)}},
			types.TransactWriteItem{Put: &types.Put{TableName: aws.String(t),
				Item:                with(deploymentNameKey(d.OrgID, d.Name), map[string]types.AttributeValue{"dep": s(d.ID)}),
				ConditionExpression: aws.String(notExists)}})
	}
	nOwn := len(items)
	items = append(items, extra...)
	reasons, err := db.transact(ctx, items)
	if err != nil {
		return store.Deployment{}, nil, wrap(op, err)
	}
	if reasons != nil {
		switch {
		case txFailedAt(reasons, 0):
			again, err := db.get(ctx, t, deploymentKey(d.OrgID, d.ID))
			if err != nil {
				return store.Deployment{}, nil, wrap(op, err)
			}
			if again == nil {
				return store.Deployment{}, nil, store.ErrNotFound
			}
			return store.Deployment{}, nil, store.ErrStale
		case nOwn == 3 && txFailedAt(reasons, 2):
			return store.Deployment{}, nil, store.ErrConflict
		}
		return store.Deployment{}, reasons[nOwn:], nil
	}
	stored.UpdatedAt = canon(stored.UpdatedAt)
	stored.CreatedAt = canon(stored.CreatedAt)
	return stored, nil, nil
}

// UpdateDeployment implements store.Deployments. CreatedAt is kept; the other
// fields are replaced.
func (db *DB) UpdateDeployment(ctx context.Context, d store.Deployment) (store.Deployment, error) {
	out, reasons, err := db.casDeployment(ctx, "update deployment", d, nil)
	if err != nil {
		return store.Deployment{}, err
	}
	if reasons != nil {
		return store.Deployment{}, txErr("update deployment", reasons)
	}
	return out, nil
}

// AddRevision implements store.Deployments: the deployment write and the new
// revision (Version 1, under d's OrgID and ID) in one transaction.
func (db *DB) AddRevision(ctx context.Context, d store.Deployment, r store.Revision) (store.Deployment, error) {
	out, reasons, err := db.casDeployment(ctx, "add revision", d, []types.TransactWriteItem{{Put: &types.Put{
		TableName: aws.String(db.tables.deployments), Item: revisionItem(d, r),
		ConditionExpression: aws.String(notExists),
	}}})
	if err != nil {
		return store.Deployment{}, err
	}
	if reasons != nil {
		if txFailedAt(reasons, 0) {
			return store.Deployment{}, store.ErrConflict
		}
		return store.Deployment{}, txErr("add revision", reasons)
	}
	return out, nil
}

// maxTxItems is DynamoDB's limit of items in one transaction.
const maxTxItems = 100

// DeleteDeployment implements store.Deployments. The deployment, its name
// marker and its revisions go in one transaction; when there are too many
// revisions for one, the oldest are deleted first (a crash then leaves the
// deployment with fewer revisions, and a retry finishes the job).
func (db *DB) DeleteDeployment(ctx context.Context, orgID, id string) error {
	t := db.tables.deployments
	return retry(ctx, "delete deployment", func() error {
		cur, err := db.get(ctx, t, deploymentKey(orgID, id))
		if err != nil {
			return err
		}
		if cur == nil {
			return store.ErrNotFound
		}
		revs, err := db.queryPartition(ctx, t, revisionPK(orgID, id), "REV#")
		if err != nil {
			return err
		}
		if excess := len(revs) + 2 - maxTxItems; excess > 0 {
			byCreated(revs, false)
			var keys []map[string]types.AttributeValue
			for _, r := range revs[:excess] {
				keys = append(keys, revisionKey(orgID, id, r.str("id")))
			}
			if err := db.batchWrite(ctx, t, deletes(keys)); err != nil {
				return err
			}
			revs = revs[excess:]
		}
		items := []types.TransactWriteItem{
			{Delete: &types.Delete{TableName: aws.String(t), Key: deploymentKey(orgID, id),
				ConditionExpression:       aws.String("version = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(cur.num("version"))}}},
			{Delete: &types.Delete{TableName: aws.String(t), Key: deploymentNameKey(orgID, cur.str("name"))}},
		}
		for _, r := range revs {
			items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(t), Key: revisionKey(orgID, id, r.str("id"))}})
		}
		reasons, err := db.transact(ctx, items)
		if err != nil {
			return err
		}
		if txFailedAt(reasons, 0) {
			return errRetry // changed (or deleted) meanwhile: look again
		}
		if reasons != nil {
			return txErr("delete deployment", reasons)
		}
		return nil
	})
}

// Revision implements store.Deployments.
func (db *DB) Revision(ctx context.Context, orgID, deploymentID, id string) (store.Revision, error) {
	it, err := db.get(ctx, db.tables.deployments, revisionKey(orgID, deploymentID, id))
	if err != nil {
		return store.Revision{}, wrap("revision", err)
	}
	if it == nil {
		return store.Revision{}, store.ErrNotFound
	}
	return revisionFrom(it), nil
}

// ListRevisions implements store.Deployments: newest first, ties broken by
// insertion order (the later insert first).
func (db *DB) ListRevisions(ctx context.Context, orgID, deploymentID string, f store.RevisionFilter) ([]store.Revision, error) {
	dep, err := db.get(ctx, db.tables.deployments, deploymentKey(orgID, deploymentID))
	if err != nil {
		return nil, wrap("list revisions", err)
	}
	if dep == nil {
		return nil, store.ErrNotFound
	}
	items, err := db.queryPartition(ctx, db.tables.deployments, revisionPK(orgID, deploymentID), "REV#")
	if err != nil {
		return nil, wrap("list revisions", err)
	}
	var kept []item
	for _, it := range items {
		if len(f.Statuses) > 0 && !slices.Contains(f.Statuses, it.str("status")) {
			continue
		}
		kept = append(kept, it)
	}
	byCreated(kept, true)
	out := []store.Revision{}
	for _, it := range page(kept, f.Limit, f.Offset, 20) {
		out = append(out, revisionFrom(it))
	}
	return out, nil
}

// UpdateRevision implements store.Deployments. Status, StatusReason, Doc and
// UpdatedAt are replaced under the optimistic rule.
func (db *DB) UpdateRevision(ctx context.Context, r store.Revision) (store.Revision, error) {
	k := revisionKey(r.OrgID, r.DeploymentID, r.ID)
	cur, err := db.get(ctx, db.tables.deployments, k)
	if err != nil {
		return store.Revision{}, wrap("update revision", err)
	}
	if cur == nil {
		return store.Revision{}, store.ErrNotFound
	}
	if cur.num("version") != r.Version {
		return store.Revision{}, store.ErrStale
	}
	u := newUpd().set("status", s(r.Status)).set("reason", s(r.StatusReason)).set("doc", b(r.Doc)).
		set("updated", n(micros(r.UpdatedAt))).set("version", n(r.Version+1)).set("gpk", s("REV#"+r.Status)).
		cond("version", "$ = ?", n(r.Version))
	failed, _, err := db.write1(ctx, u.update(db.tables.deployments, k))
	if err != nil {
		return store.Revision{}, wrap("update revision", err)
	}
	if failed {
		again, err := db.get(ctx, db.tables.deployments, k)
		if err != nil {
			return store.Revision{}, wrap("update revision", err)
		}
		if again == nil {
			return store.Revision{}, store.ErrNotFound
		}
		return store.Revision{}, store.ErrStale
	}
	out := revisionFrom(cur)
	out.Status, out.StatusReason, out.Doc = r.Status, r.StatusReason, r.Doc
	out.UpdatedAt, out.Version = canon(r.UpdatedAt), r.Version+1
	return out, nil
}

// UnsettledRevisions implements store.Deployments through the status index
// (eventually consistent on AWS: a revision written a moment ago may be
// missing, and is found on the next call). Oldest first.
func (db *DB) UnsettledRevisions(ctx context.Context, statuses []string) ([]store.Revision, error) {
	var items []item
	seen := map[string]bool{}
	for _, st := range statuses {
		if seen[st] {
			continue
		}
		seen[st] = true
		got, err := db.byStatus(ctx, "REV#"+st)
		if err != nil {
			return nil, wrap("unsettled revisions", err)
		}
		items = append(items, got...)
	}
	byCreated(items, false)
	out := []store.Revision{}
	for _, it := range items {
		out = append(out, revisionFrom(it))
	}
	return out, nil
}

// DeploymentsInStatus implements store.Deployments through the status index
// (eventually consistent, as UnsettledRevisions). Oldest first.
func (db *DB) DeploymentsInStatus(ctx context.Context, status string) ([]store.Deployment, error) {
	items, err := db.byStatus(ctx, "DEP#"+status)
	if err != nil {
		return nil, wrap("deployments in status", err)
	}
	byCreated(items, false)
	out := []store.Deployment{}
	for _, it := range items {
		out = append(out, deploymentFrom(it))
	}
	return out, nil
}

// byStatus returns the items of the status index's partition gpk. The index
// holds keys only (revision documents are not copied into it): each item is
// read from the table, and one gone since, or whose status moved on
// meanwhile, is left out.
func (db *DB) byStatus(ctx context.Context, gpk string) ([]item, error) {
	keys, err := db.queryAll(ctx, &dynamodb.QueryInput{
		TableName: aws.String(db.tables.deployments), IndexName: aws.String(indexStatus),
		KeyConditionExpression:    aws.String("gpk = :g"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":g": s(gpk)},
	})
	if err != nil {
		return nil, err
	}
	out := make([]item, 0, len(keys))
	for _, k := range keys {
		it, err := db.get(ctx, db.tables.deployments, key(k.str("pk"), k.str("sk")))
		if err != nil {
			return nil, err
		}
		if it != nil && it.str("gpk") == gpk {
			out = append(out, it)
		}
	}
	return out, nil
}

package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

func orgKey(id string) map[string]types.AttributeValue       { return key("ORG#"+id, "ORG") }
func orgNameKey(name string) map[string]types.AttributeValue { return key("NAME#"+name, "NAME") }
func apiKeyKey(hash string) map[string]types.AttributeValue  { return key("KEY#"+hash, "KEY") }
func apiKeyIDKey(id string) map[string]types.AttributeValue  { return key("KEYID#"+id, "KEYID") }
func orgSecretKey(orgID, name string) map[string]types.AttributeValue {
	return key("ORG#"+orgID, "SECRET#"+name)
}

func with(k map[string]types.AttributeValue, attrs map[string]types.AttributeValue) map[string]types.AttributeValue {
	for name, v := range attrs {
		k[name] = v
	}
	return k
}

const notExists = "attribute_not_exists(pk)"
const exists = "attribute_exists(pk)"

// CreateOrganization implements store.Organizations: the organization and a
// marker item for its name are written in one transaction, each on condition
// that it is new.
func (db *DB) CreateOrganization(ctx context.Context, org store.Organization) error {
	attrs := map[string]types.AttributeValue{"id": s(org.ID), "name": s(org.Name), "created": n(micros(org.CreatedAt))}
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(db.tables.orgs), Item: with(orgNameKey(org.Name), attrs), ConditionExpression: aws.String(notExists)}},
		{Put: &types.Put{TableName: aws.String(db.tables.orgs), Item: with(orgKey(org.ID), attrs), ConditionExpression: aws.String(notExists)}},
	})
	if err != nil {
		return wrap("create organization", err)
	}
	if txFailedAt(reasons, 0) || txFailedAt(reasons, 1) {
		return store.ErrConflict
	}
	if reasons != nil {
		return txErr("create organization", reasons)
	}
	return nil
}

// OrganizationByName implements store.Organizations.
func (db *DB) OrganizationByName(ctx context.Context, name string) (store.Organization, error) {
	it, err := db.getWritten(ctx, db.tables.orgs, orgNameKey(name))
	if err != nil {
		return store.Organization{}, wrap("organization by name", err)
	}
	if it == nil {
		return store.Organization{}, store.ErrNotFound
	}
	return store.Organization{ID: it.str("id"), Name: it.str("name"), CreatedAt: it.time("created")}, nil
}

// CreateAPIKey implements store.Organizations: one transaction checks the
// organization and writes the key (keyed by hash) and a marker for its ID.
func (db *DB) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	attrs := map[string]types.AttributeValue{"id": s(k.ID), "org": s(k.OrgID), "hash": s(k.Hash), "created": n(micros(k.CreatedAt))}
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(db.tables.orgs), Key: orgKey(k.OrgID), ConditionExpression: aws.String(exists)}},
		{Put: &types.Put{TableName: aws.String(db.tables.orgs), Item: with(apiKeyKey(k.Hash), attrs), ConditionExpression: aws.String(notExists)}},
		{Put: &types.Put{TableName: aws.String(db.tables.orgs), Item: with(apiKeyIDKey(k.ID), map[string]types.AttributeValue{"hash": s(k.Hash)}), ConditionExpression: aws.String(notExists)}},
	})
	if err != nil {
		return wrap("create api key", err)
	}
	if reasons != nil {
		switch {
		case txFailedAt(reasons, 1) || txFailedAt(reasons, 2):
			return store.ErrConflict
		case txFailedAt(reasons, 0):
			return store.ErrNotFound
		}
		return txErr("create api key", reasons)
	}
	return nil
}

// APIKeyByHash implements store.Organizations.
func (db *DB) APIKeyByHash(ctx context.Context, hash string) (store.APIKey, error) {
	it, err := db.getWritten(ctx, db.tables.orgs, apiKeyKey(hash))
	if err != nil {
		return store.APIKey{}, wrap("api key by hash", err)
	}
	if it == nil {
		return store.APIKey{}, store.ErrNotFound
	}
	return store.APIKey{ID: it.str("id"), OrgID: it.str("org"), Hash: it.str("hash"), CreatedAt: it.time("created")}, nil
}

// OrganizationSecretRef implements store.Organizations.
func (db *DB) OrganizationSecretRef(ctx context.Context, orgID, name string) (string, error) {
	it, err := db.getWritten(ctx, db.tables.orgs, orgSecretKey(orgID, name))
	if err != nil {
		return "", wrap("organization secret", err)
	}
	if it == nil {
		return "", store.ErrNotFound
	}
	return it.str("ref"), nil
}

// SetOrganizationSecretRef implements store.Organizations.
func (db *DB) SetOrganizationSecretRef(ctx context.Context, orgID, name, ref string) error {
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(db.tables.orgs), Key: orgKey(orgID), ConditionExpression: aws.String(exists)}},
		{Put: &types.Put{TableName: aws.String(db.tables.orgs), Item: with(orgSecretKey(orgID, name), map[string]types.AttributeValue{"ref": s(ref)}), ConditionExpression: aws.String(notExists)}},
	})
	if err != nil {
		return wrap("set organization secret", err)
	}
	if reasons != nil {
		switch {
		case txFailedAt(reasons, 1):
			return store.ErrConflict
		case txFailedAt(reasons, 0):
			return store.ErrNotFound
		}
		return txErr("set organization secret", reasons)
	}
	return nil
}

// DeleteAPIKey implements store.Organizations: the key item and its id
// marker go together.
func (db *DB) DeleteAPIKey(ctx context.Context, hash string) error {
	k, err := db.APIKeyByHash(ctx, hash)
	if err != nil {
		return err
	}
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: aws.String(db.tables.orgs), Key: apiKeyKey(hash), ConditionExpression: aws.String(exists)}},
		{Delete: &types.Delete{TableName: aws.String(db.tables.orgs), Key: apiKeyIDKey(k.ID)}},
	})
	if err != nil {
		return wrap("delete api key", err)
	}
	if reasons != nil {
		if txFailedAt(reasons, 0) {
			return store.ErrNotFound
		}
		return txErr("delete api key", reasons)
	}
	return nil
}

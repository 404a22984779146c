package sqlite

import (
	"context"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/stepgraph/stepgraph/internal/store"
)

// CreateOrganization implements store.Organizations.
func (db *DB) CreateOrganization(ctx context.Context, org store.Organization) error {
	_, err := db.exec(ctx,
		`INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)`,
		org.ID, org.Name, micros(org.CreatedAt))
	return mapErr("create organization", err)
}

// OrganizationByName implements store.Organizations.
func (db *DB) OrganizationByName(ctx context.Context, name string) (store.Organization, error) {
	var o store.Organization
	var created int64
	err := db.reads().QueryRowContext(ctx,
		`SELECT id, name, created_at FROM organizations WHERE name = ?`, name).
		Scan(&o.ID, &o.Name, &created)
	if err != nil {
		return store.Organization{}, mapErr("organization by name", err)
	}
	o.CreatedAt = fromMicros(created)
	return o, nil
}

// CreateAPIKey implements store.Organizations.
func (db *DB) CreateAPIKey(ctx context.Context, key store.APIKey) error {
	_, err := db.exec(ctx,
		`INSERT INTO api_keys (id, org_id, hash, created_at) VALUES (?, ?, ?, ?)`,
		key.ID, key.OrgID, key.Hash, micros(key.CreatedAt))
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
		return store.ErrNotFound // no such organization
	}
	return mapErr("create api key", err)
}

// APIKeyByHash implements store.Organizations.
func (db *DB) APIKeyByHash(ctx context.Context, hash string) (store.APIKey, error) {
	var k store.APIKey
	var created int64
	err := db.reads().QueryRowContext(ctx,
		`SELECT id, org_id, hash, created_at FROM api_keys WHERE hash = ?`, hash).
		Scan(&k.ID, &k.OrgID, &k.Hash, &created)
	if err != nil {
		return store.APIKey{}, mapErr("api key by hash", err)
	}
	k.CreatedAt = fromMicros(created)
	return k, nil
}

// OrganizationSecretRef implements store.Organizations.
func (db *DB) OrganizationSecretRef(ctx context.Context, orgID, name string) (string, error) {
	var ref string
	err := db.reads().QueryRowContext(ctx,
		`SELECT ref FROM org_secrets WHERE org_id = ? AND name = ?`, orgID, name).Scan(&ref)
	return ref, mapErr("organization secret", err)
}

// SetOrganizationSecretRef implements store.Organizations.
func (db *DB) SetOrganizationSecretRef(ctx context.Context, orgID, name, ref string) error {
	_, err := db.exec(ctx,
		`INSERT INTO org_secrets (org_id, name, ref) VALUES (?, ?, ?)`, orgID, name, ref)
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
		return store.ErrNotFound
	}
	return mapErr("set organization secret", err)
}

// DeleteAPIKey implements store.Organizations.
func (db *DB) DeleteAPIKey(ctx context.Context, hash string) error {
	res, err := db.exec(ctx, `DELETE FROM api_keys WHERE hash = ?`, hash)
	if err != nil {
		return mapErr("delete api key", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

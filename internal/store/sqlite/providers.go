package sqlite

import (
	"context"

	"github.com/stepgraph/stepgraph/internal/store"
)

const providerColumns = `id, org_id, provider_id, name, client_id, client_secret_ref,
	auth_url, token_url, uses_pkce, code_challenge_method, provider_type,
	token_endpoint_auth_method, created_at, updated_at, revocation_url`

func scanProvider(s scanner) (store.Provider, error) {
	var p store.Provider
	var created, updated int64
	err := s.Scan(&p.ID, &p.OrgID, &p.ProviderID, &p.Name, &p.ClientID, &p.ClientSecretRef,
		&p.AuthURL, &p.TokenURL, &p.UsesPKCE, &p.CodeChallengeMethod, &p.ProviderType,
		&p.TokenEndpointAuthMethod, &created, &updated, &p.RevocationURL)
	if err != nil {
		return store.Provider{}, err
	}
	p.CreatedAt, p.UpdatedAt = fromMicros(created), fromMicros(updated)
	return p, nil
}

// CreateProvider implements store.Providers.
func (db *DB) CreateProvider(ctx context.Context, p store.Provider) error {
	_, err := db.exec(ctx, `INSERT INTO providers (`+providerColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.OrgID, p.ProviderID, p.Name, p.ClientID, p.ClientSecretRef,
		p.AuthURL, p.TokenURL, p.UsesPKCE, p.CodeChallengeMethod, p.ProviderType,
		p.TokenEndpointAuthMethod, micros(p.CreatedAt), micros(p.UpdatedAt), p.RevocationURL)
	return mapErr("create provider", err)
}

// Provider implements store.Providers.
func (db *DB) Provider(ctx context.Context, orgID, providerID string) (store.Provider, error) {
	p, err := scanProvider(db.reads().QueryRowContext(ctx,
		`SELECT `+providerColumns+` FROM providers WHERE org_id = ? AND provider_id = ?`,
		orgID, providerID))
	if err != nil {
		return store.Provider{}, mapErr("provider", err)
	}
	return p, nil
}

// ListProviders implements store.Providers: oldest first, ties in insertion
// order.
func (db *DB) ListProviders(ctx context.Context, orgID string) ([]store.Provider, error) {
	return queryAll(ctx, db.reads(), "list providers",
		`SELECT `+providerColumns+` FROM providers WHERE org_id = ? ORDER BY created_at, seq`,
		[]any{orgID}, scanProvider)
}

// UpdateProvider implements store.Providers. The stored ID and CreatedAt are
// kept; every other field is replaced.
func (db *DB) UpdateProvider(ctx context.Context, p store.Provider) error {
	res, err := db.exec(ctx, `UPDATE providers SET
		name = ?, client_id = ?, client_secret_ref = ?, auth_url = ?, token_url = ?,
		uses_pkce = ?, code_challenge_method = ?, provider_type = ?,
		token_endpoint_auth_method = ?, updated_at = ?, revocation_url = ?
		WHERE org_id = ? AND provider_id = ?`,
		p.Name, p.ClientID, p.ClientSecretRef, p.AuthURL, p.TokenURL,
		p.UsesPKCE, p.CodeChallengeMethod, p.ProviderType,
		p.TokenEndpointAuthMethod, micros(p.UpdatedAt), p.RevocationURL,
		p.OrgID, p.ProviderID)
	if err != nil {
		return mapErr("update provider", err)
	}
	n, err := affected("update provider", res)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// DeleteProvider implements store.Providers.
func (db *DB) DeleteProvider(ctx context.Context, orgID, providerID string) error {
	res, err := db.exec(ctx,
		`DELETE FROM providers WHERE org_id = ? AND provider_id = ?`, orgID, providerID)
	if err != nil {
		return mapErr("delete provider", err)
	}
	n, err := affected("delete provider", res)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

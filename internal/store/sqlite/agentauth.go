package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

const attemptColumns = `id, org_id, user_id, provider_id, scopes, agent_id, state_hash, status, error,
	token_id, created_at, expires_at, updated_at`

func scanAttempt(s scanner) (store.AuthAttempt, error) {
	var a store.AuthAttempt
	var scopes string
	var created, expires, updated int64
	err := s.Scan(&a.ID, &a.OrgID, &a.UserID, &a.ProviderID, &scopes, &a.AgentID, &a.StateHash, &a.Status, &a.Error,
		&a.TokenID, &created, &expires, &updated)
	if err != nil {
		return store.AuthAttempt{}, err
	}
	a.Scopes = splitScopes(scopes)
	a.CreatedAt, a.ExpiresAt, a.UpdatedAt = fromMicros(created), fromMicros(expires), fromMicros(updated)
	return a, nil
}

// Scopes are stored space-joined, as OAuth writes them; a scope never
// contains a space (RFC 6749 §3.3), which the use case checks.
func joinScopes(s []string) string { return strings.Join(s, " ") }

func splitScopes(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, " ")
}

// CreateAuthAttempt implements store.AgentAuth.
func (db *DB) CreateAuthAttempt(ctx context.Context, a store.AuthAttempt) error {
	_, err := db.exec(ctx, `INSERT INTO auth_attempts (`+attemptColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.OrgID, a.UserID, a.ProviderID, joinScopes(a.Scopes), a.AgentID, a.StateHash, a.Status, a.Error,
		a.TokenID, micros(a.CreatedAt), micros(a.ExpiresAt), micros(a.UpdatedAt))
	return mapErr("create auth attempt", err)
}

// AuthAttempt implements store.AgentAuth.
func (db *DB) AuthAttempt(ctx context.Context, orgID, id string) (store.AuthAttempt, error) {
	a, err := scanAttempt(db.reads().QueryRowContext(ctx,
		`SELECT `+attemptColumns+` FROM auth_attempts WHERE org_id = ? AND id = ?`, orgID, id))
	return a, mapErr("auth attempt", err)
}

// AuthAttemptByState implements store.AgentAuth.
func (db *DB) AuthAttemptByState(ctx context.Context, stateHash string) (store.AuthAttempt, error) {
	a, err := scanAttempt(db.reads().QueryRowContext(ctx,
		`SELECT `+attemptColumns+` FROM auth_attempts WHERE state_hash = ?`, stateHash))
	return a, mapErr("auth attempt by state", err)
}

// SetAuthAttemptStatus implements store.AgentAuth: one conditional UPDATE,
// so of two callbacks with the same state only one moves the attempt.
func (db *DB) SetAuthAttemptStatus(ctx context.Context, a store.AuthAttempt, from string) error {
	return db.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE auth_attempts SET status = ?, error = ?, token_id = ?, updated_at = ?
			WHERE org_id = ? AND id = ? AND status = ?`,
			a.Status, a.Error, a.TokenID, micros(a.UpdatedAt), a.OrgID, a.ID, from)
		if err != nil {
			return mapErr("set auth attempt status", err)
		}
		n, err := affected("set auth attempt status", res)
		if err != nil || n == 1 {
			return err
		}
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM auth_attempts WHERE org_id = ? AND id = ?)`,
			a.OrgID, a.ID).Scan(&exists); err != nil {
			return mapErr("set auth attempt status", err)
		}
		if exists == 0 {
			return store.ErrNotFound
		}
		return store.ErrStale
	})
}

// DeleteExpiredAuthAttempts implements store.AgentAuth.
func (db *DB) DeleteExpiredAuthAttempts(ctx context.Context, orgID string, t time.Time) (int, error) {
	res, err := db.exec(ctx, `DELETE FROM auth_attempts WHERE org_id = ? AND expires_at < ?`, orgID, micros(t))
	if err != nil {
		return 0, mapErr("delete expired auth attempts", err)
	}
	n, err := affected("delete expired auth attempts", res)
	return int(n), err
}

const tokenColumns = `id, org_id, user_id, provider_id, scopes, agent_id, secret_ref, expires_at, usable, created_at, updated_at`

func scanToken(s scanner) (store.AgentToken, error) {
	var t store.AgentToken
	var scopes string
	var expires sql.NullInt64
	var created, updated int64
	err := s.Scan(&t.ID, &t.OrgID, &t.UserID, &t.ProviderID, &scopes, &t.AgentID, &t.SecretRef, &expires, &t.Usable,
		&created, &updated)
	if err != nil {
		return store.AgentToken{}, err
	}
	t.Scopes = splitScopes(scopes)
	t.ExpiresAt = fromNullMicros(expires)
	t.CreatedAt, t.UpdatedAt = fromMicros(created), fromMicros(updated)
	return t, nil
}

// PutAgentToken implements store.AgentAuth: the replaced record's secret
// reference is read and the record replaced in one transaction.
func (db *DB) PutAgentToken(ctx context.Context, t store.AgentToken) (string, error) {
	var replaced string
	err := db.inTx(ctx, func(tx *txn) error {
		err := tx.QueryRowContext(ctx, `SELECT secret_ref FROM agent_tokens
			WHERE org_id = ? AND provider_id = ? AND user_id = ? AND scopes = ? AND agent_id = ?`,
			t.OrgID, t.ProviderID, t.UserID, joinScopes(t.Scopes), t.AgentID).Scan(&replaced)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return mapErr("put agent token", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM agent_tokens
			WHERE org_id = ? AND provider_id = ? AND user_id = ? AND scopes = ? AND agent_id = ?`,
			t.OrgID, t.ProviderID, t.UserID, joinScopes(t.Scopes), t.AgentID); err != nil {
			return mapErr("put agent token", err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO agent_tokens (`+tokenColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			t.ID, t.OrgID, t.UserID, t.ProviderID, joinScopes(t.Scopes), t.AgentID, t.SecretRef, nullMicros(t.ExpiresAt),
			t.Usable, micros(t.CreatedAt), micros(t.UpdatedAt))
		return mapErr("put agent token", err)
	})
	if err != nil {
		return "", err
	}
	return replaced, nil
}

// AgentToken implements store.AgentAuth.
func (db *DB) AgentToken(ctx context.Context, orgID, id string) (store.AgentToken, error) {
	t, err := scanToken(db.reads().QueryRowContext(ctx,
		`SELECT `+tokenColumns+` FROM agent_tokens WHERE org_id = ? AND id = ?`, orgID, id))
	return t, mapErr("agent token", err)
}

// AgentTokens implements store.AgentAuth.
func (db *DB) AgentTokens(ctx context.Context, orgID, providerID, userID string) ([]store.AgentToken, error) {
	return queryAll(ctx, db.reads(), "list agent tokens",
		`SELECT `+tokenColumns+` FROM agent_tokens WHERE org_id = ? AND provider_id = ? AND (? = '' OR user_id = ?)
		ORDER BY created_at, seq`, []any{orgID, providerID, userID, userID}, scanToken)
}

// UpdateAgentToken implements store.AgentAuth.
func (db *DB) UpdateAgentToken(ctx context.Context, t store.AgentToken, fromRef string) error {
	return db.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE agent_tokens SET secret_ref = ?, expires_at = ?, usable = ?, updated_at = ?
			WHERE org_id = ? AND id = ? AND secret_ref = ?`,
			t.SecretRef, nullMicros(t.ExpiresAt), t.Usable, micros(t.UpdatedAt), t.OrgID, t.ID, fromRef)
		if err != nil {
			return mapErr("update agent token", err)
		}
		n, err := affected("update agent token", res)
		if err != nil || n == 1 {
			return err
		}
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM agent_tokens WHERE org_id = ? AND id = ?)`,
			t.OrgID, t.ID).Scan(&exists); err != nil {
			return mapErr("update agent token", err)
		}
		if exists == 0 {
			return store.ErrNotFound
		}
		return store.ErrStale
	})
}

// DeleteAgentTokens implements store.AgentAuth.
func (db *DB) DeleteAgentTokens(ctx context.Context, orgID, providerID, userID string) ([]store.AgentToken, error) {
	var out []store.AgentToken
	err := db.inTx(ctx, func(tx *txn) error {
		var err error
		out, err = queryAll(ctx, tx, "delete agent tokens",
			`SELECT `+tokenColumns+` FROM agent_tokens WHERE org_id = ? AND provider_id = ? AND (? = '' OR user_id = ?)
			ORDER BY created_at, seq`, []any{orgID, providerID, userID, userID}, scanToken)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM agent_tokens WHERE org_id = ? AND provider_id = ? AND (? = '' OR user_id = ?)`,
			orgID, providerID, userID, userID)
		return mapErr("delete agent tokens", err)
	})
	return out, err
}

// DeleteAgentToken implements store.AgentAuth.
func (db *DB) DeleteAgentToken(ctx context.Context, orgID, id string) (store.AgentToken, error) {
	var out store.AgentToken
	err := db.inTx(ctx, func(tx *txn) error {
		var err error
		out, err = scanToken(tx.QueryRowContext(ctx,
			`SELECT `+tokenColumns+` FROM agent_tokens WHERE org_id = ? AND id = ?`, orgID, id))
		if err != nil {
			return mapErr("delete agent token", err)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM agent_tokens WHERE org_id = ? AND id = ?`, orgID, id)
		return mapErr("delete agent token", err)
	})
	if err != nil {
		return store.AgentToken{}, err
	}
	return out, nil
}

var _ store.AgentAuth = (*DB)(nil)

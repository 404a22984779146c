-- 0012: agent auth (internal/agentauth). auth_attempts are the authorizations
-- in progress, found by the hash of their state (the state itself is never
-- stored); agent_tokens are the records of the tokens users granted, keyed by
-- organization, user, provider and scopes (space-joined, sorted). The token
-- values are in the secrets store under secret_ref, never here.
CREATE TABLE auth_attempts (
    id          TEXT    NOT NULL PRIMARY KEY,
    org_id      TEXT    NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id     TEXT    NOT NULL,
    provider_id TEXT    NOT NULL,
    scopes      TEXT    NOT NULL,
    state_hash  TEXT    NOT NULL UNIQUE,
    status      TEXT    NOT NULL,
    error       TEXT    NOT NULL,
    token_id    TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX auth_attempts_expiry ON auth_attempts (org_id, expires_at);

CREATE TABLE agent_tokens (
    seq         INTEGER PRIMARY KEY,
    id          TEXT    NOT NULL UNIQUE,
    org_id      TEXT    NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id     TEXT    NOT NULL,
    provider_id TEXT    NOT NULL,
    scopes      TEXT    NOT NULL,
    secret_ref  TEXT    NOT NULL,
    expires_at  INTEGER,
    usable      INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (org_id, provider_id, user_id, scopes)
);

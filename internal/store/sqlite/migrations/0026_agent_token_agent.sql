-- 0026: agent-scoped tokens (issue 17). A token belongs to (organization,
-- user, provider, scopes, agent); agent_id '' is the user's unscoped token,
-- which every token stored before this migration is. An attempt carries the
-- agent to its callback. SQLite cannot change a UNIQUE constraint in place:
-- agent_tokens is rebuilt with the agent in its key (rows keep their seq,
-- so the order of listings is kept).
ALTER TABLE auth_attempts ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';

CREATE TABLE agent_tokens_0026 (
    seq         INTEGER PRIMARY KEY,
    id          TEXT    NOT NULL UNIQUE,
    org_id      TEXT    NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id     TEXT    NOT NULL,
    provider_id TEXT    NOT NULL,
    scopes      TEXT    NOT NULL,
    agent_id    TEXT    NOT NULL DEFAULT '',
    secret_ref  TEXT    NOT NULL,
    expires_at  INTEGER,
    usable      INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (org_id, provider_id, user_id, scopes, agent_id)
);
INSERT INTO agent_tokens_0026 (seq, id, org_id, user_id, provider_id, scopes, agent_id, secret_ref, expires_at, usable, created_at, updated_at)
    SELECT seq, id, org_id, user_id, provider_id, scopes, '', secret_ref, expires_at, usable, created_at, updated_at FROM agent_tokens;
DROP TABLE agent_tokens;
ALTER TABLE agent_tokens_0026 RENAME TO agent_tokens;

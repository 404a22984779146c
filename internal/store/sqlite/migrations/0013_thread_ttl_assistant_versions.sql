-- 0013: a thread's time to live (store.Thread.ExpiresAt, TTLStrategy): the
-- workers sweep threads whose expiry has passed (ExpiredThreads reads them
-- oldest expiry first, across organizations, through the partial index).

ALTER TABLE threads ADD COLUMN expires_at INTEGER;
ALTER TABLE threads ADD COLUMN ttl_strategy TEXT NOT NULL DEFAULT '';

CREATE INDEX threads_expiry ON threads (expires_at) WHERE expires_at IS NOT NULL;

-- Every version of an assistant (store.Assistants: UpdateAssistant adds
-- one, SetAssistantVersion makes one current); the assistants row is the
-- current version. Assistants made before this migration get their
-- current version as their only one.

CREATE TABLE assistant_versions (
    org_id       TEXT    NOT NULL,
    assistant_id TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    graph_id     TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    description  TEXT    NOT NULL,
    config       TEXT    NOT NULL,
    context      TEXT    NOT NULL,
    metadata     TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (org_id, assistant_id, version)
);

INSERT INTO assistant_versions (org_id, assistant_id, version, graph_id, name, description, config, context, metadata, created_at)
SELECT org_id, id, version, graph_id, name, description, config, context, metadata, updated_at FROM assistants;

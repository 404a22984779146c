-- 0001: the initial schema. Times are INTEGER unix microseconds, UTC.
-- Tables whose rows are listed in insertion-sensitive order carry an
-- INTEGER PRIMARY KEY "seq" (an alias of the rowid, stable across VACUUM) that
-- breaks ties between equal created_at values; their string id is UNIQUE.

CREATE TABLE organizations (
    id         TEXT    NOT NULL PRIMARY KEY,
    name       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE TABLE api_keys (
    id         TEXT    NOT NULL PRIMARY KEY,
    org_id     TEXT    NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    hash       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);
CREATE INDEX api_keys_org ON api_keys (org_id);

CREATE TABLE providers (
    seq                        INTEGER PRIMARY KEY,
    id                         TEXT    NOT NULL,
    org_id                     TEXT    NOT NULL,
    provider_id                TEXT    NOT NULL,
    name                       TEXT    NOT NULL,
    client_id                  TEXT    NOT NULL,
    client_secret_ref          TEXT    NOT NULL,
    auth_url                   TEXT    NOT NULL,
    token_url                  TEXT    NOT NULL,
    uses_pkce                  INTEGER NOT NULL,
    code_challenge_method      TEXT    NOT NULL,
    provider_type              TEXT    NOT NULL,
    token_endpoint_auth_method TEXT    NOT NULL,
    created_at                 INTEGER NOT NULL,
    updated_at                 INTEGER NOT NULL,
    UNIQUE (org_id, provider_id)
);
CREATE INDEX providers_org_created ON providers (org_id, created_at, seq);

CREATE TABLE deployments (
    seq                INTEGER PRIMARY KEY,
    id                 TEXT    NOT NULL UNIQUE,
    org_id             TEXT    NOT NULL,
    name               TEXT    NOT NULL,
    status             TEXT    NOT NULL,
    latest_revision_id TEXT    NOT NULL,
    active_revision_id TEXT    NOT NULL,
    doc                BLOB,
    version            INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    UNIQUE (org_id, name)
);
CREATE INDEX deployments_org_created ON deployments (org_id, created_at, seq);
CREATE INDEX deployments_status ON deployments (status, created_at, seq);

CREATE TABLE revisions (
    seq           INTEGER PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    org_id        TEXT    NOT NULL,
    deployment_id TEXT    NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    status        TEXT    NOT NULL,
    status_reason TEXT    NOT NULL,
    doc           BLOB,
    version       INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX revisions_deployment_created ON revisions (deployment_id, created_at, seq);
CREATE INDEX revisions_status ON revisions (status, created_at, seq);

CREATE TABLE idempotency_keys (
    org_id       TEXT    NOT NULL,
    scope        TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    request_hash TEXT    NOT NULL,
    status       INTEGER NOT NULL,
    body         BLOB,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (org_id, scope, key)
);

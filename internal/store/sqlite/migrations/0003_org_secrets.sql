-- 0003: references to secrets an organization owns as a whole (the webhook
-- signing secret). The values live in the secrets store.
CREATE TABLE org_secrets (
    org_id TEXT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name   TEXT NOT NULL,
    ref    TEXT NOT NULL,
    PRIMARY KEY (org_id, name)
);

-- 0013: a thread's time to live (store.Thread.ExpiresAt, TTLStrategy): the
-- workers sweep threads whose expiry has passed (ExpiredThreads reads them
-- oldest expiry first, across organizations, through the partial index).

ALTER TABLE threads ADD COLUMN expires_at INTEGER;
ALTER TABLE threads ADD COLUMN ttl_strategy TEXT NOT NULL DEFAULT '';

CREATE INDEX threads_expiry ON threads (expires_at) WHERE expires_at IS NOT NULL;

-- 0004: the answer of a finished temporary (stateless) run outlives its
-- thread for a while, so a waiter in another process still gets it.
CREATE TABLE temporary_results (
    run_id     TEXT    PRIMARY KEY,
    org_id     TEXT    NOT NULL,
    result     TEXT,
    expires_at INTEGER NOT NULL
);
CREATE INDEX temporary_results_expiry ON temporary_results (expires_at);

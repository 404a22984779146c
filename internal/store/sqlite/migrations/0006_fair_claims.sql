-- 0006: fair claims (issue 12, finding F2). ClaimRun serves organizations in
-- turn and caps the running runs of each: it walks the organizations with
-- pending runs in org_id order from the one it served last, and counts an
-- organization's running runs, both on runs_org_claim. claim_turn holds the
-- organization served last (one row), so the turns carry on across
-- processes and restarts. runs_claim (start order across organizations) has
-- no reader left: expired leases are looked for among the running runs,
-- which runs_org_claim holds together too.
CREATE TABLE claim_turn (
    id       INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    last_org TEXT    NOT NULL
);
DROP INDEX runs_claim;
CREATE INDEX runs_org_claim ON runs (status, org_id, not_before, created_at, seq);

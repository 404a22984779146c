-- 0010: the event log of resumable run streams (store.Events). Numbered
-- apart from the run-queue migrations so parallel work does not collide.
-- A row is one event; a run's events are numbered from 0 (seq) and read in
-- that order. Rows expire (expires_at, unix microseconds): reads skip
-- expired ones and DeleteExpiredRunEvents removes them by the index.
CREATE TABLE run_events (
    org_id     TEXT    NOT NULL,
    run_id     TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    event      TEXT    NOT NULL,
    data       BLOB    NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (org_id, run_id, seq)
) WITHOUT ROWID;
CREATE INDEX run_events_expiry ON run_events (expires_at);

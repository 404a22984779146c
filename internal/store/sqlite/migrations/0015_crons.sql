-- 0015: crons (store.Crons). Times are unix microseconds; end_time and
-- next_run_date are NULL when there is none. crons_due serves the
-- scheduler's scan of due crons across organizations.
CREATE TABLE crons (
    seq              INTEGER PRIMARY KEY,
    org_id           TEXT    NOT NULL,
    id               TEXT    NOT NULL,
    assistant_id     TEXT    NOT NULL,
    thread_id        TEXT    NOT NULL,
    user_id          TEXT    NOT NULL,
    schedule         TEXT    NOT NULL,
    timezone         TEXT    NOT NULL,
    end_time         INTEGER,
    on_run_completed TEXT    NOT NULL,
    enabled          INTEGER NOT NULL,
    payload          TEXT    NOT NULL,
    metadata         TEXT    NOT NULL,
    next_run_date    INTEGER,
    version          INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (org_id, id)
);
CREATE INDEX crons_org_created ON crons (org_id, created_at);
CREATE INDEX crons_due ON crons (enabled, next_run_date);

-- 0002: assistants, threads, runs and checkpoints (the runs port).
-- JSON fields are TEXT holding the caller's raw JSON byte for byte (bound as
-- text: SQLite's json functions would read a BLOB as JSONB); NULL means none.
-- Checkpoint data is the engine's opaque document, a BLOB like Doc.
-- Zero times of runs (started_at, ended_at, lease_until) are NULL.

CREATE TABLE assistants (
    seq         INTEGER PRIMARY KEY,
    id          TEXT    NOT NULL,
    org_id      TEXT    NOT NULL,
    graph_id    TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    description TEXT    NOT NULL,
    config      TEXT    NOT NULL,
    context     TEXT    NOT NULL,
    metadata    TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (org_id, id)
);
CREATE INDEX assistants_org_created ON assistants (org_id, created_at, seq);

CREATE TABLE threads (
    seq          INTEGER PRIMARY KEY,
    id           TEXT    NOT NULL,
    org_id       TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    metadata     TEXT    NOT NULL,
    config       TEXT    NOT NULL,
    state_values TEXT,
    interrupts   TEXT,
    error        TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    UNIQUE (org_id, id)
);
CREATE INDEX threads_org_created ON threads (org_id, created_at, seq);

-- Run IDs are unique across organizations: the worker methods name a run by
-- its ID alone.
CREATE TABLE runs (
    seq                INTEGER PRIMARY KEY,
    id                 TEXT    NOT NULL UNIQUE,
    org_id             TEXT    NOT NULL,
    thread_id          TEXT    NOT NULL,
    assistant_id       TEXT    NOT NULL,
    status             TEXT    NOT NULL,
    metadata           TEXT    NOT NULL,
    kwargs             TEXT    NOT NULL,
    multitask_strategy TEXT    NOT NULL,
    temporary          INTEGER NOT NULL,
    not_before         INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    started_at         INTEGER,
    ended_at           INTEGER,
    result             TEXT,
    cancel_action      TEXT    NOT NULL,
    lease_owner        TEXT    NOT NULL,
    lease_until        INTEGER,
    attempt            INTEGER NOT NULL,
    FOREIGN KEY (org_id, thread_id) REFERENCES threads (org_id, id) ON DELETE CASCADE
);
CREATE INDEX runs_thread_status ON runs (org_id, thread_id, status);
CREATE INDEX runs_thread_created ON runs (org_id, thread_id, created_at, seq);
-- ClaimRun: pending (or running) runs in start order.
CREATE INDEX runs_claim ON runs (status, not_before, created_at, seq);

-- Checkpoint IDs are time-ordered, so the primary key also serves the
-- newest-first listing of a thread's checkpoints.
CREATE TABLE checkpoints (
    org_id     TEXT    NOT NULL,
    thread_id  TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    parent_id  TEXT    NOT NULL,
    run_id     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    data       BLOB,
    PRIMARY KEY (org_id, thread_id, id),
    FOREIGN KEY (org_id, thread_id) REFERENCES threads (org_id, id) ON DELETE CASCADE
);
CREATE INDEX checkpoints_run ON checkpoints (org_id, thread_id, run_id);

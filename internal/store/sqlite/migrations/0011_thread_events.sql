-- 0011: the thread-keyed event log of the thread event protocol
-- (store.Events AppendThreadEvents; POST /threads/{id}/stream/events).
-- thread_event_seqs holds each thread's counter, the highest seq it was
-- given: it never expires, so a thread's numbering never goes back when its
-- events expire (a client's since cursor stays meaningful). Both tables are
-- deleted with the thread (foreign keys). Rows of thread_events expire like
-- run_events (expires_at, unix microseconds).
CREATE TABLE thread_event_seqs (
    org_id    TEXT    NOT NULL,
    thread_id TEXT    NOT NULL,
    last_seq  INTEGER NOT NULL,
    PRIMARY KEY (org_id, thread_id),
    FOREIGN KEY (org_id, thread_id) REFERENCES threads (org_id, id) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE TABLE thread_events (
    org_id     TEXT    NOT NULL,
    thread_id  TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    run_id     TEXT    NOT NULL,
    event      TEXT    NOT NULL,
    data       BLOB    NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (org_id, thread_id, seq),
    FOREIGN KEY (org_id, thread_id) REFERENCES threads (org_id, id) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX thread_events_expiry ON thread_events (expires_at);

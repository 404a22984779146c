-- When a thread's state last changed (store.Thread.StateUpdatedAt,
-- upstream's state_updated_at; a sort key of thread search). Threads made
-- before this migration take their updated_at, as upstream's in-memory
-- runtime does for a thread that lacks it.
ALTER TABLE threads ADD COLUMN state_updated_at INTEGER NOT NULL DEFAULT 0;
UPDATE threads SET state_updated_at = updated_at;

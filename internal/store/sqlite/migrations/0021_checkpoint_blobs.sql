-- 0021: checkpoints in the cpcodec format (issue 19). A checkpoint row keeps
-- its head in data and its manifest in manifest; the values of its channels
-- are rows of checkpoint_blobs, one per version (an append to an array: the
-- appended elements over its base). Rows whose manifest is NULL hold the
-- whole checkpoint in data, as before: existing checkpoints are read as
-- they are and need no rewrite.
--
-- size is the length of the checkpoint's data as put (NULL: octet_length
-- of data, the old rows): what the organization's usage counts, as the
-- store.Usage contract says, whatever the format stores.
ALTER TABLE checkpoints ADD COLUMN manifest BLOB;
ALTER TABLE checkpoints ADD COLUMN size INTEGER;

CREATE TABLE checkpoint_blobs (
    org_id    TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    id        TEXT NOT NULL,
    base      TEXT NOT NULL, -- '' for a whole value
    data      BLOB NOT NULL,
    PRIMARY KEY (org_id, thread_id, id),
    FOREIGN KEY (org_id, thread_id) REFERENCES threads (org_id, id) ON DELETE CASCADE
);

DROP TRIGGER org_usage_checkpoint_insert;
DROP TRIGGER org_usage_checkpoint_update;
DROP TRIGGER org_usage_checkpoint_delete;
CREATE TRIGGER org_usage_checkpoint_insert AFTER INSERT ON checkpoints BEGIN
    INSERT INTO org_usage (org_id, threads, bytes) VALUES (NEW.org_id, 0, coalesce(NEW.size, octet_length(NEW.data), 0))
        ON CONFLICT (org_id) DO UPDATE SET bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER org_usage_checkpoint_update AFTER UPDATE OF data, size ON checkpoints BEGIN
    UPDATE org_usage SET bytes = bytes + coalesce(NEW.size, octet_length(NEW.data), 0) - coalesce(OLD.size, octet_length(OLD.data), 0)
        WHERE org_id = NEW.org_id;
END;
CREATE TRIGGER org_usage_checkpoint_delete AFTER DELETE ON checkpoints BEGIN
    UPDATE org_usage SET bytes = bytes - coalesce(OLD.size, octet_length(OLD.data), 0)
        WHERE org_id = OLD.org_id;
END;

-- A thread's values summary and a run's result are the state a checkpoint
-- holds: stored split the same way (their manifests reach the same blobs,
-- so they write a manifest, not the state again). NULL manifest: the
-- document is whole in state_values / result, as before. result_size is
-- the result's length as put, what the usage counts.
ALTER TABLE threads ADD COLUMN values_manifest TEXT;
ALTER TABLE runs ADD COLUMN result_manifest TEXT;
ALTER TABLE runs ADD COLUMN result_size INTEGER;

DROP TRIGGER org_usage_run_insert;
DROP TRIGGER org_usage_run_update;
DROP TRIGGER org_usage_run_delete;
CREATE TRIGGER org_usage_run_insert AFTER INSERT ON runs BEGIN
    INSERT INTO org_usage (org_id, threads, bytes)
        VALUES (NEW.org_id, 0, octet_length(NEW.metadata) + octet_length(NEW.kwargs) + coalesce(NEW.result_size, octet_length(NEW.result), 0))
        ON CONFLICT (org_id) DO UPDATE SET bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER org_usage_run_update AFTER UPDATE OF metadata, kwargs, result, result_size ON runs BEGIN
    UPDATE org_usage SET bytes = bytes
        + octet_length(NEW.metadata) + octet_length(NEW.kwargs) + coalesce(NEW.result_size, octet_length(NEW.result), 0)
        - octet_length(OLD.metadata) - octet_length(OLD.kwargs) - coalesce(OLD.result_size, octet_length(OLD.result), 0)
        WHERE org_id = NEW.org_id;
END;
CREATE TRIGGER org_usage_run_delete AFTER DELETE ON runs BEGIN
    UPDATE org_usage SET bytes = bytes
        - octet_length(OLD.metadata) - octet_length(OLD.kwargs) - coalesce(OLD.result_size, octet_length(OLD.result), 0)
        WHERE org_id = OLD.org_id;
END;

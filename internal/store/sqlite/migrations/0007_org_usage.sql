-- 0006: what each organization stores (store.Usage), counted by triggers in
-- the transaction of every write that changes it: whatever the statement
-- (an upsert of a checkpoint, the deletion of a thread with its runs and
-- checkpoints), the counters move with the rows. Sizes are octet_length:
-- bytes, for the TEXT documents as for the BLOB checkpoint data. The counts
-- start from what the database holds when the migration runs.

CREATE TABLE org_usage (
    org_id  TEXT    NOT NULL PRIMARY KEY,
    threads INTEGER NOT NULL,
    bytes   INTEGER NOT NULL
);

INSERT INTO org_usage (org_id, threads, bytes)
SELECT org_id, sum(n), sum(b) FROM (
    SELECT org_id, count(*) AS n, coalesce(sum(octet_length(metadata)), 0) AS b
        FROM threads GROUP BY org_id
    UNION ALL
    SELECT org_id, 0, coalesce(sum(octet_length(metadata) + octet_length(kwargs) + coalesce(octet_length(result), 0)), 0)
        FROM runs GROUP BY org_id
    UNION ALL
    SELECT org_id, 0, coalesce(sum(coalesce(octet_length(data), 0)), 0)
        FROM checkpoints GROUP BY org_id
) GROUP BY org_id;

-- Inserts create the organization's row when it has none (upsert); updates
-- and deletes follow an insert of the same organization, so the row exists.

CREATE TRIGGER org_usage_thread_insert AFTER INSERT ON threads BEGIN
    INSERT INTO org_usage (org_id, threads, bytes) VALUES (NEW.org_id, 1, octet_length(NEW.metadata))
        ON CONFLICT (org_id) DO UPDATE SET threads = threads + 1, bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER org_usage_thread_update AFTER UPDATE OF metadata ON threads BEGIN
    UPDATE org_usage SET bytes = bytes + octet_length(NEW.metadata) - octet_length(OLD.metadata)
        WHERE org_id = NEW.org_id;
END;
CREATE TRIGGER org_usage_thread_delete AFTER DELETE ON threads BEGIN
    UPDATE org_usage SET threads = threads - 1, bytes = bytes - octet_length(OLD.metadata)
        WHERE org_id = OLD.org_id;
END;

CREATE TRIGGER org_usage_run_insert AFTER INSERT ON runs BEGIN
    INSERT INTO org_usage (org_id, threads, bytes)
        VALUES (NEW.org_id, 0, octet_length(NEW.metadata) + octet_length(NEW.kwargs) + coalesce(octet_length(NEW.result), 0))
        ON CONFLICT (org_id) DO UPDATE SET bytes = bytes + excluded.bytes;
END;
-- Only writes of the counted columns fire it: not the lease renewals.
CREATE TRIGGER org_usage_run_update AFTER UPDATE OF metadata, kwargs, result ON runs BEGIN
    UPDATE org_usage SET bytes = bytes
        + octet_length(NEW.metadata) + octet_length(NEW.kwargs) + coalesce(octet_length(NEW.result), 0)
        - octet_length(OLD.metadata) - octet_length(OLD.kwargs) - coalesce(octet_length(OLD.result), 0)
        WHERE org_id = NEW.org_id;
END;
CREATE TRIGGER org_usage_run_delete AFTER DELETE ON runs BEGIN
    UPDATE org_usage SET bytes = bytes
        - octet_length(OLD.metadata) - octet_length(OLD.kwargs) - coalesce(octet_length(OLD.result), 0)
        WHERE org_id = OLD.org_id;
END;

CREATE TRIGGER org_usage_checkpoint_insert AFTER INSERT ON checkpoints BEGIN
    INSERT INTO org_usage (org_id, threads, bytes) VALUES (NEW.org_id, 0, coalesce(octet_length(NEW.data), 0))
        ON CONFLICT (org_id) DO UPDATE SET bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER org_usage_checkpoint_update AFTER UPDATE OF data ON checkpoints BEGIN
    UPDATE org_usage SET bytes = bytes + coalesce(octet_length(NEW.data), 0) - coalesce(octet_length(OLD.data), 0)
        WHERE org_id = NEW.org_id;
END;
CREATE TRIGGER org_usage_checkpoint_delete AFTER DELETE ON checkpoints BEGIN
    UPDATE org_usage SET bytes = bytes - coalesce(octet_length(OLD.data), 0)
        WHERE org_id = OLD.org_id;
END;

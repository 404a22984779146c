-- 0014: the long-term memory store (store.Items, the /store API). One row
-- per item; ns is the namespace as store.EncodeNamespace writes it (each
-- label followed by 0x1E), so a namespace prefix is a range of ns.
-- expires_at (unix microseconds) is NULL for an item without TTL; reads
-- skip expired rows and DeleteExpiredItems removes them by the index.
-- An item counts toward its organization's stored bytes (org_usage, 0007):
-- its key, its labels (octet_length(ns) less one separator per label),
-- its value and its vectors, moved by the triggers below in the
-- transaction of every write.
CREATE TABLE store_items (
    org_id     TEXT    NOT NULL,
    ns         TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    depth      INTEGER NOT NULL,
    value      BLOB    NOT NULL,
    vectors    BLOB,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    ttl_us     INTEGER NOT NULL,
    expires_at INTEGER,
    PRIMARY KEY (org_id, ns, key)
) WITHOUT ROWID;
CREATE INDEX store_items_updated ON store_items (org_id, updated_at);
CREATE INDEX store_items_expiry ON store_items (expires_at) WHERE expires_at IS NOT NULL;

CREATE TRIGGER org_usage_store_item_insert AFTER INSERT ON store_items BEGIN
    INSERT INTO org_usage (org_id, threads, bytes)
        VALUES (NEW.org_id, 0, octet_length(NEW.key) + octet_length(NEW.ns) - NEW.depth
            + octet_length(NEW.value) + coalesce(octet_length(NEW.vectors), 0))
        ON CONFLICT (org_id) DO UPDATE SET bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER org_usage_store_item_update AFTER UPDATE OF value, vectors ON store_items BEGIN
    UPDATE org_usage SET bytes = bytes
        + octet_length(NEW.value) + coalesce(octet_length(NEW.vectors), 0)
        - octet_length(OLD.value) - coalesce(octet_length(OLD.vectors), 0)
        WHERE org_id = NEW.org_id;
END;
CREATE TRIGGER org_usage_store_item_delete AFTER DELETE ON store_items BEGIN
    UPDATE org_usage SET bytes = bytes - (octet_length(OLD.key) + octet_length(OLD.ns) - OLD.depth
            + octet_length(OLD.value) + coalesce(octet_length(OLD.vectors), 0))
        WHERE org_id = OLD.org_id;
END;

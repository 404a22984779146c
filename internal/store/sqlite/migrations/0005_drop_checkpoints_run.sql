-- 0005: checkpoints lose their index by run. Every checkpoint write paid for
-- it (a second B-tree page per write, the largest cost of a sync run's
-- steps); its one reader, deleting a cancelled run's checkpoints with
-- rollback, finds them through the primary key's (org_id, thread_id) prefix.
DROP INDEX checkpoints_run;

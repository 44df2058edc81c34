-- Rows written per execution (issue 47 point 2, docs/ledger.md "Rows written per execution"):
-- D1 bills every index entry an insert or update writes as a row written, so an index that only
-- serves a read the product can do another way is dropped here. No table rebuild.
--
-- 1. `destination_key_sends_unguarded` (migrations/0017): one entry per unguarded key send, read
--    only by the history removal to find the sends of the executions it removes. The removal now
--    finds them by the keys of those executions' steps and MAP items (the send's primary key
--    begins with the workspace and the key: src/ledger/history.ts removeExecutions).
DROP INDEX IF EXISTS destination_key_sends_unguarded;

-- 2. `executions_by_status` (migrations/0031) leaves COMPLETED executions out. It wrote an entry
--    when an execution started and another when it finished (its status is in the key); an
--    execution that completes now only leaves the index (a delete: D1 counts no index entry).
--    The list's status filter and the stuck-step scan carry `status <> 'COMPLETED'` so SQLite can
--    use it (src/ledger/execution-list.ts, src/notifications/outbox.ts); `?status=COMPLETED` walks
--    `executions_by_workspace` (or `_by_workflow`) newest first, skipping the other statuses —
--    completed executions are most of a workspace's, so a page reads about its own rows.
DROP INDEX IF EXISTS executions_by_status;
CREATE INDEX executions_by_status ON executions (workspace, status, created_at, id) WHERE status <> 'COMPLETED';

-- 3. `identity_values_by_execution` (migrations/0027): one entry per business value, read only to
--    delete an execution's values (the tombstone's expiry, an erasure, a start over's copy). The
--    execution now keeps its values' hashes (`executions.value_hashes`, written by the start
--    batch's insert: the claim's, or those of the execution a start over starts over; no row more)
--    and its tombstone keeps them after a retention removal, so every delete names the values'
--    primary keys (workspace, value_hash, created_at, execution_id). The rows kept are filled from
--    `identity_values` first, through the index, before it goes.
ALTER TABLE executions ADD COLUMN value_hashes TEXT;
ALTER TABLE execution_tombstones ADD COLUMN value_hashes TEXT;
UPDATE executions SET value_hashes = (SELECT json_group_array(v.value_hash) FROM identity_values v WHERE v.execution_id = executions.id)
WHERE EXISTS (SELECT 1 FROM identity_values v WHERE v.execution_id = executions.id);
UPDATE execution_tombstones SET value_hashes = (SELECT json_group_array(v.value_hash) FROM identity_values v WHERE v.execution_id = execution_tombstones.id)
WHERE EXISTS (SELECT 1 FROM identity_values v WHERE v.execution_id = execution_tombstones.id);
DROP TRIGGER IF EXISTS identity_values_expire;
CREATE TRIGGER identity_values_expire AFTER DELETE ON execution_tombstones WHEN old.value_hashes IS NOT NULL BEGIN DELETE FROM identity_values WHERE (workspace, value_hash, created_at, execution_id) IN (SELECT old.workspace, v.value, old.created_at, old.id FROM json_each(old.value_hashes) v); END;
DROP INDEX IF EXISTS identity_values_by_execution;

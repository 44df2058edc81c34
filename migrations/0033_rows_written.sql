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

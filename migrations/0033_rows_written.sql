-- Rows written per execution (issue 47 point 2, docs/ledger.md "Rows written per execution"):
-- D1 bills every index entry an insert or update writes as a row written, so an index that only
-- serves a read the product can do another way is dropped here. No table rebuild.
--
-- 1. `destination_key_sends_unguarded` (migrations/0017): one entry per unguarded key send, read
--    only by the history removal to find the sends of the executions it removes. The removal now
--    finds them by the keys of those executions' steps and MAP items (the send's primary key
--    begins with the workspace and the key: src/ledger/history.ts removeExecutions).
DROP INDEX IF EXISTS destination_key_sends_unguarded;

-- One lineage per trigger (docs/ledger.md "One live execution per trigger").
--
-- Until now an execution a trigger started after its identity's window ended (or after a cancel
-- released it) began a lineage of its own, so the one-live-execution gates of a start over and an
-- operator retry, which look at the lineage, did not see the other executions of the same trigger.
-- From now on every execution a trigger starts joins the lineage of the trigger's first execution
-- (the one whose id is the identity itself: src/ledger/executions.ts `insertExecution`). This moves
-- the executions started before into it: every lineage whose first execution was started by a
-- trigger (it has an identity) under an id other than the identity, while the identity's first
-- execution exists, becomes that first execution's lineage — with every start over of it.
--
-- Order-independent: the lineage a row moves to is read from rows this statement never changes (a
-- trigger's first execution heads its own lineage, whose id is the identity, so it is not matched),
-- and running it twice changes nothing.
UPDATE executions
SET lineage_id = (SELECT x.lineage_id FROM executions h JOIN executions x ON x.id = h.identity WHERE h.id = executions.lineage_id)
WHERE EXISTS (SELECT 1 FROM executions h JOIN executions x ON x.id = h.identity
              WHERE h.id = executions.lineage_id AND h.id <> h.identity);

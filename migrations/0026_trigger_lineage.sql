-- Every execution a trigger started is in the lineage named by its trigger identity (issue 41,
-- finding 2; docs/history.md "Tombstones and ids"). No table is rebuilt: this UPDATEs
-- `executions.lineage_id` only.
--
-- Until now a trigger's executions joined the lineage of the trigger's first execution, whose id
-- was the identity — so the claim's one-live gate reached a later window's live execution only
-- through that first execution's row, and once the history sweep or an erasure removed it, a
-- re-sent trigger started a second live execution. And since no run's id is the bare identity any
-- more (finding 1), the "first execution" has no id to be found by. From now on `lineage_id` of
-- every execution a trigger starts IS its identity (src/ledger/executions.ts `startExecutionRow`),
-- a value that needs no row, and the claim looks up live executions by it (`liveOfIdentity`).
--
-- This moves the executions started before into it: every lineage whose head (the execution whose
-- id is the lineage's id) was started by a trigger under an id other than its identity — a later
-- window begun after its first execution was removed, or a lineage from before migration 0015 —
-- becomes the identity's, with every start over and reuse after failure of it (they share their
-- head's lineage). A lineage headed by a trigger's first execution is already named by the
-- identity (that execution's id), and a forced run's (no identity) stays its own.
--
-- Order-independent: the value a row moves to is read from its head's `identity`, which this
-- statement never changes, through the head's primary key (no scan per row); running it twice
-- changes nothing (an identity names no execution but its trigger's first one, whose identity is
-- itself).
UPDATE executions
SET lineage_id = (SELECT h.identity FROM executions h WHERE h.id = executions.lineage_id)
WHERE EXISTS (SELECT 1 FROM executions h
              WHERE h.id = executions.lineage_id AND h.identity IS NOT NULL AND h.identity <> executions.lineage_id);

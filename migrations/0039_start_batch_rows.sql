-- Rows written by the start batch (issue 47 point 2, docs/ledger.md "Rows written per execution").
-- No table rebuild: one index dropped and created again, narrower.
--
-- `executions_live_by_lineage` (migrations/0031) wrote an entry for every execution while it was
-- live. A lineage's head — a forced run (test runs, stream runs, forced starts) or a trigger's
-- execution from before the window ids — has its own id as `lineage_id`, so "the live execution
-- of lineage L" finds it by primary key (`id = L AND lineage_id = id`); the index now holds only
-- the other members (`lineage_id <> id`: a trigger's executions, whose lineage is their identity,
-- reuses after failure and start overs). Every reader asks both (src/ledger/lineage.ts
-- `liveOfLineage`): the claim, the start-over gate, the start over's answer, the operator's step
-- and undo retries. A forced run writes one row less; a trigger's execution writes what it did.
DROP INDEX IF EXISTS executions_live_by_lineage;
CREATE INDEX executions_live_by_lineage ON executions (lineage_id)
  WHERE lineage_id <> id AND status IN ('RUNNING', 'COMPENSATING');

-- Duplicates counted where they were stopped (SPEC section 9, docs/steps.md "Duplicates stopped").
-- Each counter is maintained by a statement in the batch that already stops the duplicate, so it
-- costs no round trip: the trigger's start batch counts `duplicate_deliveries` (since 0003); the
-- claim batch counts a redelivered message for a settled step, or one dropped while the step waits
-- (`redeliveries_stopped`), and the highest attempt claimed (`max_attempt`); the settle and retry
-- batches count a late write fenced out (`fenced_out_writes`) and an answer the destination
-- replayed from its own idempotency store (`destination_replays`: `Idempotent-Replayed: true`).
ALTER TABLE executions ADD COLUMN redeliveries_stopped INTEGER NOT NULL DEFAULT 0 CHECK (redeliveries_stopped >= 0);
ALTER TABLE executions ADD COLUMN fenced_out_writes INTEGER NOT NULL DEFAULT 0 CHECK (fenced_out_writes >= 0);
ALTER TABLE executions ADD COLUMN destination_replays INTEGER NOT NULL DEFAULT 0 CHECK (destination_replays >= 0);
ALTER TABLE executions ADD COLUMN max_attempt INTEGER NOT NULL DEFAULT 0 CHECK (max_attempt >= 0);

-- The list (src/ledger/read-model.ts `listExecutionRecords`) pages newest first on
-- (created_at, id): every index it walks ends in (created_at, id), both ascending, so SQLite walks
-- it backwards in exactly the list's order — no sort. (The 0003 indexes had `created_at DESC, id`,
-- whose mixed directions made SQLite sort the last term: replaced.) The two filters each have a
-- partial index; the query repeats these WHERE expressions exactly, so SQLite can use it.
DROP INDEX executions_by_workspace;
DROP INDEX executions_by_workflow;
CREATE INDEX executions_by_workspace ON executions (workspace, created_at, id);
CREATE INDEX executions_by_workflow ON executions (workspace, workflow_id, created_at, id);
CREATE INDEX executions_by_status ON executions (workspace, status, created_at, id);
CREATE INDEX executions_with_duplicates ON executions (workspace, created_at, id)
  WHERE duplicate_deliveries + redeliveries_stopped + fenced_out_writes + destination_replays > 0;
CREATE INDEX executions_retried ON executions (workspace, created_at, id) WHERE max_attempt > 1;

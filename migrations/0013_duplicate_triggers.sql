-- Each duplicate trigger an execution absorbed, as an event the trace can list (docs/ingress.md
-- "Atomic, visible dedupe"): written by the start batch of the duplicate itself (src/ledger/
-- executions.ts `recordDuplicateTrigger`), right after it counted the duplicate. Bounded: the
-- first 100 duplicates of an execution are kept one by one; after that only the count
-- (`executions.duplicate_deliveries`) and the time of the last one move.
CREATE TABLE duplicate_triggers (
  execution_id   TEXT NOT NULL,
  seq            INTEGER NOT NULL CHECK (seq BETWEEN 1 AND 100),   -- which duplicate: 1 for the first
  at             INTEGER NOT NULL,
  trigger_kind   TEXT NOT NULL,   -- how the duplicate arrived: webhook, schedule, …
  identity_kind  TEXT NOT NULL,   -- what made it the same trigger: fields, client, content, schedule
  PRIMARY KEY (execution_id, seq)
) WITHOUT ROWID;

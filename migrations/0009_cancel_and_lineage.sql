-- Cancel, and no two live executions of one trigger (docs/steps.md "Cancel", SPEC sections 4 and 9).
--
-- 1. A new state, CANCELLED, for executions and steps, and a `cancelled` step event. The states
--    are CHECK constraints, which SQLite cannot alter: the three tables are rebuilt with every
--    row kept. Each old table is renamed out of the way (`…_0008`; a rename carries the foreign
--    keys that point at it along, so nothing points at a missing table), the new one is created
--    under the real name and filled column by column, then the old ones are dropped — children
--    before parents, so no drop orphans a row — and the indexes are re-created. Foreign keys are
--    checked at the end of the migration's transaction (`defer_foreign_keys`), once every row
--    is back.
-- 2. `lineage_id` on executions: the execution a chain of start overs began with (its own id for
--    a first execution). At most one execution of a lineage may be RUNNING — a start over and an
--    operator retry check it in the statement that would make a second one live
--    (src/ledger/executions.ts, operator.ts), so two executions never send the same keys at once.
--    Existing rows get theirs by walking `started_over_from` back to the first execution.
PRAGMA defer_foreign_keys = on;

ALTER TABLE executions RENAME TO executions_0008;
CREATE TABLE executions (
  id                   TEXT PRIMARY KEY,
  workspace            TEXT NOT NULL,
  workflow_id          TEXT NOT NULL,
  version              TEXT NOT NULL,
  entry_vertex_id      TEXT NOT NULL,
  trigger_kind         TEXT NOT NULL CHECK (trigger_kind IN ('webhook', 'test', 'stream', 'schedule', 'start_over')),
  identity_kind        TEXT NOT NULL CHECK (identity_kind IN ('content', 'fields', 'client', 'schedule', 'forced')),
  -- The identity hash this execution was started under (NULL for forced runs: they have none).
  identity             TEXT CHECK (identity IS NULL OR length(identity) = 64),
  status               TEXT NOT NULL DEFAULT 'RUNNING' CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED')),
  payload              TEXT NOT NULL,           -- the trigger payload as JSON text
  -- Duplicate deliveries of this execution's trigger, mirrored from its identity row in the
  -- claim's transaction, so the count outlives the identity (which is swept after its window).
  duplicate_deliveries INTEGER NOT NULL DEFAULT 0 CHECK (duplicate_deliveries >= 0),
  last_duplicate_at    INTEGER,
  started_over_from    TEXT REFERENCES executions(id),
  -- The first execution of this chain of start overs (its own id for a first execution).
  lineage_id           TEXT NOT NULL,
  created_at           INTEGER NOT NULL,
  updated_at           INTEGER NOT NULL,
  finished_at          INTEGER,
  -- An execution is finished exactly when its status is final.
  CHECK ((status = 'RUNNING') = (finished_at IS NULL)),
  CHECK ((identity IS NULL) = (identity_kind = 'forced')),
  CHECK (started_over_from IS NULL OR lineage_id <> id)
);

INSERT INTO executions
  (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload,
   duplicate_deliveries, last_duplicate_at, started_over_from, lineage_id, created_at, updated_at, finished_at)
WITH RECURSIVE chain (id, lineage_id) AS (
  SELECT id, id FROM executions_0008 WHERE started_over_from IS NULL
  UNION ALL
  SELECT e.id, chain.lineage_id FROM executions_0008 e JOIN chain ON e.started_over_from = chain.id
)
SELECT e.id, e.workspace, e.workflow_id, e.version, e.entry_vertex_id, e.trigger_kind, e.identity_kind, e.identity, e.status, e.payload,
       e.duplicate_deliveries, e.last_duplicate_at, e.started_over_from, chain.lineage_id, e.created_at, e.updated_at, e.finished_at
FROM executions_0008 e JOIN chain ON chain.id = e.id;


-- Steps: CANCELLED (an operator cancelled the execution while the step was DISPATCHED or
-- EXECUTING; its epoch moved, so a worker still running is fenced out when it settles).
ALTER TABLE steps RENAME TO steps_0008;
CREATE TABLE steps (
  execution_id     TEXT NOT NULL REFERENCES executions(id),
  vertex_id        TEXT NOT NULL,
  workspace        TEXT NOT NULL,
  state            TEXT NOT NULL CHECK (state IN ('DISPATCHED', 'EXECUTING', 'COMPLETED', 'FAILED', 'SKIPPED', 'CANCELLED')),
  epoch            INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0),   -- fencing token, +1 on every claim (and on cancel)
  attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  -- The attempt count when an operator retry reopened the step: the retry policy's budget
  -- counts from here, while `attempt` keeps counting (the trace shows the true total).
  retry_base       INTEGER NOT NULL DEFAULT 0 CHECK (retry_base >= 0 AND retry_base <= attempt),
  available_at     INTEGER NOT NULL,          -- DISPATCHED: when the step may be claimed
  lease_until      INTEGER,                   -- EXECUTING: when the claim expires
  idempotency_key  TEXT CHECK (idempotency_key IS NULL OR length(idempotency_key) BETWEEN 1 AND 255),
  request          TEXT,                      -- redacted request summary (JSON)
  output           TEXT,                      -- JSON
  -- COMPLETED: JSON array of the successors whose edges this step took (edge `when` decided by
  -- the settling worker). Fan-in decisions read it inside the settle batch (src/ledger/steps.ts).
  next_vertices    TEXT,
  error            TEXT,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  finished_at      INTEGER,
  resends          INTEGER NOT NULL DEFAULT 0 CHECK (resends >= 0),
  next_resend_at   INTEGER,
  PRIMARY KEY (execution_id, vertex_id),
  CHECK ((state = 'EXECUTING') = (lease_until IS NOT NULL)),
  CHECK ((state IN ('COMPLETED', 'FAILED', 'SKIPPED', 'CANCELLED')) = (finished_at IS NOT NULL)),
  -- A claimed step always carries the epoch of its claim.
  CHECK (state <> 'EXECUTING' OR epoch >= 1)
);

INSERT INTO steps
  (execution_id, vertex_id, workspace, state, epoch, attempt, retry_base, available_at, lease_until, idempotency_key, request, output,
   next_vertices, error, created_at, updated_at, finished_at, resends, next_resend_at)
SELECT execution_id, vertex_id, workspace, state, epoch, attempt, retry_base, available_at, lease_until, idempotency_key, request, output,
       next_vertices, error, created_at, updated_at, finished_at, resends, next_resend_at
FROM steps_0008;


-- Step events: `cancelled` (the step was in flight when its execution was cancelled; the detail
-- names the state and the key it had sent).
ALTER TABLE step_events RENAME TO step_events_0008;
CREATE TABLE step_events (
  id            INTEGER PRIMARY KEY,
  execution_id  TEXT NOT NULL,
  vertex_id     TEXT NOT NULL,
  -- redelivery_dropped: a redundant message was acked instead of retried (the step was settled,
  -- or waiting under a live lease / for its due time, which the reaper covers); see docs/steps.md.
  type          TEXT NOT NULL CHECK (
                  type IN (
                    'fenced_out', 'attempt_failed', 'lease_expired', 'operator_retry', 'dead_lettered', 'redelivery_dropped', 'cancelled'
                  )
                ),
  epoch         INTEGER,
  at            INTEGER NOT NULL,
  detail        TEXT
);

INSERT INTO step_events (id, execution_id, vertex_id, type, epoch, at, detail)
SELECT id, execution_id, vertex_id, type, epoch, at, detail FROM step_events_0008;

-- The old tables, children first (their indexes go with them), then the indexes again.
DROP TABLE step_events_0008;
DROP TABLE steps_0008;
DROP TABLE executions_0008;

CREATE INDEX executions_by_workspace ON executions (workspace, created_at DESC, id);
CREATE INDEX executions_by_workflow ON executions (workspace, workflow_id, status, created_at DESC);
-- The one-live-execution check of a start over and an operator retry.
CREATE INDEX executions_live_by_lineage ON executions (lineage_id) WHERE status = 'RUNNING';
CREATE INDEX executions_by_predecessor ON executions (started_over_from) WHERE started_over_from IS NOT NULL;
CREATE INDEX steps_dispatched_due ON steps (available_at) WHERE state = 'DISPATCHED';
CREATE INDEX steps_lease_expiry ON steps (lease_until) WHERE state = 'EXECUTING';
CREATE INDEX steps_first_resend_due ON steps (available_at) WHERE state = 'DISPATCHED' AND next_resend_at IS NULL;
CREATE INDEX steps_next_resend_due ON steps (next_resend_at) WHERE state = 'DISPATCHED' AND next_resend_at IS NOT NULL;
CREATE INDEX step_events_by_step ON step_events (execution_id, vertex_id, id);

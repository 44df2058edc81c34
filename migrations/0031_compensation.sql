-- Compensation (SPEC section 18, docs/steps.md "Compensation"): three new execution statuses, an
-- undo step as a `work_items` row of kind 'undo', and the keys a compensation burnt.
--
-- TABLE REBUILDS (SQLite cannot alter a CHECK): `executions`, `execution_tombstones` and
-- `work_items`, every row kept.
--
-- 1. `executions`: status gains COMPENSATING (live: the one-live gate counts it, it has no
--    `finished_at`, so its generated `purge_at` is NULL and the history sweep never takes it),
--    COMPENSATED and COMPENSATION_FAILED (final; kept as long as a FAILED execution:
--    `retain_failed_ms`). The finished rule becomes
--    `(status IN ('RUNNING', 'COMPENSATING')) = (finished_at IS NULL)`, the one-live index covers
--    both live statuses.
--    How: the rows are copied out to a plain table (`executions_0030`, no constraints), the old
--    table dropped and the new one created under the real name, the rows copied back, the copy
--    dropped, its indexes and triggers made again. No rename of `executions`: a rename carries the
--    foreign keys that point at it (`steps.execution_id`, its own links) to the old name, and D1
--    enforces foreign keys (`legacy_alter_table` does not stop that while they are on). The drop
--    leaves the steps' rows without a parent for a moment and the copy back gives each its parent
--    again; foreign keys are checked at the end of the transaction (`defer_foreign_keys`).
-- 2. `execution_tombstones`: its status CHECK learns the two final statuses (its expiry trigger made again).
-- 3. `work_items`: `kind` gains 'undo' (an undo step; `item` holds what it undoes).
-- 4. `burnt_keys` (new): a destination key a compensation undid. Kept for good (never swept): any
--    later send of it in the workspace fails before sending (src/steps/compensate-keys.ts).
PRAGMA defer_foreign_keys = on;

CREATE TABLE executions_0030 AS SELECT
   id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload,
   duplicate_deliveries, last_duplicate_at, started_over_from, lineage_id, created_at, updated_at, finished_at,
   previous_execution_id, superseded_by, redeliveries_stopped, fenced_out_writes, destination_replays, max_attempt,
   retain_completed_ms, retain_failed_ms, retain_cancelled_ms, sweep_held_until, duplicate_log
FROM executions;
DROP TABLE executions;
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
  status               TEXT NOT NULL DEFAULT 'RUNNING'
                       CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'COMPENSATING', 'COMPENSATED', 'COMPENSATION_FAILED')),
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
  previous_execution_id TEXT REFERENCES executions(id),
  superseded_by        TEXT REFERENCES executions(id),
  redeliveries_stopped INTEGER NOT NULL DEFAULT 0 CHECK (redeliveries_stopped >= 0),
  fenced_out_writes    INTEGER NOT NULL DEFAULT 0 CHECK (fenced_out_writes >= 0),
  destination_replays  INTEGER NOT NULL DEFAULT 0 CHECK (destination_replays >= 0),
  max_attempt          INTEGER NOT NULL DEFAULT 0 CHECK (max_attempt >= 0),
  retain_completed_ms  INTEGER NOT NULL DEFAULT 604800000 CHECK (retain_completed_ms >= 60000),
  retain_failed_ms     INTEGER NOT NULL DEFAULT 2592000000 CHECK (retain_failed_ms >= 60000),
  retain_cancelled_ms  INTEGER NOT NULL DEFAULT 2592000000 CHECK (retain_cancelled_ms >= 60000),
  sweep_held_until     INTEGER,
  -- When the sweep may remove the execution (migrations/0017): NULL while RUNNING or COMPENSATING.
  -- COMPLETED keeps `retain_completed_ms`, CANCELLED `retain_cancelled_ms`, every failure
  -- (FAILED, COMPENSATED, COMPENSATION_FAILED) `retain_failed_ms`. iif(), not CASE … END (wrangler's splitter).
  purge_at             INTEGER GENERATED ALWAYS AS (
    max(finished_at + iif(status = 'COMPLETED', retain_completed_ms, iif(status = 'CANCELLED', retain_cancelled_ms, retain_failed_ms)),
        coalesce(sweep_held_until, 0))
  ) VIRTUAL,
  duplicate_log        TEXT,
  -- An execution is finished exactly when its status is final.
  CHECK ((status IN ('RUNNING', 'COMPENSATING')) = (finished_at IS NULL)),
  CHECK ((identity IS NULL) = (identity_kind = 'forced')),
  CHECK (started_over_from IS NULL OR lineage_id <> id)
);
INSERT INTO executions
  (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload,
   duplicate_deliveries, last_duplicate_at, started_over_from, lineage_id, created_at, updated_at, finished_at,
   previous_execution_id, superseded_by, redeliveries_stopped, fenced_out_writes, destination_replays, max_attempt,
   retain_completed_ms, retain_failed_ms, retain_cancelled_ms, sweep_held_until, duplicate_log)
SELECT id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload,
   duplicate_deliveries, last_duplicate_at, started_over_from, lineage_id, created_at, updated_at, finished_at,
   previous_execution_id, superseded_by, redeliveries_stopped, fenced_out_writes, destination_replays, max_attempt,
   retain_completed_ms, retain_failed_ms, retain_cancelled_ms, sweep_held_until, duplicate_log
FROM executions_0030;
DROP TABLE executions_0030;

-- The one-live-execution check of a start over, an operator retry and the identity claim.
CREATE INDEX executions_live_by_lineage ON executions (lineage_id) WHERE status IN ('RUNNING', 'COMPENSATING');
CREATE INDEX executions_by_predecessor ON executions (started_over_from) WHERE started_over_from IS NOT NULL;
CREATE INDEX executions_by_workspace ON executions (workspace, created_at, id);
CREATE INDEX executions_by_workflow ON executions (workspace, workflow_id, created_at, id);
CREATE INDEX executions_by_status ON executions (workspace, status, created_at, id);
CREATE INDEX executions_with_duplicates ON executions (workspace, created_at, id)
  WHERE duplicate_deliveries + redeliveries_stopped + fenced_out_writes + destination_replays > 0;
CREATE INDEX executions_retried ON executions (workspace, created_at, id) WHERE max_attempt > 1;
CREATE INDEX executions_by_previous ON executions (previous_execution_id) WHERE previous_execution_id IS NOT NULL;
CREATE INDEX executions_by_superseder ON executions (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX executions_purge_due ON executions (purge_at) WHERE purge_at IS NOT NULL;
CREATE TRIGGER executions_supersede_failed AFTER INSERT ON executions WHEN NEW.previous_execution_id IS NOT NULL BEGIN UPDATE executions SET superseded_by = NEW.id, updated_at = NEW.created_at WHERE id = NEW.previous_execution_id AND status = 'FAILED' AND superseded_by IS NULL; END;
CREATE TRIGGER executions_identity_values AFTER INSERT ON executions WHEN NEW.identity IS NOT NULL BEGIN INSERT INTO identity_values (workspace, value_hash, created_at, execution_id) SELECT NEW.workspace, v.value, NEW.created_at, NEW.id FROM execution_identities i CROSS JOIN json_each(i.value_hashes) v WHERE i.identity = NEW.identity AND i.execution_id = NEW.id AND i.value_hashes IS NOT NULL ON CONFLICT DO NOTHING; END;

ALTER TABLE execution_tombstones RENAME TO execution_tombstones_0030;
CREATE TABLE execution_tombstones (
  id           TEXT PRIMARY KEY,
  workspace    TEXT NOT NULL,
  workflow_id  TEXT NOT NULL,
  status       TEXT NOT NULL CHECK (status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'COMPENSATED', 'COMPENSATION_FAILED')),
  created_at   INTEGER NOT NULL,
  finished_at  INTEGER NOT NULL,
  removed_at   INTEGER NOT NULL,
  reason       TEXT NOT NULL CHECK (reason IN ('retention', 'erased')),
  -- 1: the trace is in the ARCHIVE bucket (src/history/archive.ts names the object).
  archived     INTEGER NOT NULL CHECK (archived IN (0, 1)),
  expires_at   INTEGER NOT NULL,
  CHECK (expires_at > removed_at),
  CHECK (reason = 'retention' OR archived = 0)
) WITHOUT ROWID;
INSERT INTO execution_tombstones (id, workspace, workflow_id, status, created_at, finished_at, removed_at, reason, archived, expires_at)
SELECT id, workspace, workflow_id, status, created_at, finished_at, removed_at, reason, archived, expires_at FROM execution_tombstones_0030;
DROP TABLE execution_tombstones_0030;
CREATE INDEX execution_tombstones_expiry ON execution_tombstones (expires_at);
CREATE TRIGGER identity_values_expire AFTER DELETE ON execution_tombstones BEGIN DELETE FROM identity_values WHERE execution_id = old.id; END;

ALTER TABLE work_items RENAME TO work_items_0030;
CREATE TABLE work_items (
  execution_id     TEXT NOT NULL,
  row_key          TEXT NOT NULL CHECK (length(row_key) BETWEEN 3 AND 100 AND instr(row_key, '#') > 1),
  vertex_id        TEXT NOT NULL,
  -- 'map_item': an item of a MAP (migrations/0028). 'undo': the undo step of the COMPLETED step
  -- `vertex_id`; `item_index` is its place in the compensation's order (0 runs first: the step
  -- that completed last); `item` is `{ "undo": <vertex>, "seq": <its completing attempt's seq> }`.
  kind             TEXT NOT NULL CHECK (kind IN ('map_item', 'undo')),
  item_index       INTEGER NOT NULL CHECK (item_index BETWEEN 0 AND 999),
  workspace        TEXT NOT NULL,
  state            TEXT NOT NULL CHECK (state IN ('PENDING', 'DISPATCHED', 'EXECUTING', 'COMPLETED', 'FAILED', 'CANCELLED')),
  epoch            INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0),
  attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  retry_base       INTEGER NOT NULL DEFAULT 0 CHECK (retry_base >= 0 AND retry_base <= attempt),
  available_at     INTEGER NOT NULL,
  lease_until      INTEGER,
  next_resend_at   INTEGER,
  parked_until     INTEGER,
  resends          INTEGER NOT NULL DEFAULT 0 CHECK (resends >= 0),
  item             TEXT NOT NULL,
  idempotency_key  TEXT CHECK (idempotency_key IS NULL OR length(idempotency_key) BETWEEN 1 AND 255),
  request          TEXT,
  output           TEXT,
  collected        TEXT CHECK (collected IS NULL OR length(CAST(collected AS BLOB)) <= 16384),
  error            TEXT,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  finished_at      INTEGER,
  PRIMARY KEY (execution_id, row_key),
  UNIQUE (execution_id, vertex_id, kind, item_index),
  CHECK ((state = 'EXECUTING') = (lease_until IS NOT NULL)),
  CHECK ((state IN ('COMPLETED', 'FAILED', 'CANCELLED')) = (finished_at IS NOT NULL)),
  CHECK (state <> 'EXECUTING' OR epoch >= 1),
  CHECK ((state = 'COMPLETED') = (collected IS NOT NULL))
);
INSERT INTO work_items
  (execution_id, row_key, vertex_id, kind, item_index, workspace, state, epoch, attempt, retry_base, available_at, lease_until,
   next_resend_at, parked_until, resends, item, idempotency_key, request, output, collected, error, created_at, updated_at, finished_at)
SELECT execution_id, row_key, vertex_id, kind, item_index, workspace, state, epoch, attempt, retry_base, available_at, lease_until,
   next_resend_at, parked_until, resends, item, idempotency_key, request, output, collected, error, created_at, updated_at, finished_at
FROM work_items_0030;
DROP TABLE work_items_0030;
CREATE INDEX work_items_by_state ON work_items (execution_id, vertex_id, kind, state, item_index);
CREATE INDEX work_items_lease_expiry ON work_items (lease_until) WHERE state = 'EXECUTING';
CREATE INDEX work_items_first_resend_due ON work_items (available_at) WHERE state = 'DISPATCHED' AND next_resend_at IS NULL;
CREATE INDEX work_items_next_resend_due ON work_items (next_resend_at) WHERE state = 'DISPATCHED' AND next_resend_at IS NOT NULL;
CREATE INDEX work_items_by_key ON work_items (workspace, idempotency_key) WHERE idempotency_key IS NOT NULL;
-- The undo steps of one execution in their order (the compensation's next one, its progress).
CREATE INDEX work_items_undo_order ON work_items (execution_id, item_index) WHERE kind = 'undo';

-- The compensation's undo steps, inserted when the execution moves RUNNING → COMPENSATING (the
-- settle batch's `finishExecution` decides that once: src/ledger/step-settle.ts). One row per
-- COMPLETED step whose vertex in the execution's pinned definition declares `compensate`, placed
-- in reverse order of completion by the settle sequence on record (the `seq` of the step's
-- completed attempt; ties, never expected, broken by `finished_at` then vertex id): place 0
-- DISPATCHED (the settle's caller sends its message), the rest PENDING. No batch statement is
-- added to a settle: the settle budgets are unchanged. One statement, iif() not CASE (wrangler's splitter).
CREATE TRIGGER executions_compensation_starts AFTER UPDATE OF status ON executions WHEN NEW.status = 'COMPENSATING' AND OLD.status = 'RUNNING' BEGIN INSERT INTO work_items (execution_id, row_key, vertex_id, kind, item_index, workspace, state, available_at, item, created_at, updated_at) SELECT NEW.id, c.vertex_id || '#undo#' || c.place, c.vertex_id, 'undo', c.place, NEW.workspace, iif(c.place = 0, 'DISPATCHED', 'PENDING'), NEW.updated_at, json_object('undo', c.vertex_id, 'seq', c.seq), NEW.updated_at, NEW.updated_at FROM (SELECT u.vertex_id, u.seq, row_number() OVER (ORDER BY u.seq DESC, u.finished_at DESC, u.vertex_id DESC) - 1 AS place FROM (SELECT st.vertex_id, st.finished_at, (SELECT max(a.seq) FROM step_attempts a WHERE a.execution_id = NEW.id AND a.vertex_id = st.vertex_id AND a.outcome = 'completed') AS seq FROM steps st WHERE st.execution_id = NEW.id AND st.state = 'COMPLETED' AND st.vertex_id IN (SELECT json_extract(j.value, '$.id') FROM workflow_versions v, json_each(v.definition, '$.vertices') j WHERE v.workspace = NEW.workspace AND v.workflow_id = NEW.workflow_id AND v.version = NEW.version AND json_extract(j.value, '$.type') = 'GATEWAY' AND json_type(j.value, '$.config.compensate') = 'object')) u) c WHERE c.place < 1000 ON CONFLICT DO NOTHING; END;

CREATE TABLE burnt_keys (
  workspace        TEXT NOT NULL,
  idempotency_key  TEXT NOT NULL,
  execution_id     TEXT NOT NULL,
  vertex_id        TEXT NOT NULL,
  -- The undo's own key that reversed it.
  undo_key         TEXT NOT NULL,
  burnt_at         INTEGER NOT NULL,
  PRIMARY KEY (workspace, idempotency_key)
) WITHOUT ROWID;

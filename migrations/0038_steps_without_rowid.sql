-- `steps` WITHOUT ROWID (issue 47 point 2, docs/ledger.md "Rows written per execution"): the primary key
-- (execution_id, vertex_id) becomes the table's own b-tree, so a step no longer writes a second entry
-- in SQLite's automatic key index (`sqlite_autoindex_steps_1`): one row written less per step (D1
-- counts every index entry an insert writes), three for the bench's three-step job.
--
-- TABLE REBUILD: `steps`, every row kept (SQLite cannot make a table WITHOUT ROWID in place).
--
-- What read `steps.rowid` now reads the primary key or the new column:
--   created_seq  the step's place in its execution's insertion order, written by every insert (0, 1,
--                2 … in the start batch's order, then one more than the execution's highest for each
--                later step). It is the tie-break of steps created in the same millisecond (fan-out
--                siblings, a chained successor) where the trace and the change stream broke the tie
--                by rowid (`ORDER BY created_at, created_seq`); the rows kept here number their
--                execution's steps in rowid order, so every existing execution reads as before. Not
--                indexed: it is only ever read with its execution's steps.
--   the reaper (src/ledger/step-recovery.ts) names the steps it takes by (execution_id, vertex_id).
--
-- How (as migrations/0031 rebuilt `executions`): the rows are copied out to a plain table
-- (`steps_0037`, no constraints, each numbered in its execution in rowid order), the old table
-- dropped with its indexes and triggers, the new one created under the real name, the rows copied
-- back in key order and the copy dropped. No rename: renaming a table checks every trigger of the
-- schema, and `executions_failed_notify` and `executions_compensation_starts` read `steps` by name,
-- which does not exist between the drop and the rename. They read the new table as they read the old.
-- The foreign key from `steps.execution_id` to `executions` is checked at the end of the transaction
-- (`defer_foreign_keys`, as the earlier rebuilds). Then every index and trigger of `steps` is made
-- again exactly as after migrations/0037, in their order of creation (SQLite fires the triggers of
-- one event in that order).
--
-- A step's row now lives in the key's b-tree, whose cells SQLite keeps at most about 1 KB on the page
-- (a 4 KB page) and spills the rest to overflow pages, as a rowid table does past about 4 KB: a step
-- with a large output or request reads the same bytes through one more page, and the b-tree's inner
-- pages hold fewer keys when rows are large. Every read of `steps` is by its execution (the key's
-- prefix) or by a partial index; D1's limit of 2 MB per row is unchanged.
PRAGMA defer_foreign_keys = on;

CREATE TABLE steps_0037 AS SELECT
   execution_id, vertex_id, workspace, state, epoch, attempt, retry_base, available_at, lease_until, idempotency_key, request,
   output, next_vertices, error, created_at, row_number() OVER (PARTITION BY execution_id ORDER BY rowid) - 1 AS created_seq,
   updated_at, finished_at, resends, next_resend_at, parked_until, wake_at, key_destination, key_guarded, permit_wait
FROM steps;
DROP TABLE steps;
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
  -- the settling worker). Fan-in decisions read it inside the settle batch (src/ledger/step-settle.ts).
  next_vertices    TEXT,
  error            TEXT,
  created_at       INTEGER NOT NULL,
  -- The step's place in its execution's insertion order: the tie-break of `created_at` (above).
  created_seq      INTEGER NOT NULL CHECK (created_seq >= 0),
  updated_at       INTEGER NOT NULL,
  finished_at      INTEGER,
  resends          INTEGER NOT NULL DEFAULT 0 CHECK (resends >= 0),
  next_resend_at   INTEGER,
  parked_until     INTEGER,                   -- migrations/0019
  wake_at          INTEGER,
  key_destination  TEXT,                      -- migrations/0024, 0036
  key_guarded      INTEGER,
  permit_wait      TEXT CHECK (permit_wait IS NULL OR length(permit_wait) <= 2000),   -- migrations/0029
  PRIMARY KEY (execution_id, vertex_id),
  CHECK ((state = 'EXECUTING') = (lease_until IS NOT NULL)),
  CHECK ((state IN ('COMPLETED', 'FAILED', 'SKIPPED', 'CANCELLED')) = (finished_at IS NOT NULL)),
  -- A claimed step always carries the epoch of its claim.
  CHECK (state <> 'EXECUTING' OR epoch >= 1)
) WITHOUT ROWID;
INSERT INTO steps
  (execution_id, vertex_id, workspace, state, epoch, attempt, retry_base, available_at, lease_until, idempotency_key, request,
   output, next_vertices, error, created_at, created_seq, updated_at, finished_at, resends, next_resend_at, parked_until, wake_at,
   key_destination, key_guarded, permit_wait)
SELECT execution_id, vertex_id, workspace, state, epoch, attempt, retry_base, available_at, lease_until, idempotency_key, request,
       output, next_vertices, error, created_at, created_seq, updated_at, finished_at, resends, next_resend_at, parked_until, wake_at,
       key_destination, key_guarded, permit_wait
FROM steps_0037 ORDER BY execution_id, vertex_id;
DROP TABLE steps_0037;

-- The indexes of `steps`, as migrations/0009, 0019 and 0021 made them.
CREATE INDEX steps_lease_expiry ON steps (lease_until) WHERE state = 'EXECUTING';
CREATE INDEX steps_first_resend_due ON steps (available_at) WHERE state = 'DISPATCHED' AND next_resend_at IS NULL;
CREATE INDEX steps_next_resend_due ON steps (next_resend_at) WHERE state = 'DISPATCHED' AND next_resend_at IS NOT NULL;
CREATE INDEX steps_parked ON steps (parked_until) WHERE parked_until IS NOT NULL;
CREATE INDEX steps_by_key ON steps (workspace, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Its triggers, as migrations/0024, 0034 and 0036 made them last, in their order of creation.
CREATE TRIGGER steps_claimed_at_insert AFTER INSERT ON steps WHEN NEW.state = 'EXECUTING' BEGIN INSERT INTO step_attempts (execution_id, vertex_id, epoch, attempt, outcome, started_at, idempotency_key, seq, ev_mark) VALUES (NEW.execution_id, NEW.vertex_id, NEW.epoch, NEW.attempt, 'running', NEW.updated_at, NEW.idempotency_key, (SELECT coalesce(max(sq.seq), 0) + 1 FROM step_attempts sq WHERE sq.execution_id = NEW.execution_id), (SELECT coalesce(max(mk.id), 0) FROM step_events mk WHERE mk.execution_id = NEW.execution_id)) ON CONFLICT (execution_id, vertex_id, epoch) DO NOTHING; END;
CREATE TRIGGER steps_failure_cancels_parked AFTER UPDATE OF state ON steps WHEN NEW.state IN ('FAILED', 'COMPLETED') AND EXISTS (SELECT 1 FROM steps f WHERE f.execution_id = NEW.execution_id AND f.state = 'FAILED') BEGIN UPDATE steps SET state = 'CANCELLED', epoch = epoch + 1, lease_until = NULL, parked_until = NULL, next_resend_at = NULL, finished_at = NEW.updated_at, updated_at = NEW.updated_at, error = 'cancelled for compensation: the execution failed for good (a step FAILED) and compensates what completed; this ' || (SELECT json_extract(j.value, '$.type') FROM executions e JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version, json_each(v.definition, '$.vertices') j WHERE e.id = NEW.execution_id AND json_extract(j.value, '$.id') = steps.vertex_id) || ' was waiting and never called anything' WHERE execution_id = NEW.execution_id AND state IN ('DISPATCHED', 'EXECUTING') AND vertex_id IN (SELECT json_extract(j.value, '$.id') FROM executions e JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version, json_each(v.definition, '$.vertices') j WHERE e.id = NEW.execution_id AND e.status = 'RUNNING' AND json_extract(j.value, '$.type') IN ('DELAY', 'WAIT_FOR_EVENT')) AND (EXISTS (SELECT 1 FROM steps c WHERE c.execution_id = NEW.execution_id AND c.state = 'COMPLETED' AND c.vertex_id IN (SELECT json_extract(j.value, '$.id') FROM executions e JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version, json_each(v.definition, '$.vertices') j WHERE e.id = NEW.execution_id AND json_extract(j.value, '$.type') = 'GATEWAY' AND json_type(j.value, '$.config.compensate') = 'object')) OR EXISTS (SELECT 1 FROM work_items mc WHERE mc.execution_id = NEW.execution_id AND mc.kind = 'map_item' AND mc.state = 'COMPLETED' AND mc.vertex_id IN (SELECT json_extract(j.value, '$.id') FROM executions e JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version, json_each(v.definition, '$.vertices') j WHERE e.id = NEW.execution_id AND json_extract(j.value, '$.type') = 'MAP' AND json_type(j.value, '$.config.step.config.compensate') = 'object'))); END;
CREATE TRIGGER steps_failure_cancels_new_wait AFTER INSERT ON steps WHEN NEW.state = 'DISPATCHED' AND EXISTS (SELECT 1 FROM steps f WHERE f.execution_id = NEW.execution_id AND f.state = 'FAILED') BEGIN UPDATE steps SET state = 'CANCELLED', epoch = epoch + 1, lease_until = NULL, parked_until = NULL, next_resend_at = NULL, finished_at = NEW.updated_at, updated_at = NEW.updated_at, error = 'cancelled for compensation: the execution failed for good (a step FAILED) and compensates what completed; this ' || (SELECT json_extract(j.value, '$.type') FROM executions e JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version, json_each(v.definition, '$.vertices') j WHERE e.id = NEW.execution_id AND json_extract(j.value, '$.id') = steps.vertex_id) || ' was waiting and never called anything' WHERE execution_id = NEW.execution_id AND vertex_id = NEW.vertex_id AND state = 'DISPATCHED' AND vertex_id IN (SELECT json_extract(j.value, '$.id') FROM executions e JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version, json_each(v.definition, '$.vertices') j WHERE e.id = NEW.execution_id AND e.status = 'RUNNING' AND json_extract(j.value, '$.type') IN ('DELAY', 'WAIT_FOR_EVENT')) AND (EXISTS (SELECT 1 FROM steps c WHERE c.execution_id = NEW.execution_id AND c.state = 'COMPLETED' AND c.vertex_id IN (SELECT json_extract(j.value, '$.id') FROM executions e JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version, json_each(v.definition, '$.vertices') j WHERE e.id = NEW.execution_id AND json_extract(j.value, '$.type') = 'GATEWAY' AND json_type(j.value, '$.config.compensate') = 'object')) OR EXISTS (SELECT 1 FROM work_items mc WHERE mc.execution_id = NEW.execution_id AND mc.kind = 'map_item' AND mc.state = 'COMPLETED' AND mc.vertex_id IN (SELECT json_extract(j.value, '$.id') FROM executions e JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version, json_each(v.definition, '$.vertices') j WHERE e.id = NEW.execution_id AND json_extract(j.value, '$.type') = 'MAP' AND json_type(j.value, '$.config.step.config.compensate') = 'object'))); END;
CREATE TRIGGER steps_parked_cancelled_event AFTER UPDATE OF state ON steps WHEN NEW.state = 'CANCELLED' AND OLD.state IN ('DISPATCHED', 'EXECUTING') AND NEW.error LIKE 'cancelled for compensation:%' BEGIN INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail) VALUES (NEW.execution_id, NEW.vertex_id, 'cancelled', NEW.epoch, NEW.finished_at, 'cancelled while ' || OLD.state || iif(OLD.parked_until IS NOT NULL, ' (parked)', '') || ': the execution failed for good and compensates; no key sent'); END;
CREATE TRIGGER steps_parked_cancelled_attempt AFTER UPDATE OF state ON steps WHEN NEW.state = 'CANCELLED' AND OLD.state IN ('DISPATCHED', 'EXECUTING') AND NEW.error LIKE 'cancelled for compensation:%' BEGIN UPDATE step_attempts SET outcome = 'cancelled', finished_at = max(started_at, NEW.finished_at), seq = (SELECT coalesce(max(sq.seq), 0) + 1 FROM step_attempts sq WHERE sq.execution_id = NEW.execution_id), ev_mark = (SELECT coalesce(max(mk.id), 0) FROM step_events mk WHERE mk.execution_id = NEW.execution_id) WHERE execution_id = NEW.execution_id AND vertex_id = NEW.vertex_id AND outcome = 'running'; END;
CREATE TRIGGER steps_key_sent_at_insert AFTER INSERT ON steps WHEN NEW.key_destination IS NOT NULL AND NEW.idempotency_key IS NOT NULL BEGIN INSERT INTO destination_key_sends (workspace, idempotency_key, destination, first_sent_at, counted_from, execution_id, vertex_id, guarded, retention_ms) VALUES (NEW.workspace, NEW.idempotency_key, NEW.key_destination, NEW.created_at, NEW.created_at, NEW.execution_id, NEW.vertex_id, CASE WHEN coalesce(NEW.key_guarded, 0) > 0 THEN 1 ELSE 0 END, CASE WHEN NEW.key_guarded > 1 THEN NEW.key_guarded END) ON CONFLICT (workspace, idempotency_key, destination) DO UPDATE SET guarded = max(guarded, excluded.guarded), retention_ms = CASE WHEN excluded.retention_ms > coalesce(retention_ms, 0) THEN excluded.retention_ms ELSE retention_ms END; END;

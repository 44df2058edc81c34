-- `executions` WITHOUT ROWID (issue 47 point 2, docs/ledger.md "Rows written per execution"): the
-- primary key (id) becomes the table's own b-tree, so an execution no longer writes a second entry in
-- SQLite's automatic key index (`sqlite_autoindex_executions_1`): one row written less per execution
-- (D1 counts every index entry an insert writes). Nothing read `executions.rowid` (src/, test/ read
-- by id, by an index, or order by `created_at, id`).
--
-- TABLE REBUILD: `executions`, every row kept, as migrations/0031 rebuilt it and 0038 rebuilt
-- `steps`: the rows are copied out to a plain table (`executions_0043`, no constraints), the old table
-- dropped with its indexes and triggers, the new one created under the real name (no rename: a
-- rename carries the foreign keys that point at it to the old name), the rows copied back in key
-- order and the copy dropped. Foreign keys are checked at the end of the transaction
-- (`defer_foreign_keys`): the drop leaves `steps` (and the self-references) without a parent for a
-- moment, and the copy back gives each its parent again.
-- The drop's implicit DELETE runs `compensation_resolutions`' ON DELETE CASCADE (deferring a foreign
-- key does not defer its action), so its rows are copied out first and put back after.
-- Then every index and trigger of `executions` is made again exactly as after migrations/0043 (the
-- triggers in their order of creation: SQLite fires the triggers of one event in that order; the
-- self-references' indexes before the copy, below).
--
-- Bytes: a WITHOUT ROWID row keeps at most about 1 KB on its page before spilling to overflow
-- pages (a rowid table about 4 KB), and the row holds the payload: an execution whose row is 1–4 KB
-- takes an overflow page it did not before (measured: docs/benchmarks.md "Rows written per
-- execution, the fourth round"); the automatic index's entry (the id and a rowid) is gone.
-- On a large shard the copy runs under D1's 30-second limit like 0038's (docs/deploy.md).
PRAGMA defer_foreign_keys = on;

CREATE TABLE compensation_resolutions_0043 AS SELECT * FROM compensation_resolutions;
CREATE TABLE executions_0043 AS SELECT
   id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload, duplicate_deliveries, last_duplicate_at, started_over_from, lineage_id, created_at, updated_at, finished_at, previous_execution_id, superseded_by, redeliveries_stopped, fenced_out_writes, destination_replays, max_attempt, retain_completed_ms, retain_failed_ms, retain_cancelled_ms, sweep_held_until, duplicate_log, value_hashes
FROM executions;
DROP TABLE executions;
CREATE TABLE executions (
  id                   TEXT NOT NULL PRIMARY KEY,
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
  -- The lineage: the identity of the trigger (migrations/0026), or the first execution of a forced run.
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
  duplicate_log        TEXT,                    -- the duplicates as events (src/ledger/start-execution-row.ts)
  value_hashes         TEXT,                    -- migrations/0033: the business values' hashes
  -- An execution is finished exactly when its status is final.
  CHECK ((status IN ('RUNNING', 'COMPENSATING')) = (finished_at IS NULL)),
  CHECK ((identity IS NULL) = (identity_kind = 'forced')),
  CHECK (started_over_from IS NULL OR lineage_id <> id)
) WITHOUT ROWID;
-- The indexes of the three references from the table to itself first: with the steps' parent
-- dropped, foreign key violations are outstanding, so SQLite looks for the children of every row
-- copied back, and without these it scans the table for each (quadratic: 8,000 rows took 19.5 s).
CREATE INDEX executions_by_predecessor ON executions (started_over_from) WHERE started_over_from IS NOT NULL;
CREATE INDEX executions_by_previous ON executions (previous_execution_id) WHERE previous_execution_id IS NOT NULL;
CREATE INDEX executions_by_superseder ON executions (superseded_by) WHERE superseded_by IS NOT NULL;
INSERT INTO executions
  (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload, duplicate_deliveries, last_duplicate_at, started_over_from, lineage_id, created_at, updated_at, finished_at, previous_execution_id, superseded_by, redeliveries_stopped, fenced_out_writes, destination_replays, max_attempt, retain_completed_ms, retain_failed_ms, retain_cancelled_ms, sweep_held_until, duplicate_log, value_hashes)
SELECT id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload, duplicate_deliveries, last_duplicate_at, started_over_from, lineage_id, created_at, updated_at, finished_at, previous_execution_id, superseded_by, redeliveries_stopped, fenced_out_writes, destination_replays, max_attempt, retain_completed_ms, retain_failed_ms, retain_cancelled_ms, sweep_held_until, duplicate_log, value_hashes
FROM executions_0043 ORDER BY id;
DROP TABLE executions_0043;
INSERT OR IGNORE INTO compensation_resolutions SELECT * FROM compensation_resolutions_0043;
DROP TABLE compensation_resolutions_0043;

CREATE INDEX executions_live_by_lineage ON executions (lineage_id) WHERE status IN ('RUNNING', 'COMPENSATING');
CREATE INDEX executions_by_workspace ON executions (workspace, created_at, id);
CREATE INDEX executions_by_workflow ON executions (workspace, workflow_id, created_at, id);
CREATE INDEX executions_with_duplicates ON executions (workspace, created_at, id)
  WHERE duplicate_deliveries + redeliveries_stopped + fenced_out_writes + destination_replays > 0;
CREATE INDEX executions_retried ON executions (workspace, created_at, id) WHERE max_attempt > 1;
CREATE INDEX executions_purge_due ON executions (purge_at) WHERE purge_at IS NOT NULL;
CREATE TRIGGER executions_supersede_failed AFTER INSERT ON executions WHEN NEW.previous_execution_id IS NOT NULL BEGIN UPDATE executions SET superseded_by = NEW.id, updated_at = NEW.created_at WHERE id = NEW.previous_execution_id AND status = 'FAILED' AND superseded_by IS NULL; END;
CREATE TRIGGER executions_identity_values AFTER INSERT ON executions WHEN NEW.identity IS NOT NULL BEGIN INSERT INTO identity_values (workspace, value_hash, created_at, execution_id) SELECT NEW.workspace, v.value, NEW.created_at, NEW.id FROM execution_identities i CROSS JOIN json_each(i.value_hashes) v WHERE i.identity = NEW.identity AND i.execution_id = NEW.id AND i.value_hashes IS NOT NULL ON CONFLICT DO NOTHING; END;
CREATE TRIGGER executions_failed_notify AFTER UPDATE OF status ON executions WHEN OLD.status = 'RUNNING' AND NEW.status IN ('FAILED', 'COMPENSATING') BEGIN INSERT INTO notification_outbox (workspace, event, subject, execution_id, webhook_id, data, next_at, created_at, updated_at) SELECT NEW.workspace, 'execution.failed', NEW.id, NEW.id, 'idemflow.execution.failed.' || NEW.id, json_object('executionId', NEW.id, 'workflowId', NEW.workflow_id, 'version', NEW.version, 'status', 'FAILED', 'failedStep', (SELECT f.vertex_id FROM steps f WHERE f.execution_id = NEW.id AND f.state = 'FAILED' ORDER BY f.finished_at DESC LIMIT 1), 'failedAt', strftime('%Y-%m-%dT%H:%M:%fZ', NEW.updated_at / 1000.0, 'unixepoch')), NEW.updated_at, NEW.updated_at, NEW.updated_at FROM notification_settings s WHERE s.workspace = NEW.workspace AND EXISTS (SELECT 1 FROM json_each(s.events) w WHERE w.value = 'execution.failed') AND EXISTS (SELECT 1 FROM steps x WHERE x.execution_id = NEW.id AND x.state = 'FAILED') ON CONFLICT (workspace, event, subject) DO NOTHING; END;
CREATE TRIGGER executions_deleted_outbox AFTER DELETE ON executions BEGIN DELETE FROM notification_outbox WHERE execution_id = OLD.id; END;
CREATE INDEX executions_by_status ON executions (workspace, status, created_at, id) WHERE status <> 'COMPLETED';
CREATE TRIGGER executions_compensation_failed_notify AFTER UPDATE OF status ON executions WHEN NEW.status = 'COMPENSATION_FAILED' AND OLD.status = 'COMPENSATING' BEGIN INSERT INTO notification_outbox (workspace, event, subject, execution_id, webhook_id, data, next_at, created_at, updated_at) SELECT NEW.workspace, 'execution.compensation_failed', g.subject, NEW.id, 'idemflow.execution.compensation_failed.' || g.subject, json_object('executionId', NEW.id, 'workflowId', NEW.workflow_id, 'version', NEW.version, 'status', 'COMPENSATION_FAILED', 'vertexId', (SELECT w.vertex_id FROM work_items w WHERE w.execution_id = NEW.id AND w.kind = 'undo' AND w.state = 'FAILED' ORDER BY w.item_index LIMIT 1), 'operatorRetries', g.n, 'at', strftime('%Y-%m-%dT%H:%M:%fZ', NEW.updated_at / 1000.0, 'unixepoch')), NEW.updated_at, NEW.updated_at, NEW.updated_at FROM notification_settings s, (SELECT c.n, NEW.id || iif(c.n > 0, '/operator-retry-' || c.n, '') AS subject FROM (SELECT count(*) AS n FROM step_events ev WHERE ev.execution_id = NEW.id AND ev.type = 'operator_retry' AND ev.vertex_id LIKE '%#undo#%') c) g WHERE s.workspace = NEW.workspace AND EXISTS (SELECT 1 FROM json_each(s.events) w WHERE w.value = 'execution.compensation_failed') ON CONFLICT (workspace, event, subject) DO NOTHING; END;
CREATE TRIGGER executions_compensation_starts AFTER UPDATE OF status ON executions WHEN NEW.status = 'COMPENSATING' AND OLD.status = 'RUNNING' BEGIN INSERT INTO work_items (execution_id, row_key, vertex_id, kind, item_index, workspace, state, available_at, item, created_at, updated_at) SELECT NEW.id, c.vertex_id || '#undo#' || c.place, c.vertex_id, 'undo', c.place, NEW.workspace, iif(c.place = 0, 'DISPATCHED', 'PENDING'), NEW.updated_at, iif(c.item IS NULL, json_object('undo', c.vertex_id, 'seq', c.seq), json_object('undo', c.vertex_id, 'item', c.item, 'seq', c.seq)), NEW.updated_at, NEW.updated_at FROM (SELECT u.vertex_id, u.item, u.seq, row_number() OVER (ORDER BY u.seq DESC, u.finished_at DESC, u.vertex_id DESC, u.item DESC) - 1 AS place FROM (SELECT st.vertex_id, NULL AS item, st.finished_at, coalesce(st.att_seq, (SELECT max(a.seq) FROM step_attempt_rows a WHERE a.execution_id = NEW.id AND a.vertex_id = st.vertex_id AND a.outcome = 'completed')) AS seq FROM steps st WHERE st.execution_id = NEW.id AND st.state = 'COMPLETED' AND st.vertex_id IN (SELECT json_extract(j.value, '$.id') FROM workflow_versions v, json_each(v.definition, '$.vertices') j WHERE v.workspace = NEW.workspace AND v.workflow_id = NEW.workflow_id AND v.version = NEW.version AND json_extract(j.value, '$.type') = 'GATEWAY' AND json_type(j.value, '$.config.compensate') = 'object') UNION ALL SELECT mi.vertex_id, mi.item_index, mi.finished_at, (SELECT max(a.seq) FROM step_attempt_rows a WHERE a.execution_id = NEW.id AND a.vertex_id = mi.row_key AND a.outcome = 'completed') FROM work_items mi WHERE mi.execution_id = NEW.id AND mi.kind = 'map_item' AND mi.state = 'COMPLETED' AND mi.vertex_id IN (SELECT json_extract(j.value, '$.id') FROM workflow_versions v, json_each(v.definition, '$.vertices') j WHERE v.workspace = NEW.workspace AND v.workflow_id = NEW.workflow_id AND v.version = NEW.version AND json_extract(j.value, '$.type') = 'MAP' AND json_type(j.value, '$.config.step.config.compensate') = 'object')) u) c WHERE c.place < 1000 ON CONFLICT DO NOTHING; END;

-- The attempt that completes a step is kept on the step's own row (issue 47 point 2, docs/ledger.md
-- "Rows written per execution"; docs/steps.md "Every attempt on record"). No table rebuild: five
-- columns added (ADD COLUMN writes no row), a table renamed, a view created, three triggers made
-- again.
--
-- Before, the batch that settles a step COMPLETED inserted its attempt's row into `step_attempts`
-- beside the step's own update: two rows written (and two deleted at removal) where the step row,
-- updated anyway, can hold the same facts — its epoch, attempt, key, claim time and finish time are
-- already on it. Now that batch writes the attempt's record on the step row (`att_seq`, `att_mark`:
-- its place in the change stream; `att_response_status`, `att_response`: its bounded response;
-- `att_request` only where its request summary is not the step's own `request`), and the other attempts (failed, retried, in progress, slept, lost, cancelled; every
-- attempt of a MAP item or undo step) keep their rows.
--
-- 1. `step_attempts` is renamed `step_attempt_rows`: every statement that writes an attempt row
--    writes there (src/ledger/attempts.ts and the two triggers below).
-- 2. `step_attempts` is now a VIEW: the rows, and one completed attempt per step whose row holds it.
--    Every reader (the trace, the change stream, stream progress, the trace's size bound, the next
--    change number, the compensation order) reads the view, so it sees every attempt as before.
-- 3. The triggers that write or read attempts are dropped BEFORE the rename (a rename rewrites a
--    trigger's references to the new name) and made again after it, each the same but for what it
--    reads and writes: `steps_attempt_unrecorded` and `work_items_attempt_unrecorded`
--    (migrations/0040, 0041; each made again last of its table's `UPDATE OF state` triggers, as
--    there) write `step_attempt_rows`, number the attempt after the rows' and the step rows'
--    newest, and the step's writes nothing when the settle put the attempt on the row
--    (`NEW.att_seq`); `executions_compensation_starts` (migrations/0038) orders a step by its row's
--    completed attempt. They read the two tables apart, never the view: SQLite materialises a
--    compound view whole when a correlated subquery reads it (src/ledger/attempts.ts).
DROP TRIGGER steps_attempt_unrecorded;
DROP TRIGGER work_items_attempt_unrecorded;
DROP TRIGGER executions_compensation_starts;

-- No CHECK on the new columns: SQLite tests an added column's CHECK against every existing row (a
-- scan of `steps`, within D1's 30-second limit for a statement: docs/deploy.md), and every value is
-- bounded before it is bound (src/ledger/attempts.ts: a summary at most 8 KiB, a change number >= 1).
ALTER TABLE steps ADD COLUMN att_seq INTEGER;
ALTER TABLE steps ADD COLUMN att_mark INTEGER;
ALTER TABLE steps ADD COLUMN att_request TEXT;
ALTER TABLE steps ADD COLUMN att_response_status INTEGER;
ALTER TABLE steps ADD COLUMN att_response TEXT;

ALTER TABLE step_attempts RENAME TO step_attempt_rows;

-- The attempt a step row holds: completed, started when its epoch was claimed (never after its end),
-- finished with the step. Its request summary is the step's own `request` unless `att_request` holds
-- another (bounded to 8 KiB where the step's was longer) or 'none' (the attempt made no request while
-- the step keeps an earlier attempt's); its response summary is `att_response`, or — NULL beside a
-- status — the output's headers and body (a Gateway's output is its answer): the same bytes are not
-- stored twice.
CREATE VIEW step_attempts AS
  SELECT execution_id, vertex_id, epoch, attempt, outcome, started_at, finished_at, idempotency_key, request,
         response_status, response, error, delay_ms, delay_reason, seq, ev_mark
  FROM step_attempt_rows
  UNION ALL
  SELECT execution_id, vertex_id, epoch, max(attempt, 1), 'completed', min(coalesce(claimed_at, created_at), finished_at),
         finished_at, idempotency_key,
         CASE WHEN att_request IS NULL THEN request WHEN att_request = 'none' THEN NULL ELSE att_request END,
         att_response_status,
         CASE WHEN att_response IS NULL AND att_response_status IS NOT NULL
              THEN json_object('headers', output -> '$.headers', 'body', output -> '$.body') ELSE att_response END,
         NULL, NULL, NULL, att_seq, att_mark
  FROM steps
  WHERE att_seq IS NOT NULL;

CREATE TRIGGER steps_attempt_unrecorded AFTER UPDATE OF state ON steps WHEN OLD.state = 'EXECUTING' AND OLD.parked_until IS NULL AND (NEW.state <> 'EXECUTING' OR NEW.epoch <> OLD.epoch) BEGIN INSERT INTO step_attempt_rows (execution_id, vertex_id, epoch, attempt, outcome, started_at, finished_at, idempotency_key, seq, ev_mark) SELECT OLD.execution_id, OLD.vertex_id, OLD.epoch, max(OLD.attempt, 1), iif(NEW.state = 'CANCELLED', 'cancelled', 'lost'), coalesce(OLD.claimed_at, OLD.created_at), iif(NEW.state = 'CANCELLED', max(coalesce(OLD.claimed_at, OLD.created_at), NEW.finished_at), NULL), OLD.idempotency_key, max(coalesce((SELECT max(lr.seq) FROM step_attempt_rows lr WHERE lr.execution_id = OLD.execution_id), 0), coalesce((SELECT max(ls.att_seq) FROM steps ls WHERE ls.execution_id = OLD.execution_id), 0)) + 1, (SELECT coalesce(max(mk.id), 0) FROM step_events mk WHERE mk.execution_id = OLD.execution_id) WHERE NEW.att_seq IS NULL AND NOT EXISTS (SELECT 1 FROM step_attempt_rows x WHERE x.execution_id = OLD.execution_id AND x.vertex_id = OLD.vertex_id AND x.epoch = OLD.epoch AND x.outcome <> 'running') ON CONFLICT (execution_id, vertex_id, epoch) DO UPDATE SET outcome = excluded.outcome, finished_at = iif(excluded.finished_at IS NULL, NULL, max(step_attempt_rows.started_at, excluded.finished_at)), idempotency_key = coalesce(step_attempt_rows.idempotency_key, excluded.idempotency_key), seq = excluded.seq, ev_mark = excluded.ev_mark WHERE step_attempt_rows.outcome = 'running'; END;
CREATE TRIGGER work_items_attempt_unrecorded AFTER UPDATE OF state ON work_items WHEN OLD.state = 'EXECUTING' AND OLD.parked_until IS NULL AND (NEW.state <> 'EXECUTING' OR NEW.epoch <> OLD.epoch) BEGIN INSERT INTO step_attempt_rows (execution_id, vertex_id, epoch, attempt, outcome, started_at, finished_at, idempotency_key, seq, ev_mark) SELECT OLD.execution_id, OLD.row_key, OLD.epoch, max(OLD.attempt, 1), iif(NEW.state = 'CANCELLED', 'cancelled', 'lost'), coalesce(OLD.claimed_at, OLD.created_at), iif(NEW.state = 'CANCELLED', max(coalesce(OLD.claimed_at, OLD.created_at), NEW.finished_at), NULL), OLD.idempotency_key, max(coalesce((SELECT max(lr.seq) FROM step_attempt_rows lr WHERE lr.execution_id = OLD.execution_id), 0), coalesce((SELECT max(ls.att_seq) FROM steps ls WHERE ls.execution_id = OLD.execution_id), 0)) + 1, (SELECT coalesce(max(mk.id), 0) FROM step_events mk WHERE mk.execution_id = OLD.execution_id) WHERE NOT EXISTS (SELECT 1 FROM step_attempt_rows x WHERE x.execution_id = OLD.execution_id AND x.vertex_id = OLD.row_key AND x.epoch = OLD.epoch AND x.outcome <> 'running') ON CONFLICT (execution_id, vertex_id, epoch) DO UPDATE SET outcome = excluded.outcome, finished_at = iif(excluded.finished_at IS NULL, NULL, max(step_attempt_rows.started_at, excluded.finished_at)), idempotency_key = coalesce(step_attempt_rows.idempotency_key, excluded.idempotency_key), seq = excluded.seq, ev_mark = excluded.ev_mark WHERE step_attempt_rows.outcome = 'running'; END;
CREATE TRIGGER executions_compensation_starts AFTER UPDATE OF status ON executions WHEN NEW.status = 'COMPENSATING' AND OLD.status = 'RUNNING' BEGIN INSERT INTO work_items (execution_id, row_key, vertex_id, kind, item_index, workspace, state, available_at, item, created_at, updated_at) SELECT NEW.id, c.vertex_id || '#undo#' || c.place, c.vertex_id, 'undo', c.place, NEW.workspace, iif(c.place = 0, 'DISPATCHED', 'PENDING'), NEW.updated_at, iif(c.item IS NULL, json_object('undo', c.vertex_id, 'seq', c.seq), json_object('undo', c.vertex_id, 'item', c.item, 'seq', c.seq)), NEW.updated_at, NEW.updated_at FROM (SELECT u.vertex_id, u.item, u.seq, row_number() OVER (ORDER BY u.seq DESC, u.finished_at DESC, u.vertex_id DESC, u.item DESC) - 1 AS place FROM (SELECT st.vertex_id, NULL AS item, st.finished_at, coalesce(st.att_seq, (SELECT max(a.seq) FROM step_attempt_rows a WHERE a.execution_id = NEW.id AND a.vertex_id = st.vertex_id AND a.outcome = 'completed')) AS seq FROM steps st WHERE st.execution_id = NEW.id AND st.state = 'COMPLETED' AND st.vertex_id IN (SELECT json_extract(j.value, '$.id') FROM workflow_versions v, json_each(v.definition, '$.vertices') j WHERE v.workspace = NEW.workspace AND v.workflow_id = NEW.workflow_id AND v.version = NEW.version AND json_extract(j.value, '$.type') = 'GATEWAY' AND json_type(j.value, '$.config.compensate') = 'object') UNION ALL SELECT mi.vertex_id, mi.item_index, mi.finished_at, (SELECT max(a.seq) FROM step_attempt_rows a WHERE a.execution_id = NEW.id AND a.vertex_id = mi.row_key AND a.outcome = 'completed') FROM work_items mi WHERE mi.execution_id = NEW.id AND mi.kind = 'map_item' AND mi.state = 'COMPLETED' AND mi.vertex_id IN (SELECT json_extract(j.value, '$.id') FROM workflow_versions v, json_each(v.definition, '$.vertices') j WHERE v.workspace = NEW.workspace AND v.workflow_id = NEW.workflow_id AND v.version = NEW.version AND json_extract(j.value, '$.type') = 'MAP' AND json_type(j.value, '$.config.step.config.compensate') = 'object')) u) c WHERE c.place < 1000 ON CONFLICT DO NOTHING; END;

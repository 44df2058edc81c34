-- Compensation, continued (SPEC section 18, docs/steps.md "Compensation"; issue 45). No table rebuild.
--
-- 1. Parked steps at a failure for good. A DELAY or WAIT_FOR_EVENT waits as EXECUTING (parked) and
--    would hold the compensation decision (`finishExecution`: nothing DISPATCHED or EXECUTING) until
--    it wakes. When a step settles (FAILED, or COMPLETED) in an execution that has a FAILED step and
--    a COMPLETED step whose vertex declares `compensate`, the execution's DELAY and WAIT_FOR_EVENT
--    steps still DISPATCHED or EXECUTING are CANCELLED in the same statement — they never call
--    anything, so nothing of theirs is left unknown — their epoch moved (a worker between its claim
--    and its park is fenced out). The settle batch's `finishExecution`, later in the same batch,
--    then waits only for steps mid-call. No batch statement is added: the settle budgets are unchanged.
--    Three triggers, each one statement: the cancel, then (on the cancel, recognised by its error
--    text) the step's `cancelled` event and its running attempt (a wait between claim and park) closed.
-- 2. `execution.compensation_failed` (docs/notifications.md): the trigger
--    `executions_compensation_failed_notify` writes its outbox row in the very UPDATE that moves the
--    execution COMPENSATING → COMPENSATION_FAILED (the undo's settle batch; no statement added), when
--    the workspace wants the event. Its subject — and so its webhook-id — carries the operator-retry
--    generation: `<execution>` the first time, `<execution>/operator-retry-<n>` after the n-th
--    operator retry of a failed undo (the count of `operator_retry` events on the execution's undo
--    rows), so a re-failure after a retry notifies again while the queue's re-deliveries of one
--    failure keep one webhook-id.
-- 3. `compensation_resolutions`: an operator's "mark resolved" of a COMPENSATION_FAILED execution
--    (src/ledger/undo-steps.ts `resolveCompensation`): who, when, the note. One row per execution,
--    removed with it.
CREATE TRIGGER steps_failure_cancels_parked AFTER UPDATE OF state ON steps WHEN NEW.state IN ('FAILED', 'COMPLETED') AND EXISTS (SELECT 1 FROM steps f WHERE f.execution_id = NEW.execution_id AND f.state = 'FAILED') BEGIN UPDATE steps SET state = 'CANCELLED', epoch = epoch + 1, lease_until = NULL, parked_until = NULL, next_resend_at = NULL, finished_at = NEW.updated_at, updated_at = NEW.updated_at, error = 'cancelled for compensation: the execution failed for good (a step FAILED) and compensates what completed; this ' || (SELECT json_extract(j.value, '$.type') FROM executions e JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version, json_each(v.definition, '$.vertices') j WHERE e.id = NEW.execution_id AND json_extract(j.value, '$.id') = steps.vertex_id) || ' was waiting and never called anything' WHERE execution_id = NEW.execution_id AND state IN ('DISPATCHED', 'EXECUTING') AND vertex_id IN (SELECT json_extract(j.value, '$.id') FROM executions e JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version, json_each(v.definition, '$.vertices') j WHERE e.id = NEW.execution_id AND e.status = 'RUNNING' AND json_extract(j.value, '$.type') IN ('DELAY', 'WAIT_FOR_EVENT')) AND EXISTS (SELECT 1 FROM steps c WHERE c.execution_id = NEW.execution_id AND c.state = 'COMPLETED' AND c.vertex_id IN (SELECT json_extract(j.value, '$.id') FROM executions e JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version, json_each(v.definition, '$.vertices') j WHERE e.id = NEW.execution_id AND json_extract(j.value, '$.type') = 'GATEWAY' AND json_type(j.value, '$.config.compensate') = 'object')); END;
CREATE TRIGGER steps_parked_cancelled_event AFTER UPDATE OF state ON steps WHEN NEW.state = 'CANCELLED' AND OLD.state IN ('DISPATCHED', 'EXECUTING') AND NEW.error LIKE 'cancelled for compensation:%' BEGIN INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail) VALUES (NEW.execution_id, NEW.vertex_id, 'cancelled', NEW.epoch, NEW.finished_at, 'cancelled while ' || OLD.state || iif(OLD.parked_until IS NOT NULL, ' (parked)', '') || ': the execution failed for good and compensates; no key sent'); END;
CREATE TRIGGER steps_parked_cancelled_attempt AFTER UPDATE OF state ON steps WHEN NEW.state = 'CANCELLED' AND OLD.state IN ('DISPATCHED', 'EXECUTING') AND NEW.error LIKE 'cancelled for compensation:%' BEGIN UPDATE step_attempts SET outcome = 'cancelled', finished_at = max(started_at, NEW.finished_at), seq = (SELECT coalesce(max(sq.seq), 0) + 1 FROM step_attempts sq WHERE sq.execution_id = NEW.execution_id), ev_mark = (SELECT coalesce(max(mk.id), 0) FROM step_events mk WHERE mk.execution_id = NEW.execution_id) WHERE execution_id = NEW.execution_id AND vertex_id = NEW.vertex_id AND outcome = 'running'; END;

CREATE TRIGGER executions_compensation_failed_notify AFTER UPDATE OF status ON executions WHEN NEW.status = 'COMPENSATION_FAILED' AND OLD.status = 'COMPENSATING' BEGIN INSERT INTO notification_outbox (workspace, event, subject, execution_id, webhook_id, data, next_at, created_at, updated_at) SELECT NEW.workspace, 'execution.compensation_failed', g.subject, NEW.id, 'idemflow.execution.compensation_failed.' || g.subject, json_object('executionId', NEW.id, 'workflowId', NEW.workflow_id, 'version', NEW.version, 'status', 'COMPENSATION_FAILED', 'vertexId', (SELECT w.vertex_id FROM work_items w WHERE w.execution_id = NEW.id AND w.kind = 'undo' AND w.state = 'FAILED' ORDER BY w.item_index LIMIT 1), 'operatorRetries', g.n, 'at', strftime('%Y-%m-%dT%H:%M:%fZ', NEW.updated_at / 1000.0, 'unixepoch')), NEW.updated_at, NEW.updated_at, NEW.updated_at FROM notification_settings s, (SELECT c.n, NEW.id || iif(c.n > 0, '/operator-retry-' || c.n, '') AS subject FROM (SELECT count(*) AS n FROM step_events ev WHERE ev.execution_id = NEW.id AND ev.type = 'operator_retry' AND ev.vertex_id LIKE '%#undo#%') c) g WHERE s.workspace = NEW.workspace AND EXISTS (SELECT 1 FROM json_each(s.events) w WHERE w.value = 'execution.compensation_failed') ON CONFLICT (workspace, event, subject) DO NOTHING; END;

CREATE TABLE compensation_resolutions (
  execution_id  TEXT PRIMARY KEY REFERENCES executions(id) ON DELETE CASCADE,
  workspace     TEXT NOT NULL,
  -- Who marked it resolved (the caller's principal: its API key's name), and why.
  resolved_by   TEXT NOT NULL,
  note          TEXT NOT NULL CHECK (length(note) BETWEEN 1 AND 2000),
  -- The undo step that had failed (its row key).
  failed_undo   TEXT,
  resolved_at   INTEGER NOT NULL
) WITHOUT ROWID;

-- Notifications (SPEC section 18, docs/notifications.md): a workspace's notification setting and
-- the outbox of what is to be delivered. No table rebuild: two new tables.
--
--   notification_settings  one row per workspace: where (`url`, allowlisted), the NAME of the
--                          workspace secret that signs (a Standard Webhooks `whsec_` secret, never
--                          the value), the events wanted (a JSON array) and the stuck threshold.
--   notification_outbox    one row per (workspace, event, subject), written in the SAME transaction
--                          as what it tells, so a crash cannot lose it; its `webhook_id` is derived
--                          from the event and the subject, stable over every retry; delivered at
--                          least once through the queue, re-sent by the cron when its message is lost.
--
-- `execution.failed` is written by the trigger `executions_failed_notify`: the very UPDATE that moves
-- an execution from RUNNING to FAILED (or to COMPENSATING with a FAILED step: compensation starts)
-- inserts the row, whichever batch makes it — no extra statement on any settle. When an execution
-- row is deleted (erased, or swept past its retention) `executions_deleted_outbox` removes its
-- outbox rows: nothing of an erased execution stays here. A later rebuild of `executions` must
-- create both triggers again.
CREATE TABLE notification_settings (
  workspace      TEXT PRIMARY KEY,
  url            TEXT NOT NULL,
  secret_name    TEXT NOT NULL,
  events         TEXT NOT NULL CHECK (json_valid(events) AND json_type(events) = 'array'),
  stuck_after_ms INTEGER CHECK (stuck_after_ms IS NULL OR stuck_after_ms > 0),
  created_at     INTEGER NOT NULL,
  updated_at     INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE notification_outbox (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  workspace     TEXT NOT NULL,
  event         TEXT NOT NULL
                CHECK (event IN ('execution.failed', 'execution.compensation_failed', 'step.retention_refused', 'execution.stuck')),
  -- What it is about: the execution id, or `<execution>/<vertex>/<epoch>` for a step's wait.
  subject       TEXT NOT NULL,
  execution_id  TEXT NOT NULL,
  webhook_id    TEXT NOT NULL,
  data          TEXT NOT NULL CHECK (json_valid(data)),
  status        TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts      INTEGER NOT NULL DEFAULT 0,
  next_at       INTEGER NOT NULL,
  lease_until   INTEGER,
  resent_at     INTEGER,
  last_status   INTEGER,
  last_answer   TEXT,
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  delivered_at  INTEGER,
  UNIQUE (workspace, event, subject)
);
-- The cron's re-send of rows whose message was lost (bounded, oldest first).
CREATE INDEX notification_outbox_due ON notification_outbox (next_at) WHERE status = 'pending';
-- The cron's removal of settled rows past their keep time.
CREATE INDEX notification_outbox_settled ON notification_outbox (updated_at) WHERE status <> 'pending';
-- GET /v1/notifications/deliveries, newest first.
CREATE INDEX notification_outbox_by_workspace ON notification_outbox (workspace, id);
-- The settle's message names the execution (it does not know the row's id): its lookup.
CREATE INDEX notification_outbox_by_execution ON notification_outbox (execution_id, event);

CREATE TRIGGER executions_failed_notify AFTER UPDATE OF status ON executions WHEN OLD.status = 'RUNNING' AND NEW.status IN ('FAILED', 'COMPENSATING') BEGIN INSERT INTO notification_outbox (workspace, event, subject, execution_id, webhook_id, data, next_at, created_at, updated_at) SELECT NEW.workspace, 'execution.failed', NEW.id, NEW.id, 'idemflow.execution.failed.' || NEW.id, json_object('executionId', NEW.id, 'workflowId', NEW.workflow_id, 'version', NEW.version, 'status', 'FAILED', 'failedStep', (SELECT f.vertex_id FROM steps f WHERE f.execution_id = NEW.id AND f.state = 'FAILED' ORDER BY f.finished_at DESC LIMIT 1), 'failedAt', strftime('%Y-%m-%dT%H:%M:%fZ', NEW.updated_at / 1000.0, 'unixepoch')), NEW.updated_at, NEW.updated_at, NEW.updated_at FROM notification_settings s WHERE s.workspace = NEW.workspace AND EXISTS (SELECT 1 FROM json_each(s.events) w WHERE w.value = 'execution.failed') AND EXISTS (SELECT 1 FROM steps x WHERE x.execution_id = NEW.id AND x.state = 'FAILED') ON CONFLICT (workspace, event, subject) DO NOTHING; END;

CREATE TRIGGER executions_deleted_outbox AFTER DELETE ON executions BEGIN DELETE FROM notification_outbox WHERE execution_id = OLD.id; END;

/**
 * The notification outbox (migrations/0032, docs/notifications.md): every statement that writes,
 * claims, settles, re-sends and removes its rows. A row is written in the transaction that makes
 * what it tells true — `execution.failed` by the trigger `executions_failed_notify` on the very
 * UPDATE that fails the execution — so a crash cannot lose it; a writer with no setting for the
 * event writes nothing (the INSERT selects from the workspace's setting). The unique key
 * (workspace, event, subject) makes every write idempotent: one row per execution and event.
 */
import type { NotificationEvent } from "./events";

/** The SQL text of `webhookIdOf` (./events.ts), over SQL expressions for the event and subject. */
const webhookIdSql = (eventSql: string, subjectSql: string) => `'idemflow.' || ${eventSql} || '.' || ${subjectSql}`;
const isoSql = (msSql: string) => `strftime('%Y-%m-%dT%H:%M:%fZ', ${msSql} / 1000.0, 'unixepoch')`;
const wants = (settingsAlias: string, event: NotificationEvent) =>
  `EXISTS (SELECT 1 FROM json_each(${settingsAlias}.events) w WHERE w.value = '${event}')`;

const INSERT_COLUMNS = "(workspace, event, subject, execution_id, webhook_id, data, next_at, created_at, updated_at)";

/**
 * A notification about an execution (`execution.compensation_failed`, `step.retention_refused`),
 * written when the execution's workspace wants the event; `subject` defaults to the execution.
 * One statement, to add to the batch that makes the event true. RETURNING the row's id (none when
 * the workspace does not want it, or the row already exists).
 */
export function executionNotification(
  db: D1Database,
  input: { executionId: string; event: NotificationEvent; now: number; subject?: string; data?: Record<string, unknown> },
): D1PreparedStatement {
  const subject = input.subject ?? input.executionId;
  return db
    .prepare(
      `INSERT INTO notification_outbox ${INSERT_COLUMNS}
       SELECT e.workspace, ?2, ?3, e.id, ${webhookIdSql("?2", "?3")},
              json_patch(json_object('executionId', e.id, 'workflowId', e.workflow_id, 'version', e.version, 'status', e.status,
                                     'at', ${isoSql("?4")}), ?5),
              ?4, ?4, ?4
       FROM executions e JOIN notification_settings s ON s.workspace = e.workspace
       WHERE e.id = ?1 AND EXISTS (SELECT 1 FROM json_each(s.events) w WHERE w.value = ?2)
       ON CONFLICT (workspace, event, subject) DO NOTHING
       RETURNING id`,
    )
    .bind(input.executionId, input.event, subject, input.now, JSON.stringify(input.data ?? {}));
}

/** An outbox row by its id, or by what it is about (the settle knows the execution, not the row). */
export type NotificationRef = { id: number } | { executionId: string; event: NotificationEvent };

/** How long a claimed delivery holds its row (a worker that dies mid-POST frees it after this). */
export const DELIVERY_LEASE_MS = 30_000;

export interface ClaimedNotification {
  id: number;
  workspace: string;
  event: NotificationEvent;
  webhookId: string;
  data: string;
  attempts: number;
  createdAt: number;
  /** The workspace's setting now (null: deleted since the row was written). */
  url: string | null;
  secretName: string | null;
  /** The sealed secret row of that name, of this workspace only (null: none stored). */
  sealed: string | null;
}

/**
 * Takes a pending row that is due and not leased by another delivery: counts the attempt, leases
 * it, and reads the workspace's setting and sealed secret with it (one statement). Null: delivered
 * already, given up, not due, or leased.
 */
export async function claimNotification(db: D1Database, ref: NotificationRef, now: number): Promise<ClaimedNotification | null> {
  const which =
    "id" in ref
      ? "id = ?1"
      : "id = (SELECT o.id FROM notification_outbox o WHERE o.execution_id = ?1 AND o.event = ?4 ORDER BY o.id LIMIT 1)";
  return db
    .prepare(
      `UPDATE notification_outbox SET attempts = attempts + 1, lease_until = ?2 + ?3, updated_at = ?2
       WHERE ${which} AND status = 'pending' AND next_at <= ?2 AND (lease_until IS NULL OR lease_until <= ?2)
       RETURNING id, workspace, event, webhook_id AS webhookId, data, attempts, created_at AS createdAt,
         (SELECT s.url FROM notification_settings s WHERE s.workspace = notification_outbox.workspace) AS url,
         (SELECT s.secret_name FROM notification_settings s WHERE s.workspace = notification_outbox.workspace) AS secretName,
         (SELECT json_object('name', ws.name, 'keyId', ws.key_id, 'iv', ws.iv, 'ciphertext', ws.ciphertext)
            FROM notification_settings s JOIN workspace_secrets ws ON ws.workspace = s.workspace AND ws.name = s.secret_name
           WHERE s.workspace = notification_outbox.workspace) AS sealed`,
    )
    .bind(...("id" in ref ? [ref.id, now, DELIVERY_LEASE_MS] : [ref.executionId, now, DELIVERY_LEASE_MS, ref.event]))
    .first<ClaimedNotification>();
}

export type DeliveryEnd =
  | { status: "delivered"; answerStatus: number; answer: string }
  | { status: "pending"; answerStatus: number | null; answer: string; nextAt: number }
  | { status: "failed"; answerStatus: number | null; answer: string };

/** The end of a claimed attempt, under its lease (the attempt count it claimed). */
export async function settleNotification(db: D1Database, id: number, attempts: number, now: number, end: DeliveryEnd): Promise<boolean> {
  const row = await db
    .prepare(
      `UPDATE notification_outbox
         SET status = ?4, last_status = ?5, last_answer = ?6, next_at = coalesce(?7, next_at), lease_until = NULL,
             delivered_at = CASE WHEN ?4 = 'delivered' THEN ?3 END, updated_at = ?3
       WHERE id = ?1 AND attempts = ?2 AND status = 'pending'
       RETURNING id`,
    )
    .bind(id, attempts, now, end.status, end.answerStatus, end.answer, end.status === "pending" ? end.nextAt : null)
    .first();
  return row !== null;
}

/** A pending row whose message did not come within this long (lost, or never sent) is re-sent by the cron. */
export const RESEND_GRACE_MS = 60_000;
/** Rows re-sent per tick per shard. */
export const RESEND_LIMIT = 50;

/** The cron's re-send: pending rows overdue by the grace, not leased, not re-sent within it (bounded). */
export async function overdueNotifications(db: D1Database, now: number, limit = RESEND_LIMIT): Promise<number[]> {
  const { results } = await db
    .prepare(
      `UPDATE notification_outbox SET resent_at = ?1
       WHERE id IN (SELECT id FROM notification_outbox
                     WHERE status = 'pending' AND next_at <= ?1 - ?2
                       AND (resent_at IS NULL OR resent_at <= ?1 - ?2) AND (lease_until IS NULL OR lease_until <= ?1)
                     ORDER BY next_at LIMIT ?3)
       RETURNING id`,
    )
    .bind(now, RESEND_GRACE_MS, limit)
    .all<{ id: number }>();
  return results.map((r) => r.id);
}

/** Steps reported stuck per tick per shard. */
export const STUCK_LIMIT = 50;

/**
 * `execution.stuck`: steps of RUNNING executions that have been DISPATCHED or EXECUTING (a wait
 * among them) without a change for longer than their workspace's threshold — once per wait (the
 * subject is `<execution>/<vertex>/<epoch>`: a new claim is a new wait). One statement over the
 * workspaces that want the event, their RUNNING executions older than the threshold
 * (executions_by_status, which leaves COMPLETED out — the `<> 'COMPLETED'` term lets SQLite use it;
 * the CROSS JOIN keeps the settings the outer loop, so the planner never scans executions), each
 * one's open steps by primary key; at most `limit` rows a tick.
 */
export async function recordStuckSteps(db: D1Database, now: number, limit = STUCK_LIMIT): Promise<number[]> {
  const subject = "st.execution_id || '/' || st.vertex_id || '/' || st.epoch";
  const { results } = await db
    .prepare(
      `INSERT INTO notification_outbox ${INSERT_COLUMNS}
       SELECT s.workspace, 'execution.stuck', ${subject}, e.id, ${webhookIdSql("'execution.stuck'", subject)},
              json_object('executionId', e.id, 'workflowId', e.workflow_id, 'version', e.version, 'status', e.status,
                          'step', st.vertex_id, 'stepState', st.state, 'since', ${isoSql("st.updated_at")},
                          'thresholdSeconds', s.stuck_after_ms / 1000),
              ?1, ?1, ?1
       FROM notification_settings s
       CROSS JOIN executions e ON e.workspace = s.workspace AND e.status = 'RUNNING' AND e.status <> 'COMPLETED'
                                 AND e.created_at <= ?1 - s.stuck_after_ms
       JOIN steps st ON st.execution_id = e.id AND st.state IN ('DISPATCHED', 'EXECUTING') AND st.updated_at <= ?1 - s.stuck_after_ms
       WHERE s.stuck_after_ms IS NOT NULL AND ${wants("s", "execution.stuck")}
         AND NOT EXISTS (SELECT 1 FROM notification_outbox o
                          WHERE o.workspace = s.workspace AND o.event = 'execution.stuck' AND o.subject = ${subject})
       LIMIT ?2
       ON CONFLICT (workspace, event, subject) DO NOTHING
       RETURNING id`,
    )
    .bind(now, limit)
    .all<{ id: number }>();
  return results.map((r) => r.id);
}

/** How long a delivered or given-up row stays on record (GET /v1/notifications/deliveries). */
export const KEEP_SETTLED_MS = 7 * 24 * 3600 * 1000;
export const REMOVE_LIMIT = 100;

/** Removes settled rows past their keep time (bounded, oldest first). */
export async function removeSettledNotifications(db: D1Database, now: number): Promise<number> {
  const { meta } = await db
    .prepare(
      `DELETE FROM notification_outbox WHERE id IN (
         SELECT id FROM notification_outbox WHERE status <> 'pending' AND updated_at <= ?1 - ?2 ORDER BY updated_at LIMIT ?3)`,
    )
    .bind(now, KEEP_SETTLED_MS, REMOVE_LIMIT)
    .run();
  return meta.changes ?? 0;
}

export interface DeliveryRecord {
  id: number;
  event: NotificationEvent;
  webhookId: string;
  executionId: string;
  status: "pending" | "delivered" | "failed";
  attempts: number;
  lastStatus: number | null;
  lastAnswer: string | null;
  createdAt: number;
  updatedAt: number;
  deliveredAt: number | null;
  nextAt: number;
}

/** The workspace's deliveries, newest first; `before`: an id to page from. */
export async function listDeliveries(db: D1Database, workspace: string, limit: number, before: number | null): Promise<DeliveryRecord[]> {
  const { results } = await db
    .prepare(
      `SELECT id, event, webhook_id AS webhookId, execution_id AS executionId, status, attempts, last_status AS lastStatus,
              last_answer AS lastAnswer, created_at AS createdAt, updated_at AS updatedAt, delivered_at AS deliveredAt, next_at AS nextAt
       FROM notification_outbox WHERE workspace = ?1 AND (?2 IS NULL OR id < ?2) ORDER BY id DESC LIMIT ?3`,
    )
    .bind(workspace, before, limit)
    .all<DeliveryRecord>();
  return results;
}

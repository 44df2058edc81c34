/**
 * Notifications (SPEC section 18, docs/notifications.md): what other subsystems call.
 *
 * - `execution.failed` needs no call: the trigger `executions_failed_notify` (migrations/0032)
 *   writes it with the failure; `notifyExecutionFailed` sends its message after the settle.
 * - `compensationFailedNotification` — THE one function compensation calls: a statement to add to
 *   the batch that makes the execution COMPENSATION_FAILED. Nothing else is needed: the cron
 *   re-sends any pending row whose message never came within a minute, so the caller may skip
 *   the send; `sendNotificationMessages(queue, ids)` after the commit delivers at once.
 * - `retentionRefusedNotification` — the statement the retention guard's refusal writes.
 */
import { errorMessage, log } from "../lib/log";
import { executionNotification } from "./outbox";
import { sendNotificationMessages } from "./messages";

export { sendNotificationMessages };

/**
 * `execution.compensation_failed` for `executionId` (its workspace's setting decides whether a row
 * is written): add it to the batch that records the failed undo; `RETURNING id` gives the row to
 * message. Idempotent: one row per execution whatever the number of calls (the webhook-id is
 * `idemflow.execution.compensation_failed.<executionId>`). `vertexId`: the undo that failed.
 */
export function compensationFailedNotification(
  db: D1Database,
  executionId: string,
  now: number,
  detail: { vertexId?: string; item?: number } = {},
): D1PreparedStatement {
  return executionNotification(db, { executionId, event: "execution.compensation_failed", now, data: { ...detail } });
}

/** `step.retention_refused` for one step of an execution: one row per (execution, step). */
export function retentionRefusedNotification(db: D1Database, executionId: string, vertexId: string, now: number): D1PreparedStatement {
  return executionNotification(db, {
    executionId,
    event: "step.retention_refused",
    now,
    subject: `${executionId}/${vertexId}`,
    data: { step: vertexId },
  });
}

/**
 * Where the retention guard refuses a key (src/steps/gateway/index.ts, before the step's failure
 * settles): the row first, then its message. A crash before the failure settles re-runs the step,
 * which refuses again and finds the row written (one row). A failed write is logged, never thrown:
 * a notification does not change what happens to the step.
 */
export async function notifyRetentionRefused(
  deps: { db: D1Database; queue: unknown; now: () => number },
  executionId: string,
  vertexId: string,
): Promise<void> {
  try {
    const row = await retentionRefusedNotification(deps.db, executionId, vertexId, deps.now()).first<{ id: number }>();
    if (row) await sendNotificationMessages(deps.queue, [row.id]);
  } catch (error) {
    log.warn("notifications.send_failed", { executionId, vertexId, event: "step.retention_refused", error: errorMessage(error) });
  }
}

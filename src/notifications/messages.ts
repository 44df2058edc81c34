/**
 * The notification queue message: `{ "type": "notification", "id": <outbox row id> }`, or
 * `{ "type": "notification", "executionId", "event" }` (plus the `shard` every message carries).
 * src/queue.ts routes a body by its `type`: a body without one is a step message as before;
 * `notification` comes here; any other type is poison, acked and logged.
 */
import { errorMessage, log } from "../lib/log";
import { isNotificationEvent, type NotificationEvent } from "./events";
import type { NotificationRef } from "./outbox";

export const NOTIFICATION_MESSAGE_TYPE = "notification";

/** By the row's id, or — from the settle that failed an execution, which does not know the id — by execution and event. */
export type NotificationMessage =
  | { type: typeof NOTIFICATION_MESSAGE_TYPE; id: number }
  | { type: typeof NOTIFICATION_MESSAGE_TYPE; executionId: string; event: NotificationEvent };

/** A queue body's `type`, or undefined when it has none (a step message, a sweep continuation). */
export function messageType(body: unknown): unknown {
  if (body === null || typeof body !== "object" || Array.isArray(body) || !Object.hasOwn(body, "type")) return undefined;
  return (body as { type: unknown }).type;
}

export function parseNotificationMessage(body: unknown): NotificationRef | null {
  if (messageType(body) !== NOTIFICATION_MESSAGE_TYPE) return null;
  const { id, executionId, event } = body as Record<string, unknown>;
  if (typeof id === "number" && Number.isSafeInteger(id) && id > 0) return { id };
  if (typeof executionId === "string" && executionId.length > 0 && executionId.length <= 128 && isNotificationEvent(event)) {
    return { executionId, event };
  }
  return null;
}

interface AnyQueue {
  sendBatch(messages: Iterable<MessageSendRequest<never>>): Promise<void>;
}

/**
 * One message per outbox row, after the commit that wrote them. A send that fails is logged, not
 * thrown: the row is on record, and the cron re-sends it (./outbox.ts `overdueNotifications`) —
 * a notification never fails what it tells about.
 */
export async function sendNotificationMessages(queue: unknown, ids: readonly number[], delaySeconds?: number): Promise<void> {
  if (ids.length === 0) return;
  const body = (id: number): NotificationMessage => ({ type: NOTIFICATION_MESSAGE_TYPE, id });
  try {
    await (queue as AnyQueue).sendBatch(
      ids.map((id) => ({ body: body(id) as never, ...(delaySeconds === undefined ? {} : { delaySeconds }) })),
    );
  } catch (error) {
    log.warn("notifications.send_failed", { ids: ids.join(","), error: errorMessage(error), message: "the cron re-sends them" });
  }
}

/**
 * After a settle whose finish failed the execution (`executionStatus` FAILED, or COMPENSATING: it
 * failed and compensation starts): the message of the `execution.failed` row the trigger wrote with
 * it — one indexed read, and a message only when the workspace wanted the event (a row exists).
 * Anything failing here is logged, not thrown: the cron re-sends a row whose message never came.
 */
export async function notifyExecutionFailed(
  db: D1Database,
  queue: unknown,
  executionId: string,
  executionStatus: string | null,
): Promise<void> {
  if (executionStatus === null || executionStatus === "COMPLETED") return;
  try {
    const row = await db
      .prepare("SELECT id FROM notification_outbox WHERE execution_id = ?1 AND event = 'execution.failed' AND status = 'pending'")
      .bind(executionId)
      .first<{ id: number }>();
    if (row) await sendNotificationMessages(queue, [row.id]);
  } catch (error) {
    log.warn("notifications.send_failed", { executionId, error: errorMessage(error), message: "the cron re-sends it" });
  }
}

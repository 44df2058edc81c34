/**
 * The events a workspace may be notified of (SPEC section 18, docs/notifications.md). The names
 * are the `type` of the body POSTed to the workspace's URL; the table's CHECK lists the same four.
 */
export const NOTIFICATION_EVENTS = [
  "execution.failed",
  "execution.compensation_failed",
  "step.retention_refused",
  "execution.stuck",
] as const;

export type NotificationEvent = (typeof NOTIFICATION_EVENTS)[number];

export function isNotificationEvent(value: unknown): value is NotificationEvent {
  return typeof value === "string" && (NOTIFICATION_EVENTS as readonly string[]).includes(value);
}

/**
 * The `webhook-id` of a notification: derived from the event and what it is about (an execution,
 * or one wait of a step), so every retry — and a second outbox write of the same thing, which the
 * table's unique key turns into nothing — carries the same id, and the receiver deduplicates.
 * The SQL that writes outbox rows builds the same text (./outbox.ts `WEBHOOK_ID_SQL`).
 */
export function webhookIdOf(event: NotificationEvent, subject: string): string {
  return `idemflow.${event}.${subject}`;
}

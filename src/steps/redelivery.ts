/**
 * How long a step message may bounce before it is dropped.
 *
 * A message whose step cannot be claimed *yet* — EXECUTING under another worker's live lease, or
 * DISPATCHED with `available_at` in the future (retry backoff, a long `Retry-After`) — is retried
 * with a delay. Every retry consumes one of the queue's `max_retries`, and a healthy long call
 * keeps its lease alive with heartbeats: left alone, the duplicate would bounce into the DLQ and
 * the step's trace would show a dead letter on a step that never had a problem.
 *
 * So a bounce is only worth it while it is cheap insurance. From `DROP_REDELIVERY_AT_ATTEMPT`
 * deliveries on, the message is acked instead (with a `redelivery_dropped` event on the step).
 * Nothing is lost: the message was never the step's only way forward —
 * - an EXECUTING step whose lease expires (its worker died) is re-dispatched by the reaper
 *   (`redispatchExpiredLeases`);
 * - a DISPATCHED step that is due and unclaimed for `overdueMs` is re-sent by the reaper
 *   (`redispatchOverdue`).
 */

/**
 * Mirrors `max_retries` of the `idemflow-steps` consumer in wrangler.toml (a test keeps the two
 * equal). A message retried on its delivery number `QUEUE_MAX_RETRIES + 1` goes to the DLQ.
 */
export const QUEUE_MAX_RETRIES = 10;

/**
 * The delivery (`message.attempts`, 1 on the first) from which a not-yet-claimable step's message
 * is dropped rather than retried: half the queue's budget, so four bounces (about four leases of a
 * live call) still get the fast path, and the other half stays for crash retries of the same
 * message (a crash retries too). Never above `QUEUE_MAX_RETRIES`, so a bounce never reaches the DLQ.
 */
export const DROP_REDELIVERY_AT_ATTEMPT = Math.min(5, QUEUE_MAX_RETRIES);

/** Which delivery of its message this is (the queue's `message.attempts`) and the message id. */
export interface Delivery {
  messageId: string;
  attempts: number;
  /** A permit waiter's wake-up (src/steps/messages.ts `wake`): a settled step is expected, not a stopped redelivery. */
  permitWake?: boolean;
}

/** True: a message on this delivery is dropped, not bounced, if its step cannot be claimed yet. */
export function dropsIfNotClaimable(delivery: Delivery): boolean {
  return delivery.attempts >= DROP_REDELIVERY_AT_ATTEMPT;
}

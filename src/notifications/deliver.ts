/**
 * One delivery attempt of an outbox row (docs/notifications.md): claim it (leased, the attempt
 * counted), sign the body with the workspace's Standard Webhooks secret under the row's stable
 * `webhook-id`, POST it to the workspace's URL (allowlisted again: the list may have shrunk), and
 * record the answer. A 2xx delivers; anything else retries with back-off through a new delayed
 * message, up to `MAX_DELIVERY_ATTEMPTS`, then the row is given up (`failed`, on record).
 * Nothing here touches an execution: a notification never blocks or fails what it tells.
 */
import { signStandardWebhook } from "../events/standard-webhooks";
import { isAllowed } from "../lib/allowlist";
import { errorMessage, log } from "../lib/log";
import { utf8 } from "../lib/crypto";
import { lookupOrReason, secretLookup } from "../secrets/resolve";
import type { StoredSecret } from "../secrets/store";
import { claimNotification, settleNotification, type ClaimedNotification, type DeliveryEnd, type NotificationRef } from "./outbox";
import { sendNotificationMessages } from "./messages";

export const MAX_DELIVERY_ATTEMPTS = 10;
/** Back-off after the n-th failed attempt: 30 s · 2^(n−1), at most an hour (10 attempts ≈ 4.5 h). */
export function retryDelaySeconds(attempts: number): number {
  return Math.min(30 * 2 ** Math.max(0, attempts - 1), 3600);
}
const TIMEOUT_MS = 10_000;
const MAX_ANSWER_CHARS = 500;

export interface NotifyDeps {
  db: D1Database;
  env: Record<string, unknown>;
  fetch: typeof fetch;
  now: () => number;
  queue: unknown;
}

export type DeliveryOutcome = "delivered" | "retrying" | "failed" | "skipped";

/** The body POSTed: the Standard Webhooks convention `{ type, timestamp, data }`, the same bytes on every attempt. */
export function notificationBody(row: Pick<ClaimedNotification, "event" | "createdAt" | "data">): string {
  return JSON.stringify({ type: row.event, timestamp: new Date(row.createdAt).toISOString(), data: JSON.parse(row.data) as unknown });
}

export async function deliverNotification(deps: NotifyDeps, ref: number | NotificationRef): Promise<DeliveryOutcome> {
  const now = deps.now();
  const row = await claimNotification(deps.db, typeof ref === "number" ? { id: ref } : ref, now);
  if (row === null) return "skipped";
  const end = await attempt(deps, row, now);
  const settled = await settleNotification(deps.db, row.id, row.attempts, deps.now(), end);
  log.line({
    level: end.status === "delivered" ? "info" : "warn",
    event: `notifications.${end.status === "pending" ? "retrying" : end.status}`,
    fields: {
      id: row.id,
      workspace: row.workspace,
      event: row.event,
      webhookId: row.webhookId,
      attempts: row.attempts,
      answer: end.answerStatus,
    },
  });
  if (!settled) return "skipped";
  if (end.status === "pending") {
    await sendNotificationMessages(deps.queue, [row.id], Math.ceil((end.nextAt - deps.now()) / 1000));
    return "retrying";
  }
  return end.status;
}

async function attempt(deps: NotifyDeps, row: ClaimedNotification, now: number): Promise<DeliveryEnd> {
  const giveUp = (answer: string): DeliveryEnd => ({ status: "failed", answerStatus: null, answer });
  if (row.url === null || row.secretName === null) return giveUp("the workspace has no notification setting any more");
  const url = new URL(row.url);
  if (!isAllowed(url, deps.env.OUTBOUND_ALLOWLIST as string | undefined))
    return giveUp(`${url.host} is not on OUTBOUND_ALLOWLIST any more`);
  const stored: StoredSecret[] = row.sealed === null ? [] : [JSON.parse(row.sealed) as StoredSecret];
  const secret = await lookupOrReason(secretLookup({ workspace: row.workspace, stored, env: deps.env }), row.secretName);
  const retry = (answerStatus: number | null, answer: string): DeliveryEnd =>
    row.attempts >= MAX_DELIVERY_ATTEMPTS
      ? { status: "failed", answerStatus, answer }
      : { status: "pending", answerStatus, answer, nextAt: now + retryDelaySeconds(row.attempts) * 1000 };
  // A missing secret may be stored yet: retried like an unanswered POST, never sent unsigned.
  if ("reason" in secret) return retry(null, `not sent: ${secret.reason}`);
  const body = notificationBody(row);
  let headers: Record<string, string>;
  try {
    headers = await signStandardWebhook(secret.value, row.webhookId, now / 1000, utf8(body));
  } catch (error) {
    return retry(null, `not sent: the secret ${row.secretName} does not sign (${errorMessage(error)})`);
  }
  try {
    const response = await deps.fetch(url.toString(), {
      method: "POST",
      headers: { ...headers, "content-type": "application/json", "user-agent": "idemflow-notifications" },
      body,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const answer = (await response.text().catch(() => "")).slice(0, MAX_ANSWER_CHARS);
    if (response.status >= 200 && response.status < 300) return { status: "delivered", answerStatus: response.status, answer };
    return retry(response.status, answer);
  } catch (error) {
    return retry(null, `no answer: ${errorMessage(error)}`.slice(0, MAX_ANSWER_CHARS));
  }
}

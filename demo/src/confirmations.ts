/**
 * The payments API confirms a charge asynchronously, as real ones do: a moment after a charge made
 * with `"confirmWebhook": true` it POSTs a signed webhook to the engine's event source
 * (`POST {ENGINE_URL}/events/dev/payments`), which the engine turns into a `payment.confirmed`
 * event that resumes the workflow waiting for it (workflows/charge-and-confirm.json).
 *
 *     webhook-id: msg_<charge id>        the same on every delivery of this confirmation
 *     webhook-timestamp, webhook-signature: Standard Webhooks, signed with PAYMENTS_WEBHOOK_SECRET
 *     { "type": "charge.succeeded", "data": { "charge": "ch_…", "order": "A-1", "amount": 42 } }
 *
 * It is delivered **twice**, the second a moment after the first with the same `webhook-id`, as
 * a provider that did not trust the first answer would: the engine records one event and counts
 * the repeat (`duplicates: 1`); the wait resumes once. Each delivery and the engine's answer is kept
 * in `webhook_deliveries` (`GET /payments/webhooks`). A delivery that fails is recorded, never retried.
 */
import { signStandardWebhook } from "../../src/events/standard-webhooks";
import { utf8 } from "../../src/lib/crypto";
import type { ConfirmationOptions, DemoEnv } from "./env";
import { insertWebhookDelivery, type ChargeItem } from "./store";

/** How long after the charge the first confirmation goes out: time enough to see the wait (docs/walkthrough.md). */
export const CONFIRM_DELAY_MS = 2_000;
/** The engine's event source for this API: workspace `dev`, source `payments` (seeded by `npm start`). */
export const CONFIRMATION_PATH = "/events/dev/payments";
export const DEFAULT_ENGINE_URL = "http://localhost:8787";
/** Both deliveries of one confirmation. */
export const CONFIRMATION_DELIVERIES = 2;

export const defaultConfirmations: ConfirmationOptions = {
  fetch: (request) => fetch(request),
  pause: () => new Promise((resolve) => setTimeout(resolve, CONFIRM_DELAY_MS)),
};

/** The webhook of one charge: its id and its exact body (the same bytes on every delivery). */
export function confirmationOf(charge: ChargeItem): { webhookId: string; body: string } {
  return {
    webhookId: `msg_${charge.id}`,
    body: JSON.stringify({ type: "charge.succeeded", data: { charge: charge.id, order: charge.order, amount: charge.amount } }),
  };
}

/** Sends the confirmation of `charge` twice (run under `waitUntil`: the charge was answered already). */
export async function confirmCharge(
  env: DemoEnv,
  db: D1Database,
  options: ConfirmationOptions,
  charge: ChargeItem,
  now: () => number,
): Promise<void> {
  const secret = options.secret ?? env.PAYMENTS_WEBHOOK_SECRET;
  if (!secret) {
    console.error("demo: confirmWebhook asked, but PAYMENTS_WEBHOOK_SECRET is not set (demo/wrangler.toml [vars]); nothing sent");
    return;
  }
  const url = `${(options.engineUrl ?? env.ENGINE_URL ?? DEFAULT_ENGINE_URL).replace(/\/+$/, "")}${CONFIRMATION_PATH}`;
  const { webhookId, body } = confirmationOf(charge);
  await options.pause();
  for (let attempt = 1; attempt <= CONFIRMATION_DELIVERIES; attempt++) {
    // Each delivery is signed when it is sent (a retry's timestamp is its own), over the same bytes.
    const headers = await signStandardWebhook(secret, webhookId, now() / 1000, utf8(body));
    let status: number | null = null;
    let answer: string;
    try {
      const response = await options.fetch(
        new Request(url, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body }),
      );
      status = response.status;
      answer = (await response.text()).slice(0, 2_000);
    } catch (error) {
      answer = `not delivered: ${error instanceof Error ? error.message : String(error)}`;
    }
    await insertWebhookDelivery(db, { webhookId, charge: charge.id, order: charge.order, attempt, url, status, answer }, now());
  }
}

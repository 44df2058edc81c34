/**
 * The demo's notification receiver: what a workspace's `PUT /v1/notifications` URL would be
 * (docs/notifications.md). It verifies every POST as Standard Webhooks with the engine's own
 * verifier (src/events/standard-webhooks.ts) and the demo's secret (NOTIFY_SECRET, default
 * `DEMO_NOTIFICATION_SECRET`: store the same value as the workspace secret the setting names), and
 * counts deliveries per `webhook-id`: a retry of a notification already received is a duplicate,
 * answered 200 and not counted as news.
 *
 *   POST /notifications   a signed notification → 200 `{ received, duplicate }`; 401 when the signature does not verify
 *   GET  /notifications   `{ items: [{ webhookId, type, deliveries, data }], deliveries, unique, duplicates }`
 *
 * Held in memory (one demo isolate under `npm start`): a demo's record, not a store.
 */
import { Hono } from "hono";
import { verifyStandardWebhook, webhookSecretKey } from "../../src/events/standard-webhooks";
import type { DemoAppEnv } from "./env";

/** The demo's signing secret (`whsec_` + base64 of "idemflow-demo-notifications-key!"): store it as the workspace secret. */
export const DEMO_NOTIFICATION_SECRET = `whsec_${btoa("idemflow-demo-notifications-key!")}`;
const TOLERANCE_SECONDS = 300;

interface Received {
  webhookId: string;
  type: string;
  deliveries: number;
  data: unknown;
}

export function notificationReceiverRoutes(options: { now: () => number; secret?: string }): Hono<DemoAppEnv> {
  const received = new Map<string, Received>();
  let refused = 0;
  const routes = new Hono<DemoAppEnv>();
  routes.post("/", async (c) => {
    const secret = options.secret ?? (c.env as { NOTIFY_SECRET?: string } | undefined)?.NOTIFY_SECRET ?? DEMO_NOTIFICATION_SECRET;
    const raw = new Uint8Array(await c.req.arrayBuffer());
    const verdict = await verifyStandardWebhook({
      key: webhookSecretKey(secret)!,
      headers: c.req.raw.headers,
      raw,
      nowMs: options.now(),
      toleranceSeconds: TOLERANCE_SECONDS,
    });
    if (!verdict.ok) {
      refused++;
      return c.json({ error: `signature refused: ${verdict.reason}` }, 401);
    }
    const body = JSON.parse(new TextDecoder().decode(raw)) as { type?: string; data?: unknown };
    const seen = received.get(verdict.id);
    if (seen) seen.deliveries++;
    else received.set(verdict.id, { webhookId: verdict.id, type: String(body.type), deliveries: 1, data: body.data ?? null });
    return c.json({ received: verdict.id, duplicate: seen !== undefined });
  });
  routes.get("/", (c) => {
    const items = [...received.values()];
    const deliveries = items.reduce((n, r) => n + r.deliveries, 0);
    return c.json({ items, deliveries, unique: items.length, duplicates: deliveries - items.length, refused });
  });
  return routes;
}

/**
 * The demo destinations as one Hono app (port 8788 under `npm start`): the pretend third parties
 * every example workflow calls. `createDemoApp()` is exported so tests can run it in-process.
 *
 *   POST /payments/charges   Idempotency-Key + Bearer key required (Idempotency-Key middleware, keys scoped per API key)
 *   GET  /payments/charges   { items: [...] } each with its idempotencyKey (?order=, ?idempotencyKey=)
 *                            a charge with `"confirmWebhook": true` is confirmed a moment later by a signed webhook to
 *                            the engine's event source, delivered twice (confirmations.ts)
 *   GET  /payments/webhooks  { items: [...] } those deliveries, each with the engine's answer (?order=)
 *   POST /forgetful/charges  the same payments API, but it forgets a key after 120 s (a replay after that charges again)
 *   GET  /forgetful/charges  the same list as /payments/charges (one charges table)
 *   POST /shipping/labels    Idempotency-Key required (Idempotency-Key middleware; anonymous, one shared scope)
 *   GET  /shipping/labels    { items: [...] }
 *   GET  /legacy/orders      ?external_id= → { items: [...] }   (no key support)
 *   POST /legacy/orders      unique external_id; a duplicate answers 409
 *   POST /checkout/payments  idempotency_key in the JSON BODY (1–45 characters, like Square); a repeat replays the payment
 *   GET  /checkout/payments  { items: [...] } (?order=)
 *   POST /refunds/lines      a refund of one order line; Idempotency-Key + Bearer key; a repeat answers the first refund
 *   GET  /refunds/lines      { items: [...] } refunds with their key's call count (?order=) · GET /refunds/calls: every call per key
 *   POST /faults             { path, mode: "after-commit", count, method? } → next `count` matching
 *                            requests do their work, then answer 502
 *   GET  /faults · DELETE /faults   list · disarm all
 *   POST /notifications      the notification receiver: verifies Standard Webhooks signatures, counts duplicates per
 *                            webhook-id; GET /notifications: what it received (notifications.ts)
 *   POST /limited/charges    rate-limited: 429 with Retry-After past its own rate; GET /limited/record: the most in
 *                            flight, calls per second, effects per key (limited.ts)
 */
import { Hono } from "hono";
import { ProblemError } from "../../src/lib/problem";
import { commonProblems } from "../../src/lib/common-problems";
import { checkoutRoutes } from "./checkout";
import { defaultConfirmations } from "./confirmations";
import { FORGETFUL_RETENTION_MS, type ConfirmationOptions, type DemoAppEnv, type DemoOptions } from "./env";
import { faultRoutes } from "./faults";
import { legacyRoutes } from "./legacy";
import { limitedRoutes } from "./limited";
import { notificationReceiverRoutes } from "./notifications";
import { paymentRoutes } from "./payments";
import { refundRoutes } from "./refunds";
import { shippingRoutes } from "./shipping";

export function createDemoApp(options: DemoOptions = {}): Hono<DemoAppEnv> {
  const resolved: Required<DemoOptions> & { confirmations: ConfirmationOptions } = {
    database: options.database ?? ((env) => env.DB),
    now: options.now ?? (() => Date.now()),
    forgetfulRetentionMs: options.forgetfulRetentionMs ?? FORGETFUL_RETENTION_MS,
    confirmations: { ...defaultConfirmations, ...options.confirmations },
  };
  const app = new Hono<DemoAppEnv>();

  app.get("/health", (c) => c.json({ ok: true, service: "idemflow-demo" }));
  app.route("/payments", paymentRoutes(resolved));
  app.route("/forgetful", paymentRoutes(resolved, { scope: "forgetful", retentionMs: resolved.forgetfulRetentionMs }));
  app.route("/shipping", shippingRoutes(resolved));
  app.route("/legacy", legacyRoutes(resolved));
  app.route("/checkout", checkoutRoutes(resolved));
  app.route("/refunds", refundRoutes(resolved));
  app.route("/faults", faultRoutes(resolved));
  app.route("/limited", limitedRoutes(resolved));
  app.route("/notifications", notificationReceiverRoutes({ now: resolved.now }));

  app.notFound(() =>
    commonProblems
      .routeNotFound(
        "The demo serves /payments/charges, /payments/webhooks, /forgetful/charges, /shipping/labels, /legacy/orders, " +
          "/checkout/payments, /refunds/lines, /limited/charges, /notifications and /faults " +
          "(see docs/walkthrough.md).",
      )
      .toResponse(),
  );
  app.onError((error) => {
    if (error instanceof ProblemError) return error.toResponse();
    console.error("demo: unhandled error", error instanceof Error ? `${error.name}: ${error.message}` : String(error));
    return commonProblems.internal().toResponse();
  });
  return app;
}

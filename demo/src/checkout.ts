/**
 * The demo checkout API: `POST /checkout/payments` takes its idempotency key from the JSON body
 * field `idempotency_key` (as Square does), at most 45 characters (Square's CreatePayment limit),
 * and answers a repeat of a key with the payment it already made (200, `Idempotent-Replayed:
 * true`) — or 422 when the same key comes with a different request. `GET /checkout/payments`
 * lists what was charged, so a key that was not re-sent verbatim shows up as a second payment.
 *
 * Unlike /payments/charges it is not behind idemflow's middleware (that reads a header): its
 * guard is the table's UNIQUE key, claimed by one `INSERT … ON CONFLICT DO NOTHING RETURNING`.
 */
import { Hono } from "hono";
import { canonicalJson } from "../../src/lib/canonical-json";
import type { DemoAppEnv, DemoOptions } from "./env";
import { afterCommitFaults } from "./faults";
import { identifierOf, readJsonObject } from "./json";
import { demoProblems } from "./problems";
import { newId } from "./store";

export const CHECKOUT_KEY_MAX_LENGTH = 45;

interface PaymentRow {
  id: string;
  idempotency_key: string;
  order_id: string | null;
  amount: number | null;
  request: string;
  created_at: number;
}

const item = (r: PaymentRow) => ({
  object: "payment",
  id: r.id,
  idempotencyKey: r.idempotency_key,
  order: r.order_id,
  amount: r.amount,
  createdAt: new Date(r.created_at).toISOString(),
});

export function checkoutRoutes(options: Required<DemoOptions>): Hono<DemoAppEnv> {
  const routes = new Hono<DemoAppEnv>();

  routes.post("/payments", afterCommitFaults(options.database), async (c) => {
    const { idempotency_key: key, ...rest } = await readJsonObject(c.req);
    if (typeof key !== "string" || key.length === 0 || key.length > CHECKOUT_KEY_MAX_LENGTH) {
      throw demoProblems.checkoutKeyInvalid(CHECKOUT_KEY_MAX_LENGTH, typeof key === "string" ? key.length : null);
    }
    const amount = rest.amount;
    if (amount !== undefined && (typeof amount !== "number" || !Number.isFinite(amount) || amount < 0)) throw demoProblems.chargeInvalid();
    const db = options.database(c.env);
    const request = canonicalJson(rest);
    const inserted = await db
      .prepare(
        `INSERT INTO checkout_payments (id, idempotency_key, order_id, amount, request, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (idempotency_key) DO NOTHING RETURNING *`,
      )
      .bind(newId("pay"), key, identifierOf(rest.order), typeof amount === "number" ? amount : null, request, options.now())
      .first<PaymentRow>();
    if (inserted) return c.json(item(inserted), 201);
    const existing = (await db.prepare("SELECT * FROM checkout_payments WHERE idempotency_key = ?1").bind(key).first<PaymentRow>())!;
    if (existing.request !== request) throw demoProblems.checkoutKeyReused();
    return c.json(item(existing), 200, { "idempotent-replayed": "true" });
  });

  routes.get("/payments", async (c) => {
    const { results } = await options
      .database(c.env)
      .prepare("SELECT * FROM checkout_payments WHERE (?1 IS NULL OR order_id = ?1) ORDER BY created_at, id")
      .bind(c.req.query("order") ?? null)
      .all<PaymentRow>();
    return c.json({ items: results.map(item) });
  });

  return routes;
}

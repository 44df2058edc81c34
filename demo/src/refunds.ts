/**
 * The demo refunds API, the destination of `workflows/refund-lines.json` (a MAP: one refund per
 * order line, through `connectors/demo-refunds.json`, key `refund-<order>-<sku>`):
 *
 *   POST /refunds/lines   a refund of one line `{ order, sku, amount }`; `Idempotency-Key` and a
 *                         bearer key required. The first call under a key refunds (201); a repeat
 *                         answers that refund (200, `Idempotent-Replayed: true`) — also when its
 *                         body differs, as a destination that keys on the header alone does: the
 *                         second line is swallowed, and its call is recorded as a `conflict`.
 *   GET  /refunds/lines   `{ items: [...] }` the refunds (?order=), each with the calls its key got
 *   GET  /refunds/calls   `{ items: [...] }` EVERY call, in order (?key=, ?order=): `created`,
 *                         `replayed` (the same body again: a retry) or `conflict` (another body
 *                         under a key already used: the double a MAP's key rules refuse at save)
 *
 * Every call is recorded per key whatever its answer, so a re-send and a double are visible: the
 * refunds of an order are one per line exactly when every line got its own key and each key's
 * calls are `created` then `replayed` only. Its guard is the table's UNIQUE key (like
 * /checkout/payments), not the Idempotency-Key middleware, so the calls table sees every call.
 */
import { Hono, type MiddlewareHandler } from "hono";
import { idempotencyProblems } from "../../src/http/idempotency/problems";
import { parseIdempotencyKey } from "../../src/http/idempotency/key";
import { canonicalJson } from "../../src/lib/canonical-json";
import type { DemoAppEnv, DemoOptions } from "./env";
import { afterCommitFaults } from "./faults";
import { identifierOf, readJsonObject } from "./json";
import { demoProblems } from "./problems";
import { newId } from "./store";

interface RefundRow {
  id: string;
  idempotency_key: string;
  order_id: string | null;
  sku: string | null;
  amount: number | null;
  request: string;
  created_at: number;
}

interface CallRow {
  id: number;
  idempotency_key: string;
  order_id: string | null;
  sku: string | null;
  outcome: "created" | "replayed" | "conflict";
  refund_id: string;
  created_at: number;
}

const iso = (ms: number) => new Date(ms).toISOString();

const refundItem = (r: RefundRow) => ({
  object: "refund",
  id: r.id,
  idempotencyKey: r.idempotency_key,
  order: r.order_id,
  sku: r.sku,
  amount: r.amount,
  createdAt: iso(r.created_at),
});

const callItem = (r: CallRow) => ({
  id: r.id,
  idempotencyKey: r.idempotency_key,
  order: r.order_id,
  sku: r.sku,
  outcome: r.outcome,
  refund: r.refund_id,
  at: iso(r.created_at),
});

/** Like the payments API, refuse anonymous calls (the connector sends `{{ secrets.PAYMENTS_KEY }}`). */
const requireBearer: MiddlewareHandler<DemoAppEnv> = async function requireBearer(c, next) {
  if (!/^Bearer\s+\S+\s*$/i.test(c.req.header("authorization") ?? "")) throw demoProblems.unauthorized();
  await next();
};

export function refundRoutes(options: Required<DemoOptions>): Hono<DemoAppEnv> {
  const routes = new Hono<DemoAppEnv>();

  routes.post("/lines", afterCommitFaults(options.database), requireBearer, async (c) => {
    const header = c.req.header("idempotency-key");
    if (header === undefined) throw idempotencyProblems.missing();
    const parsed = parseIdempotencyKey(header);
    if (!parsed.ok) throw idempotencyProblems.invalid(parsed.reason);
    const key = parsed.key;
    const body = await readJsonObject(c.req);
    const amount = body.amount;
    if (amount !== undefined && (typeof amount !== "number" || !Number.isFinite(amount) || amount < 0)) throw demoProblems.chargeInvalid();
    const db = options.database(c.env);
    const now = options.now();
    const request = canonicalJson(body);
    const order = identifierOf(body.order);
    const sku = identifierOf(body.sku);
    const inserted = await db
      .prepare(
        `INSERT INTO refunds (id, idempotency_key, order_id, sku, amount, request, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (idempotency_key) DO NOTHING RETURNING *`,
      )
      .bind(newId("re"), key, order, sku, typeof amount === "number" ? amount : null, request, now)
      .first<RefundRow>();
    const refund = inserted ?? (await db.prepare("SELECT * FROM refunds WHERE idempotency_key = ?1").bind(key).first<RefundRow>())!;
    const outcome = inserted ? "created" : refund.request === request ? "replayed" : "conflict";
    await db
      .prepare(
        `INSERT INTO refund_calls (idempotency_key, order_id, sku, request, outcome, refund_id, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)`,
      )
      .bind(key, order, sku, request, outcome, refund.id, now)
      .run();
    if (inserted) return c.json(refundItem(refund), 201, { location: `/refunds/lines/${refund.id}` });
    return c.json(refundItem(refund), 200, { "idempotent-replayed": "true" });
  });

  routes.get("/lines", afterCommitFaults(options.database), async (c) => {
    const { results } = await options
      .database(c.env)
      .prepare(
        `SELECT r.*, (SELECT count(*) FROM refund_calls k WHERE k.idempotency_key = r.idempotency_key) AS calls
         FROM refunds r WHERE (?1 IS NULL OR r.order_id = ?1) ORDER BY r.created_at, r.id`,
      )
      .bind(c.req.query("order") ?? null)
      .all<RefundRow & { calls: number }>();
    return c.json({ items: results.map((r) => ({ ...refundItem(r), calls: r.calls })) });
  });

  routes.get("/calls", async (c) => {
    const { results } = await options
      .database(c.env)
      .prepare(
        `SELECT id, idempotency_key, order_id, sku, outcome, refund_id, created_at FROM refund_calls
         WHERE (?1 IS NULL OR idempotency_key = ?1) AND (?2 IS NULL OR order_id = ?2) ORDER BY id`,
      )
      .bind(c.req.query("key") ?? null, c.req.query("order") ?? null)
      .all<CallRow>();
    return c.json({ items: results.map(callItem) });
  });

  return routes;
}

/**
 * The demo destinations' SQL, one statement per operation. The clock (`now`) is always a parameter.
 *
 * These tables belong to pretend third parties (payments, shipping, a legacy order system), not
 * to the engine: the engine never reads them, it only sees their HTTP answers.
 */

export interface ChargeItem {
  id: string;
  idempotencyKey: string;
  order: string | null;
  amount: number | null;
  createdAt: string;
}

export interface LabelItem {
  id: string;
  idempotencyKey: string;
  order: string | null;
  createdAt: string;
}

export interface LegacyOrderItem {
  id: string;
  externalId: string;
  request: unknown;
  createdAt: string;
}

export interface FaultItem {
  id: number;
  method: string;
  path: string;
  mode: "after-commit";
  remaining: number;
  fired: number;
  createdAt: string;
}

/** A short random id with a readable prefix, like the ones real payment APIs hand out. */
export function newId(prefix: string): string {
  const bytes = crypto.getRandomValues(new Uint8Array(9));
  let hex = "";
  for (const b of bytes) hex += b.toString(16).padStart(2, "0");
  return `${prefix}_${hex}`;
}

const iso = (ms: number) => new Date(ms).toISOString();

export async function insertCharge(
  db: D1Database,
  charge: { idempotencyKey: string; order: string | null; amount: number | null; request: unknown },
  now: number,
): Promise<ChargeItem> {
  const id = newId("ch");
  await db
    .prepare("INSERT INTO charges (id, idempotency_key, order_id, amount, request, created_at) VALUES (?, ?, ?, ?, ?, ?)")
    .bind(id, charge.idempotencyKey, charge.order, charge.amount, JSON.stringify(charge.request), now)
    .run();
  return { id, idempotencyKey: charge.idempotencyKey, order: charge.order, amount: charge.amount, createdAt: iso(now) };
}

export async function listCharges(db: D1Database, filter: { idempotencyKey?: string; order?: string }): Promise<ChargeItem[]> {
  const { results } = await db
    .prepare(
      `SELECT id, idempotency_key, order_id, amount, created_at FROM charges
       WHERE (?1 IS NULL OR idempotency_key = ?1) AND (?2 IS NULL OR order_id = ?2)
       ORDER BY created_at, id`,
    )
    .bind(filter.idempotencyKey ?? null, filter.order ?? null)
    .all<{ id: string; idempotency_key: string; order_id: string | null; amount: number | null; created_at: number }>();
  return results.map((r) => ({
    id: r.id,
    idempotencyKey: r.idempotency_key,
    order: r.order_id,
    amount: r.amount,
    createdAt: iso(r.created_at),
  }));
}

export async function insertLabel(
  db: D1Database,
  label: { idempotencyKey: string; order: string | null; request: unknown },
  now: number,
): Promise<LabelItem> {
  const id = newId("lbl");
  await db
    .prepare("INSERT INTO labels (id, idempotency_key, order_id, request, created_at) VALUES (?, ?, ?, ?, ?)")
    .bind(id, label.idempotencyKey, label.order, JSON.stringify(label.request), now)
    .run();
  return { id, idempotencyKey: label.idempotencyKey, order: label.order, createdAt: iso(now) };
}

export async function listLabels(db: D1Database, filter: { idempotencyKey?: string; order?: string }): Promise<LabelItem[]> {
  const { results } = await db
    .prepare(
      `SELECT id, idempotency_key, order_id, created_at FROM labels
       WHERE (?1 IS NULL OR idempotency_key = ?1) AND (?2 IS NULL OR order_id = ?2)
       ORDER BY created_at, id`,
    )
    .bind(filter.idempotencyKey ?? null, filter.order ?? null)
    .all<{ id: string; idempotency_key: string; order_id: string | null; created_at: number }>();
  return results.map((r) => ({ id: r.id, idempotencyKey: r.idempotency_key, order: r.order_id, createdAt: iso(r.created_at) }));
}

/**
 * Create a legacy order unless one with this external_id exists: one conditional INSERT against
 * the UNIQUE column. `undefined` means it already existed (the route answers 409).
 */
export async function insertLegacyOrderIfAbsent(
  db: D1Database,
  order: { externalId: string; request: unknown },
  now: number,
): Promise<LegacyOrderItem | undefined> {
  const id = newId("lo");
  const row = await db
    .prepare(
      `INSERT INTO legacy_orders (id, external_id, request, created_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (external_id) DO NOTHING RETURNING id`,
    )
    .bind(id, order.externalId, JSON.stringify(order.request), now)
    .first<{ id: string }>();
  if (!row) return undefined;
  return { id, externalId: order.externalId, request: order.request, createdAt: iso(now) };
}

export async function listLegacyOrders(db: D1Database, filter: { externalId?: string }): Promise<LegacyOrderItem[]> {
  const { results } = await db
    .prepare(
      `SELECT id, external_id, request, created_at FROM legacy_orders
       WHERE (?1 IS NULL OR external_id = ?1) ORDER BY created_at, id`,
    )
    .bind(filter.externalId ?? null)
    .all<{ id: string; external_id: string; request: string; created_at: number }>();
  return results.map((r) => ({
    id: r.id,
    externalId: r.external_id,
    request: JSON.parse(r.request) as unknown,
    createdAt: iso(r.created_at),
  }));
}

type FaultRow = { id: number; method: string; path: string; mode: "after-commit"; remaining: number; fired: number; created_at: number };
const faultItem = (r: FaultRow): FaultItem => ({
  id: r.id,
  method: r.method,
  path: r.path,
  mode: r.mode,
  remaining: r.remaining,
  fired: r.fired,
  createdAt: iso(r.created_at),
});

export async function armFault(
  db: D1Database,
  fault: { method: string; path: string; mode: "after-commit"; count: number },
  now: number,
): Promise<FaultItem> {
  const row = await db
    .prepare("INSERT INTO faults (method, path, mode, remaining, created_at) VALUES (?, ?, ?, ?, ?) RETURNING *")
    .bind(fault.method, fault.path, fault.mode, fault.count, now)
    .first<FaultRow>();
  return faultItem(row!);
}

/**
 * Fire one unit of the oldest armed fault for this request, if any: a single UPDATE whose WHERE
 * states "still armed", so N concurrent requests consume at most `count` units between them.
 */
export async function fireFault(db: D1Database, method: string, path: string): Promise<FaultItem | undefined> {
  const row = await db
    .prepare(
      `UPDATE faults SET remaining = remaining - 1, fired = fired + 1
       WHERE id = (SELECT id FROM faults WHERE method = ?1 AND path = ?2 AND remaining > 0 ORDER BY id LIMIT 1)
         AND remaining > 0
       RETURNING *`,
    )
    .bind(method, path)
    .first<FaultRow>();
  return row ? faultItem(row) : undefined;
}

export async function listFaults(db: D1Database): Promise<FaultItem[]> {
  const { results } = await db.prepare("SELECT * FROM faults ORDER BY id").all<FaultRow>();
  return results.map(faultItem);
}

/** Disarm every fault (the walkthrough's clean-up). */
export async function disarmFaults(db: D1Database): Promise<number> {
  const result = await db.prepare("UPDATE faults SET remaining = 0 WHERE remaining > 0").run();
  return result.meta.changes ?? 0;
}

export interface WebhookDeliveryItem {
  webhookId: string;
  charge: string;
  order: string | null;
  attempt: number;
  url: string;
  status: number | null;
  answer: unknown;
  sentAt: string;
}

export async function insertWebhookDelivery(
  db: D1Database,
  delivery: {
    webhookId: string;
    charge: string;
    order: string | null;
    attempt: number;
    url: string;
    status: number | null;
    answer: string;
  },
  now: number,
): Promise<void> {
  await db
    .prepare(
      `INSERT INTO webhook_deliveries (webhook_id, charge_id, order_id, attempt, url, status, answer, sent_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    .bind(delivery.webhookId, delivery.charge, delivery.order, delivery.attempt, delivery.url, delivery.status, delivery.answer, now)
    .run();
}

/** Every delivery, oldest first; `answer` parsed when it is JSON (the engine's answers are). */
export async function listWebhookDeliveries(db: D1Database, filter: { order?: string }): Promise<WebhookDeliveryItem[]> {
  const { results } = await db
    .prepare(
      `SELECT webhook_id, charge_id, order_id, attempt, url, status, answer, sent_at FROM webhook_deliveries
       WHERE (?1 IS NULL OR order_id = ?1) ORDER BY id`,
    )
    .bind(filter.order ?? null)
    .all<{
      webhook_id: string;
      charge_id: string;
      order_id: string | null;
      attempt: number;
      url: string;
      status: number | null;
      answer: string | null;
      sent_at: number;
    }>();
  return results.map((r) => {
    let answer: unknown = r.answer;
    try {
      answer = r.answer === null ? null : (JSON.parse(r.answer) as unknown);
    } catch {
      // not JSON: the text as sent back (or the error)
    }
    return {
      webhookId: r.webhook_id,
      charge: r.charge_id,
      order: r.order_id,
      attempt: r.attempt,
      url: r.url,
      status: r.status,
      answer,
      sentAt: iso(r.sent_at),
    };
  });
}

/**
 * The demo's rate-limited API (docs/connectors.md "Limits"), the destination of
 * `connectors/demo-limited.json`: it answers 429 with `Retry-After` past its own rate, and records
 * what it saw — the most calls in flight at once, the calls per second, every key's effects — so a
 * bench or a story can show a connector's limits held (its own record, not the engine's word).
 *
 *   POST   /limited/charges  a charge `{ order, amount }`; the `Idempotency-Key` header keys it: a repeat
 *                            answers the first charge (200, `Idempotent-Replayed: true`), one effect per key.
 *                            Past `rate` calls in one second — or while `inject429` lasts — 429 with
 *                            `Retry-After: retryAfterSeconds`. Each call holds `delayMs` before it answers.
 *   POST   /limited/config   `{ rate?, retryAfterSeconds?, delayMs?, inject429? }`: the destination's own
 *                            limit (default 25/s), its Retry-After (1 s), its latency (20 ms), and the
 *                            next `inject429` calls refused whatever the rate
 *   GET    /limited/record   `{ maxInFlight, inFlight, calls, refused, perSecond: [{ second, calls, refused }],
 *                            effects, keys, doubled (orders charged under more than one key), refusedAt: [...],
 *                            startedAt: [epoch ms of each call, the first 20,000] }`
 *   DELETE /limited/record   start a new record (the config stays)
 *
 * In memory: the demo Worker is one isolate under `wrangler dev`, and the record is a measurement,
 * not data to keep.
 */
import { Hono } from "hono";
import type { DemoAppEnv, DemoOptions } from "./env";
import { readJsonObject } from "./json";

interface LimitedConfig {
  rate: number;
  retryAfterSeconds: number;
  delayMs: number;
  inject429: number;
}

interface LimitedRecord {
  inFlight: number;
  maxInFlight: number;
  calls: number;
  refused: number;
  perSecond: Map<number, { calls: number; refused: number }>;
  /** Key → the charge it made (a repeat answers it). */
  charges: Map<string, { id: string; order: unknown }>;
  refusedAt: number[];
  /** When each call arrived (the first 20,000). */
  startedAt: number[];
}

const newRecord = (): LimitedRecord => ({
  inFlight: 0,
  maxInFlight: 0,
  calls: 0,
  refused: 0,
  perSecond: new Map(),
  charges: new Map(),
  refusedAt: [],
  startedAt: [],
});

export function limitedRoutes(options: Required<Pick<DemoOptions, "now">>): Hono<DemoAppEnv> {
  const config: LimitedConfig = { rate: 25, retryAfterSeconds: 1, delayMs: 20, inject429: 0 };
  let record = newRecord();
  const app = new Hono<DemoAppEnv>();

  app.post("/charges", async (c) => {
    const now = options.now();
    const second = Math.floor(now / 1000);
    const bucket = record.perSecond.get(second) ?? { calls: 0, refused: 0 };
    record.perSecond.set(second, bucket);
    record.calls++;
    bucket.calls++;
    if (record.startedAt.length < 20_000) record.startedAt.push(now);
    record.inFlight++;
    record.maxInFlight = Math.max(record.maxInFlight, record.inFlight);
    try {
      if (config.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, config.delayMs));
      if (config.inject429 > 0 || bucket.calls - bucket.refused > config.rate) {
        if (config.inject429 > 0) config.inject429--;
        record.refused++;
        bucket.refused++;
        record.refusedAt.push(now);
        return c.json({ error: "rate limited", retryAfterSeconds: config.retryAfterSeconds }, 429, {
          "retry-after": String(config.retryAfterSeconds),
        });
      }
      const body = (await readJsonObject(c.req.raw).catch(() => null)) as Record<string, unknown> | null;
      const key = c.req.header("idempotency-key") ?? `(no key ${record.calls})`;
      const existing = record.charges.get(key);
      if (existing) {
        return c.json({ id: existing.id, order: existing.order, replayed: true }, 200, { "idempotent-replayed": "true" });
      }
      const charge = { id: `lim_${record.charges.size + 1}`, order: body?.order ?? null };
      record.charges.set(key, charge);
      return c.json({ id: charge.id, order: charge.order }, 201);
    } finally {
      record.inFlight--;
    }
  });

  app.post("/config", async (c) => {
    const body = ((await readJsonObject(c.req.raw).catch(() => null)) ?? {}) as Record<string, unknown>;
    for (const name of ["rate", "retryAfterSeconds", "delayMs", "inject429"] as const) {
      const value = body[name];
      if (typeof value === "number" && Number.isInteger(value) && value >= 0) config[name] = value;
    }
    return c.json(config);
  });

  app.get("/record", (c) =>
    c.json({
      maxInFlight: record.maxInFlight,
      inFlight: record.inFlight,
      calls: record.calls,
      refused: record.refused,
      perSecond: [...record.perSecond.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([second, s]) => ({ second: new Date(second * 1000).toISOString(), calls: s.calls, refused: s.refused })),
      effects: record.charges.size,
      keys: record.charges.size,
      doubled: doubledOrders(record),
      refusedAt: record.refusedAt.map((ms) => new Date(ms).toISOString()),
      startedAt: record.startedAt,
      config,
    }),
  );

  app.delete("/record", (c) => {
    record = newRecord();
    return c.body(null, 204);
  });

  return app;
}

/** Orders charged more than once (under different keys): a double the engine's keys exist to prevent. */
function doubledOrders(record: LimitedRecord): number {
  const perOrder = new Map<string, number>();
  for (const charge of record.charges.values()) {
    const order = JSON.stringify(charge.order);
    perOrder.set(order, (perOrder.get(order) ?? 0) + 1);
  }
  return [...perOrder.values()].filter((n) => n > 1).length;
}

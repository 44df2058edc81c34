/**
 * The demo destinations (demo/src), in-process inside workerd on the real local D1.
 *
 * The engine's migrations (applied by test/apply-migrations.ts) already create the ledger table;
 * test/helpers/demo-tables.ts adds the demo's own tables from demo/migrations (0002 onwards).
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { createDemoApp } from "../../demo/src/app";
import { createDemoTables } from "../helpers/demo-tables";

const sql = import.meta.glob<string>(["../../demo/migrations/0001_idempotency_keys.sql", "../../migrations/0001_idempotency_keys.sql"], {
  query: "?raw",
  import: "default",
  eager: true,
});

beforeAll(createDemoTables);

const app = createDemoApp();

async function call(method: string, path: string, init: { body?: unknown; headers?: Record<string, string> } = {}) {
  const ctx = createExecutionContext();
  const res = await app.fetch(
    new Request(`http://demo.test${path}`, {
      method,
      headers: { "content-type": "application/json", ...(init.headers ?? {}) },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    }),
    env,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return res;
}

const charge = (key: string, order: string, extra: Record<string, string> = {}) =>
  call("POST", "/payments/charges", {
    body: { order, amount: 10 },
    headers: { "idempotency-key": key, authorization: "Bearer sk_test", ...extra },
  });

async function items<T = Record<string, unknown>>(path: string): Promise<T[]> {
  const res = await call("GET", path);
  expect(res.status).toBe(200);
  return ((await res.json()) as { items: T[] }).items;
}

describe("the demo ledger migration", () => {
  it("is byte-for-byte the engine's migrations/0001_idempotency_keys.sql", () => {
    expect(sql["../../demo/migrations/0001_idempotency_keys.sql"]).toBe(sql["../../migrations/0001_idempotency_keys.sql"]);
  });
});

describe("POST /payments/charges", () => {
  it("requires an Idempotency-Key and creates nothing without one", async () => {
    const res = await call("POST", "/payments/charges", { body: { order: "NOKEY-1" }, headers: { authorization: "Bearer sk" } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: string }).code).toBe("idempotency-key-missing");
    expect(await items("/payments/charges?order=NOKEY-1")).toHaveLength(0);
  });

  it("requires a bearer API key", async () => {
    const res = await charge("charge-AUTH-1", "AUTH-1", { authorization: "" });
    expect(res.status).toBe(401);
    expect(await items("/payments/charges?order=AUTH-1")).toHaveLength(0);
  });

  it("charges once for 20 concurrent requests with the same key, and lists the charge with its key", async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, () => charge("charge-RACE-1", "RACE-1")));
    const statuses = answers.map((a) => a.status);
    // One did the work; the others were told it is in progress (409) or got the replay (201).
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    const charges = await items<{ idempotencyKey: string; order: string }>("/payments/charges?order=RACE-1");
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({ idempotencyKey: "charge-RACE-1", order: "RACE-1" });
  });

  it("replays the stored answer to a retry, with Idempotent-Replayed: true", async () => {
    const first = await charge("charge-REPLAY-1", "REPLAY-1");
    const second = await charge("charge-REPLAY-1", "REPLAY-1");
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(await second.json()).toEqual(await first.json());
    expect(await items("/payments/charges?order=REPLAY-1")).toHaveLength(1);
  });

  it("scopes keys per API key: two callers with the same Idempotency-Key both get charged and never see each other's charge", async () => {
    const a = await charge("charge-TENANTS-1", "TENANTS-1", { authorization: "Bearer sk_alice" });
    const b = await charge("charge-TENANTS-1", "TENANTS-1", { authorization: "Bearer sk_bob" });
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.headers.get("idempotent-replayed")).toBeNull();
    const [chargeA, chargeB] = [(await a.json()) as { id: string }, (await b.json()) as { id: string }];
    expect(chargeB.id).not.toBe(chargeA.id);
    expect(await items("/payments/charges?order=TENANTS-1")).toHaveLength(2);
    // Each retry replays its own caller's charge.
    const retryB = await charge("charge-TENANTS-1", "TENANTS-1", { authorization: "Bearer sk_bob" });
    expect(retryB.headers.get("idempotent-replayed")).toBe("true");
    expect(((await retryB.json()) as { id: string }).id).toBe(chargeB.id);
    // The ledger's principal is derived from the key, never the key itself.
    const { results } = await env.DB.prepare("SELECT principal FROM idempotency_keys WHERE idem_key = ?")
      .bind("charge-TENANTS-1")
      .all<{ principal: string }>();
    expect(results).toHaveLength(2);
    for (const { principal } of results) {
      expect(principal).toMatch(/^demo:payments:[0-9a-f]{64}$/);
      expect(principal).not.toContain("sk_");
    }
  });

  it("keys payments and shipping apart: the same key on both routes creates one of each", async () => {
    expect((await charge("shared-key-1", "SHARED-1")).status).toBe(201);
    const label = await call("POST", "/shipping/labels", { body: { order: "SHARED-1" }, headers: { "idempotency-key": "shared-key-1" } });
    expect(label.status).toBe(201);
    expect(await items("/shipping/labels?order=SHARED-1")).toHaveLength(1);
  });
});

describe("POST /faults (after-commit)", () => {
  it("makes the next matching request do its work, then answer 502; the retry replays the stored 201", async () => {
    const armed = await call("POST", "/faults", { body: { path: "/payments/charges", mode: "after-commit", count: 1 } });
    expect(armed.status).toBe(201);

    const lost = await charge("charge-LOST-1", "LOST-1");
    expect(lost.status).toBe(502);
    expect(lost.headers.get("x-demo-fault")).toBe("after-commit");
    expect(lost.headers.get("idempotent-replayed")).toBeNull();
    expect(await items("/payments/charges?order=LOST-1")).toHaveLength(1); // the work was done

    const retry = await charge("charge-LOST-1", "LOST-1");
    expect(retry.status).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(await items("/payments/charges?order=LOST-1")).toHaveLength(1);
  });

  it("fires exactly `count` times under concurrent requests (consumed atomically in D1)", async () => {
    await call("POST", "/faults", { body: { path: "/legacy/orders", method: "GET", mode: "after-commit", count: 3 } });
    const answers = await Promise.all(Array.from({ length: 10 }, () => call("GET", "/legacy/orders?external_id=none")));
    expect(answers.filter((a) => a.status === 502)).toHaveLength(3);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(7);
  });

  it("does not fire on a request that failed on its own (nothing was committed)", async () => {
    const armed = (await (await call("POST", "/faults", { body: { path: "/shipping/labels", count: 1 } })).json()) as {
      fault: { id: number };
    };
    const rejected = await call("POST", "/shipping/labels", { body: { order: "F-1" } }); // no key → 400
    expect(rejected.status).toBe(400);
    const fault = (await items<{ id: number; remaining: number }>("/faults")).find((f) => f.id === armed.fault.id);
    expect(fault?.remaining).toBe(1);
    await call("DELETE", "/faults");
  });

  it("rejects an invalid fault with 422 and says what to send", async () => {
    const res = await call("POST", "/faults", { body: { path: "payments", mode: "before-commit", count: 0 } });
    expect(res.status).toBe(422);
    const problem = (await res.json()) as { code: string; detail: string };
    expect(problem.code).toBe("demo-fault-invalid");
    expect(problem.detail).toContain("`path`");
    expect(problem.detail).toContain("`mode`");
    expect(problem.detail).toContain("`count`");
  });
});

describe("the legacy orders API (no key support)", () => {
  it("creates an order once; a second POST with the same external_id gets 409", async () => {
    const first = await call("POST", "/legacy/orders", { body: { external_id: "LEG-1", total: 5 } });
    const second = await call("POST", "/legacy/orders", { body: { external_id: "LEG-1", total: 5 } });
    expect(first.status).toBe(201);
    expect(second.status).toBe(409);
    expect(((await second.json()) as { code: string }).code).toBe("demo-legacy-duplicate");
    const found = await items<{ externalId: string }>("/legacy/orders?external_id=LEG-1");
    expect(found.map((o) => o.externalId)).toEqual(["LEG-1"]);
  });

  it("answers an unknown external_id with an empty list, not an error", async () => {
    expect(await items("/legacy/orders?external_id=never-created")).toEqual([]);
  });

  it("creates exactly one order for 10 concurrent POSTs with the same external_id", async () => {
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => call("POST", "/legacy/orders", { body: { external_id: "LEG-RACE" } })),
    );
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(9);
  });
});

/**
 * The demo refunds API (demo/src/refunds.ts), the destination of workflows/refund-lines.json: one
 * refund per key, and every call recorded per key — a retry shows as `replayed`, another line sent
 * under a key already used (the double a MAP's key rules refuse at save) as `conflict`.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { createDemoApp } from "../../demo/src/app";
import { createDemoTables } from "../helpers/demo-tables";

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

const refund = (key: string | null, body: Record<string, unknown>, auth = "Bearer sk_test") =>
  call("POST", "/refunds/lines", {
    body,
    headers: { ...(key === null ? {} : { "idempotency-key": key }), ...(auth ? { authorization: auth } : {}) },
  });

async function items<T = Record<string, unknown>>(path: string): Promise<T[]> {
  const res = await call("GET", path);
  expect(res.status).toBe(200);
  return ((await res.json()) as { items: T[] }).items;
}

describe("POST /refunds/lines", () => {
  it("refunds once per key: a retry answers the same refund, and both calls are on record", async () => {
    const first = await refund("refund-O1-A", { order: "O1", sku: "A", amount: 5 });
    expect(first.status).toBe(201);
    const made = (await first.json()) as { id: string; idempotencyKey: string; sku: string };
    expect(made).toMatchObject({ idempotencyKey: "refund-O1-A", sku: "A" });
    const again = await refund("refund-O1-A", { order: "O1", sku: "A", amount: 5 });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(((await again.json()) as { id: string }).id).toBe(made.id);
    expect(await items("/refunds/lines?order=O1")).toEqual([expect.objectContaining({ id: made.id, calls: 2 })]);
    expect((await items<{ outcome: string }>("/refunds/calls?key=refund-O1-A")).map((c) => c.outcome)).toEqual(["created", "replayed"]);
  });

  it("swallows another line sent under a key already used, and records that call as a conflict", async () => {
    expect((await refund("refund-O2", { order: "O2", sku: "A", amount: 5 })).status).toBe(201);
    const second = await refund("refund-O2", { order: "O2", sku: "B", amount: 7 });
    expect(second.status).toBe(200);
    expect(((await second.json()) as { sku: string }).sku).toBe("A"); // line B was never refunded
    expect(await items("/refunds/lines?order=O2")).toHaveLength(1);
    const calls = await items<{ sku: string; outcome: string }>("/refunds/calls?order=O2");
    expect(calls.map((c) => [c.sku, c.outcome])).toEqual([
      ["A", "created"],
      ["B", "conflict"],
    ]);
  });

  it("refuses a call without an Idempotency-Key or a bearer key, refunding and recording nothing", async () => {
    const noKey = await refund(null, { order: "O3", sku: "A" });
    expect(noKey.status).toBe(400);
    expect(((await noKey.json()) as { code: string }).code).toBe("idempotency-key-missing");
    const noAuth = await refund("refund-O3-A", { order: "O3", sku: "A" }, "");
    expect(noAuth.status).toBe(401);
    expect(await items("/refunds/lines?order=O3")).toEqual([]);
    expect(await items("/refunds/calls?order=O3")).toEqual([]);
  });
});

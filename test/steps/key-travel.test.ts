/**
 * A destination key that travels somewhere other than `Idempotency-Key`: in a JSON body field (the
 * demo's checkout API, like Square) or in a header of another name (PayPal-Request-Id). Wherever
 * it travels it is computed once, persisted before the first send, and every later attempt — a
 * retry, a takeover — sends the persisted value there; the destination's own guard proves it
 * charged once.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { createDemoApp } from "../../demo/src/app";
import { createDemoTables } from "../helpers/demo-tables";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { idempotencyKey } from "../../src/expressions/key-helpers";
import { readTrace } from "../../src/steps/trace";
import { chargeWorkflow, DEST, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "steps-key-travel";

beforeAll(createDemoTables);

const demo = createDemoApp();

/** The demo Worker in-process, on this file's D1. */
async function callDemo(request: Request): Promise<Response> {
  const ctx = createExecutionContext();
  const response = await demo.fetch(request, env, ctx);
  await waitOnExecutionContext(ctx);
  return response;
}

/**
 * The destinations: /checkout/* is the demo's checkout API (key in the body); /paypal/orders is a
 * PayPal-like API that takes its key from `PayPal-Request-Id`, deduplicated by the real ledger
 * (it forwards to the demo's /payments/charges with the key moved to the header that route reads).
 */
function destinations(h: () => Harness): typeof fetch {
  return async (input, init) => {
    const request = new Request(input as RequestInfo, init);
    const { pathname } = new URL(request.url);
    if (pathname.startsWith("/checkout/")) {
      h().dest.requests.push({ method: request.method, url: request.url, headers: {}, body: await request.clone().text() });
      return callDemo(request);
    }
    if (pathname === "/paypal/orders") {
      const headers = new Headers(request.headers);
      h().dest.requests.push({ method: request.method, url: request.url, headers: Object.fromEntries(headers), body: "" });
      const fault = paypalFaults.shift();
      if (fault !== undefined) return new Response("{}", { status: fault, headers: { "content-type": "application/json" } });
      headers.set("idempotency-key", headers.get("paypal-request-id") ?? "");
      headers.delete("paypal-request-id");
      return callDemo(new Request(`${DEST}/payments/charges`, { method: "POST", headers, body: await request.text() }));
    }
    return h().dest.fetch(request);
  };
}
const paypalFaults: number[] = [];

async function demoItems(path: string): Promise<Array<Record<string, unknown>>> {
  return ((await (await callDemo(new Request(`${DEST}${path}`))).json()) as { items: Array<Record<string, unknown>> }).items;
}

async function armFault(path: string): Promise<void> {
  const response = await callDemo(
    new Request(`${DEST}/faults`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ path }) }),
  );
  expect(response.status).toBe(201);
}

function setup(overrides: Parameters<typeof harness>[0] = {}): Harness {
  const h: Harness = harness({ fetch: destinations(() => h), ...overrides });
  return h;
}

/** entry → charge (a Gateway step calling the checkout API, with the key declared by `key`) → done. */
const payWorkflow = (id: string, key: Record<string, unknown>): WorkflowDefinitionInput =>
  chargeWorkflow(id, {
    url: `${DEST}/checkout/payments`,
    headers: {},
    body: { order: "= payload.order.id", amount: "= payload.order.total" },
    ...key,
  });

const SQUARE_KEY = {
  idempotencyKey: { value: "= $idempotencyKey('pay', payload.order.id)", profile: "square", maxLength: 45, retention: "24h" },
};

const keyTraceOf = async (id: string, vertexId: string) =>
  (await readTrace(env.DB, WS, id))!.steps.find((s) => s.vertexId === vertexId)!.destinationKey;

/** The retention guard's facts in the trace (their arithmetic: test/steps/retention-guard.test.ts). */
const sentTo = (destination: string, retentionMs: number | null) => ({
  retentionMs,
  destination,
  firstSentAt: expect.any(String),
  acknowledgedAt: null,
  retentionDeadline: retentionMs === null ? null : expect.any(String),
});

const sentBodies = (h: Harness, path: string) =>
  h.dest.requests.filter((r) => new URL(r.url).pathname === path).map((r) => JSON.parse(r.body) as Record<string, unknown>);

describe("a key in a JSON body field (the demo checkout API, Square's profile)", () => {
  it("is shaped to fit 45 characters, persisted, and re-sent from the persisted value after a lost answer: one payment", async () => {
    const h = setup();
    const order = unique("B");
    const wf = await seedWorkflow(WS, payWorkflow(unique("wf"), SQUARE_KEY));
    const id = await h.start(wf, { order: { id: order, total: 12 } });
    await armFault("/checkout/payments"); // the first payment commits, then its answer is lost (502)
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(step).toMatchObject({ state: "COMPLETED", attempt: 2 });
    expect(await executionStatus(id)).toBe("COMPLETED");
    // `pay-` + 43 would be 47 characters: the profile's 45 cut the digest to 41.
    const full = await idempotencyKey("pay", order);
    expect(full).toHaveLength(47);
    expect(step.idempotency_key).toBe(full.slice(0, 45));
    const bodies = sentBodies(h, "/checkout/payments");
    expect(bodies).toEqual([
      { order, amount: 12, idempotency_key: step.idempotency_key },
      { order, amount: 12, idempotency_key: step.idempotency_key },
    ]);
    expect(await demoItems(`/checkout/payments?order=${order}`)).toHaveLength(1);
    expect(JSON.parse(step.output!)).toMatchObject({ status: 200, idempotencyKey: step.idempotency_key });
    // The trace's request summary shows the key where it travelled.
    const row = await env.DB.prepare("SELECT request FROM steps WHERE execution_id = ?1 AND vertex_id = 'charge'")
      .bind(id)
      .first<{ request: string }>();
    expect(JSON.parse(row!.request)).toMatchObject({ body: { idempotency_key: step.idempotency_key } });
    // The trace shows the declaration: where the key went, the profile and the constraints.
    expect(await keyTraceOf(id, "charge")).toEqual({
      value: step.idempotency_key,
      bodyField: "/idempotency_key",
      profile: "square",
      maxLength: 45,
      alphabet: "printable-ascii",
      ...sentTo(DEST, 86_400_000),
    });
    expect(await keyTraceOf(id, "done")).toBeNull();
  });

  it("a takeover after the worker died mid-step sends the persisted key, not a recomputed one: one payment", async () => {
    const h = setup({ leaseMs: 1_000 });
    const order = unique("T");
    const wf = await seedWorkflow(WS, payWorkflow(unique("wf"), SQUARE_KEY));
    const id = await h.start(wf, { order: { id: order, total: 7 } });
    const [first] = h.queue.take();
    // The payment is made, then the worker dies before it can settle the step.
    await h.deliver([first!.body], {
      afterRun: () => {
        throw new Error("worker died");
      },
    });
    expect((await stepsOf(id)).charge!.state).toBe("EXECUTING");
    // What the key expression reads is different now: only the persisted key can be re-sent.
    await env.DB.prepare("UPDATE executions SET payload = ?2 WHERE id = ?1")
      .bind(id, JSON.stringify({ order: { id: order, total: 7, note: "changed" } }))
      .run();
    h.clock.advance(5_000);
    await h.deliver([first!.body]);
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(step).toMatchObject({ state: "COMPLETED", epoch: 2 });
    expect(sentBodies(h, "/checkout/payments").map((b) => b.idempotency_key)).toEqual([step.idempotency_key, step.idempotency_key]);
    expect(await demoItems(`/checkout/payments?order=${order}`)).toHaveLength(1);
  });

  it("a key over the destination's maxLength fails the step before anything is sent, not retried", async () => {
    const h = setup();
    const order = unique("L").padEnd(50, "x");
    const wf = await seedWorkflow(
      WS,
      payWorkflow(unique("wf"), { idempotencyKey: { value: "= 'pay-' & payload.order.id", bodyField: "/idempotency_key", maxLength: 45 } }),
    );
    const id = await h.start(wf, { order: { id: order, total: 1 } });
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(step).toMatchObject({ state: "FAILED", attempt: 1, idempotency_key: null });
    expect(step.error).toBe(
      "gateway charge: invalid body field /idempotency_key: the body field /idempotency_key must be 1-45 characters, got 54; " +
        "use $idempotencyKey(prefix, …) to bound it",
    );
    expect(sentBodies(h, "/checkout/payments")).toEqual([]);
  });

  it("a body that evaluates to something other than a JSON object fails the step clearly, not retried", async () => {
    const h = setup();
    const wf = await seedWorkflow(WS, payWorkflow(unique("wf"), { ...SQUARE_KEY, body: "= [payload.order.id]" }));
    const id = await h.start(wf, { order: { id: unique("A"), total: 1 } });
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(step).toMatchObject({ state: "FAILED", attempt: 1 });
    expect(step.error).toBe(
      "gateway charge: the key travels in body field /idempotency_key, but the body evaluated to an array, not a JSON object; " +
        "not sent, not retried",
    );
    expect(sentBodies(h, "/checkout/payments")).toEqual([]);
  });
});

describe("a key in a header of another name (PayPal-Request-Id)", () => {
  it("is persisted and re-sent in that header on a retry; the destination charges once", async () => {
    const h = setup();
    const order = unique("P");
    const wf = await seedWorkflow(
      WS,
      payWorkflow(unique("wf"), {
        url: `${DEST}/paypal/orders`,
        headers: { Authorization: "Bearer sk_demo" },
        idempotencyKey: { value: "= $idempotencyKey('order', payload.order.id)", profile: "paypal", maxLength: 108, retention: "72h" },
      }),
    );
    const id = await h.start(wf, { order: { id: order, total: 3 } });
    paypalFaults.push(503);
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(step).toMatchObject({ state: "COMPLETED", attempt: 2 });
    // The profile's 108 fits `order-` + 44: the key is exactly the unshaped one.
    expect(step.idempotency_key).toBe(await idempotencyKey("order", order));
    const sent = h.dest.requests.filter((r) => r.url.endsWith("/paypal/orders"));
    expect(sent.map((r) => r.headers["paypal-request-id"])).toEqual([step.idempotency_key, step.idempotency_key]);
    expect(sent.every((r) => !("idempotency-key" in r.headers))).toBe(true);
    expect(await demoItems(`/payments/charges?order=${order}`)).toHaveLength(1);
    expect(await keyTraceOf(id, "charge")).toEqual({
      value: step.idempotency_key,
      header: "PayPal-Request-Id",
      profile: "paypal",
      maxLength: 108,
      alphabet: "printable-ascii",
      ...sentTo(DEST, 72 * 3_600_000),
    });
  });

  it("the original Idempotency-Key header form is traced with its default constraints", async () => {
    const h = setup();
    const wf = await seedWorkflow(
      WS,
      chargeWorkflow(unique("wf"), { headers: { "idempotency-key": "= $idempotencyKey('charge', payload.order.id)" } }),
    );
    const id = await h.start(wf, { order: { id: unique("H"), total: 3 } });
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(await keyTraceOf(id, "charge")).toEqual({
      value: step.idempotency_key,
      header: "idempotency-key",
      profile: null,
      maxLength: 255,
      alphabet: "printable-ascii",
      ...sentTo(DEST, null),
    });
  });
});

describe("the demo checkout API (POST /checkout/payments)", () => {
  const pay = (body: unknown) =>
    callDemo(
      new Request(`${DEST}/checkout/payments`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      }),
    );

  it("charges once per body key, replays a repeat, refuses a reused key with another request and a key over 45 characters", async () => {
    const order = unique("D");
    const key = `pay-${order}`;
    const first = await pay({ idempotency_key: key, order, amount: 5 });
    expect(first.status).toBe(201);
    const again = await pay({ amount: 5, order, idempotency_key: key });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(((await again.json()) as { id: string }).id).toBe(((await first.json()) as { id: string }).id);
    const reused = await pay({ idempotency_key: key, order, amount: 6 });
    expect([reused.status, ((await reused.json()) as { code: string }).code]).toEqual([422, "demo-checkout-key-reused"]);
    const long = await pay({ idempotency_key: "k".repeat(46), order, amount: 5 });
    expect([long.status, ((await long.json()) as { code: string }).code]).toEqual([422, "demo-checkout-key-invalid"]);
    const missing = await pay({ order, amount: 5 });
    expect(missing.status).toBe(422);
    expect(await demoItems(`/checkout/payments?order=${order}`)).toHaveLength(1);
  });
});

/**
 * The demo's story, in-process: workflows/charge-and-confirm.json charges through the demo payments
 * API with `confirmWebhook: true`, parks on `payment.confirmed`; a moment later the demo posts its
 * Standard-Webhooks-signed confirmation to the engine's event source `payments` (the definition
 * `npm start` seeds: demo/event-sources/payments.json) — twice, one `webhook-id`. One event, one
 * resume, one label. Real D1 for the engine and the demo, the real app for every HTTP hop.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createDemoApp } from "../../demo/src/app";
import { confirmationOf } from "../../demo/src/confirmations";
import paymentsSource from "../../demo/event-sources/payments.json";
import charged from "../../workflows/charge-and-confirm.json";
import { app } from "../../src/app";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { createDemoTables } from "../helpers/demo-tables";
import { executionStatus, harness, seedWorkflow, stepsOf, type Harness } from "../steps/helpers";
import { BASE, unique, whsec } from "./helpers";

beforeAll(createDemoTables);
beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const SECRET = whsec("the demo's payments webhook key!");

/** The engine, in this isolate, on the harness's clock and queue. */
async function engine(h: Harness, request: Request): Promise<Response> {
  const clock = vi.spyOn(Date, "now").mockImplementation(() => h.clock.now());
  try {
    const ctx = createExecutionContext();
    const res = await app.fetch(request, { ...env, QUEUE: h.queue }, ctx);
    await waitOnExecutionContext(ctx);
    return res;
  } finally {
    clock.mockRestore();
  }
}

const bearer = (h: Harness, method: string, path: string, body?: unknown) =>
  engine(
    h,
    new Request(`${BASE}${path}`, {
      method,
      headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );

/** Delivers the messages already due (never the wait's wake-up at its timeout), until none is. */
async function deliverDue(h: Harness): Promise<void> {
  for (let round = 0; round < 20; round++) {
    const due = h.queue.pending.filter((m) => m.dueAt <= h.clock.now());
    if (due.length === 0) return;
    h.queue.pending = h.queue.pending.filter((m) => !due.includes(m));
    for (const m of due) await h.deliver([m.body]);
  }
}

/** The harness with the demo destinations in-process; the demo's confirmations wait for `release()`, then reach the engine app. */
function storyHarness() {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const background: Array<Promise<void>> = [];
  const h: Harness = harness({
    fetch: async (input, init) => {
      const ctx = createExecutionContext();
      const response = await demo.fetch(new Request(input as RequestInfo, init), env, ctx);
      background.push(waitOnExecutionContext(ctx)); // the confirmation runs after the charge was answered
      return response;
    },
  });
  const demo = createDemoApp({
    now: h.clock.now,
    confirmations: { pause: () => gate, fetch: (request) => engine(h, request), secret: SECRET },
  });
  const demoGet = async <T>(path: string): Promise<T> => {
    const ctx = createExecutionContext();
    const res = await demo.fetch(new Request(`http://localhost:8788${path}`), env, ctx);
    await waitOnExecutionContext(ctx);
    return res.json<T>();
  };
  return { h, demoGet, confirm: async () => (release(), await Promise.all(background.splice(0))) };
}

describe("charge, wait for the provider's confirmation, ship", () => {
  it("the double-delivered confirmation resumes the wait once: one event (1 duplicate), one charge, one label", async () => {
    const { h, demoGet, confirm } = storyHarness();
    expect((await bearer(h, "PUT", "/v1/secrets/PAYMENTS_WEBHOOK_SECRET", { value: SECRET })).status).toBe(200);
    expect((await bearer(h, "PUT", "/v1/event-sources/payments", paymentsSource)).status).toBe(201);
    const wf = await seedWorkflow("dev", charged as unknown as WorkflowDefinitionInput);
    const order = unique("C");
    const id = await h.start(wf, { order: { id: order, total: 42 } });
    await deliverDue(h);

    // Charged; waiting for the confirmation, nothing held.
    const [charge] = (await demoGet<{ items: Array<{ id: string; idempotencyKey: string }> }>(`/payments/charges?order=${order}`)).items;
    expect(charge?.idempotencyKey).toBe(`charge-confirmed-${order}`);
    const waits = await (await bearer(h, "GET", `/v1/waits?event=payment.confirmed&match=${order}`)).json<{ waits: unknown[] }>();
    expect(waits.waits).toEqual([expect.objectContaining({ executionId: id, vertexId: "confirmed", match: order })]);
    expect(await executionStatus(id)).toBe("RUNNING");

    await confirm();
    const { webhookId } = confirmationOf({ id: charge!.id, idempotencyKey: "", order, amount: 42, createdAt: "" });
    const deliveries = (await demoGet<{ items: Array<Record<string, unknown>> }>(`/payments/webhooks?order=${order}`)).items;
    expect(deliveries).toEqual([
      expect.objectContaining({
        webhookId,
        attempt: 1,
        status: 202,
        answer: expect.objectContaining({ deduplicated: false, resumed: [id], name: "payment.confirmed" }),
      }),
      expect.objectContaining({
        webhookId,
        attempt: 2,
        status: 200,
        answer: expect.objectContaining({ deduplicated: true, duplicates: 1 }),
      }),
    ]);

    await deliverDue(h);
    expect(await executionStatus(id)).toBe("COMPLETED");
    const steps = await stepsOf(id);
    expect(JSON.parse(steps.confirmed!.output!)).toMatchObject({ id: webhookId, match: order, data: { charge: charge!.id, order } });
    expect((await demoGet<{ items: unknown[] }>(`/shipping/labels?order=${order}`)).items).toHaveLength(1);
    expect((await demoGet<{ items: unknown[] }>(`/payments/charges?order=${order}`)).items).toHaveLength(1);
  });

  it("a charge that does not ask for a confirmation sends none", async () => {
    const sent: Request[] = [];
    const demo = createDemoApp({
      confirmations: { pause: async () => {}, fetch: async (r) => (sent.push(r), new Response(null, { status: 202 })) },
    });
    const order = unique("N");
    const call = async (path: string, init?: RequestInit) => {
      const ctx = createExecutionContext();
      const res = await demo.fetch(new Request(`http://localhost:8788${path}`, init), { ...env, PAYMENTS_WEBHOOK_SECRET: SECRET }, ctx);
      await waitOnExecutionContext(ctx); // any confirmation would have been sent by now
      return res;
    };
    const headers = { authorization: "Bearer sk_test", "content-type": "application/json" };
    const plain = await call("/payments/charges", {
      method: "POST",
      headers: { ...headers, "idempotency-key": `plain-${order}` },
      body: JSON.stringify({ order, amount: 1 }),
    });
    expect(plain.status).toBe(201);
    expect(sent).toEqual([]);
    expect((await (await call(`/payments/webhooks?order=${order}`)).json<{ items: unknown[] }>()).items).toEqual([]);
    // Asked for: two deliveries, one webhook-id, each signed (the demo's env holds the secret).
    const asked = await call("/payments/charges", {
      method: "POST",
      headers: { ...headers, "idempotency-key": `asked-${order}` },
      body: JSON.stringify({ order, amount: 1, confirmWebhook: true }),
    });
    expect(asked.status).toBe(201);
    expect(sent.map((r) => [r.url, r.headers.get("webhook-id")])).toEqual([
      ["http://localhost:8787/events/dev/payments", `msg_${(await asked.json<{ id: string }>()).id}`],
      ["http://localhost:8787/events/dev/payments", sent[0]!.headers.get("webhook-id")],
    ]);
    expect(sent[0]!.headers.get("webhook-signature")).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
  });
});

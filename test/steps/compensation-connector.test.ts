/**
 * Compensation through a connector, and an undo as a Gateway call (docs/steps.md "Compensation",
 * issue 45 §1 and §3): a connector step's `compensate` with its own `operation`, `path` and
 * `keyFields` is resolved at save by the connector's key rule into its own key (`refund-<order>`,
 * never `charge-<order>`), refused where it could equal the step's; the undo takes the connector's
 * permit like any call through a limited connector; an undo's own verify probe runs before its re-attempt.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { getWorkflow, type StoredWorkflow } from "../../src/definitions/store";
import { limitedPayments, putJson, WS } from "../flow/helpers";
import { DEST, executionStatus, harness, seedWorkflow, unique, type Harness } from "./helpers";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const refundThrough = (more: Record<string, unknown> = {}) => ({
  operation: "refund",
  method: "POST",
  path: "/refunds",
  keyFields: { order: "= payload.order.id" },
  body: "= { 'charge': output.body.id }",
  ...more,
});

/** received → charge (through `connector`, refunded through it) → ship (inline; fails when faulted). */
function orderThrough(connector: string, compensate: Record<string, unknown> = refundThrough(), charge: Record<string, unknown> = {}) {
  return {
    id: unique("wf"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "charge",
        type: "GATEWAY",
        config: {
          connector,
          operation: "charge",
          method: "POST",
          path: "/charges",
          keyFields: { order: "= payload.order.id" },
          body: "= { 'order': payload.order.id }",
          compensate,
          ...charge,
        },
      },
      {
        id: "ship",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${DEST}/shipping/labels`,
          headers: { "Idempotency-Key": "= 'ship-' & payload.order.id" },
          retry: { maxAttempts: 1, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
        },
      },
    ],
    edges: [
      { from: "received", to: "charge" },
      { from: "charge", to: "ship" },
    ],
  };
}

async function connector(h: Harness, limits?: Record<string, unknown>): Promise<string> {
  const name = unique("pay");
  const saved = await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, limits));
  expect(saved.status, JSON.stringify(saved.body)).toBe(201);
  return name;
}

async function save(h: Harness, wf: { id: string }): Promise<{ status: number; body: Record<string, unknown> }> {
  return putJson(h, `/v1/workflows/${wf.id}`, wf);
}

const errorsOf = (body: Record<string, unknown>) => (body.errors as Array<{ pointer: string; code: string; message: string }>) ?? [];

describe("compensate through the step's connector: at save", () => {
  it("resolves the undo's URL under the connector, its own key from its operation, and the connector on record", async () => {
    const h = harness();
    const name = await connector(h);
    const wf = orderThrough(name);
    const saved = await save(h, wf);
    expect(saved.status, JSON.stringify(saved.body)).toBe(201);
    const stored = (await getWorkflow(env.DB, WS, wf.id))!;
    const charge = stored.definition.vertices.find((v) => v.id === "charge")!;
    const compensate = (charge.config as { compensate: Record<string, unknown> }).compensate;
    expect(compensate).toMatchObject({
      method: "POST",
      url: "http://localhost:8788/payments/refunds",
      idempotencyKey: { value: '= "refund-" & (payload.order.id)' },
      connector: { name, operation: "refund" },
    });
    expect(compensate).not.toHaveProperty("path");
    expect(compensate).not.toHaveProperty("keyFields");
  });

  it.each([
    [
      "the step's own operation (the same key)",
      { compensate: refundThrough({ operation: "charge" }) },
      "compensation-key-equals-step-key",
      "/vertices/1/config/compensate/keyFields/order",
    ],
    [
      "a `url` beside `path`",
      { compensate: refundThrough({ url: `${DEST}/x` }) },
      "connector-owns-member",
      "/vertices/1/config/compensate/url",
    ],
    [
      "no operation",
      { compensate: refundThrough({ operation: undefined }) },
      "connector-operation-missing",
      "/vertices/1/config/compensate/operation",
    ],
    [
      "a key field the rule does not name",
      { compensate: refundThrough({ keyFields: { order: "= payload.order.id", sku: "= 'x'" } }) },
      "connector-key-field-unknown",
      "/vertices/1/config/compensate/keyFields/sku",
    ],
  ])("refuses %s: 422 with its pointer, nothing saved", async (_name, change, code, pointer) => {
    const h = harness();
    const name = await connector(h);
    const wf = orderThrough(name, change.compensate);
    const saved = await save(h, wf);
    expect(saved.status).toBe(422);
    expect(errorsOf(saved.body)).toContainEqual(expect.objectContaining({ code, pointer }));
    expect(await getWorkflow(env.DB, WS, wf.id)).toBeNull();
  });

  it("refuses `path` on a step that names no connector, and `compensate.connector` given by the author", async () => {
    const h = harness();
    const wf = orderThrough("x");
    const charge = wf.vertices[1] as { config: Record<string, unknown> };
    for (const member of ["connector", "operation", "path", "keyFields"]) delete charge.config[member];
    charge.config.url = `${DEST}/payments/charges`;
    charge.config.headers = { "Idempotency-Key": "= 'charge-' & payload.order.id" };
    const saved = await save(h, wf);
    expect(saved.status).toBe(422);
    expect(errorsOf(saved.body)).toContainEqual(
      expect.objectContaining({ code: "compensation-connector-member", pointer: "/vertices/1/config/compensate/path" }),
    );
    charge.config.compensate = {
      method: "POST",
      url: `${DEST}/payments/refunds`,
      headers: { "Idempotency-Key": "= 'refund-' & payload.order.id" },
      connector: { name: "pay", version: "a".repeat(64) },
    };
    const provenance = await save(h, wf);
    expect(provenance.status).toBe(422);
    expect(errorsOf(provenance.body)).toContainEqual(
      expect.objectContaining({ code: "connector-provenance-given", pointer: "/vertices/1/config/compensate/connector" }),
    );
  });
});

describe("compensate through the step's connector: at run time", () => {
  async function saved(h: Harness, limits?: Record<string, unknown>): Promise<StoredWorkflow> {
    const name = await connector(h, limits);
    const wf = orderThrough(name);
    const put = await save(h, wf);
    expect(put.status, JSON.stringify(put.body)).toBe(201);
    return (await getWorkflow(env.DB, WS, wf.id))!;
  }

  it("ship fails for good: the refund goes through the connector with its own key, once", async () => {
    const h = harness();
    const wf = await saved(h);
    const p = { order: { id: unique("O") } };
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, p);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(h.dest.keysSent("/payments/charges")).toEqual([`charge-${p.order.id}`]);
    expect(h.dest.keysSent("/payments/refunds")).toEqual([`refund-${p.order.id}`]);
  });

  it("an undo through a limited connector takes its permit: while another call holds the only one, no refund is sent", async () => {
    const h = harness();
    const wf = await saved(h, { concurrency: 1 });
    const a = { order: { id: unique("A") } };
    const b = { order: { id: unique("B") } };
    h.dest.fault("/shipping/labels", 400);
    const idA = await h.start(wf, a);
    // A runs until its compensation starts: the undo's message pending.
    while (!h.queue.pending.some((m) => m.body.undo !== undefined)) {
      const [next] = h.queue.pending.splice(0, 1);
      await h.deliver([next!.body]);
    }
    expect(await executionStatus(idA)).toBe("COMPENSATING");
    const undoMessage = h.queue.pending.splice(
      h.queue.pending.findIndex((m) => m.body.undo !== undefined),
      1,
    )[0]!;
    // B's charge is mid-call through the connector, holding its only permit.
    const idB = await h.start(wf, b);
    const chargeB = h.queue.pending.splice(
      h.queue.pending.findIndex((m) => m.body.executionId === idB),
      1,
    )[0]!;
    let release!: () => void;
    let called!: () => void;
    const inCall = new Promise<void>((resolve) => (called = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    const running = h.deliver([chargeB.body], {
      fetch: async (input, init) => {
        called();
        await gate;
        return h.dest.fetch(input, init);
      },
    });
    await inCall;
    // A's undo now: refused a permit, nothing sent; it asks again later (not an attempt of the refund).
    await h.deliver([undoMessage.body]);
    expect(h.dest.keysSent("/payments/refunds")).toEqual([]);
    const undo = await env.DB.prepare("SELECT state, error FROM work_items WHERE execution_id = ?1 AND kind = 'undo'")
      .bind(idA)
      .first<{ state: string; error: string }>();
    expect(undo!.state).toBe("DISPATCHED");
    expect(undo!.error).toContain("waiting");
    release();
    await running;
    await h.drain();
    expect(await executionStatus(idA)).toBe("COMPENSATED");
    // B shipped (the one fault was A's): only A's charge is refunded.
    expect(h.dest.keysSent("/payments/refunds")).toEqual([`refund-${a.order.id}`]);
    expect(await executionStatus(idB)).toBe("COMPLETED");
  });
});

describe("a connector's declared undo (`compensate` of the connector)", () => {
  it("a step's compensate gives only its key fields and body: the connector's operation, path and method, its own key", async () => {
    const h = harness();
    const name = unique("pay");
    const def = limitedPayments(name, undefined, { compensate: { operation: "refund", path: "/refunds" } });
    expect((await putJson(h, `/v1/connectors/${name}`, def)).status).toBe(201);
    const wf = orderThrough(name, { keyFields: { order: "= payload.order.id" }, body: "= { 'charge': output.body.id }" });
    const put = await save(h, wf);
    expect(put.status, JSON.stringify(put.body)).toBe(201);
    const stored = (await getWorkflow(env.DB, WS, wf.id))!;
    const p = { order: { id: unique("O") } };
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(stored, p);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(h.dest.keysSent("/payments/refunds")).toEqual([`refund-${p.order.id}`]);
    expect(h.dest.requests.filter((r) => new URL(r.url).pathname === "/payments/refunds").map((r) => r.method)).toEqual(["POST"]);
  });

  it("its own key rule: with one expression as the writes' rule, the undo's own rule makes a different key", async () => {
    const h = harness();
    const name = unique("pay");
    const key = { profile: "stripe", rule: { expression: "= 'w-' & payload.order.id" } };
    const same = { ...limitedPayments(name, undefined), key, compensate: { operation: "refund", path: "/refunds" } };
    // Without its own rule the undo's key would be the writes' expression: refused at the connector.
    const refused = await putJson(h, `/v1/connectors/${name}`, same);
    expect(refused.status).toBe(422);
    expect(errorsOf(refused.body)).toContainEqual(
      expect.objectContaining({ code: "compensation-key-equals-step-key", pointer: "/compensate/rule" }),
    );
    const own = { ...same, compensate: { ...same.compensate, rule: { expression: "= 'u-' & payload.order.id" } } };
    const saved = await putJson(h, `/v1/connectors/${name}`, own);
    expect(saved.status, JSON.stringify(saved.body)).toBe(201);
    const wf = orderThrough(name, { body: "= { 'charge': output.body.id }" }, { operation: undefined, keyFields: undefined });
    const put = await save(h, wf);
    expect(put.status, JSON.stringify(put.body)).toBe(201);
    const stored = (await getWorkflow(env.DB, WS, wf.id))!;
    const p = { order: { id: unique("O") } };
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(stored, p);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(h.dest.keysSent("/payments/charges")).toEqual([`w-${p.order.id}`]);
    expect(h.dest.keysSent("/payments/refunds")).toEqual([`u-${p.order.id}`]);
  });

  it("refuses a declared undo on a connector without a key", async () => {
    const h = harness();
    const name = unique("pay");
    const { key: _key, ...keyless } = limitedPayments(name, undefined, {
      verify: { path: "/orders", condition: "= status = 200" },
      compensate: { operation: "refund", path: "/refunds" },
    });
    const refused = await putJson(h, `/v1/connectors/${name}`, keyless);
    expect(refused.status).toBe(422);
    expect(errorsOf(refused.body)).toContainEqual(
      expect.objectContaining({ code: "connector-compensate-without-key", pointer: "/compensate" }),
    );
  });
});

describe("an undo's verify probe", () => {
  it("runs before the undo's re-attempt (its response lost), as any Gateway call's", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        {
          id: "charge",
          type: "GATEWAY",
          config: {
            method: "POST",
            url: `${DEST}/payments/charges`,
            headers: { "Idempotency-Key": "= 'charge-' & payload.order.id" },
            compensate: {
              method: "POST",
              url: `${DEST}/payments/refunds`,
              headers: { "Idempotency-Key": "= 'refund-' & payload.order.id" },
              retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
              verify: { url: `${DEST}/payments/refunds`, query: { order: "= payload.order.id" }, condition: "= status = 200" },
            },
          },
        },
        {
          id: "ship",
          type: "GATEWAY",
          config: {
            method: "POST",
            url: `${DEST}/shipping/labels`,
            headers: { "Idempotency-Key": "= 'ship-' & payload.order.id" },
            retry: { maxAttempts: 1, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
          },
        },
      ],
      edges: [
        { from: "received", to: "charge" },
        { from: "charge", to: "ship" },
      ],
    } as unknown as WorkflowDefinitionInput);
    const p = { order: { id: unique("O") } };
    h.dest.fault("/shipping/labels", 400);
    h.dest.fault("/payments/refunds", 503, 1, { afterCommit: true });
    const id = await h.start(wf, p);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    // The first POST's answer was lost; the probe (a GET, 404 here: not there, so the write runs) before the second.
    const refundCalls = h.dest.requests.filter((r) => new URL(r.url).pathname === "/payments/refunds").map((r) => r.method);
    expect(refundCalls).toEqual(["POST", "GET", "POST"]);
    expect(h.dest.effects.filter((e) => e.path === "/payments/refunds")).toHaveLength(1);
  });
});
